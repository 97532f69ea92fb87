"""The pages of a Word file, for citations: a Word file has no pages of its own, only the breaks
its author made and, when Word saved it, where Word last broke its pages.

mammoth drops every kind of break, so before conversion each block (a body paragraph or table)
that starts a new page gets a mark in its first run, a private-use character and a random
token that the file's own text cannot spell; after conversion each mark becomes the
``<!-- page N -->`` line that Markdown files use (``readers.parse_markdown``). The evidence, in
the order Word writes it:

- a hard page break (``<w:br w:type="page"/>``), ``w:pageBreakBefore`` on a paragraph or its
  style, and a section that starts on a new, odd or even page;
- ``<w:lastRenderedPageBreak/>``, where Word's own layout broke the page when it last saved the
  file: the best evidence of the printed page. Word writes one after a hard break too, so one
  with nothing printed since the last break is that same break, counted once.

As in a PDF, a paragraph cut by a page break keeps the page it starts on; the next block is on
the new page. A table row that Word split across pages records the break once in each cell,
and counts once. A footnote is cited on the page of its reference, an endnote on the body's
last page. A file that records no break at all (never paginated by Word, or one page long) gets
no pages: page 1 would be a guess.
"""

from __future__ import annotations

import secrets
import shutil
import tempfile
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from xml.etree import ElementTree

_WORD = (
    "http://schemas.openxmlformats.org/wordprocessingml/2006/main",  # transitional
    "http://purl.oclc.org/ooxml/wordprocessingml/main",
)  # strict
_CHOICE = "{http://schemas.openxmlformats.org/markup-compatibility/2006}Choice"
_DOCUMENT = "word/document.xml"
_STYLES = "word/styles.xml"
_MARK = "\ue000"  # private use, and with a random token: no text in the file passes for a mark
# The section starts (w:type) that begin a new page; "continuous" and "nextColumn" do not.
_NEW_PAGE_SECTIONS = ("nextPage", "oddPage", "evenPage")


@dataclass(frozen=True)
class PageMarks:
    """The marks put in one file's copy: :meth:`restore` turns them into page markers."""

    token: str = ""

    def restore(self, markdown: str) -> str:
        if not self.token:
            return markdown
        opening = f"{_MARK}{self.token}:"
        lines = []
        for line in markdown.splitlines():
            if opening not in line:
                lines.append(line)
                continue
            pages, text = [], []
            for i, part in enumerate(line.split(opening)):
                if i == 0:
                    text.append(part)
                    continue
                number, _, rest = part.partition(_MARK)
                pages.append(int(number))
                # what followed a line's opening (a list item's number, a table's pipe) lost its
                # leading space to markdownify, which the mark kept from it
                text.append(rest.lstrip() if not text[-1].strip() or text[-1][-1].isspace() else rest)
            lines += [f"<!-- page {pages[0]} -->", "".join(text)]
            if pages[-1] != pages[0]:  # two blocks in one line (a deleted paragraph mark joins them)
                lines.append(f"<!-- page {pages[-1]} -->")
        return "\n".join(lines)


@contextmanager
def marked_pages(path: Path) -> Iterator[tuple[Path, PageMarks]]:
    """A copy of the Word file at ``path`` with its pages marked, and how to read the marks back
    out of its Markdown; the file itself, and no marks, when it records no page break. The file
    has passed ``bounds.check_docx`` (no DTD, so no entities to expand; bounded size and elements)."""
    with zipfile.ZipFile(path) as archive:
        parts, marks = _marked_parts(archive)
    if not parts:
        yield path, marks
        return
    with tempfile.TemporaryDirectory(prefix="arc-docx-") as folder:
        copy = Path(folder) / "marked.docx"
        with zipfile.ZipFile(path) as archive, zipfile.ZipFile(copy, "w", zipfile.ZIP_STORED) as out:
            # stored, not compressed: mammoth reads the copy once, right away
            for member in archive.infolist():
                if member.filename in parts:
                    out.writestr(member.filename, parts[member.filename])
                else:
                    with archive.open(member) as source, out.open(member.filename, "w") as target:
                        shutil.copyfileobj(source, target)
        yield copy, marks


def _marked_parts(archive: zipfile.ZipFile) -> tuple[dict[str, bytes], PageMarks]:
    """The parts that carry marks (the body, and the notes it refers to), by name."""
    document = ElementTree.fromstring(archive.read(_DOCUMENT))
    namespace = document.tag[1:].partition("}")[0]
    body = document.find(f"{{{namespace}}}body")
    if namespace not in _WORD or body is None:
        return {}, PageMarks()
    w = _Names(namespace)
    pager = _Pager(w, _styles_breaking_before(archive, w), _section_starts(body, w))
    for block in _blocks(body, w):
        pager.block(block)
    if not pager.evidence:
        return {}, PageMarks()
    marks = PageMarks(secrets.token_hex(8))
    for block, page in pager.starts:
        _mark(block, page, w, marks)
    parts = {_DOCUMENT: _serialized(document)}
    for kind, references in pager.notes.items():
        part = f"word/{kind}s.xml"
        if not references or part not in archive.namelist():
            continue
        notes = ElementTree.fromstring(archive.read(part))
        for note in notes.iter(getattr(w, kind)):
            if (number := note.get(w.id, "")) in references:
                # a footnote is printed at the foot of its reference's page; endnotes follow
                # the body, from its last page on
                _mark(note, references[number] if kind == "footnote" else pager.last, w, marks)
        parts[part] = _serialized(notes)
    return parts, marks


class _Names:
    """Qualified names in the file's WordprocessingML namespace."""

    def __init__(self, namespace: str):
        self.namespace = namespace

    def __getattr__(self, local: str) -> str:
        return f"{{{self.namespace}}}{local}"


def _on(element: ElementTree.Element | None, w: _Names) -> bool | None:
    """An on/off property: absent None; present, on unless its val says off."""
    if element is None:
        return None
    return element.get(w.val, "true") not in ("false", "0", "off")


def _styles_breaking_before(archive: zipfile.ZipFile, w: _Names) -> dict[str | None, bool]:
    """Which paragraph styles start a new page (``pageBreakBefore``, through ``basedOn``); the
    key None is the default paragraph style's answer."""
    if _STYLES not in archive.namelist():
        return {}
    root = ElementTree.fromstring(archive.read(_STYLES))
    own: dict[str, bool | None] = {}
    based: dict[str, str] = {}
    default = None
    for style in root.iter(w.style):
        if style.get(w.type) != "paragraph" or not (name := style.get(w.styleId)):
            continue
        own[name] = _on(style.find(f"{w.pPr}/{w.pageBreakBefore}"), w)
        if (parent := style.find(w.basedOn)) is not None:
            based[name] = parent.get(w.val, "")
        if style.get(w.default) in ("1", "true", "on"):
            default = name

    def breaks(name: str) -> bool:
        seen = set()
        while name in own and name not in seen:  # basedOn may loop in a damaged file
            seen.add(name)
            if own[name] is not None:
                return bool(own[name])
            name = based.get(name, "")
        return False

    answers: dict[str | None, bool] = {name: breaks(name) for name in own}
    answers[None] = breaks(default) if default else False
    return answers


def _section_starts(body: ElementTree.Element, w: _Names) -> dict[int, str]:
    """For each paragraph that ends a section (its ``w:sectPr``), how the next section starts: the
    next ``w:sectPr`` in the body (the body's own last) says, as its ``w:type``; nextPage by default."""
    enders: list[ElementTree.Element] = []
    properties: list[ElementTree.Element] = []
    for paragraph in body.iter(w.p):
        if (own := paragraph.find(f"{w.pPr}/{w.sectPr}")) is not None:
            enders.append(paragraph)
            properties.append(own)
    if (last := body.find(w.sectPr)) is not None:
        properties.append(last)
    starts: dict[int, str] = {}
    # without the body's own sectPr, the last ender has no following one and is left out
    for paragraph, following in zip(enders, properties[1:], strict=False):
        kind = following.find(w.type)
        starts[id(paragraph)] = "nextPage" if kind is None else kind.get(w.val, "nextPage")
    return starts


def _blocks(container: ElementTree.Element, w: _Names) -> Iterator[ElementTree.Element]:
    """The body's paragraphs and tables in order, looking through content controls and custom
    XML that wrap them."""
    for child in container:
        if child.tag in (w.sdt, w.customXml):
            inner = child.find(w.sdtContent) if child.tag == w.sdt else child
            if inner is not None:
                yield from _blocks(inner, w)
        elif child.tag in (w.p, w.tbl):
            yield child


@dataclass
class _Pager:
    """Walks the body in order, counting pages as Word's breaks say."""

    w: _Names
    styles: dict[str | None, bool]
    sections: dict[int, str]
    page: int = 1
    since_break: bool = False  # something printed since the last break
    printed: bool = False  # anything printed yet
    evidence: bool = False
    first: int | None = None  # the page the current block's first printed content is on
    last: int = 1  # the page the last printed content is on
    starts: list[tuple[ElementTree.Element, int]] = field(default_factory=list)
    notes: dict[str, dict[str, int]] = field(default_factory=lambda: {"footnote": {}, "endnote": {}})

    def __post_init__(self) -> None:
        w = self.w
        # deleted text and field codes print nothing; a text box floats beside the page's flow;
        # mc:Choice repeats what mc:Fallback holds (mammoth reads the fallback)
        self.unprinted = {
            w.delText,
            w.instrText,
            w.txbxContent,
            w.rPr,
            w.pPr,
            w.sectPr,
            _CHOICE,
            getattr(w, "del"),
            w.moveFrom,
        }
        self.printing = {w.sym, w.drawing, w.pict, w.object, w.footnoteReference, w.endnoteReference}
        self.references = {w.footnoteReference: "footnote", w.endnoteReference: "endnote"}

    def block(self, element: ElementTree.Element) -> None:
        self.first = None
        self.walk(element)
        if self.first is not None and (not self.starts or self.starts[-1][1] != self.first):
            self.starts.append((element, self.first))

    def walk(self, element: ElementTree.Element) -> None:
        w, tag = self.w, element.tag
        if tag in self.unprinted:
            return
        if tag == w.p:
            self.paragraph(element)
        elif tag == w.tr:
            self.row(element)
        elif tag == w.br:
            if element.get(w.type) == "page":
                self.hard_break()
        elif tag == w.lastRenderedPageBreak:
            self.evidence = True
            if self.since_break:
                self.turn()
        else:
            if tag in self.references:
                self.notes[self.references[tag]][element.get(w.id, "")] = self.page
            if (tag == w.t and element.text) or tag in self.printing:
                self.prints()
            for child in element:
                self.walk(child)

    def paragraph(self, p: ElementTree.Element) -> None:
        w = self.w
        properties = p.find(w.pPr)
        style = properties.find(w.pStyle) if properties is not None else None
        before = _on(properties.find(w.pageBreakBefore), w) if properties is not None else None
        if before is None:
            before = self.styles.get(style.get(w.val) if style is not None else None, False)
        if before and self.printed:  # Word ignores it on the document's first paragraph
            self.hard_break()
        for child in p:
            self.walk(child)
        start = self.sections.get(id(p))
        if start in _NEW_PAGE_SECTIONS:
            self.hard_break()
            if (start, self.page % 2) in (("oddPage", 0), ("evenPage", 1)):
                self.page += 1  # Word leaves a blank page to start on the side asked for

    def row(self, tr: ElementTree.Element) -> None:
        """Each cell from the row's first page; the row ends where its longest cell does."""
        page, since_break = self.page, self.since_break
        ends = []
        for cell in _cells(tr, self.w):
            self.page, self.since_break = page, since_break
            self.walk(cell)
            ends.append((self.page, self.since_break))
        if ends:
            self.page = max(end for end, _ in ends)
            self.since_break = any(printed for end, printed in ends if end == self.page)

    def hard_break(self) -> None:
        self.evidence = True
        self.turn()

    def turn(self) -> None:
        self.page += 1
        self.since_break = False

    def prints(self) -> None:
        self.since_break = self.printed = True
        self.last = self.page
        if self.first is None:
            self.first = self.page


def _cells(tr: ElementTree.Element, w: _Names) -> Iterator[ElementTree.Element]:
    for child in tr:
        if child.tag == w.tc:
            yield child
        elif child.tag in (w.sdt, w.sdtContent, w.customXml):
            yield from _cells(child, w)


def _mark(block: ElementTree.Element, page: int, w: _Names, marks: PageMarks) -> None:
    """A run holding the page's mark, first in the block's first paragraph (after its properties)."""
    paragraph = block if block.tag == w.p else next(block.iter(w.p), None)
    if paragraph is None:
        return
    run = ElementTree.Element(w.r)
    ElementTree.SubElement(run, w.t).text = f"{_MARK}{marks.token}:{page}{_MARK}"
    paragraph.insert(1 if len(paragraph) and paragraph[0].tag == w.pPr else 0, run)


def _serialized(root: ElementTree.Element) -> bytes:
    return ElementTree.tostring(root, encoding="utf-8", xml_declaration=True)
