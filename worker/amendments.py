"""Amendments of named sections.

A recorded amendment usually replaces sections of a declaration, not the whole document
("Article VII, Section 4 shall hereby be deleted in its entirety and replaced with the
following"). An amending document names them (``--amends ccrs:"Article VII Section 4"`` or
``"amends"`` in a manifest); the chunks of those sections are marked with what amended them,
demoted like superseded content and labelled in the ``[SOURCE n]`` block. The marks are applied
whichever of the two documents is ingested first, and dropped when the amendment is deleted.
"""

from __future__ import annotations

import re

from pydantic import ValidationError

from .errors import IngestError
from .models import Amendment, ChunkResult

_PART = re.compile(r"\b(article|section|chapter|part|exhibit|appendix|schedule|§)\s*"
                   r"([0-9]+(?:\.[0-9]+)*|[ivxlcdm]+\b|[a-z]\b)", re.I)
_LEADING_NUMBER = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)*)\.?\s")
_ROMAN = {"i": 1, "v": 5, "x": 10, "l": 50, "c": 100, "d": 500, "m": 1000}


def parse_amends(value: str) -> Amendment:
    """``DOCUMENT_ID:SECTION[;SECTION...]``, as the CLI takes it."""
    document_id, _, sections = value.partition(":")
    try:
        return Amendment(document_id.strip(), tuple(s.strip() for s in sections.split(";") if s.strip()))
    except ValidationError as exc:
        problem = exc.errors()[0]
        raise IngestError(f"--amends: {problem['loc'][0]}: {problem['msg']} "
                          f"(give DOCUMENT_ID:SECTION[;SECTION...], got {value!r})") from None


def section_key(text: str) -> tuple[tuple[str, str], ...]:
    """("article", "7"), ("section", "4") ... in order: "ARTICLE VII Use Restrictions > Section 4"
    and "Article 7, Section 4" give the same key; a heading "4.2 Fencing" is section 4.2."""
    parts: list[tuple[str, str]] = []
    for segment in text.split(" > "):
        found = [(kind.lower().replace("§", "section"), _number(value)) for kind, value in _PART.findall(segment)]
        if not found and (leading := _LEADING_NUMBER.match(segment)):
            found = [("section", leading.group(1))]
        parts.extend(found)
    return tuple(parts)


def amends(named: str, section_path: str) -> bool:
    """Whether a chunk under ``section_path`` is in the section ``named`` (or one inside it)."""
    want, have = section_key(named), section_key(section_path)
    if not want:
        return False
    position = 0
    for part in have:  # the named parts, in order, within the chunk's path
        if part == want[position]:
            position += 1
            if position == len(want):
                return True
    return False


def _number(value: str) -> str:
    low = value.lower()
    if low.isdigit() or "." in low:
        return low
    if len(low) == 1 and low not in "ivx":  # a lettered part: "Exhibit A"
        return low
    total = 0
    for i, char in enumerate(low):
        worth = _ROMAN[char]
        total += -worth if i + 1 < len(low) and _ROMAN[low[i + 1]] > worth else worth
    return str(total)


def bring_amendments(ranked: list[ChunkResult], window: int) -> list[ChunkResult]:
    """A question about an amended rule brings the amendment's text: the best candidate of the
    amending document moves up to just before the amended chunk it replaces (with that chunk's
    score, which the demotion had halved), when it is among the candidates at all."""
    out = list(ranked)
    for chunk in [c for c in out[:window] if c.amended_by]:
        position = out.index(chunk)
        amending = next((i for i, c in enumerate(out) if c.document_id == chunk.amended_by), None)
        if amending is None or amending < position:
            continue
        best = out.pop(amending)
        best.final_score = max(best.final_score, chunk.final_score)
        out.insert(position, best)
    return out
