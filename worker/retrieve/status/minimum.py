"""An explicit ``min_relevance`` is a hard minimum, and ``top_k`` a hard maximum.

A request's ``min_relevance`` keeps every chunk below it out of the context and out of the chunk
list: no neighbour pulled in to complete a sentence (neighbours are not scored against the
question), no "best chunk rather than nothing". A context left empty by it means ``no_results``.
The chunk list never holds more than ``top_k`` chunks, the ones in the context first.
"""

from __future__ import annotations

from ...models import ChunkResult


def qualifying(ranking: list[ChunkResult], minimum: float | None) -> list[ChunkResult]:
    """The ranking without the chunks an explicit minimum keeps out."""
    return ranking if minimum is None else [c for c in ranking if c.final_score >= minimum]


def listed(ranking: list[ChunkResult], in_context: list[ChunkResult], top_k: int) -> list[ChunkResult]:
    """At most ``top_k`` chunks: the context's own chunks first (a passage's ranked chunk before a
    neighbour that only completes its sentence), then the ranking's next best; shown in ranking
    order, the neighbours after it."""
    rank = {c.id: i for i, c in enumerate(ranking)}
    context_ids = {c.id for c in in_context}
    ranked_in_context = sorted((c for c in in_context if c.id in rank), key=lambda c: rank[c.id])
    neighbours = [c for c in in_context if c.id not in rank]
    rest = [c for c in ranking if c.id not in context_ids]
    kept = {c.id for c in (ranked_in_context + neighbours + rest)[:top_k]}
    return [c for c in ranking if c.id in kept] + [c for c in neighbours if c.id in kept]


def empty_context_warning(minimum: float, best: float | None) -> str:
    found = "" if best is None else f" (the best scored {best:.2f})"
    return f"no chunk reached min_relevance {minimum:g}{found}"
