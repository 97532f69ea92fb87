"""Amended sections at question time: a chunk whose section another document amends is demoted
like superseded content; the amending text is brought up to where the amended chunk stood."""

from __future__ import annotations

from ..models import ChunkResult


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
