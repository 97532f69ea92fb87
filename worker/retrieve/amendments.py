"""Amended sections at question time: a chunk whose section another document amends is demoted
like superseded content; the amending text is brought up to where the amended chunk stood. An
amending instrument's recitals (who made it, under what power, by what vote) answer with it."""

from __future__ import annotations

import re
from collections.abc import Iterable

from ..models import ChunkResult

# The first-stage match a chunk carries (SearchBackend.search); what a recital takes over.
_MATCH_FIELDS = ("vector_score", "fts_score", "bm25_score", "fused_score", "vector_rank", "fts_rank")
# A recital opens a paragraph ("WHEREAS, the Declarant desires to ..."); an amending instrument's
# recitals speak of amending ("may unilaterally amend", "may be amended by the affirmative vote"),
# where any instrument's name the document it rests on "as amended" (from time to time).
_RECITAL = re.compile(r"(?:^|\n)\W*whereas\b", re.I)
_AMENDING = re.compile(r"\bamend", re.I)
_AS_AMENDED = re.compile(r"\bas amended\b", re.I)


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
        out.insert(position, best.model_copy(update={"final_score": max(best.final_score, chunk.final_score)}))
    return out


def is_amending_recital(chunk: ChunkResult) -> bool:
    """Whether ``chunk`` holds an amending instrument's recitals: a paragraph opening "WHEREAS"
    in a passage that speaks of amending (not only of a document "as amended")."""
    return bool(_RECITAL.search(chunk.content)) and bool(_AMENDING.search(_AS_AMENDED.sub("", chunk.content)))


def recitals_take_their_instruments_match(found: Iterable[ChunkResult]) -> list[ChunkResult]:
    """``found`` (the candidates), each amending instrument's recitals taking the match of the
    instrument's best candidate when that is better than their own.

    An amendment is one act: its operative text says what changed, its recitals when, by whom
    and by what vote or power ("agreed at a Special Meeting held on June 26, 2013", "the
    Declarant may unilaterally amend"). A question about the change ("when did owners vote to
    change the rule on yard sales?") matches the operative text or the preamble, in the rule's
    words, and the recitals, in the instrument's formal words, rank far below. Only candidates
    are lifted, nothing enters them, and no chunk rises above its instrument's best."""
    found = list(found)
    best: dict[str, ChunkResult] = {}
    for chunk in found:
        known = best.get(chunk.document_id)
        if known is None or chunk.fused_score > known.fused_score:
            best[chunk.document_id] = chunk
    out = []
    for chunk in found:
        lender = best[chunk.document_id]
        if lender.fused_score > chunk.fused_score and is_amending_recital(chunk):
            chunk = chunk.model_copy(update={f: getattr(lender, f) for f in _MATCH_FIELDS})
        out.append(chunk)
    return out
