"""Bounds on what reading one document may cost: pages, unpacked bytes, nesting depth, XML
elements and time, and a way to stop when the caller has gone.

A governing document is at most a few hundred pages, a few MB of text and a dozen levels deep;
input far beyond that is an attack or a broken file, and is refused with a clear message (a
``ValueError``, which ingestion reports as a 4xx naming the file) before it can hold a worker.
"""

from __future__ import annotations

import subprocess
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import TYPE_CHECKING, Any
from xml.parsers import expat

if TYPE_CHECKING:
    from ..config import Reading


@dataclass(frozen=True)
class ReadLimits:
    """The settings' limits (ARC_MAX_PAGES and friends, worker/config.py)."""

    max_pages: int = 2000
    max_ocr_pages: int = 300
    max_unpacked_bytes: int = 300_000_000
    max_nesting: int = 100
    max_xml_elements: int = 500_000
    convert_seconds: float = 60.0
    convert_memory_bytes: int = 1_500_000_000
    read_seconds: float = 900.0

    @classmethod
    def from_settings(cls, reading: Reading) -> ReadLimits:
        """The configured limits, the same for uploads and the command line."""
        return cls(
            max_pages=reading.max_pages,
            max_ocr_pages=reading.max_ocr_pages,
            max_unpacked_bytes=reading.max_unpacked_bytes,
            max_nesting=reading.max_nesting,
            max_xml_elements=reading.max_xml_elements,
            convert_seconds=reading.convert_timeout,
            convert_memory_bytes=reading.convert_memory_mb * 1_000_000,
            read_seconds=reading.read_timeout,
        )


DEFAULT_LIMITS = ReadLimits()  # for callers that pass no limits (a frozen value, shared safely)


class Cancelled(ValueError):
    """The caller went away, or reading ran past its time: stop, store nothing."""


@dataclass
class Budget:
    """One read's deadline and the question "is the caller still there?"; checked between
    pages and while a converter or Tesseract runs, which are then killed."""

    seconds: float = 900.0
    gone: Callable[[], bool] = lambda: False
    started: float = field(default_factory=time.monotonic)

    def remaining(self) -> float:
        return self.seconds - (time.monotonic() - self.started)

    def check(self) -> None:
        if self.remaining() <= 0:
            raise Cancelled(f"reading took over {self.seconds:g} s (ARC_READ_TIMEOUT); split the document")
        if self.gone():
            raise Cancelled("the client closed the connection; stopped reading")


def run_bounded(
    command: list[str],
    *,
    seconds: float,
    budget: Budget,
    overtime: Exception,
    env: dict[str, str] | None = None,
    poll_seconds: float = 0.1,
) -> subprocess.CompletedProcess[bytes]:
    """Run ``command`` (a converter, Tesseract) to its end, its output collected; ``overtime`` is
    raised past ``seconds``, and ``budget`` is checked between polls. The child is killed and
    waited for on every way out: a deadline, a cancel, and whatever else reaches the caller
    mid-poll (a worker's abort as SystemExit, a KeyboardInterrupt, a failing cancel check), so no
    child outlives the read that started it."""
    child = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + seconds
    try:
        while True:
            try:
                # a retried communicate() keeps what it read before the timeout
                out, err = child.communicate(timeout=poll_seconds)
                return subprocess.CompletedProcess(command, child.returncode, out, err)
            except subprocess.TimeoutExpired:
                if time.monotonic() > deadline:
                    raise overtime from None
                budget.check()
    finally:
        if child.returncode is None:
            child.kill()
            child.communicate()  # reaps it and closes its pipes


def json_depth_exceeds(value: Any, limit: int) -> bool:
    """Whether parsed JSON nests deeper than ``limit`` (iteratively: no recursion to exhaust)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


_VOID_ELEMENTS = frozenset("area base br col embed hr img input link meta param source track wbr".split())


class _TooDeep(Exception):
    pass


class _DepthScanner(HTMLParser):
    """Nests elements as BeautifulSoup's html.parser tree does (an end tag closes up to the
    latest open element of its name; one with no open match is ignored), in one linear pass:
    building 3,000 nested divs took BeautifulSoup 2 s and grows with the square of the depth."""

    def __init__(self, limit: int):
        super().__init__(convert_charrefs=False)
        self.limit = limit
        self.open: list[str] = []

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        if tag not in _VOID_ELEMENTS:
            self.open.append(tag)
            if len(self.open) > self.limit:
                raise _TooDeep

    def handle_endtag(self, tag: str) -> None:
        if tag in self.open:  # at most `limit` entries
            while self.open.pop() != tag:
                pass


def html_too_deep(html: str, limit: int) -> bool:
    """Whether the page nests elements deeper than ``limit``, before any tree is built."""
    scanner = _DepthScanner(limit)
    try:
        scanner.feed(html)
        scanner.close()
    except _TooDeep:
        return True
    return False


_XML_CHUNK = 1 << 16


def check_docx(path: Any, limits: ReadLimits) -> None:
    """Stream every XML part of a .docx through expat before any converter builds it in memory:
    refuse a DTD (a Word file never has one; entity expansion is how "billion laughs" grows),
    nesting deeper than ``max_nesting``, more than ``max_xml_elements`` elements, and more than
    ``max_unpacked_bytes`` once unpacked (counted as read, not as the archive claims)."""
    try:
        with zipfile.ZipFile(path) as archive:
            members = archive.infolist()
            claimed = sum(m.file_size for m in members)
            if claimed > limits.max_unpacked_bytes:
                raise ValueError(_too_big(claimed, limits))
            if "word/document.xml" not in archive.namelist():
                raise ValueError("not a Word (.docx) file: it has no word/document.xml")
            unpacked, elements = 0, 0
            for member in members:
                if not member.filename.endswith((".xml", ".rels")):
                    continue
                depth = 0

                # The handlers read `member` (B023): they run only within its own iteration.
                def start(_name: str, _attrs: Any) -> None:
                    nonlocal depth, elements
                    depth += 1
                    elements += 1
                    if depth > limits.max_nesting:
                        raise ValueError(
                            f"{member.filename} nests elements over {limits.max_nesting} "  # noqa: B023
                            "deep (ARC_MAX_NESTING)"
                        )
                    if elements > limits.max_xml_elements:
                        raise ValueError(
                            f"over {limits.max_xml_elements:,} XML elements (ARC_MAX_XML_ELEMENTS): split the document"
                        )

                def end(_name: str) -> None:
                    nonlocal depth
                    depth -= 1

                def doctype(*_args: Any) -> None:
                    raise ValueError(f"{member.filename} declares a DTD, which Word files never do")  # noqa: B023

                parser = expat.ParserCreate()
                parser.StartElementHandler = start
                parser.EndElementHandler = end
                parser.StartDoctypeDeclHandler = doctype
                parser.EntityDeclHandler = doctype
                with archive.open(member) as fh:
                    while chunk := fh.read(_XML_CHUNK):
                        unpacked += len(chunk)
                        if unpacked > limits.max_unpacked_bytes:
                            raise ValueError(_too_big(unpacked, limits))
                        parser.Parse(chunk, False)
                    parser.Parse(b"", True)
    except expat.ExpatError as exc:
        raise ValueError(f"not a readable Word (.docx) file (broken XML: {exc})"[:300]) from None
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, NotImplementedError, KeyError) as exc:
        raise ValueError(f"not a readable Word (.docx) file ({type(exc).__name__})") from None
    except RuntimeError as exc:  # an encrypted member
        raise ValueError(f"not a readable Word (.docx) file ({exc})"[:300]) from None


def _too_big(size: int, limits: ReadLimits) -> str:
    return (
        f"a Word file that unpacks to {size / 1e6:.0f} MB (at most {limits.max_unpacked_bytes / 1e6:.0f} MB, "
        "ARC_MAX_UNPACKED_BYTES): split it, or ingest its text"
    )
