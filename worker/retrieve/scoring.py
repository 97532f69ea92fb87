"""First-stage scoring: the absolute relevance of a candidate and the order that fills the context."""

from __future__ import annotations

from collections.abc import Collection

from ..models import ChunkResult, Weights
from .authority import Adjustments

# The calibrated first-stage score: cosine similarity and normalised BM25 blended 0.7/0.3,
# comparable across questions (the fused score is relative to one candidate list).
RELEVANCE_VECTOR_SHARE = 0.7
# The ranking score blends that absolute relevance with the fused score (rescaled to the same
# scale), a quarter and three quarters. The fused part carries the source's authority (binding
# x1.1, design guidelines x1.05, superseded x0.5, as after reranking) and the steer: they reorder
# the list, but the best score stays the best relevance, so a weak match in a binding document
# does not look more certain and the status thresholds keep their meaning. Measured with the captured
# candidate lists (README "One score"): the fused order alone puts hoa-dev's evidence in SOURCE 1
# for 0.64 of answerable questions; half relevance without authority 0.70 but SciFact nDCG@10
# 0.730 and SQuAD 0.905 (fused alone 0.731 / 0.908); a quarter with authority 0.70-0.72, SciFact
# 0.734 and SQuAD 0.908. Authority cannot move a benchmark whose documents are all alike.
RANK_RELEVANCE_SHARE = 0.25


def first_stage_order(
    candidates: list[ChunkResult],
    *,
    have_embedding: bool,
    steer: list[str],
    steer_boost: float,
    authority: Adjustments | None = None,
    weights: Weights | None = None,
    named: Collection[str] = (),
    name_boost: float = 1.0,
) -> list[ChunkResult]:
    """The candidates, each a copy with its ``relevance`` and the ``final_score`` that orders the
    list, fills the context and sets the status, ordered by it.

    ``final_score`` = a quarter of the chunk's calibrated ``relevance`` + three quarters of its
    fused score x the source's authority factor x ``steer_boost`` (for a document type the question
    names) x ``name_boost`` (for a document the question names, ``named``), scaled so that the
    winner of that product scores the best relevance among the candidates. Both parts are absolute,
    so one threshold means the same for every question; the fused part keeps the order that ranks
    best on the benchmarks, the relevance part and the authority the one that puts the answer first
    on governing documents.
    """
    if not candidates:
        return candidates
    boosts = {
        c.id: boost(c, authority=authority, steer=steer, steer_boost=steer_boost, named=named, name_boost=name_boost)
        for c in candidates
    }
    scored = {c.id: relevance(c, have_embedding, weights) for c in candidates}
    confidence = max(scored.values())
    top = max(c.fused_score * boosts[c.id] for c in candidates)

    def final(chunk: ChunkResult) -> float:
        relative = confidence * chunk.fused_score * boosts[chunk.id] / top if top > 0 else 0.0
        return round(RANK_RELEVANCE_SHARE * scored[chunk.id] + (1 - RANK_RELEVANCE_SHARE) * relative, 6)

    ordered = [c.model_copy(update={"relevance": scored[c.id], "final_score": final(c)}) for c in candidates]
    # Ties keep the SQL order.
    return sorted(ordered, key=lambda c: -c.final_score)


def boost(
    chunk: ChunkResult,
    *,
    authority: Adjustments | None,
    steer: Collection[str],
    steer_boost: float,
    named: Collection[str] = (),
    name_boost: float = 1.0,
) -> float:
    """The factor the ranking gives ``chunk``'s source: its authority, x ``steer_boost`` for a
    document type the question names, x ``name_boost`` for a document the question names."""
    factor = (authority or Adjustments()).factor(chunk)
    return (
        factor
        * (steer_boost if chunk.document_type in steer else 1.0)
        * (name_boost if chunk.document_id in named else 1.0)
    )


def relevance(chunk: ChunkResult, have_embedding: bool, weights: Weights | None = None) -> float:
    """An absolute 0..1 score comparable across queries (fused scores are per-query relative).
    Explicit request weights replace the calibrated blend (a caller asking for one leg gets it)."""
    if not have_embedding:
        return round(chunk.fts_score or 0.0, 6)
    vector_share = RELEVANCE_VECTOR_SHARE if weights is None else weights.vector / (weights.vector + weights.fts)
    value = vector_share * max(chunk.vector_score or 0.0, 0.0) + (1 - vector_share) * (chunk.fts_score or 0.0)
    return round(value, 6)
