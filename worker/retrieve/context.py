"""Stage 5: ranked chunks -> the ``[SOURCE n]`` context an agent pastes into its prompt.

Walk the ranking (best first), keep chunks that qualify and fit until ``max_chunks``, pull in a
neighbour where a kept chunk is cut mid-sentence (if the budget allows), then lay the chunks out
as passages, the most trusted first (see :func:`_passages`). The budget covers the whole
formatted text, counted with the real tokenizer.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache

from ..ingest.chunking import SECTION_SEPARATOR, SENTENCE_END, is_table
from ..models import ChunkResult, Citations
from ..tokens import TokenCounter
from .in_force import dates, dates_line

SEPARATOR = "\n---\n"
_ENDS_SENTENCE = re.compile(r"""[.!?:;)"'\]]\s*$""")
_STARTS_SENTENCE = re.compile(r"""^\s*([A-Z0-9"'(\[•*-]|§)""")

NeighbourFetch = Callable[[ChunkResult], list[ChunkResult]]


@dataclass(frozen=True)
class Context:
    text: str
    tokens: int
    chunks: list[ChunkResult]  # what went in, in SOURCE order (neighbours included)
    source_of: dict[int, int] = field(default_factory=dict)  # chunk id -> its [SOURCE n]


DOCUMENT_LABEL = "[DOCUMENT]"
ELIDED = "…"  # in a compact section path: the SOURCE above's path but its last part


def format_source(
    n: int,
    chunk: ChunkResult,
    last_page: int | None = None,
    citations: Citations = "compact",
    previous: ChunkResult | None = None,
) -> str:
    """One ``[SOURCE n]`` block. ``previous``: the passage of the block before it (compact only),
    whose document line and section path this block's header need not repeat."""
    if citations == "full":
        return f"[SOURCE {n}]\n{_full_header(chunk, last_page)}\n{chunk.content}"
    line = _source_line(chunk, last_page, previous)
    header = f"[SOURCE {n}] {line}" if line else f"[SOURCE {n}]"
    if previous is None or _document_key(previous) != _document_key(chunk):
        header = f"{DOCUMENT_LABEL} {_document_line(chunk)}\n{header}"
    return f"{header}\n{chunk.content}"


def _header(chunk: ChunkResult, citations: Citations) -> str:
    """The block's opening as counted against the budget (the label with a two-digit number), its
    section path written out. A compact block's document line is counted apart (:class:`_Budget`):
    only the first passage of a document's run carries it."""
    if citations == "full":
        return f"[SOURCE 99]\n{_full_header(chunk)}\n"
    return f"[SOURCE 99] {_source_line(chunk)}\n"  # a space more than a block without facts


def _document_key(chunk: ChunkResult) -> tuple[str, str]:
    return chunk.document_id, _document_line(chunk)


def _document_line(chunk: ChunkResult) -> str:
    """The document's facts, said once for a run of its passages: name, binding or not, and what
    superseded it."""
    status = "binding" if chunk.is_binding else "not binding"
    if chunk.superseded_by:
        status += f", superseded by {chunk.superseded_by}"
    return f"{chunk.document_name} | {status}"


def _source_line(chunk: ChunkResult, last_page: int | None = None, previous: ChunkResult | None = None) -> str:
    """The passage's own facts after ``[SOURCE n]``, ``|`` between them: section, page or page
    range, and what amended its section. The labels of the full header are left out: the order and
    the words (``p.``, ``amended by``) say what each part is. Where the SOURCE above is of the same
    document, the part of the section path that repeats its parent is written ``…`` (:func:`_section`)."""
    parts = []
    if chunk.section_path:
        same_document = previous is not None and _document_key(previous) == _document_key(chunk)
        parts.append(_section(chunk.section_path, previous.section_path if same_document and previous else None))
    if chunk.page_number is not None and last_page is not None and last_page != chunk.page_number:
        parts.append(f"pp. {chunk.page_number}-{last_page}")
    elif chunk.page_number is not None:
        parts.append(f"p. {chunk.page_number}")
    if chunk.amended_by:
        parts.append(f"amended by {chunk.amended_by_name or chunk.amended_by} [{chunk.amended_by}]")
    if (dated := dates(chunk)) is not None:  # when it took effect, what replaced it and when
        parts.append(f"effective {dated}")
    return " | ".join(parts)


def _section(path: str, above: str | None) -> str:
    """``path`` with ``…`` for all of ``above`` but its last part, where ``path`` starts with those
    parts and goes on (a sibling's path, as in ``ARTICLE XI > Section 3.`` after ``ARTICLE XI >
    Section 1.``): the ``…`` then stands for one thing only."""
    if not above:
        return path
    parts, parent = path.split(SECTION_SEPARATOR), above.split(SECTION_SEPARATOR)[:-1]
    if not parent or len(parts) <= len(parent) or parts[: len(parent)] != parent:
        return path
    return SECTION_SEPARATOR.join([ELIDED, *parts[len(parent) :]])


def _full_header(chunk: ChunkResult, last_page: int | None = None) -> str:
    """Labelled lines, one fact a line, for callers that parse them.
    ``last_page``: the page a passage joined from several chunks ends on, cited as a range."""
    lines = [f"Document: {chunk.document_name}"]
    if chunk.section_path:
        lines.append(f"Section: {chunk.section_path}")
    if chunk.page_number is not None and last_page is not None and last_page != chunk.page_number:
        lines.append(f"Pages: {chunk.page_number}-{last_page}")
    elif chunk.page_number is not None:
        lines.append(f"Page: {chunk.page_number}")
    binding = "yes" if chunk.is_binding else "no"
    if chunk.superseded_by:
        binding += f" (superseded by {chunk.superseded_by})"
    if chunk.amended_by:
        binding += f" (this section was amended by {chunk.amended_by_name or chunk.amended_by} [{chunk.amended_by}])"
    lines.append(f"Binding: {binding}")
    if (dated := dates_line(chunk)) is not None:  # when it took effect, what replaced it and when
        lines.append(dated)
    lines.append("Content:")
    return "\n".join(lines)


@lru_cache(maxsize=8192)
def _cached_header_tokens(counter: TokenCounter, header: str) -> int:
    return counter.count(header)


def _header_tokens(counter: TokenCounter, header: str) -> int:
    # Headers repeat from request to request (the same chunks come back): count each once.
    try:
        # a counter need not be hashable (TokenCounter does not say so): one that is not raises
        return _cached_header_tokens(counter, header)  # type: ignore[arg-type]
    except TypeError:  # an unhashable counter
        return counter.count(header)


def cut_mid_thought(chunk: ChunkResult) -> tuple[bool, bool]:
    """(starts mid-sentence, ends mid-sentence). A table (or a row group of one, which repeats
    its header) is whole as it is."""
    if is_table(chunk.content):
        return False, False
    return not _STARTS_SENTENCE.match(chunk.content), not _ENDS_SENTENCE.search(chunk.content)


def assemble(
    ranked: list[ChunkResult],
    *,
    counter: TokenCounter,
    token_budget: int,
    min_relevance: float,
    max_chunks: int = 8,
    min_chunks: int = 0,
    floor: float | None = None,
    neighbours: NeighbourFetch | None = None,
    fill: int = 0,
    fill_needs: float | None = None,
    carry: bool = False,
    citations: Citations = "compact",
) -> Context:
    """Walk ``ranked`` (best first) and keep what fits.

    A chunk needs ``min_relevance``, except the first ``min_chunks`` kept, which need only
    ``floor``: an answer with weak evidence still hands the agent its best passages. A chunk
    that does not qualify or does not fit is skipped, not the end of the walk.

    ``fill``: then the rest of the ranking goes in, in order, up to ``fill`` ranked chunks in all
    (neighbours not counted) and as far as the budget goes, each with the neighbour it is cut
    from; these need ``fill_needs`` (default ``floor``; a caller's hard minimum passes its own).
    A caller who sized the context gets it used, and the default context's chunks go in first.

    ``carry``: the room the passages leave goes to the sentence before and after each one, from
    the chunks around it in its section (:func:`_with_sentences_around`; needs ``neighbours``).

    ``citations``: how each ``[SOURCE n]`` block names its passage (see :func:`format_source`).
    """
    budget = _Budget(counter, token_budget, citations)
    chosen: list[ChunkResult] = []
    floor = min_relevance if floor is None else min(floor, min_relevance)
    for chunk in ranked:
        if len(chosen) >= max_chunks:
            break
        needed = floor if len(chosen) < min_chunks else min_relevance
        if chunk.final_score < needed or not budget.fits(chunk):
            continue
        budget.take(chunk)
        chosen.append(chunk)
    if not chosen and ranked and ranked[0].final_score >= (floor if min_chunks else min_relevance):
        # Not even the best chunk fits the budget: hand over its beginning rather than nothing.
        chosen.append(_truncated(ranked[0], counter, token_budget, citations))
        budget.take(chosen[0])

    kept = len(chosen)  # ranked chunks: neighbours do not count against ``fill``
    if neighbours is not None:
        for chunk in list(chosen):
            _add_neighbours(chunk, chosen, budget, neighbours)
    taken = {c.id for c in chosen}
    needed = floor if fill_needs is None else fill_needs
    for chunk in ranked:
        if kept >= fill:
            break
        if chunk.id in taken or chunk.final_score < needed or not budget.fits(chunk):
            continue
        budget.take(chunk)
        chosen.append(chunk)
        taken.add(chunk.id)
        kept += 1
        if neighbours is not None:
            taken.update(c.id for c in _add_neighbours(chunk, chosen, budget, neighbours))

    # Per-block counts are exact for each block but BPE can merge across a join; the final text is
    # counted as a whole and trimmed, so the budget holds for what the agent actually receives.
    context = _render(chosen, counter, citations)
    while context.tokens > token_budget and len(chosen) > 1:
        chosen.pop()
        context = _render(chosen, counter, citations)
    if carry and neighbours is not None:
        context = _with_sentences_around(context, neighbours, counter, token_budget, citations)
    return context


def _with_sentences_around(
    built: Context, fetch: NeighbourFetch, counter: TokenCounter, token_budget: int, citations: Citations
) -> Context:
    """``built`` with each passage carrying the sentence before it and the sentence after it,
    where the chunk around it is of the same section and the context still fits the budget,
    SOURCE 1 first.

    A chunk boundary can fall between a rule and the sentence that qualifies it ("... except
    that ...", "This does not apply to ..."): the stock splitters' overlap carries that sentence
    into both chunks; here the passage shown carries it instead, so the index keeps one vector a
    chunk and the agent reads the sentence where it belongs (docs/answer-quality.md)."""
    chunks = list(built.chunks)
    held = {c.id for c in chunks}
    best = built
    for passage in _passages(chunks):
        first, last = passage[0], passage[-1]
        around = {n.chunk_index: n for edge in {first.id: first, last.id: last}.values() for n in fetch(edge)}
        for edge, step in ((first, -1), (last, 1)):
            other = around.get(edge.chunk_index + step)
            if other is None or other.id in held or other.section_path != edge.section_path:
                continue
            if is_table(other.content) or is_table(edge.content):
                continue
            pieces = SENTENCE_END.split(other.content.strip())
            sentence = (pieces[-1] if step < 0 else pieces[0]).strip()
            if not sentence:
                continue
            current = next(c for c in chunks if c.id == edge.id)
            text = f"{sentence} {current.content}" if step < 0 else f"{current.content} {sentence}"
            trial = [c.model_copy(update={"content": text}) if c.id == edge.id else c for c in chunks]
            rendered = _render(trial, counter, citations)
            if rendered.tokens <= token_budget:
                chunks, best = trial, rendered
    return best


def _add_neighbours(
    chunk: ChunkResult, chosen: list[ChunkResult], budget: _Budget, fetch: NeighbourFetch
) -> list[ChunkResult]:
    """Add to ``chosen`` the chunk before or after ``chunk`` where it is cut mid-sentence, if the
    budget allows; the neighbours added."""
    starts_cut, ends_cut = cut_mid_thought(chunk)
    if not (starts_cut or ends_cut):
        return []
    added = []
    for neighbour in fetch(chunk):
        wanted = (starts_cut and neighbour.chunk_index == chunk.chunk_index - 1) or (
            ends_cut and neighbour.chunk_index == chunk.chunk_index + 1
        )
        if wanted and not any(c.id == neighbour.id for c in chosen) and budget.fits(neighbour):
            budget.take(neighbour)
            chosen.append(neighbour)
            added.append(neighbour)
    return added


def leg_tops_first(ranked: list[ChunkResult], top: int, slots: int) -> tuple[list[ChunkResult], int]:
    """``ranked`` with the chunks that either search leg ranks in its ``top`` and that the ranking
    leaves past its first ``slots`` moved up to follow those, and how many chunks now go first.

    The fused order can sink a passage that one leg ranks near the top and the other leg did not
    return at all (it counts 0 for that leg). The ranking's own best keep their places; each leg's
    best few come right after them, ahead of the rest.
    """
    head = ranked[: max(slots, 0)]
    if top < 1:
        return ranked, len(head)
    lifted = [c for c in ranked[len(head) :] if min(c.vector_rank or top + 1, c.fts_rank or top + 1) <= top]
    if not lifted:
        return ranked, len(head)
    moved = {c.id for c in lifted}
    return head + lifted + [c for c in ranked[len(head) :] if c.id not in moved], len(head) + len(lifted)


def _truncated(chunk: ChunkResult, counter: TokenCounter, token_budget: int, citations: Citations) -> ChunkResult:
    """The chunk cut at a token boundary so that its whole ``[SOURCE n]`` block fits the budget."""
    overhead = counter.count(format_source(99, chunk.model_copy(update={"content": ""}), citations=citations))
    keep = max(token_budget - overhead - 2, 0)
    content = counter.truncate(chunk.content, keep).rstrip() if keep else ""
    if content != chunk.content:  # "…" only where text was cut
        content = f"{content} …" if content else "…"
    cut = chunk.model_copy(update={"content": content})
    while counter.count(format_source(99, cut, citations=citations)) > token_budget and len(cut.content) > 1:
        cut = cut.model_copy(update={"content": cut.content[: len(cut.content) * 3 // 4].rstrip() + " …"})
    return cut


class _Budget:
    """Running token count of the formatted context (numbering digits included, conservatively).

    A block costs its header, counted here, plus its content, counted once at ingestion
    (``token_count``, the same tokenizer): tokenizing every candidate block on every request was
    most of the worker's own time. A compact block also costs its document's line unless a passage
    of that document was taken already (:func:`_passages` keeps a document's passages together, so
    the line is written once). The finished context is counted whole, exactly."""

    def __init__(self, counter: TokenCounter, limit: int, citations: Citations):
        self.counter = counter
        self.citations = citations
        self.limit = limit
        self.used = 0
        self.separator = counter.count(SEPARATOR)
        self._costs: dict[int, int] = {}
        self._documents: set[tuple[str, str]] = set()

    def cost(self, chunk: ChunkResult) -> int:
        block = self._costs.get(chunk.id)
        if block is None:
            content = chunk.token_count if chunk.token_count > 0 else self.counter.count(chunk.content)
            block = self._costs[chunk.id] = _header_tokens(self.counter, _header(chunk, self.citations)) + content + 1
        return block + self._document_cost(chunk) + (self.separator if self.used else 0)

    def _document_cost(self, chunk: ChunkResult) -> int:
        if self.citations == "full" or _document_key(chunk) in self._documents:
            return 0
        return _header_tokens(self.counter, f"{DOCUMENT_LABEL} {_document_line(chunk)}\n")

    def fits(self, chunk: ChunkResult) -> bool:
        return self.used + self.cost(chunk) <= self.limit

    def take(self, chunk: ChunkResult) -> None:
        self.used += self.cost(chunk)
        self._documents.add(_document_key(chunk))
        self._costs.pop(chunk.id, None)  # a truncated copy shares the id: never reuse its cost


def _render(chunks: list[ChunkResult], counter: TokenCounter, citations: Citations) -> Context:
    passages = _passages(chunks)
    merged = [_merged(p) for p in passages]
    text = SEPARATOR.join(
        format_source(i, m, p[-1].page_number, citations, merged[i - 2] if i > 1 else None)
        for i, (m, p) in enumerate(zip(merged, passages, strict=True), start=1)
    )
    return Context(
        text=text,
        tokens=counter.count(text) if text else 0,
        chunks=[c for p in passages for c in p],
        source_of={c.id: i for i, p in enumerate(passages, start=1) for c in p},
    )


def _passages(chunks: list[ChunkResult]) -> list[list[ChunkResult]]:
    """Chunks as ``[SOURCE n]`` passages, the most trusted first.

    Adjacent chunks of one section (a chunk and the neighbour that completes it) form one
    passage, in reading order. Passages of one document stay together; documents come in the
    order of their best passage, and a document's passages best first, so SOURCE 1 is the
    passage the ranking trusts most.
    """
    score = {c.id: c.final_score for c in chunks}
    runs: list[list[ChunkResult]] = []
    for chunk in sorted(chunks, key=lambda c: (c.document_id, c.chunk_index)):
        last = runs[-1][-1] if runs else None
        if (
            last is not None
            and last.document_id == chunk.document_id
            and last.chunk_index + 1 == chunk.chunk_index
            and last.section_path == chunk.section_path
        ):
            runs[-1].append(chunk)
        else:
            runs.append([chunk])
    best = {id(run): max(score[c.id] for c in run) for run in runs}
    document_best: dict[str, float] = {}
    for run in runs:
        document = run[0].document_id
        document_best[document] = max(document_best.get(document, 0.0), best[id(run)])
    # Ties fall back to the order the chunks were chosen in (the ranking).
    chosen_at = {c.id: i for i, c in enumerate(chunks)}
    return sorted(
        runs,
        key=lambda run: (
            -document_best[run[0].document_id],
            run[0].document_id,
            -best[id(run)],
            min(chosen_at[c.id] for c in run),
        ),
    )


def _merged(passage: list[ChunkResult]) -> ChunkResult:
    if len(passage) == 1:
        return passage[0]
    return passage[0].model_copy(update={"content": "\n\n".join(c.content for c in passage)})
