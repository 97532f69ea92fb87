"""Which OCR reads governing-document scans best on this kind of machine: character error rate
against the hand-checked Markdown transcriptions, and seconds per page.

    python benchmarks/ocr.py --engines tesseract,rapidocr --out benchmarks/ocr

Every page of each scanned PDF is rendered at --dpi (pypdfium2, as ingestion does) and read by
each engine; the pages' text, joined, is compared with the transcription of the same document
(``<name>.md`` beside the ``scanned/`` folder) after both are normalised alike: Markdown markup
dropped, quotes and dashes made plain, whitespace collapsed, case kept. The transcriptions keep
their own typos and leave out running headers, signatures and recording stamps, so the rate is
an upper bound on the engine's errors; it ranks engines fairly because they read the same pages.

``rapidocr`` (rapidocr-onnxruntime, models inside its PyPI wheel) is not a project dependency:
``pip install rapidocr-onnxruntime`` to measure it.
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path

from rapidfuzz.distance import Levenshtein

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from worker import ocr  # noqa: E402

DEFAULT_SCANS = ROOT.parent / "shared" / "datasets" / "hoa-dev" / "heronwood" / "documents" / "scanned"

_MARKUP = re.compile(r"<br\s*/?>|[#*_|>`\\]")
_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"',
                         "\u2014": "-", "\u2013": "-"})


def normalise(text: str) -> str:
    text = _MARKUP.sub(" ", text.translate(_QUOTES)).replace("---", "-").replace("--", "-")
    return " ".join(text.split())


def cer(hypothesis: str, reference: str) -> float:
    return Levenshtein.distance(hypothesis, reference) / max(len(reference), 1)


def tesseract_pages(pdf: Path, dpi: int, max_pages: int | None) -> list[ocr.PageText]:
    """Exactly as ingestion reads a scan: one single-threaded Tesseract per core."""
    import pypdfium2 as pdfium

    count = len(pdfium.PdfDocument(str(pdf)))
    return list(ocr.Ocr(dpi=dpi).read_pages(pdf, list(range(1, count + 1))[:max_pages]))


def rapidocr_pages(pdf: Path, dpi: int, max_pages: int | None) -> list[ocr.PageText]:
    read = rapidocr_reader()
    pages = []
    for number, image in enumerate(ocr.render_pages(pdf, dpi=dpi, limit=max_pages), start=1):
        started = time.perf_counter()
        text = read(image)
        pages.append(ocr.PageText(number, text, time.perf_counter() - started))
    return pages


def rapidocr_reader() -> Callable[[object], str]:
    import numpy as np
    from rapidocr_onnxruntime import RapidOCR

    engine = RapidOCR()

    def read(image) -> str:
        result, _ = engine(np.asarray(image.convert("RGB")))
        # one box per text line: top to bottom, then left to right within a line's height
        boxes = sorted(((min(p[1] for p in box), min(p[0] for p in box), text) for box, text, _ in result or []))
        lines: list[list[tuple[float, str]]] = []
        last_top = None
        for top, left, text in boxes:
            if last_top is None or top - last_top > 15:
                lines.append([])
                last_top = top
            lines[-1].append((left, text))
        return "\n".join(" ".join(t for _, t in sorted(line)) for line in lines)

    return read


ENGINES: dict[str, Callable[[Path, int, int | None], list[ocr.PageText]]] = {
    "tesseract": tesseract_pages,
    "rapidocr": rapidocr_pages,
}


def measure(engine: str, pdf: Path, reference: str, dpi: int, max_pages: int | None) -> dict:
    started = time.perf_counter()
    pages = ENGINES[engine](pdf, dpi, max_pages)
    wall = time.perf_counter() - started
    hypothesis = normalise("\n".join(p.text for p in pages))
    if max_pages is not None:  # compare with the part of the transcription those pages hold
        reference = reference[: int(len(hypothesis) * 1.02)]
    return {
        "document": pdf.stem, "engine": engine, "pages": len(pages), "dpi": dpi,
        "cer": round(cer(hypothesis, reference), 4),
        # wall-clock seconds per page, rendering included (what ingestion takes), and the
        # slowest single page's own reading time
        "seconds_per_page": round(wall / max(len(pages), 1), 2),
        "seconds_per_page_max": round(max((p.seconds for p in pages), default=0.0), 2),
        "characters": len(hypothesis), "reference_characters": len(reference),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scans", type=Path, default=DEFAULT_SCANS, help="folder of scanned PDFs")
    parser.add_argument("--engines", default="tesseract", help="comma-separated: " + ", ".join(ENGINES))
    parser.add_argument("--dpi", type=int, default=ocr.RENDER_DPI)
    parser.add_argument("--max-pages", type=int, default=None, help="first N pages of each PDF (a quick look)")
    parser.add_argument("--out", type=Path, default=None, help="folder for results.json and results.md")
    args = parser.parse_args(argv)

    pdfs = sorted(args.scans.glob("*.pdf"))
    if not pdfs:
        parser.error(f"--scans: no PDF in {args.scans}")
    rows = []
    for engine in args.engines.split(","):
        if engine not in ENGINES:
            parser.error(f"--engines: unknown engine {engine!r} (known: {', '.join(ENGINES)})")
        for pdf in pdfs:
            reference = normalise((pdf.parent.parent / f"{pdf.stem}.md").read_text(encoding="utf-8"))
            row = measure(engine, pdf, reference, args.dpi, args.max_pages)
            print(json.dumps(row), flush=True)
            rows.append(row)

    table = ["| engine | document | pages | CER | s/page (wall) | slowest page (s) |", "|---|---|---|---|---|---|"]
    for engine in dict.fromkeys(r["engine"] for r in rows):
        mine = [r for r in rows if r["engine"] == engine]
        for r in mine:
            table.append(f"| {engine} | {r['document']} | {r['pages']} | {r['cer']:.3f} | "
                         f"{r['seconds_per_page']:.1f} | {r['seconds_per_page_max']:.1f} |")
        pages = sum(r["pages"] for r in mine)
        pooled = sum(r["cer"] * r["reference_characters"] for r in mine) / sum(r["reference_characters"] for r in mine)
        mean_s = sum(r["seconds_per_page"] * r["pages"] for r in mine) / pages
        table.append(f"| **{engine}** | all | {pages} | **{pooled:.3f}** | **{mean_s:.1f}** | |")
    print("\n".join(table))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        meta = {"command": "python benchmarks/ocr.py " + " ".join(argv if argv is not None else sys.argv[1:]),
                "machine": f"{platform.machine()}, {__import__('os').cpu_count()} cores",
                "engines": {"tesseract": ocr.Tesseract.version_or_none()}}
        (args.out / "results.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2) + "\n")
        (args.out / "results.md").write_text(f"`{meta['command']}` ({meta['machine']})\n\n" + "\n".join(table) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
