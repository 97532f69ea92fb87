"""Each document's history among a community's documents: what it replaced (superseded or
amended) and what replaced it, with the dates they took effect, and the documents in the order
they took effect (the keeper's timeline). Read from the documents list, which holds the links."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Literal

from ..models import DocumentSummary

How = Literal["superseded", "amended"]


@dataclass(frozen=True)
class Link:
    """One replacement: ``document`` superseded the other document whole, or amended sections of it."""

    how: How
    document_id: str
    name: str
    effective_date: date | None


@dataclass(frozen=True)
class History:
    document: DocumentSummary
    replaced: list[Link] = field(default_factory=list)  # the documents it superseded or amended
    replaced_by: list[Link] = field(default_factory=list)  # the documents that superseded or amended it


def histories(documents: Sequence[DocumentSummary]) -> dict[str, History]:
    """Every document's history, by id."""
    by_id = {d.document_id: d for d in documents}
    out = {d.document_id: History(d) for d in documents}
    for d in documents:
        for how, by in [("superseded", d.superseded_by)] + [("amended", a) for a in d.amended_by]:
            newer = by_id.get(by) if by else None
            if by is None or newer is None:
                continue
            out[d.document_id].replaced_by.append(_link(how, newer))
            out[by].replaced.append(_link(how, d))
    for h in out.values():
        h.replaced.sort(key=_when)
        h.replaced_by.sort(key=_when)
    return out


def timeline(documents: Sequence[DocumentSummary]) -> list[History]:
    """The documents in the order they took effect (undated ones, in force from the beginning, first)."""
    found = histories(documents)
    return sorted(found.values(), key=lambda h: (h.document.effective_date or date.min, h.document.document_id))


def _link(how: str, d: DocumentSummary) -> Link:
    return Link("superseded" if how == "superseded" else "amended", d.document_id, d.name, d.effective_date)


def _when(link: Link) -> tuple[date, str]:
    return (link.effective_date or date.min, link.document_id)
