"""Does a scanned declaration answer as well as its transcription? The CC&R questions of hoa-dev
(gold ``heronwood-ccrs``) through the webhook, with a knowledge base of the CC&Rs alone: once
from the Markdown transcription, once from the image-only scanned PDF read by OCR.

    python benchmarks/scanned_answers.py --dataset ../shared/datasets/hoa-dev --out benchmarks/scanned

Everything else is the answer-level evaluation (``arc-retrieval eval``): the same ingestion path,
the default configuration, the same evidence matching.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from worker.config import Settings  # noqa: E402
from worker.embeddings import CachedEmbedder, build_embedder  # noqa: E402
from worker.evaluation.answer_harness import ARC, N8N, evaluate_answers  # noqa: E402
from worker.evaluation.answers import (AnswerDataset, load_answer_dataset, normalise_for_match,  # noqa: E402
                                      summarise)
from worker.ingest.readers import read_path  # noqa: E402

GOLD = "heronwood-ccrs"
SOURCES = {"transcription (Markdown)": "documents/covenants-conditions-and-restrictions.md",
           "scanned PDF (OCR)": "documents/scanned/covenants-conditions-and-restrictions.pdf"}
COLUMNS = ["evidence_in_context", "evidence_in_source1", "answerable_empty_context", "status_right", "hedged",
           "answerable_no_results_with_evidence", "negatives_success", "mean_answerable_tokens"]


def one_document_dataset(dataset: AnswerDataset, file: str, workdir: Path) -> AnswerDataset:
    """The Heronwood community reduced to its CC&Rs, read from ``file``, and their questions."""
    community = next(c for c in dataset.communities if any(q.gold_document == GOLD and q.community == c
                                                           for q in dataset.questions))
    source = dataset.communities[community]
    entry = next(e for e in json.loads((source / "manifest.json").read_text())["documents"]
                 if e["document_id"] == GOLD)
    folder = workdir / community
    folder.mkdir(parents=True)
    manifest = {"community": community, "documents": [{**entry, "file": str((source / file).resolve())}]}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    # The community's unanswerable and off-topic questions too: a status that says success to
    # everything would otherwise look right.
    questions = [q for q in dataset.questions if q.gold_document == GOLD or (q.community == community and q.negative)]
    return AnswerDataset(f"{dataset.name} CC&R questions", {community: folder}, questions)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", type=Path, default=ROOT.parent / "shared" / "datasets" / "hoa-dev")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)

    dataset = load_answer_dataset(args.dataset)
    settings = Settings.from_env()
    embedder = CachedEmbedder(build_embedder(settings))
    rows = {}
    with tempfile.TemporaryDirectory(prefix="scanned-") as tmp:
        for label, file in SOURCES.items():
            subset = one_document_dataset(dataset, file, Path(tmp) / label.split()[0])
            started = time.perf_counter()
            results = evaluate_answers(subset, settings=settings, embedder=embedder, data_dir=settings.database.data_dir,
                                       progress=False)
            seconds = round(time.perf_counter() - started, 1)
            # the ceiling: questions with an evidence phrase anywhere in the text as read
            text = normalise_for_match(" ".join(b.text for b in read_path(
                Path(json.loads((next(iter(subset.communities.values())) / "manifest.json").read_text())
                     ["documents"][0]["file"])).blocks))
            answerable = [q for q in subset.questions if q.kind == "answerable"]
            present = sum(any(normalise_for_match(e) in text for e in q.evidence) for q in answerable)
            rows[label] = {"seconds": seconds,
                           "evidence_in_document_text": round(present / len(answerable), 4),
                           ARC: summarise(results.outcomes[ARC]), N8N: summarise(results.outcomes[N8N]),
                           "questions": [o.row() for o in results.outcomes[ARC]]}
            missed = [(q["id"], q["status"]) for q in rows[label]["questions"] if q["kind"] == "answerable" and not q["evidence_in_context"]]
            print(label, json.dumps({k: v for k, v in rows[label].items() if k != "questions"}), "missed:", missed,
                  flush=True)

    questions = len([q for q in dataset.questions if q.gold_document == GOLD])
    negatives = sum(q.negative for q in subset.questions)
    lines = [f"{questions} CC&R questions (gold `{GOLD}`) and the community's {negatives} unanswerable and off-topic "
             "ones; knowledge base: the CC&Rs alone.", "",
             "| source | system | evidence in the document's text | "
             + " | ".join(c.replace("_", " ") for c in COLUMNS) + " | ingest + ask (s) |",
             "|---|---|---|" + "---|" * (len(COLUMNS) + 1)]
    for label, row in rows.items():
        for system in (ARC, N8N):
            cells = " | ".join(_cell(row[system].get(c)) for c in COLUMNS)
            ceiling = _cell(row["evidence_in_document_text"]) if system == ARC else ""
            lines.append(f"| {label} | {system} | {ceiling} | {cells} | {row['seconds'] if system == ARC else ''} |")
    print("\n".join(lines))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        command = "python benchmarks/scanned_answers.py " + " ".join(argv if argv is not None else sys.argv[1:])
        (args.out / "results.json").write_text(json.dumps({"command": command, "rows": rows}, indent=1) + "\n")
        (args.out / "results.md").write_text(f"`{command}`\n\n" + "\n".join(lines) + "\n")
    return 0


def _cell(value) -> str:
    return "-" if value is None else (f"{value:.2f}" if isinstance(value, float) and value < 10 else f"{value:.0f}")


if __name__ == "__main__":
    raise SystemExit(main())
