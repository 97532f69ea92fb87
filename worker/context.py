"""Stage 6: ranked chunks -> the ``[SOURCE n]`` context an agent pastes into its prompt.

Walk the ranking, keep chunks at or above ``min_relevance`` until ``max_chunks`` or the token
budget is reached, pull in a neighbour where a kept chunk is cut mid-sentence (if the budget
allows), then group by document (most relevant document first) in chunk order. The budget
covers the whole formatted text, counted with the real tokenizer.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from .models import ChunkResult
from .tokens import TokenCounter

SEPARATOR = "\n---\n"
_ENDS_SENTENCE = re.compile(r"""[.!?:;)"'\]]\s*$""")
_STARTS_SENTENCE = re.compile(r"""^\s*([A-Z0-9"'(\[•*-]|§)""")

NeighbourFetch = Callable[[ChunkResult], list[ChunkResult]]


@dataclass(frozen=True)
class Context:
    text: str
    tokens: int
    chunks: list[ChunkResult]  # what went in, in SOURCE order (neighbours included)


def format_source(n: int, chunk: ChunkResult) -> str:
    lines = [f"[SOURCE {n}]", f"Document: {chunk.document_name}"]
    if chunk.section_path:
        lines.append(f"Section: {chunk.section_path}")
    if chunk.page_number is not None:
        lines.append(f"Page: {chunk.page_number}")
    binding = "yes" if chunk.is_binding else "no"
    if chunk.superseded_by:
        binding += f" (superseded by {chunk.superseded_by})"
    lines.append(f"Binding: {binding}")
    lines.append("Content:")
    lines.append(chunk.content)
    return "\n".join(lines)


def cut_mid_thought(chunk: ChunkResult) -> tuple[bool, bool]:
    """(starts mid-sentence, ends mid-sentence)."""
    return not _STARTS_SENTENCE.match(chunk.content), not _ENDS_SENTENCE.search(chunk.content)


def assemble(ranked: list[ChunkResult], *, counter: TokenCounter, token_budget: int, min_relevance: float,
             max_chunks: int = 8, neighbours: NeighbourFetch | None = None) -> Context:
    budget = _Budget(counter, token_budget)
    chosen: list[ChunkResult] = []
    for chunk in ranked:
        if len(chosen) >= max_chunks or chunk.final_score < min_relevance:
            break
        if not budget.fits(chunk):
            break
        budget.take(chunk)
        chosen.append(chunk)

    if neighbours is not None:
        for chunk in list(chosen):
            starts_cut, ends_cut = cut_mid_thought(chunk)
            if not (starts_cut or ends_cut):
                continue
            for neighbour in neighbours(chunk):
                wanted = (starts_cut and neighbour.chunk_index == chunk.chunk_index - 1) or \
                         (ends_cut and neighbour.chunk_index == chunk.chunk_index + 1)
                if wanted and not any(c.id == neighbour.id for c in chosen) and budget.fits(neighbour):
                    budget.take(neighbour)
                    chosen.append(neighbour)

    # Per-block counts are exact for each block but BPE can merge across a join; the final text is
    # counted as a whole and trimmed, so the budget holds for what the agent actually receives.
    context = _render(chosen, counter)
    while context.tokens > token_budget and chosen:
        chosen.pop()
        context = _render(chosen, counter)
    return context


class _Budget:
    """Running token count of the formatted context (numbering digits included, conservatively)."""

    def __init__(self, counter: TokenCounter, limit: int):
        self.counter = counter
        self.limit = limit
        self.used = 0
        self.separator = counter.count(SEPARATOR)

    def cost(self, chunk: ChunkResult) -> int:
        return self.counter.count(format_source(99, chunk)) + (self.separator if self.used else 0)

    def fits(self, chunk: ChunkResult) -> bool:
        return self.used + self.cost(chunk) <= self.limit

    def take(self, chunk: ChunkResult) -> None:
        self.used += self.cost(chunk)


def _render(chunks: list[ChunkResult], counter: TokenCounter) -> Context:
    ordered = _group(chunks)
    text = SEPARATOR.join(format_source(i, c) for i, c in enumerate(ordered, start=1))
    return Context(text=text, tokens=counter.count(text) if text else 0, chunks=ordered)


def _group(chunks: list[ChunkResult]) -> list[ChunkResult]:
    # Documents in the order their first chunk was chosen (the ranking), chunks in reading order.
    first_seen: dict[str, int] = {}
    for i, c in enumerate(chunks):
        first_seen.setdefault(c.document_id, i)
    return sorted(chunks, key=lambda c: (first_seen[c.document_id], c.chunk_index))
