"""Lines of text pages (a PDF's text layer, OCR, plain text) into blocks: the layout heuristics.

Headings are found by the numbering governing documents are written with ("Chapter 4",
"ARTICLE V", "4.2 Fencing", "Exhibit A"); running headers, footers and page numbers are dropped;
paragraphs cut by a page break are rejoined, and so are words hyphenated across lines.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ...textnorm import SOFT_HYPHEN, normalise_text
from ..chunking import ITEM, Block
from ..lexicon import english_words
from .document import TABLE_ROW, ParsedDocument, enter_section

_HEADING_WORDS = "(chapter|article|part|exhibit|appendix|schedule)"
_TEXT_HEADING_L1 = re.compile(rf"^{_HEADING_WORDS}\b[\s\w.:-]{{0,70}}$", re.I)
_TEXT_HEADING_NUM = re.compile(r"^(?:(?i:section)\s+)?(\d+(?:\.\d+)*)\.?\s+[A-Z][^.]{0,70}$")
_SECTION_WORD = re.compile(r"^section\s+(\d+(?:\.\d+)*)", re.I)


def parse_text(text: str, first_page: int | None = None) -> ParsedDocument:
    pages = text.split("\f")
    numbered = len(pages) > 1 or first_page is not None
    return parse_pages([(i + (first_page or 1) if numbered else None, p) for i, p in enumerate(pages)])


def parse_pages(pages: Sequence[tuple[int | None, str]]) -> ParsedDocument:
    """Lines of text pages (a PDF's text layer, OCR, plain text) into blocks.

    Page furniture (running headers and footers, page numbers) is dropped. A paragraph ends at a
    blank line or page break only where its sentence ends, so one cut by a page break or a stray
    blank line (OCR makes them) stays whole and keeps the page it started on; words hyphenated
    across lines are joined; a short title on the line after a bare "ARTICLE V" joins that heading.
    """
    pages = [(page, _normalised(text)) for page, text in pages]
    split: list[tuple[int | None, list[str], set[int]]] = []
    for page, text in pages:
        lines = [line.strip() for line in text.splitlines()]
        split.append((page, lines, _edge_indexes(lines)))
    furniture = _page_furniture(split)
    spelled = DocumentWords.of(text for _, text in pages)
    stack: list[tuple[int, str]] = []
    blocks: list[Block] = []
    title: str | None = None
    paragraph: list[str] = []
    paragraph_page: int | None = None
    titled = True  # whether the innermost heading has its title or text under it yet

    table: list[str] = []

    def flush() -> None:
        nonlocal paragraph
        if paragraph:
            blocks.append(Block(_join_lines(paragraph, spelled), tuple(h for _, h in stack), paragraph_page))
            paragraph = []

    def flush_table(page: int | None) -> None:
        if table:
            blocks.append(Block("\n".join(table), tuple(h for _, h in stack), page))
            table.clear()

    for page, lines, edges in split:
        if paragraph and _ends_sentence(paragraph[-1]):
            flush()
        for i, line in enumerate(lines):
            if TABLE_ROW.match(line):  # a table's rows (pdf_tables) stay rows
                if not table:
                    flush()
                table.append(line)
                continue
            flush_table(page)
            if not line:
                if paragraph and _ends_sentence(paragraph[-1]):
                    flush()
                continue
            if i in edges and (_furniture_key(line) in furniture or _PAGE_NUMBER.match(line)):
                continue
            if (
                not titled
                and not paragraph
                and _is_title(line)
                and not _TEXT_HEADING_L1.match(line)
                and not _TEXT_HEADING_NUM.match(line)
            ):
                stack[-1] = (stack[-1][0], f"{stack[-1][1]} {line}")  # "ARTICLE I" + "Definitions"
                titled = True
                continue
            level = _text_heading_level(line)
            # The document's own name on its first line ("Maple Court Design Rules"), then its
            # first heading: the name is the title, not a paragraph the heading would join
            named = (
                title is None
                and not blocks
                and not stack
                and len(paragraph) == 1
                and _is_title(paragraph[0])
                and _title_case(paragraph[0])
            )
            if level is not None and (section := _SECTION_WORD.match(line)):
                # "Section 2. Driveways": a sibling of "Section 1. Roofs", inside the ARTICLE above
                # them if there is one; a wrapped sentence's line "Section 3 of the Declaration" is no heading
                level = (
                    _section_level(section.group(1), stack)
                    if not paragraph or _ends_sentence(paragraph[-1]) or named
                    else None
                )
            if level is not None:
                if named:
                    title = paragraph.pop()
                flush()
                enter_section(stack, level, line)
                if title is None and _names_a_document(line):
                    title = line
                titled = not _BARE_HEADING.match(line)
                continue
            titled = True
            if ITEM.match(line):
                flush()
            if (not paragraph or _ends_sentence(paragraph[-1])) and (run_in := _RUN_IN_SECTION.match(line)):
                # "Section 4. Criteria for Approval. Within ten (10) days ...": a section of its
                # own, as a heading line would make it (one rule per chunk, not an article's worth)
                flush()
                level = _section_level(run_in.group(1), stack)
                enter_section(stack, level, run_in.group(0).strip().rstrip("."))
            if not paragraph:
                paragraph_page = page
            paragraph.append(line)
        flush_table(page)
    flush()
    return ParsedDocument(title, blocks)


def _normalised(text: str) -> str:
    """A page's text in the form questions are put in (:func:`worker.textnorm.normalise_text`); a
    soft hyphen that ends a line marks a word broken there, so it becomes the hyphen
    :func:`rejoin` joins."""
    return normalise_text(re.sub(f"{SOFT_HYPHEN}[ \t]*$", "-", text, flags=re.M))


# "Section 4." or "Section 4.2" opening a paragraph, with its run-in title when it has one
_RUN_IN_SECTION = re.compile(
    r"^(?:SECTION|[Ss]ection)\s+(\d+(?:\.\d+)*)\.?"
    r"(?:\s+(?:(?:[A-Z0-9][\w'’/&:,()-]*|of|and|or|for|the|to|on|in|an?|under|by)\s+){0,9}"
    r"[A-Z0-9][\w'’/&:,()-]*\.(?=\s|$))?"
)
_BARE_HEADING = re.compile(rf"^{_HEADING_WORDS}\s+[\w.\"'-]{{1,8}}$", re.I)
_PAGE_NUMBER = re.compile(r"^(?:.*\bpage\s+\S{1,4}(?:\s+of\s+\S{1,4})?|[-\u2013 ]*\d{1,4}[-\u2013 ]*)$", re.I)
_SENTENCE_END = (".", ":", ";", "?", "!", ".\"", ".\u201d", ".)")


def _title_case(text: str) -> bool:
    """ "Fences and Walls" is a title; "Owners must keep their lots free of" (a numbered rule's
    first line, wrapped) is not."""
    words = [w for w in re.findall(r"[A-Za-z][\w'’-]*", text) if len(w) > 3]
    return len(text.split()) <= 8 and sum(w[0].isupper() for w in words) * 2 >= len(words)


def _names_a_document(heading: str) -> bool:
    """A heading that can be the document's name: not a scanned title's stray word ("OF" between
    "ARTICLES" and "INCORPORATION") nor a numbered part ("ARTICLE I"), which name no document."""
    return (
        re.search(r"[A-Za-z]{4}", heading) is not None
        and not _TEXT_HEADING_L1.match(heading)
        and not _TEXT_HEADING_NUM.match(heading)
    )


def _ends_sentence(line: str) -> bool:
    return line.endswith(_SENTENCE_END)


def _is_title(line: str) -> bool:
    return (
        len(line.split()) <= 8
        and line[0].isupper()
        and not line.endswith((".", ",", ";", ":"))
        and not ITEM.match(line)
    )


def _join_lines(lines: list[str], spelled: DocumentWords | None = None) -> str:
    """Lines into one paragraph; a line ending in a hyphen joins the next as :func:`rejoin` says
    ("resi-" + "dential" is "residential", "two-" + "story" is "two-story"); before a capital
    the hyphen stays."""
    out = lines[0]
    for line in lines[1:]:
        if out.endswith("-") and len(out) > 1 and out[-2].isalpha() and line[:1].islower():
            out = rejoin(out, line, spelled or DocumentWords())
        else:
            out = f"{out} {line}"
    return out


@dataclass(frozen=True)
class DocumentWords:
    """How a document spells words elsewhere: whole, and with a hyphen inside a line."""

    whole: frozenset[str] = frozenset()
    hyphenated: frozenset[str] = frozenset()

    @classmethod
    def of(cls, texts: Iterable[str]) -> DocumentWords:
        text = "\n".join(texts).lower()
        return cls(frozenset(_WHOLE_WORD.findall(text)), frozenset(_HYPHENATED.findall(text)))


_WHOLE_WORD = re.compile(r"(?<![\w-])[a-z]+(?![\w-])")
_HYPHENATED = re.compile(r"(?<![\w-])[a-z]+-[a-z]+(?![\w-])")


def rejoin(head: str, tail: str, spelled: DocumentWords) -> str:
    """``head`` ends in a hyphen at a line's end and ``tail`` is the next line: one word broken in
    two ("resi-" "dential") or a compound broken at its own hyphen ("two-" "story"). The
    document's own spelling decides when it writes the word elsewhere; else an English word
    list: a known word is joined, two known words keep their hyphen, and anything else (a
    syllable, a term the list lacks) is joined, as line-end hyphens in legal text mostly are."""
    left, right = re.search(r"([A-Za-z]+)-$", head), re.match(r"[A-Za-z]+", tail)
    if left is None or right is None:
        return head[:-1] + tail
    first, second = left.group(1).lower(), right.group(0).lower()
    if first + second in spelled.whole:
        keep = False
    elif f"{first}-{second}" in spelled.hyphenated:
        keep = True
    else:
        known = english_words()
        keep = first + second not in known and len(first) > 1 and len(second) > 1 and first in known and second in known
    return head + tail if keep else head[:-1] + tail


def _edge_indexes(lines: list[str], depth: int = 2) -> set[int]:
    """The first and last ``depth`` non-empty lines of a page: where running heads and feet sit."""
    filled = [i for i, line in enumerate(lines) if line]
    return set(filled[:depth] + filled[-depth:])


def _furniture_key(line: str) -> str:
    return re.sub(r"\d+", "#", " ".join(line.lower().split()))


def _page_furniture(pages: list[tuple[int | None, list[str], set[int]]]) -> set[str]:
    """Lines at the top or bottom of many pages (numbers aside): running headers and footers."""
    if len(pages) < 2:
        return set()
    seen: dict[str, int] = {}
    for _, lines, edges in pages:
        for key in {_furniture_key(lines[i]) for i in edges}:
            seen[key] = seen.get(key, 0) + 1
    needed = max(2, math.ceil(0.3 * len(pages)))
    return {key for key, count in seen.items() if count >= needed}


def _section_level(number: str, stack: list[tuple[int, str]]) -> int:
    """ "Section 4.2" sits one level below an article, chapter or part above it, and beside
    "Section 4.1": the sections met before it are its siblings, never its parents."""
    in_part = any(not _SECTION_WORD.match(name) for level, name in stack if level == 1)
    return number.count(".") + (2 if in_part else 1)


def _text_heading_level(line: str) -> int | None:
    if not line or len(line) > 80 or line.endswith((".", ",", ";")):
        return None
    if _TEXT_HEADING_L1.match(line):
        return 1
    if (m := _TEXT_HEADING_NUM.match(line)) and _title_case(line[m.end(1) :]):
        return m.group(1).count(".") + 1
    if line.isupper() and len(line.split()) <= 8 and any(c.isalpha() for c in line):
        return 1
    return None
