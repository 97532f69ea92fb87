"""How the first-stage score should blend relevance, the fused score and the source's authority.

Runs every question of each dataset once through the real pipeline (``default`` configuration),
keeps each question's candidate list as the SQL returned it, then re-orders those lists with
:func:`worker.retrieve.first_stage.first_stage_order` under each setting of ``RANK_RELEVANCE_SHARE`` and with
the authority multipliers on or off. Reported per setting: nDCG@10 on BEIR sets; on an answer
set (hoa-dev layout) the share of answerable questions whose first chunk holds an evidence phrase
(close to "evidence in SOURCE 1", which also merges neighbouring chunks), the lowest answerable
and the highest negative ``best_score`` (the room the status thresholds have).

    python benchmarks/ranking_sweep.py --beir ../shared/datasets/scifact \
        --beir ../shared/datasets/squad-v1.1-dev --answers ../shared/datasets/hoa-dev \
        --out benchmarks/ranking_sweep
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

from worker.retrieve import first_stage, scoring
from worker.retrieve.authority import Adjustments
from worker.config import Settings
from worker.embeddings import CachedEmbedder, build_embedder
from worker.evaluation import answer_harness, harness
from worker.evaluation.answers import evidence_found, load_answer_dataset
from worker.evaluation.dataset import load_dataset
from worker.evaluation.metrics import summarise
from worker.models import ChunkResult

SHARES = (0.0, 0.25, 0.5, 0.75, 1.0)
NEUTRAL = Adjustments(binding=1.0, superseded=1.0, document_type={})


@dataclass
class Captured:
    key: str  # the BEIR query id, or the answer question
    candidates: list[ChunkResult]
    steer: list[str]


def capture(run) -> list[Captured]:
    """Run ``run()`` with the first stage recording each candidate list before ordering it."""
    captured: list[Captured] = []
    original = first_stage.first_stage_order
    current = {"key": ""}

    def recording(candidates, **kwargs):
        captured.append(Captured(current["key"], [c.model_copy() for c in candidates], list(kwargs["steer"])))
        return original(candidates, **kwargs)

    ask = answer_harness._ask_worker

    def asking(client, settings, question):
        current["key"] = question
        return ask(client, settings, question)

    with mock.patch.object(first_stage, "first_stage_order", recording), \
            mock.patch.object(answer_harness, "_ask_worker", asking):
        run(current)
    return captured


def reorder(item: Captured, share: float, authority: Adjustments) -> list[ChunkResult]:
    with mock.patch.object(scoring, "RANK_RELEVANCE_SHARE", share):
        return first_stage.first_stage_order([c.model_copy() for c in item.candidates], have_embedding=True,
                                          steer=item.steer, steer_boost=1.1, authority=authority)


def beir_rows(folder: Path, embedder: CachedEmbedder, data_dir: Path) -> list[dict]:
    dataset = load_dataset(folder)
    qids = iter(sorted(dataset.queries))

    def run(current):
        original = harness.Retriever.answer

        def answer(self, request, request_id=None):
            current["key"] = next(qids)
            return original(self, request, request_id)

        with mock.patch.object(harness.Retriever, "answer", answer):
            harness.evaluate(dataset, ["default"], embedder=embedder, data_dir=data_dir)

    captured = capture(run)
    rows = []
    for share in SHARES:
        for name, authority in (("off", NEUTRAL), ("on", Adjustments())):
            rankings = {}
            for item in captured:
                ranking: list[str] = []
                for chunk in reorder(item, share, authority):
                    if chunk.document_id not in ranking:
                        ranking.append(chunk.document_id)
                rankings[item.key] = ranking[:20]
            rows.append({"dataset": folder.name, "relevance_share": share, "authority": name,
                         "ndcg@10": round(summarise(rankings, dataset.qrels)["ndcg@10"], 4)})
    return rows


def answer_rows(folder: Path, settings: Settings, embedder: CachedEmbedder, data_dir: Path) -> list[dict]:
    dataset = load_answer_dataset(folder)
    captured = capture(lambda current: answer_harness.evaluate_answers(
        dataset, settings=settings, embedder=embedder, data_dir=data_dir, progress=False))
    rows = []
    for share in SHARES:
        for name, authority in (("off", NEUTRAL), ("on", Adjustments())):
            first, answerable, negatives = 0, [], []
            for item in captured:
                ordered = reorder(item, share, authority)
                best = ordered[0].final_score if ordered else 0.0
                if item.key.negative:
                    negatives.append(best)
                else:
                    answerable.append(best)
                    first += bool(ordered) and evidence_found(item.key.evidence, ordered[0].content)
            rows.append({"dataset": folder.name, "relevance_share": share, "authority": name,
                         "evidence_in_first_chunk": round(first / len(answerable), 2),
                         "lowest_answerable_best": round(min(answerable), 3),
                         "highest_negative_best": round(max(negatives), 3)})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--beir", type=Path, action="append", default=[], help="a BEIR-layout folder")
    parser.add_argument("--answers", type=Path, action="append", default=[], help="an answer dataset folder")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    settings = Settings.from_env()
    embedder = CachedEmbedder(build_embedder(settings), maxsize=100_000)
    data_dir = settings.database.data_dir.resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    rows = [r for folder in args.beir for r in beir_rows(folder, embedder, data_dir)]
    rows += [r for folder in args.answers for r in answer_rows(folder, settings, embedder, data_dir)]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(rows, indent=1) + "\n")
    lines = ["# First-stage ranking: relevance share x authority", "",
             "Command: `python benchmarks/ranking_sweep.py " + " ".join(
                 [f"--beir {p}" for p in args.beir] + [f"--answers {p}" for p in args.answers]
                 + [f"--out {args.out}"]) + "`", "",
             f"Embedding model {embedder.model}; shipped setting: relevance share "
             f"{scoring.RANK_RELEVANCE_SHARE}, authority on.", ""]
    for dataset in dict.fromkeys(r["dataset"] for r in rows):
        mine = [r for r in rows if r["dataset"] == dataset]
        columns = [k for k in mine[0] if k != "dataset"]
        lines += [f"## {dataset}", "", "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
        lines += ["| " + " | ".join(str(r[c]) for c in columns) + " |" for r in mine] + [""]
    (args.out / "results.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
