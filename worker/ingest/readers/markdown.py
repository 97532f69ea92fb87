"""Markdown into blocks: ``#`` headings are the section path, ``<!-- page N -->`` markers the
pages, pipe rows stay tables, lettered and numbered items are blocks of their own."""

from __future__ import annotations

import re

from ...textnorm import normalise_text
from ..chunking import ITEM, Block
from .document import TABLE_ROW, ParsedDocument, enter_section

_HTML_BREAK = re.compile(r"<br\s*/?>", re.I)
# Leading spaces allowed: transcriptions nest headings inside list items ("2. The Articles are
# amended as follows:" then "    ## ARTICLE I"); governing documents carry no indented code.
_MD_HEADING = re.compile(r"^\s*(#{1,6})\s(.*)$")
_PAGE_MARKER = re.compile(r"^\s*<!--\s*page\s+(\d+)\s*-->\s*$", re.I)


def parse_markdown(text: str) -> ParsedDocument:
    stack: list[tuple[int, str]] = []
    title: str | None = None
    page: int | None = None
    blocks: list[Block] = []
    paragraph: list[str] = []

    table: list[str] = []

    def flush() -> None:
        if paragraph:
            blocks.append(Block(" ".join(paragraph).strip(), tuple(h for _, h in stack), page))
            paragraph.clear()

    def flush_table() -> None:
        if table:  # rows stay rows: the chunker keeps a table apart and repeats its header
            blocks.append(Block("\n".join(table), tuple(h for _, h in stack), page))
            table.clear()

    for line in normalise_text(text).splitlines():
        if TABLE_ROW.match(line):
            if not table:
                flush()
            table.append(line.strip())
            continue
        flush_table()
        if "<" in line:  # "## ARTICLE V<br>Architectural Control": one heading
            line = " ".join(part.strip() for part in _HTML_BREAK.split(line))
        if marker := _PAGE_MARKER.match(line):
            flush()
            page = int(marker.group(1))
            continue
        if heading := _MD_HEADING.match(line):
            flush()
            # a closing run of #s is no part of the name ("## Fences ##")
            level, name = len(heading.group(1)), heading.group(2).strip().rstrip("#").rstrip()
            if not name:
                continue
            if level == 1 and title is None:
                title = name
                continue  # the document title names the document, not a section
            enter_section(stack, level, name)
            continue
        if not line.strip():
            flush()
        elif ITEM.match(line):
            flush()
            paragraph.append(line.strip())
        else:
            paragraph.append(line.strip())
    flush_table()
    flush()
    return ParsedDocument(title, [b for b in blocks if b.text])
