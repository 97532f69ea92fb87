"""File readers: Markdown, plain text and PDF into :class:`~worker.ingest.chunking.Block` s.

Headings become the section path. Markdown uses ``#`` headings; plain text and PDF use the
numbering governing documents are written with ("Chapter 4", "ARTICLE V", "4.2 Fencing",
"Exhibit A"). Lettered and numbered items ("(F) ...", "3. ...") are blocks of their own, so a
long section splits between items, never inside one if it can help it. Pages: PDF pages, form
feeds in text, ``<!-- page N -->`` markers in Markdown, and a Word file's page breaks. Tables
stay tables: Markdown pipe rows, and the ruled tables of a PDF page (found by pdfplumber) as
such rows.
"""

from __future__ import annotations

import logging
import math
import re
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from ..models import TextFormat
from .bounds import Budget, ReadLimits, check_docx, html_too_deep
from .chunking import ITEM, Block
from .lexicon import english_words
from .links import unsafe_url, without_unsafe_links
from .ocr import Ocr

log = logging.getLogger("arc.readers")

# A page with fewer letters than this in its text layer, and an image, is a scan (a recording
# stamp or a page number may be all the text a scanned page carries).
_MIN_PAGE_LETTERS = 20

# Patterns run on every line of untrusted text, so none may backtrack: each is anchored or
# fails at once, and what would need a lazy group against trailing spaces is done in Python
# ("# a" + 2,000 spaces + "b" took 10 s against the old heading pattern, holding the process).
_HTML_BREAK = re.compile(r"<br\s*/?>", re.I)
# Leading spaces allowed: transcriptions nest headings inside list items ("2. The Articles are
# amended as follows:" then "    ## ARTICLE I"); governing documents carry no indented code.
_MD_HEADING = re.compile(r"^\s*(#{1,6})\s(.*)$")
_TABLE_ROW = re.compile(r"^\s*\|.*\|\s*$")
_PAGE_MARKER = re.compile(r"^\s*<!--\s*page\s+(\d+)\s*-->\s*$", re.I)
_PAGE_MARKER_IN_TEXT = re.compile(r"^[ \t]*(<!--[ \t]*page[ \t]+\d+[ \t]*-->)[ \t]*$", re.I | re.M)
_HEADING_WORDS = "(chapter|article|part|exhibit|appendix|schedule)"
_TEXT_HEADING_L1 = re.compile(rf"^{_HEADING_WORDS}\b[\s\w.:-]{{0,70}}$", re.I)
_TEXT_HEADING_NUM = re.compile(r"^(?:(?i:section)\s+)?(\d+(?:\.\d+)*)\.?\s+[A-Z][^.]{0,70}$")
_SECTION_WORD = re.compile(r"^section\s+(\d+(?:\.\d+)*)", re.I)


@dataclass(frozen=True)
class ParsedDocument:
    title: str | None
    blocks: list[Block]
    ocr_pages: int = 0
    ocr_seconds: float = 0.0  # wall-clock time reading them


# The text files the readers know, by suffix (PDF and Word are read by their own readers).
TEXT_SUFFIXES: dict[str, TextFormat] = {".md": "markdown", ".markdown": "markdown", ".txt": "text",
                                        ".html": "html", ".htm": "html"}


def read_path(path: Path, ocr: Ocr = Ocr(), limits: ReadLimits = ReadLimits(),
              budget: Budget | None = None) -> ParsedDocument:
    """A file as its reader reads it, without unsafe links (worker/ingest/links.py)."""
    return _safe_links(_read_path(path, ocr, limits, budget))


def _safe_links(parsed: ParsedDocument) -> ParsedDocument:
    """Every block and the title without unsafe links, whatever the format was."""
    blocks = [replace(b, text=_unlinked(b.text)) for b in parsed.blocks]
    title = without_unsafe_links(parsed.title) if parsed.title else parsed.title
    return replace(parsed, title=title, blocks=[b for b in blocks if b.text.strip()])


def _unlinked(text: str) -> str:
    safe = without_unsafe_links(text)
    return safe if safe == text else safe.strip()


def _read_path(path: Path, ocr: Ocr, limits: ReadLimits, budget: Budget | None) -> ParsedDocument:
    suffix = path.suffix.lower()
    if suffix in TEXT_SUFFIXES:
        return parse_formatted(_utf8(path), TEXT_SUFFIXES[suffix], limits, budget)
    if suffix == ".pdf":
        return parse_pdf(path, ocr, limits, budget)
    if suffix == ".docx":
        from .convert import docx_markdown_bounded

        return parse_markdown(docx_markdown_bounded(path, limits, budget))
    raise ValueError(f"unsupported file type {suffix or '(none)'}: use .md, .txt, .pdf, .docx, .html "
                     "or a BEIR corpus.jsonl")


def parse_formatted(text: str, format: TextFormat, limits: ReadLimits = ReadLimits(),
                    budget: Budget | None = None) -> ParsedDocument:
    """Text in a format a caller names (a file's suffix, the ingest webhook's `format`), without
    unsafe links."""
    if format == "text":
        return _safe_links(parse_text(text))
    if format == "html":
        from .convert import html_markdown_bounded

        return _safe_links(parse_markdown(html_markdown_bounded(text, limits, budget)))
    return _safe_links(parse_markdown(text))




def html_to_markdown(html: str, max_nesting: int = ReadLimits.max_nesting, what: str = "HTML") -> str:
    """Headings, numbered and bulleted lists and tables as Markdown (markdownify); scripts,
    styles and a page's navigation, header and footer left out. Deeper nesting than
    ``max_nesting`` is refused: markdownify recurses per element (3,000 nested divs exhausted
    Python's stack)."""
    from bs4 import BeautifulSoup
    from markdownify import MarkdownConverter

    if html_too_deep(html, max_nesting):
        raise ValueError(f"{what} nested over {max_nesting} elements deep (ARC_MAX_NESTING)")
    soup = BeautifulSoup(html, "html.parser")
    # <title> names the page, it is no passage of it: the document's title unless an <h1> names it
    title = " ".join(soup.title.get_text().split()) if soup.title else ""
    for tag in soup(["title", "script", "style", "noscript", "template", "nav", "header", "footer"]):
        tag.decompose()
    for link in soup("a", href=True):
        if unsafe_url(link["href"]):
            del link["href"]
    for image in soup("img"):
        if not image.get("src") or unsafe_url(image["src"]):
            image.replace_with(image.get("alt") or "")
    body = MarkdownConverter(heading_style="ATX", bullets="-", table_infer_header=True).convert_soup(soup)
    # A page's text that reads like Markdown's page marker stays text: only a Word file's own
    # breaks (restored after this, docx_pages) say where a page begins.
    body = _PAGE_MARKER_IN_TEXT.sub(r"\\\1", body)
    return f"# {title}\n\n{body}" if title and soup.find("h1") is None else body


def docx_to_markdown(path: Path, limits: ReadLimits = ReadLimits()) -> str:
    """A Word document through mammoth's semantic HTML (its headings, lists and tables), then as
    HTML above; the Title style is the document's title, and ``<!-- page N -->`` markers say
    where its pages begin (:mod:`worker.ingest.docx_pages`)."""
    import zipfile
    from xml.etree.ElementTree import ParseError

    import mammoth

    from .docx_pages import marked_pages

    check_docx(path, limits)
    # Images are left out: mammoth inlines each as base64 text, memory for nothing retrievable.
    no_images = mammoth.images.img_element(lambda image: {"alt": image.alt_text or ""})
    try:
        with marked_pages(path) as (marked, pages), marked.open("rb") as fh:
            html = mammoth.convert_to_html(fh, style_map="p[style-name='Title'] => h1:fresh",
                                           convert_image=no_images).value
    except (zipfile.BadZipFile, KeyError, ParseError) as exc:
        raise ValueError(f"not a readable Word (.docx) file ({type(exc).__name__})") from None
    # mammoth nests a list's levels as <ol>s that the XML wrote flat, so the limit applies again
    return pages.restore(html_to_markdown(html, limits.max_nesting, what="the Word file's lists and tables"))


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

    for line in text.splitlines():
        if _TABLE_ROW.match(line):
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
            _enter(stack, level, name)
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


def parse_text(text: str, first_page: int | None = None) -> ParsedDocument:
    pages = text.split("\f")
    numbered = len(pages) > 1 or first_page is not None
    return _parse_pages([(i + (first_page or 1) if numbered else None, p) for i, p in enumerate(pages)])


def _utf8(path: Path) -> str:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start}); "
                         "save it as UTF-8") from None
    if (nul := text.find("\x00")) >= 0:  # Postgres text cannot hold it; no text file has one
        raise ValueError(f"a NUL byte at character {nul}: not a text file")
    return text


def parse_pdf(path: Path, ocr: Ocr = Ocr(), limits: ReadLimits = ReadLimits(),
              budget: Budget | None = None) -> ParsedDocument:
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
        scanned = [n for (n, text), page in zip(pages, reader.pages)
                   if sum(c.isalpha() for c in text) < _MIN_PAGE_LETTERS and _has_image(page)]
        if len(scanned) > limits.max_ocr_pages:
            raise ValueError(f"{len(scanned):,} pages need OCR (at most {limits.max_ocr_pages:,}, "
                             "ARC_MAX_OCR_PAGES): split the PDF")
        ruled = [n for n, page in enumerate(reader.pages, start=1) if n not in scanned and _has_rules(page)]
    except (PyPdfError, OSError, KeyError, TypeError, AttributeError) as exc:
        # pypdf raises its own errors and, on damaged files, plain Python ones from its parser
        raise ValueError(f"not a readable PDF ({type(exc).__name__}: {exc})"[:300]) from None
    if ruled:
        with_tables = pdf_tables(path, ruled)
        pages = [(n, with_tables.get(n, text)) for n, text in pages]
    if not scanned:
        return _parse_pages(pages)
    started = time.perf_counter()
    read = {p.number: p.text for p in ocr.read_pages(path, scanned, budget)}
    seconds = time.perf_counter() - started
    parsed = _parse_pages([(n, read.get(n, text)) for n, text in pages])
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
                tables = sorted(((t.bbox, rows) for t in page.find_tables() if _holds_a_table(rows := t.extract())),
                                key=lambda found_table: found_table[0][1])
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


def _parse_pages(pages: list[tuple[int | None, str]]) -> ParsedDocument:
    """Lines of text pages (a PDF's text layer, OCR, plain text) into blocks.

    Page furniture (running headers and footers, page numbers) is dropped. A paragraph ends at a
    blank line or page break only where its sentence ends, so one cut by a page break or a stray
    blank line (OCR makes them) stays whole and keeps the page it started on; words hyphenated
    across lines are joined; a short title on the line after a bare "ARTICLE V" joins that heading.
    """
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
            if _TABLE_ROW.match(line):  # a table's rows (pdf_tables) stay rows
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
            if not titled and not paragraph and _is_title(line) and not _TEXT_HEADING_L1.match(line) \
                    and not _TEXT_HEADING_NUM.match(line):
                stack[-1] = (stack[-1][0], f"{stack[-1][1]} {line}")  # "ARTICLE I" + "Definitions"
                titled = True
                continue
            level = _text_heading_level(line)
            if level is not None and (section := _SECTION_WORD.match(line)):
                # "Section 2. Driveways": a sibling of "Section 1. Roofs", inside the ARTICLE above
                # them if there is one; a wrapped sentence's line "Section 3 of the Declaration" is no heading
                level = _section_level(section.group(1), stack) \
                    if not paragraph or _ends_sentence(paragraph[-1]) else None
            if level is not None:
                flush()
                _enter(stack, level, line)
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
                _enter(stack, level, run_in.group(0).strip().rstrip("."))
            if not paragraph:
                paragraph_page = page
            paragraph.append(line)
        flush_table(page)
    flush()
    return ParsedDocument(title, blocks)


# "Section 4." or "Section 4.2" opening a paragraph, with its run-in title when it has one
_RUN_IN_SECTION = re.compile(
    r"^(?:SECTION|[Ss]ection)\s+(\d+(?:\.\d+)*)\.?"
    r"(?:\s+(?:(?:[A-Z0-9][\w'’/&:,()-]*|of|and|or|for|the|to|on|in|an?|under|by)\s+){0,9}"
    r"[A-Z0-9][\w'’/&:,()-]*\.(?=\s|$))?")
_BARE_HEADING = re.compile(rf"^{_HEADING_WORDS}\s+[\w.\"'-]{{1,8}}$", re.I)
_PAGE_NUMBER = re.compile(r"^(?:.*\bpage\s+\S{1,4}(?:\s+of\s+\S{1,4})?|[-\u2013 ]*\d{1,4}[-\u2013 ]*)$", re.I)
_SENTENCE_END = (".", ":", ";", "?", "!", ".\"", ".\u201d", ".)")


def _title_case(text: str) -> bool:
    """"Fences and Walls" is a title; "Owners must keep their lots free of" (a numbered rule's
    first line, wrapped) is not."""
    words = [w for w in re.findall(r"[A-Za-z][\w'’-]*", text) if len(w) > 3]
    return len(text.split()) <= 8 and sum(w[0].isupper() for w in words) * 2 >= len(words)


def _names_a_document(heading: str) -> bool:
    """A heading that can be the document's name: not a scanned title's stray word ("OF" between
    "ARTICLES" and "INCORPORATION") nor a numbered part ("ARTICLE I"), which name no document."""
    return (re.search(r"[A-Za-z]{4}", heading) is not None and not _TEXT_HEADING_L1.match(heading)
            and not _TEXT_HEADING_NUM.match(heading))


def _ends_sentence(line: str) -> bool:
    return line.endswith(_SENTENCE_END)


def _is_title(line: str) -> bool:
    return (len(line.split()) <= 8 and line[0].isupper() and not line.endswith((".", ",", ";", ":"))
            and not ITEM.match(line))


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
        keep = (first + second not in known and len(first) > 1 and len(second) > 1
                and first in known and second in known)
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


def _enter(stack: list[tuple[int, str]], level: int, name: str) -> None:
    """Open a section: headings at its level or deeper are closed first."""
    while stack and stack[-1][0] >= level:
        stack.pop()
    stack.append((level, name))


def _section_level(number: str, stack: list[tuple[int, str]]) -> int:
    """"Section 4.2" sits one level below an article, chapter or part above it, and beside
    "Section 4.1": the sections met before it are its siblings, never its parents."""
    in_part = any(not _SECTION_WORD.match(name) for level, name in stack if level == 1)
    return number.count(".") + (2 if in_part else 1)


def _text_heading_level(line: str) -> int | None:
    if not line or len(line) > 80 or line.endswith((".", ",", ";")):
        return None
    if _TEXT_HEADING_L1.match(line):
        return 1
    if (m := _TEXT_HEADING_NUM.match(line)) and _title_case(line[m.end(1):]):
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
