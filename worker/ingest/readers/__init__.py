"""File readers: Markdown, plain text and PDF into :class:`~worker.ingest.chunking.Block` s.

Headings become the section path. Markdown uses ``#`` headings; plain text and PDF use the
numbering governing documents are written with ("Chapter 4", "ARTICLE V", "4.2 Fencing",
"Exhibit A"). Lettered and numbered items ("(F) ...", "3. ...") are blocks of their own, so a
long section splits between items, never inside one if it can help it. Pages: PDF pages, form
feeds in text, ``<!-- page N -->`` markers in Markdown, and a Word file's page breaks. Tables
stay tables: Markdown pipe rows, and the ruled tables of a PDF page (found by pdfplumber) as
such rows.

The package is split by format: :mod:`.markdown`, :mod:`.layout` (text pages: plain text, a PDF's
text layer, OCR), :mod:`.pdf`, :mod:`.html` and :mod:`.docx` (the last two run in the bounded
converter child, :mod:`worker.ingest.convert`), :mod:`.beir`. This module picks one by a file's
suffix or a caller's format.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from ...models import TextFormat
from ..bounds import DEFAULT_LIMITS, Budget, ReadLimits
from ..convert import docx_markdown_bounded, html_markdown_bounded
from ..links import without_unsafe_links
from ..ocr import DEFAULT_OCR, Ocr
from .beir import CorpusRecord, read_beir_corpus
from .document import ParsedDocument
from .layout import DocumentWords, parse_pages, parse_text, rejoin
from .markdown import parse_markdown
from .pdf import markdown_table, parse_pdf, pdf_tables

__all__ = [
    "TEXT_SUFFIXES",
    "CorpusRecord",
    "DocumentWords",
    "ParsedDocument",
    "markdown_table",
    "parse_formatted",
    "parse_markdown",
    "parse_pages",
    "parse_pdf",
    "parse_text",
    "pdf_tables",
    "read_beir_corpus",
    "read_path",
    "rejoin",
]


# The text files the readers know, by suffix (PDF and Word are read by their own readers).
TEXT_SUFFIXES: dict[str, TextFormat] = {
    ".md": "markdown",
    ".markdown": "markdown",
    ".txt": "text",
    ".html": "html",
    ".htm": "html",
}


def read_path(
    path: Path, ocr: Ocr = DEFAULT_OCR, limits: ReadLimits = DEFAULT_LIMITS, budget: Budget | None = None
) -> ParsedDocument:
    """A file as its reader reads it, without unsafe links (worker/ingest/links.py)."""
    return _safe_links(_read_path(path, ocr, limits, budget))


def _read_path(path: Path, ocr: Ocr, limits: ReadLimits, budget: Budget | None) -> ParsedDocument:
    suffix = path.suffix.lower()
    if suffix in TEXT_SUFFIXES:
        return parse_formatted(_utf8(path), TEXT_SUFFIXES[suffix], limits, budget)
    if suffix == ".pdf":
        return parse_pdf(path, ocr, limits, budget)
    if suffix == ".docx":
        return parse_markdown(docx_markdown_bounded(path, limits, budget))
    raise ValueError(
        f"unsupported file type {suffix or '(none)'}: use .md, .txt, .pdf, .docx, .html or a BEIR corpus.jsonl"
    )


def parse_formatted(
    text: str, format: TextFormat, limits: ReadLimits = DEFAULT_LIMITS, budget: Budget | None = None
) -> ParsedDocument:
    """Text in a format a caller names (a file's suffix, the ingest webhook's `format`), without
    unsafe links."""
    if format == "text":
        return _safe_links(parse_text(text))
    if format == "html":
        return _safe_links(parse_markdown(html_markdown_bounded(text, limits, budget)))
    return _safe_links(parse_markdown(text))


def _safe_links(parsed: ParsedDocument) -> ParsedDocument:
    """Every block and the title without unsafe links, whatever the format was."""
    blocks = [replace(b, text=_unlinked(b.text)) for b in parsed.blocks]
    title = without_unsafe_links(parsed.title) if parsed.title else parsed.title
    return replace(parsed, title=title, blocks=[b for b in blocks if b.text.strip()])


def _unlinked(text: str) -> str:
    safe = without_unsafe_links(text)
    return safe if safe == text else safe.strip()


def _utf8(path: Path) -> str:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(
            f"not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start}); save it as UTF-8"
        ) from None
    if (nul := text.find("\x00")) >= 0:  # Postgres text cannot hold it; no text file has one
        raise ValueError(f"a NUL byte at character {nul}: not a text file")
    return text
