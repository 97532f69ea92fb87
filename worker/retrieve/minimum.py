"""An explicit ``min_relevance`` is a hard minimum, and ``top_k`` a hard maximum.

A request's ``min_relevance`` keeps every chunk below it out of the context and out of the chunk
list: no neighbour pulled in to complete a sentence (neighbours are not scored against the
question), no "best chunk rather than nothing". A context left empty by it means ``no_results``.
The chunk list never holds more than ``top_k`` chunks, the ones in the context first.
"""

from __future__ import annotations

from ..models import ChunkResult


def qualifying(ranking: list[ChunkResult], minimum: float | None) -> list[ChunkResult]:
    """The ranking without the chunks an explicit minimum keeps out."""
    return ranking if minimum is None else [c for c in ranking if c.final_score >= minimum]


def listed(ranking: list[ChunkResult], in_context: list[ChunkResult], top_k: int) -> list[ChunkResult]:
    """At most ``top_k`` chunks, best first: every chunk in the context (a neighbour that completes
    one included) and, in the room left, the ranking's next best."""
    context_ids = {c.id for c in in_context}
    shown = ranking[:top_k]
    shown_ids = {c.id for c in shown}
    extra = [c for c in in_context if c.id not in shown_ids]
    while extra and len(shown) + len(extra) > top_k:
        # make room by dropping the lowest-ranked chunk the context does not use
        spare = next((i for i in range(len(shown) - 1, -1, -1) if shown[i].id not in context_ids), None)
        if spare is None:
            break
        shown.pop(spare)
    return shown + extra[: max(top_k - len(shown), 0)]


def empty_context_warning(minimum: float, best: float | None) -> str:
    found = "" if best is None else f" (the best scored {best:.2f})"
    return f"no chunk reached min_relevance {minimum:g}{found}"
