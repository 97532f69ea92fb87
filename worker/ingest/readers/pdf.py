"""PDF files: each page's text layer, OCR for pages that are scans, ruled tables as Markdown rows
(pdfplumber), then the text layout heuristics of :mod:`.layout`."""

from __future__ import annotations

import logging
import re
import time
from dataclasses import replace
from pathlib import Path

from ..bounds import DEFAULT_LIMITS, Budget, ReadLimits
from ..ocr import DEFAULT_OCR, Ocr
from .document import ParsedDocument
from .layout import parse_pages

log = logging.getLogger("arc.readers")

# A page with fewer letters than this in its text layer, and an image, is a scan (a recording
# stamp or a page number may be all the text a scanned page carries).
_MIN_PAGE_LETTERS = 20


def parse_pdf(
    path: Path, ocr: Ocr = DEFAULT_OCR, limits: ReadLimits = DEFAULT_LIMITS, budget: Budget | None = None
) -> ParsedDocument:
    """The text layer of each page; pages that are images (scans) are read by OCR. At most
    ``limits.max_pages`` pages and ``limits.max_ocr_pages`` scanned ones (a 1.6 MB PDF of 10,000
    blank pages sharing one image would have kept Tesseract busy for hours)."""
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    budget = budget or Budget(limits.read_seconds)
    try:
        reader = PdfReader(str(path))
        if reader.is_encrypted and not reader.decrypt(""):
            raise ValueError("the PDF is encrypted with a password; save an unprotected copy")
        if (count := len(reader.pages)) > limits.max_pages:
            raise ValueError(f"{count:,} pages (at most {limits.max_pages:,}, ARC_MAX_PAGES): split the PDF")
        pages = []
        for n, page in enumerate(reader.pages, start=1):
            budget.check()
            pages.append((n, page.extract_text() or ""))
        scanned = [
            n
            for (n, text), page in zip(pages, reader.pages, strict=True)
            if sum(c.isalpha() for c in text) < _MIN_PAGE_LETTERS and _has_image(page)
        ]
        if len(scanned) > limits.max_ocr_pages:
            raise ValueError(
                f"{len(scanned):,} pages need OCR (at most {limits.max_ocr_pages:,}, ARC_MAX_OCR_PAGES): split the PDF"
            )
        ruled = [n for n, page in enumerate(reader.pages, start=1) if n not in scanned and _has_rules(page)]
    except (PyPdfError, OSError, KeyError, TypeError, AttributeError) as exc:
        # pypdf raises its own errors and, on damaged files, plain Python ones from its parser
        raise ValueError(f"not a readable PDF ({type(exc).__name__}: {exc})"[:300]) from None
    if ruled:
        with_tables = pdf_tables(path, ruled)
        pages = [(n, with_tables.get(n, text)) for n, text in pages]
    if not scanned:
        return parse_pages(pages)
    started = time.perf_counter()
    read = {p.number: p.text for p in ocr.read_pages(path, scanned, budget)}
    seconds = time.perf_counter() - started
    parsed = parse_pages([(n, read.get(n, text)) for n, text in pages])
    return replace(parsed, ocr_pages=len(scanned), ocr_seconds=seconds)


def _has_image(page) -> bool:
    return len(page.images) > 0  # lists them (forms included) without decoding any


_RULE_OPERATOR = re.compile(rb"\s(?:re|l)\s")


def _has_rules(page) -> bool:
    """Whether the page draws lines or rectangles: a ruled table needs them, and only such pages
    are worth pdfplumber's slower layout analysis."""
    try:
        contents = page.get_contents()
        return bool(contents is not None and _RULE_OPERATOR.search(contents.get_data()))
    except Exception:  # a damaged content stream: no tables rather than no document
        return False


def pdf_tables(path: Path, numbers: list[int]) -> dict[int, str]:
    """The text of those pages that hold ruled tables, each table as Markdown rows in its place
    (pdfplumber finds them from the drawn lines); pages without one are left out."""
    import pdfplumber

    found: dict[int, str] = {}
    try:
        with pdfplumber.open(path) as pdf:
            for number in numbers:
                page = pdf.pages[number - 1]
                tables = sorted(
                    ((t.bbox, rows) for t in page.find_tables() if _holds_a_table(rows := t.extract())),
                    key=lambda found_table: found_table[0][1],
                )
                if not tables:
                    continue
                parts, top = [], 0.0
                for (_, table_top, _, table_bottom), rows in tables:
                    parts.append(_text_between(page, top, table_top))
                    parts.append(markdown_table(rows))
                    top = table_bottom
                parts.append(_text_between(page, top, page.height))
                found[number] = "\n".join(p for p in parts if p)
    except Exception as exc:  # pdfminer's errors on odd files: keep pypdf's text for those pages
        log.info("table detection skipped", extra={"file": path.name, "error_type": type(exc).__name__})
    return found


def _holds_a_table(rows: list[list[str | None]]) -> bool:
    """At least two rows with two filled cells: a ruled box or a single line is not a table."""
    filled = [[c for c in row if c and c.strip()] for row in rows]
    return len(rows) >= 2 and max(len(r) for r in rows) >= 2 and sum(len(r) >= 2 for r in filled) >= 2


def _text_between(page, top: float, bottom: float) -> str:
    if bottom - top < 1:
        return ""
    return page.crop((0, top, page.width, bottom)).extract_text() or ""


def markdown_table(rows: list[list[str | None]]) -> str:
    """Rows of cells as a Markdown table, the first row its header."""
    width = max(len(row) for row in rows)

    def cells(row: list[str | None]) -> str:
        text = [" ".join((c or "").split()).replace("|", "\\|") for c in row] + [""] * (width - len(row))
        return "| " + " | ".join(text) + " |"

    return "\n".join([cells(rows[0]), "|" + " --- |" * width, *(cells(row) for row in rows[1:])])
