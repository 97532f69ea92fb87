"""The dates documents took effect, checked at ingest: a document that supersedes or amends
another cannot take effect before it. Either of the two may be the one arriving (an older
declaration ingested after its amendment), so both directions are checked; an undated document
(in force from the beginning) is never out of order."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from datetime import date
from typing import Protocol

from ..models import Amendment


class Linked(Protocol):
    """What the check reads of a document being ingested (``ingestor.DocumentInput``)."""

    document_id: str
    supersedes: str | None
    superseded_by: str | None
    amends: tuple[Amendment, ...]
    effective_date: date | None


def links_of(doc: Linked) -> Iterator[str]:
    """The documents ``doc`` names as ones it replaces or that replace it."""
    if doc.supersedes:
        yield doc.supersedes
    if doc.superseded_by:
        yield doc.superseded_by
    for amendment in doc.amends:
        yield amendment.document_id


def first_misdated(
    documents: Sequence[Linked],
    dates: Mapping[str, date | None],
    replacing: Sequence[tuple[str, date | None, str]],
) -> str | None:
    """The first pair out of order, said for the caller, or None. ``dates``: every document's
    date, those being ingested and those they name; ``replacing``: stored documents that declare
    they replace one of ``documents`` (id, date, the id they replace)."""
    pairs: list[tuple[str, str, str]] = []  # (newer, older, how)
    for doc in documents:
        if doc.supersedes:
            pairs.append((doc.document_id, doc.supersedes, "supersedes"))
        if doc.superseded_by:
            pairs.append((doc.superseded_by, doc.document_id, "supersedes"))
        pairs.extend((doc.document_id, a.document_id, "amends") for a in doc.amends)
    known = dict(dates)
    for newer, newer_date, older in replacing:
        known.setdefault(newer, newer_date)
        pairs.append((newer, older, "supersedes or amends"))
    for newer, older, how in pairs:
        newer_date, older_date = known.get(newer), known.get(older)
        if newer_date is not None and older_date is not None and newer_date < older_date:
            return (
                f"{newer!r} {how} {older!r} but is dated {newer_date.isoformat()}, before {older!r} took "
                f"effect on {older_date.isoformat()}: a replacement cannot take effect before what it replaces"
            )
    return None
