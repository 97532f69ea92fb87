"""File readers: Markdown, plain text and PDF into :class:`~worker.chunking.Block` s.

Headings become the section path. Markdown uses ``#`` headings; plain text and PDF use the
numbering governing documents are written with ("Chapter 4", "ARTICLE V", "4.2 Fencing",
"Exhibit A"). Lettered and numbered items ("(F) ...", "3. ...") are blocks of their own, so a
long section splits between items, never inside one if it can help it. Pages: PDF pages, form
feeds in text, and ``<!-- page N -->`` markers in Markdown.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from .chunking import Block

# Leading spaces allowed: transcriptions nest headings inside list items ("2. The Articles are
# amended as follows:" then "    ## ARTICLE I"); governing documents carry no indented code.
_MD_HEADING = re.compile(r"^\s*(#{1,6})\s+(.+?)\s*#*\s*$")
_PAGE_MARKER = re.compile(r"^\s*<!--\s*page\s+(\d+)\s*-->\s*$", re.I)
_ITEM = re.compile(r"^\s*(?:[-*•]\s+|\(?[A-Za-z0-9]{1,3}[.)]\s+|\([A-Za-z0-9]{1,3}\)\s+)")
_TEXT_HEADING_L1 = re.compile(r"^(chapter|article|part|exhibit|appendix|schedule)\b[\s\w.:-]{0,70}$", re.I)
_TEXT_HEADING_NUM = re.compile(r"^(?:section\s+)?(\d+(?:\.\d+)*)\.?\s+[A-Z][^.]{0,70}$")


@dataclass(frozen=True)
class ParsedDocument:
    title: str | None
    blocks: list[Block]


def read_path(path: Path) -> ParsedDocument:
    suffix = path.suffix.lower()
    if suffix in (".md", ".markdown"):
        return parse_markdown(_utf8(path))
    if suffix == ".txt":
        return parse_text(_utf8(path))
    if suffix == ".pdf":
        return parse_pdf(path)
    raise ValueError(f"unsupported file type {suffix or '(none)'}: use .md, .txt, .pdf or a BEIR corpus.jsonl")


def parse_markdown(text: str) -> ParsedDocument:
    stack: list[tuple[int, str]] = []
    title: str | None = None
    page: int | None = None
    blocks: list[Block] = []
    paragraph: list[str] = []

    def flush() -> None:
        if paragraph:
            blocks.append(Block(" ".join(paragraph).strip(), tuple(h for _, h in stack), page))
            paragraph.clear()

    for line in text.splitlines():
        if marker := _PAGE_MARKER.match(line):
            flush()
            page = int(marker.group(1))
            continue
        if heading := _MD_HEADING.match(line):
            flush()
            level, name = len(heading.group(1)), heading.group(2).strip()
            if level == 1 and title is None:
                title = name
                continue  # the document title names the document, not a section
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, name))
            continue
        if not line.strip():
            flush()
        elif _ITEM.match(line):
            flush()
            paragraph.append(line.strip())
        else:
            paragraph.append(line.strip())
    flush()
    return ParsedDocument(title, [b for b in blocks if b.text])


def parse_text(text: str, first_page: int | None = None) -> ParsedDocument:
    pages = text.split("\f")
    numbered = len(pages) > 1 or first_page is not None
    return _parse_pages([(i + (first_page or 1) if numbered else None, p) for i, p in enumerate(pages)])


def _utf8(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start}); "
                         "save it as UTF-8") from None


def parse_pdf(path: Path) -> ParsedDocument:
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    try:
        reader = PdfReader(str(path))
        if reader.is_encrypted and not reader.decrypt(""):
            raise ValueError("the PDF is encrypted with a password; save an unprotected copy")
        pages = [(n, page.extract_text() or "") for n, page in enumerate(reader.pages, start=1)]
    except (PyPdfError, OSError, KeyError, TypeError, AttributeError) as exc:
        # pypdf raises its own errors and, on damaged files, plain Python ones from its parser
        raise ValueError(f"not a readable PDF ({type(exc).__name__}: {exc})"[:300]) from None
    return _parse_pages(pages)


def _parse_pages(pages: list[tuple[int | None, str]]) -> ParsedDocument:
    stack: list[tuple[int, str]] = []
    blocks: list[Block] = []
    title: str | None = None
    for page, text in pages:
        paragraph: list[str] = []
        for line in [*text.splitlines(), ""]:
            stripped = line.strip()
            level = _text_heading_level(stripped)
            if level is not None or not stripped or _ITEM.match(stripped):
                if paragraph:
                    blocks.append(Block(" ".join(paragraph), tuple(h for _, h in stack), page))
                    paragraph = []
            if level is not None:
                while stack and stack[-1][0] >= level:
                    stack.pop()
                stack.append((level, stripped))
                title = title or stripped
            elif stripped:
                paragraph.append(stripped)
    return ParsedDocument(title, blocks)


def _text_heading_level(line: str) -> int | None:
    if not line or len(line) > 80 or line.endswith((".", ",", ";")):
        return None
    if _TEXT_HEADING_L1.match(line):
        return 1
    if m := _TEXT_HEADING_NUM.match(line):
        return m.group(1).count(".") + 1
    if line.isupper() and len(line.split()) <= 8 and any(c.isalpha() for c in line):
        return 1
    return None


@dataclass(frozen=True)
class CorpusRecord:
    """One line of a BEIR ``corpus.jsonl``: ``_id``, ``title``, ``text``."""

    doc_id: str
    title: str
    text: str


def read_beir_corpus(path: Path) -> Iterator[CorpusRecord]:
    import json

    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                row = json.loads(line)
                yield CorpusRecord(str(row["_id"]), row.get("title") or "", row.get("text") or "")
