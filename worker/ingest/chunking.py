"""Structure-following chunking.

Readers (``worker/ingest/readers/``) turn a file into :class:`Block` s: paragraphs and list items that
know their heading path and page. :func:`chunk_blocks` packs consecutive blocks of one section
into chunks that fit the embedding model, splitting long blocks at sentences, so every chunk
carries the heading path it belongs to ("Chapter 4 > 4.2 Fencing > (F) ..."). A list split
across chunks repeats the sentence that introduced it at the top of each later piece, so
"(B) Barbed wire fences anywhere." still says what is prohibited.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

SECTION_SEPARATOR = " > "
# A list item's opening: a bullet, "3.", "B)", "(F)", "(iv)"
ITEM = re.compile(r"^\s*(?:[-*•]\s+|\(?[A-Za-z0-9]{1,3}[.)]\s+|\([A-Za-z0-9]{1,3}\)\s+)")
# The sentence that introduces a list ends with a colon ("The following are prohibited:")
_LEAD_IN = re.compile(r"(?:^|(?<=[.!?;]\s))([^.!?;]{3,300}:)\s*$")


@dataclass(frozen=True)
class Block:
    text: str
    section: tuple[str, ...]
    page: int | None = None


@dataclass(frozen=True)
class Chunk:
    chunk_index: int
    section_path: str
    content: str
    page_number: int | None

    def embedding_text(self, document_name: str | None = None) -> str:
        """What the embedder reads: the document's name and heading path give a short chunk its topic."""
        context = [p for p in (document_name, self.section_path) if p]
        if len(context) == 2 and context[1].startswith(context[0]):
            context = context[1:]  # a record whose title is its section (BEIR)
        return "\n".join(context) + "\n\n" + self.content if context else self.content


SENTENCE_END = re.compile(r"(?<=[.!?;:])\s+(?=[\"'(\[A-Z0-9])")


def chunk_blocks(blocks: Iterable[Block], count_tokens: Callable[[str], int], max_tokens: int) -> list[Chunk]:
    """Pack blocks into chunks of at most ``max_tokens`` (heading path included)."""
    chunks: list[Chunk] = []
    current: list[str] = []
    current_section: tuple[str, ...] | None = None
    current_page: int | None = None
    lead_in: str | None = None  # the sentence introducing the list being chunked, if any

    def flush() -> None:
        nonlocal current
        if current:
            chunks.append(
                Chunk(len(chunks), SECTION_SEPARATOR.join(current_section or ()), "\n\n".join(current), current_page)
            )
        current = []

    for block in blocks:
        path = SECTION_SEPARATOR.join(block.section)
        budget = max_tokens - count_tokens(path) - 4  # room for the separator lines
        if budget < 16:
            raise ValueError(f"heading path too long for the embedding input: {path[:80]}")
        if block.section != current_section:
            flush()
            current_section = block.section
            lead_in = None
        elif current and block.page != current_page:
            flush()  # a chunk is cited by one page: a rule printed on page 2 is not "page 1"
        if is_table(block.text):  # a chunk of its own (or row groups, each with the header rows)
            flush()
            for piece in _table_pieces(block.text, count_tokens, budget):
                current, current_page = [piece], block.page
                flush()
            continue
        item = bool(ITEM.match(block.text))
        for piece in _split_to_fit(block.text, count_tokens, budget):
            candidate = "\n\n".join([*current, piece])
            if current and count_tokens(candidate) > budget:
                flush()
            if not current:
                current_page = block.page
                if item and lead_in and count_tokens(f"{lead_in}\n\n{piece}") <= budget:
                    current.append(lead_in)
            current.append(piece)
        if not item:
            found = _LEAD_IN.search(block.text)
            lead_in = found.group(1).strip() if found else None
    flush()
    return chunks


def is_table(text: str) -> bool:
    """A Markdown table: rows of pipes, the second a ``| --- |`` separator."""
    lines = text.split("\n")
    return len(lines) >= 2 and lines[0].startswith("|") and bool(_TABLE_SEPARATOR.match(lines[1]))


def _table_pieces(text: str, count_tokens: Callable[[str], int], budget: int) -> list[str]:
    lines = text.split("\n")
    header, rows = lines[:2], lines[2:]
    pieces: list[str] = []
    current: list[str] = []
    for row in rows:
        if current and count_tokens("\n".join([*header, *current, row])) > budget:
            pieces.append("\n".join([*header, *current]))
            current = []
        current.append(row)
    if current or not pieces:
        pieces.append("\n".join([*header, *current]))
    # a row longer than the whole budget is cut like any run-on text
    return [
        p
        for piece in pieces
        for p in ([piece] if count_tokens(piece) <= budget else _split_to_fit(piece, count_tokens, budget))
    ]


_TABLE_SEPARATOR = re.compile(r"^\|(?:\s*:?-{3,}:?\s*\|)+\s*$")


def _split_to_fit(text: str, count_tokens: Callable[[str], int], budget: int) -> list[str]:
    if count_tokens(text) <= budget:
        return [text]
    pieces: list[str] = []
    current = ""
    for sentence in _sentences(text, count_tokens, budget):
        candidate = f"{current} {sentence}".strip()
        if current and count_tokens(candidate) > budget:
            pieces.append(current)
            current = sentence
        else:
            current = candidate
    if current:
        pieces.append(current)
    return pieces


def _sentences(text: str, count_tokens: Callable[[str], int], budget: int) -> Iterable[str]:
    for sentence in SENTENCE_END.split(text):
        if count_tokens(sentence) <= budget:
            yield sentence
            continue
        # A run-on "sentence" longer than the model's input: cut between words.
        words = sentence.split()
        current: list[str] = []
        for word in words:
            if current and count_tokens(" ".join([*current, word])) > budget:
                yield " ".join(current)
                current = []
            current.append(word)
        if current:
            yield " ".join(current)
