"""Two first-stage designs measured against the shipped one, each community on its own.

``fusion``: every question of an answer dataset is asked once through the webhook, its candidate
list kept as the SQL returned it (cosine, BM25, each leg's rank), and the fused score rebuilt
offline under other normalisations (the list's best instead of min-max, z-scores, reciprocal rank
fusion at k = 3 / 10 / 60) and other leg weights (the vector leg's share moved by -0.1 .. +0.2 from
the query type's), then ordered by :func:`worker.retrieve.scoring.first_stage_order` as shipped.
Reported per community: the first chunk holds the evidence / one of the first 3 / of the first 6.

``focus``: the whole answer harness, with the question's vector blended with the vector of its
asking part ("we're selling next month - do we have to tell the HOA?" -> "do we have to tell
the HOA?"), for questions of several sentences; the full-text leg reads the whole question.

    python benchmarks/first_stage_variants.py fusion --out benchmarks/first_stage_variants
    python benchmarks/first_stage_variants.py focus --out /tmp/focus
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from unittest import mock

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from worker.config import Settings  # noqa: E402
from worker.embeddings import CachedEmbedder, build_embedder  # noqa: E402
from worker.evaluation import answer_harness  # noqa: E402
from worker.evaluation.answers import Question, evidence_found, load_answer_dataset  # noqa: E402
from worker.models import ChunkResult  # noqa: E402
from worker.retrieve import first_stage  # noqa: E402
from worker.retrieve.preprocess import preprocess  # noqa: E402
from worker.retrieve.scoring import first_stage_order  # noqa: E402

DATASET = ROOT.parent / "shared" / "datasets" / "hoa-dev"
Captured = tuple[Question, list[ChunkResult], dict]


def capture(dataset: Path) -> list[Captured]:
    """Each answerable question's candidate list and the ordering's arguments, asked once."""
    settings = Settings()
    embedder = CachedEmbedder(build_embedder(settings), maxsize=100_000)
    data_dir = settings.database.data_dir.resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    loaded_dataset = load_answer_dataset(dataset)
    cache = answer_harness.VectorCache.of_passages(data_dir, embedder)
    captured: list[Captured] = []
    asking: dict[str, Question | None] = {"question": None}
    original = first_stage.first_stage_order

    def recording(candidates: list[ChunkResult], **kwargs) -> list[ChunkResult]:
        question = asking["question"]
        if question is not None:  # not the calibration's probes
            captured.append((question, [c.model_copy() for c in candidates], dict(kwargs)))
        return original(candidates, **kwargs)

    with mock.patch.object(first_stage, "first_stage_order", recording):
        for loaded in answer_harness.each_community(
            loaded_dataset, settings=settings, embedder=embedder, cache=cache, data_dir=data_dir
        ):
            client, retriever = answer_harness._webhook_client(settings, loaded.db, embedder)
            retriever.calibrate_now()
            for question in loaded.questions:
                if question.kind == "answerable":
                    asking["question"] = question
                    answer_harness.ask_webhook(client, settings, question)
                    asking["question"] = None
    return captured


def _minmax(values: list[float | None]) -> list[float]:
    present = [v for v in values if v is not None]
    if not present:
        return [0.0] * len(values)
    low, high = min(present), max(present)
    return [0.0 if v is None else (v - low) / (high - low) if high > low else 1.0 for v in values]


def _by_best(values: list[float | None]) -> list[float]:
    best = max([v for v in values if v is not None] or [1.0]) or 1.0
    return [0.0 if v is None else v / best for v in values]


def _z(values: list[float | None]) -> list[float]:
    present = [v for v in values if v is not None]
    if len(present) < 2:
        return [0.0 if v is None else 1.0 for v in values]
    mean, spread = statistics.mean(present), statistics.pstdev(present) or 1.0
    lowest = min((v - mean) / spread for v in present)
    return [lowest if v is None else (v - mean) / spread for v in values]


def _rrf(k: int) -> Callable[[list[int | None]], list[float]]:
    return lambda ranks: [0.0 if r is None else 1 / (k + r) for r in ranks]


NORMALISATIONS: dict[str, Callable[[list[ChunkResult]], tuple[list[float], list[float]]]] = {
    "min-max (shipped)": lambda cs: (_minmax([c.vector_score for c in cs]), _minmax([c.bm25_score for c in cs])),
    "divided by the list's best": lambda cs: (
        _by_best([c.vector_score for c in cs]),
        _by_best([c.bm25_score for c in cs]),
    ),
    "z-scores": lambda cs: (_z([c.vector_score for c in cs]), _z([c.bm25_score for c in cs])),
    **{
        f"reciprocal rank, k={k}": (
            lambda cs, k=k: (_rrf(k)([c.vector_rank for c in cs]), _rrf(k)([c.fts_rank for c in cs]))
        )
        for k in (3, 10, 60)
    },
}


def reorder(item: Captured, normalise, vector_shift: float) -> list[ChunkResult]:
    question, candidates, kwargs = item
    vector, _ = preprocess(question.question).weights
    vw = min(max(vector + vector_shift, 0.0), 1.0)
    legs = normalise(candidates)
    fused = [vw * v + (1 - vw) * f for v, f in zip(*legs, strict=True)]
    # the ordering reads the fused score relative to the list's best; z-scores go below 0
    low = min(fused, default=0.0)
    shifted = [x - low for x in fused] if low < 0 else fused
    copies = [c.model_copy(update={"fused_score": s}) for c, s in zip(candidates, shifted, strict=True)]
    return first_stage_order(copies, **kwargs)


def placed(captured: list[Captured], order: Callable[[Captured], list[ChunkResult]]) -> dict[str, tuple]:
    """Per community: the share whose evidence is in the first chunk, the first 3, the first 6."""
    found: dict[str, list[tuple[bool, bool, bool]]] = {}
    for item in captured:
        hits = [evidence_found(item[0].evidence, c.content) for c in order(item)]
        found.setdefault(item[0].community, []).append((any(hits[:1]), any(hits[:3]), any(hits[:6])))
    return {c: tuple(sum(x[i] for x in rows) / len(rows) for i in range(3)) for c, rows in sorted(found.items())}


def fusion(args: argparse.Namespace) -> int:
    captured = capture(args.dataset)
    shipped, *others = NORMALISATIONS
    designs = [(shipped, s) for s in (0.0, -0.1, 0.1, 0.2)] + [(n, s) for n in others for s in (0.0, 0.1)]
    rows = [
        (name, shift, placed(captured, lambda item, n=name, s=shift: reorder(item, NORMALISATIONS[n], s)))
        for name, shift in designs
    ]
    communities = list(rows[0][2])
    lines = [
        "# First-stage fusion variants, each community on its own",
        "",
        f"Command: `python benchmarks/first_stage_variants.py fusion --out {args.out}`",
        "",
        f"{len(captured)} answerable questions of {args.dataset.name}, all-MiniLM-L6-v2. Each cell: the "
        "evidence in the first chunk / in one of the first 3 / of the first 6 of the re-ordered "
        "candidate list (the context then adds each leg's best hits and neighbours). The first row "
        "rebuilds the shipped order from the captured scores.",
        "",
        "| fusion | vector share | " + " | ".join(communities) + " |",
        "|---|---|" + "---|" * len(communities),
    ]
    for name, shift, result in rows:
        cells = " | ".join("{:.2f} / {:.2f} / {:.2f}".format(*result[c]) for c in communities)
        lines.append(f"| {name} | {'query type' if not shift else f'{shift:+.1f}'} | {cells} |")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


_PARTS = re.compile(r"(?<=[.?!])\s+|\s+-+\s+|\s*\.\.\.+\s*|;\s+")
_ASKS = re.compile(
    r"^(can|could|may|do|does|did|is|are|was|were|what|whats|what's|how|who|when|where|which|should|must|"
    r"will|would|am|if|any)\b",
    re.I,
)


def asking_part(question: str) -> str | None:
    """The sentences of a question of several that ask something, or None."""
    parts = [p.strip() for p in _PARTS.split(question.strip()) if p and len(p.split()) >= 2]
    asking = [p for p in parts if p.endswith("?") or _ASKS.match(p)]
    return " ".join(asking) if len(parts) > 1 and asking and len(asking) < len(parts) else None


def focus(args: argparse.Namespace) -> int:
    original = first_stage.FirstStage._embed_before

    def blended(self, text: str, deadline: float) -> np.ndarray:
        vector = original(self, text, deadline)
        part = asking_part(text)
        if part is None:
            return vector
        mixed = vector + self.embedder.embed_query(part)
        return (mixed / np.linalg.norm(mixed)).astype(vector.dtype)

    settings = Settings()
    embedder = CachedEmbedder(build_embedder(settings), maxsize=100_000)
    with mock.patch.object(first_stage.FirstStage, "_embed_before", blended):
        results = answer_harness.evaluate_answers(
            load_answer_dataset(args.dataset),
            settings=settings,
            embedder=embedder,
            data_dir=settings.database.data_dir.resolve(),
            progress=False,
        )
    answer_harness.write_answer_report(
        results, args.out, command=f"python benchmarks/first_stage_variants.py focus --out {args.out}"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    for name, help_text in (("fusion", "other fused scores, offline"), ("focus", "the harness, vectors blended")):
        command = commands.add_parser(name, help=help_text)
        command.add_argument("--dataset", type=Path, default=DATASET)
        command.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    return fusion(args) if args.command == "fusion" else focus(args)


if __name__ == "__main__":
    raise SystemExit(main())
