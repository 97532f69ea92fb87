"""Status signals, replayed: every question's and every calibration probe's first-stage candidates.

Each community is ingested once into its own database through the normal path (as
``arc-retrieval eval`` does), its status calibrated, and then asked, through ``Retriever.answer``
(the webhook's call):

* every question of the dataset (its kind and whether its evidence reached the context);
* the calibration's probes: the off-domain questions and the knowledge base's own sentences
  asked back (``confidence.pseudo_questions``), with the chunk each sentence came from.

For each answer the candidate list is kept with every score the first stage gives (cosine, BM25,
its normalised form, each leg's rank, relevance, final score), and each community's chunk texts,
so that status signals can be computed and compared offline, per community, without re-asking.

    python benchmarks/status_signals.py dump --foreign --out /tmp/signals
    python benchmarks/status_signals.py report /tmp/signals
    python benchmarks/status_signals.py ranking /tmp/signals
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from worker.config import Settings  # noqa: E402
from worker.embeddings import CachedEmbedder, build_embedder  # noqa: E402
from worker.evaluation.answer_harness import VectorCache, _webhook_client, each_community  # noqa: E402
from worker.evaluation.answers import evidence_found, load_answer_dataset, split_sources  # noqa: E402
from worker.models import RetrievalRequest  # noqa: E402
from worker.retrieve import sentences as sentence_stage  # noqa: E402
from worker.retrieve.status import confidence as confidence_stage  # noqa: E402

SENTENCE_TOP = 10  # candidates whose best sentence is scored
KEPT = ("id", "vector_score", "fts_score", "bm25_score", "vector_rank", "fts_rank", "relevance", "final_score")


def ask(retriever, text: str) -> dict:
    """The answer's status and confidence, and its candidate list with every first-stage score."""
    captured: dict[str, list] = {}
    original = retriever._search

    def search(params):
        found = original(params)
        captured["candidates"] = found
        return found

    retriever._search = search
    try:
        answer = retriever.answer(RetrievalRequest(query=text))
    finally:
        retriever._search = original
    ranked = sorted(captured.get("candidates", []), key=lambda c: -c.final_score)
    vector = retriever.embedder.embed_query(answer.query.normalized)
    sentences = sentence_stage.best_sentences(vector, ranked[:SENTENCE_TOP], retriever.sentence_vectors)
    return {
        "sentences": {str(k): v for k, v in sentences.items()},
        "normalized": answer.query.normalized,
        "status": answer.status,
        "confidence": (answer.confidence or {}).get("score"),
        "context": answer.context,
        "weights": [answer.query.weights.vector, answer.query.weights.fts],
        "candidates": [{k: getattr(c, k) for k in KEPT} for c in ranked],
    }


def replay(retriever, db, community: str, questions, foreign=()) -> dict:
    with db.connection() as conn:
        rows = conn.execute(
            "select id, document_id, document_type, section_path, content, token_count from knowledge_chunks"
        ).fetchall()
    chunks = {
        r[0]: {"document_id": r[1], "document_type": r[2], "section": r[3], "content": r[4], "tokens": r[5]}
        for r in rows
    }
    out: dict = {"community": community, "chunks": chunks, "questions": [], "probes": []}
    (stored_as,) = retriever.backend.communities()  # the knowledge base holds this community alone
    scale = retriever.calibrator.for_question(stored_as).calibration
    out["calibration"] = (
        None
        if scale is None
        else {"floor": scale.floor, "match": scale.match, "near_miss": scale.near_miss, "top": scale.top}
    )
    for q in questions:
        got = ask(retriever, q.question)
        sources = split_sources(got.pop("context"))
        got.update(
            {
                "id": q.id,
                "kind": q.kind,
                "question": q.question,
                "evidence": list(q.evidence),
                "in_context": q.kind == "answerable" and evidence_found(q.evidence, "\n".join(sources)),
                "in_source1": q.kind == "answerable" and bool(sources) and evidence_found(q.evidence, sources[0]),
                "evidence_chunks": [
                    i for i, c in chunks.items() if q.evidence and evidence_found(q.evidence, c["content"])
                ],
            }
        )
        out["questions"].append(got)
    texts = retriever.backend.calibration_chunks(confidence_stage.CALIBRATION_QUESTIONS * 2, stored_as)
    for sentence in confidence_stage.pseudo_questions(texts):
        got = ask(retriever, sentence)
        got.pop("context")
        spaced = " ".join(sentence.split())
        got.update(
            {
                "kind": "own",
                "question": sentence,
                "source_chunks": [i for i, c in chunks.items() if spaced in " ".join(c["content"].split())],
            }
        )
        out["probes"].append(got)
    for q in foreign:
        got = ask(retriever, q.question)
        got.pop("context")
        got.update({"kind": "foreign", "question": q.question, "of": q.community, "id": q.id, "asked_kind": q.kind})
        out["probes"].append(got)
    for question in confidence_stage.off_domain_questions():
        got = ask(retriever, question)
        got.pop("context")
        got.update({"kind": "off_domain", "question": question})
        out["probes"].append(got)
    return out


def dump(args: argparse.Namespace) -> int:
    dataset = load_answer_dataset(args.dataset)
    settings = Settings.from_env()
    embedder = CachedEmbedder(build_embedder(settings), maxsize=100_000)
    data_dir = settings.database.data_dir.resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    cache = VectorCache.of_passages(data_dir, embedder)
    wanted = [c for c in args.communities.split(",") if c]
    args.out.mkdir(parents=True, exist_ok=True)
    loaded = each_community(dataset, settings=settings, embedder=embedder, cache=cache, data_dir=data_dir, only=wanted)
    for each in loaded:
        cache.save()
        _, retriever = _webhook_client(settings, each.db, embedder)
        retriever.calibrate_now()
        foreign = [q for q in dataset.questions if q.community != each.community] if args.foreign else []
        dumped = replay(retriever, each.db, each.community, each.questions, foreign)
        (args.out / f"{each.community}.json").write_text(json.dumps(dumped) + "\n")
        print(each.community, len(dumped["questions"]), len(dumped["probes"]), flush=True)
    return 0


# -- report: status signals computed from the dumps -------------------------------------------------

SUCCESS_AT = confidence_stage.SUCCESS_AT


def best(answer: dict, signal: str, without: frozenset = frozenset()) -> float:
    """``answer``'s best value of ``signal`` over its candidates, leaving out the chunks ``without``."""
    if signal == "sentence":
        return max((v for k, v in answer["sentences"].items() if int(k) not in without), default=0.0)
    key = {"relevance": "relevance", "vector": "vector_score", "fts": "fts_score"}[signal]
    return max((c[key] or 0.0 for c in answer["candidates"] if c["id"] not in without), default=0.0)


def scale(dump: dict, signal: str) -> Callable[[dict], float]:
    """``signal`` on the knowledge base's calibrated scale, as ``confidence.Calibration`` builds it
    for the relevance: floor from the off-domain probes, match and near miss from its own sentences."""
    probes = dump["probes"]
    own = [p for p in probes if p["kind"] == "own"]
    calibration = confidence_stage.Calibration(
        version=0,
        floor=statistics.median(best(p, signal) for p in probes if p["kind"] == "off_domain"),
        match=statistics.median(best(p, signal) for p in own),
        near_miss=statistics.median(best(p, signal, frozenset(p["source_chunks"])) for p in own),
        questions=len(own),
    )
    return lambda answer: calibration.confidence(best(answer, signal))


def foreign_cut(dump: dict, percentile: float) -> Callable[[dict], float]:
    """Success from the ``percentile`` of the best relevance other communities' questions score here:
    the level a homeowner's question on a common subject reaches in this knowledge base."""
    levels = sorted(best(p, "relevance") for p in dump["probes"] if p["kind"] == "foreign")
    cut = levels[min(int(len(levels) * percentile / 100), len(levels) - 1)]
    return lambda answer: SUCCESS_AT if best(answer, "relevance") >= cut else 0.0


def lowered(answer: dict) -> bool:
    """The status was lowered past the confidence (the answer type), whatever the signal."""
    return (answer["confidence"] or 0.0) >= SUCCESS_AT and answer["status"] != "success"


def outcome(questions: list[dict], signal: Callable[[dict], float]) -> dict:
    success = [signal(q) >= SUCCESS_AT and not lowered(q) for q in questions]
    right = [
        s and q["in_context"] if q["kind"] == "answerable" else not s for q, s in zip(questions, success, strict=True)
    ]
    answered = [s for q, s in zip(questions, success, strict=True) if q["kind"] == "answerable" and q["in_context"]]
    negatives = [s for q, s in zip(questions, success, strict=True) if q["kind"] != "answerable"]
    positive = [signal(q) for q in questions if q["kind"] == "answerable"]
    negative = [signal(q) for q in questions if q["kind"] != "answerable"]
    wins = sum((p > n) + 0.5 * (p == n) for p in positive for n in negative)
    return {
        "status_right": sum(right) / len(right),
        "hedged": 1 - sum(answered) / max(len(answered), 1),
        "negatives_success": sum(negatives) / max(len(negatives), 1),
        "auroc": wins / max(len(positive) * len(negative), 1),
    }


DESIGNS: dict[str, Callable[[dict], Callable[[dict], float]]] = {
    "best relevance (shipped)": lambda d: scale(d, "relevance"),
    "best sentence": lambda d: scale(d, "sentence"),
    "vector leg": lambda d: scale(d, "vector"),
    "max(relevance, sentence)": lambda d: (lambda a, b: lambda q: max(a(q), b(q)))(
        scale(d, "relevance"), scale(d, "sentence")
    ),
    "mean(relevance, sentence)": lambda d: (lambda a, b: lambda q: (a(q) + b(q)) / 2)(
        scale(d, "relevance"), scale(d, "sentence")
    ),
    "other communities' questions, median": lambda d: foreign_cut(d, 50),
    "other communities' questions, 65th pct": lambda d: foreign_cut(d, 65),
}


def ceiling(questions: list[dict], signal: Callable[[dict], float]) -> float:
    """Status right at the best cut on ``signal`` chosen on these very questions: what no placement
    of one cut can beat, however it is calibrated."""
    values = sorted({signal(q) for q in questions} | {2.0})
    return max(
        outcome(questions, lambda q, cut=cut: SUCCESS_AT * signal(q) / cut if cut > 0 else 1.0)["status_right"]
        for cut in values
    )


def report(folder: Path) -> str:
    dumps = {p.stem: json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))}
    lines = [
        "| design | " + " | ".join(dumps) + " | all |",
        "|---|" + "---|" * (len(dumps) + 1),
    ]
    for name, make in DESIGNS.items():
        cells, pooled = [], []
        for dump in dumps.values():
            signal = make(dump)
            got = outcome(dump["questions"], signal)
            pooled += [(q, signal(q)) for q in dump["questions"]]
            cells.append(
                f"{got['status_right']:.2f} (h {got['hedged']:.2f}, n {got['negatives_success']:.2f}, "
                f"A {got['auroc']:.2f})"
            )
        right = [
            (v >= SUCCESS_AT and not lowered(q) and q["in_context"])
            if q["kind"] == "answerable"
            else not (v >= SUCCESS_AT and not lowered(q))
            for q, v in pooled
        ]
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {sum(right) / len(right):.2f} |")
    shipped = DESIGNS["best relevance (shipped)"]
    cells = [f"{ceiling(d['questions'], shipped(d)):.2f}" for d in dumps.values()]
    lines.append(
        "| best relevance, the best cut for each community chosen on its own questions | " + " | ".join(cells) + " | |"
    )
    return "\n".join(lines) + "\n"


# -- ranking: a linear mix of the first stage's scores, fitted on three communities -----------------

FEATURES = ("vector", "fts", "vector_gap", "fts_gap", "vector_rank", "fts_rank", "boost", "length", "sentence")
BUDGETS = (500, 1000, 2000)


def features(answer: dict, candidate: dict, chunks: dict) -> list[float]:
    """What the first stage knows of ``candidate``: each leg's score and its gap to the leg's best,
    each leg's rank (as 1 / (1 + rank)), the source's boost, the chunk's length, its best sentence."""
    ranked = answer["candidates"]
    vector, fts = candidate["vector_score"] or 0.0, candidate["fts_score"] or 0.0
    return [
        vector,
        fts,
        vector - max(c["vector_score"] or 0.0 for c in ranked),
        fts - max(c["fts_score"] or 0.0 for c in ranked),
        1 / (1 + candidate["vector_rank"]) if candidate["vector_rank"] else 0.0,
        1 / (1 + candidate["fts_rank"]) if candidate["fts_rank"] else 0.0,
        candidate["final_score"] - candidate["relevance"],
        float(np.log1p(chunks[str(candidate["id"])]["tokens"])),
        answer["sentences"].get(str(candidate["id"]), vector),
    ]


def answerable(dump: dict) -> list[dict]:
    return [q for q in dump["questions"] if q["kind"] == "answerable" and q["evidence_chunks"]]


def fitted(dumps: list[dict]) -> Callable[[np.ndarray], np.ndarray]:
    """A logistic model of "this candidate holds the evidence", standardised, lightly regularised."""
    rows, labels = [], []
    for dump in dumps:
        for q in answerable(dump):
            for c in q["candidates"]:
                rows.append(features(q, c, dump["chunks"]))
                labels.append(c["id"] in q["evidence_chunks"])
    x, y = np.array(rows), np.array(labels, dtype=float)
    mean, spread = x.mean(0), x.std(0) + 1e-9
    z = np.hstack([(x - mean) / spread, np.ones((len(x), 1))])
    w = np.zeros(z.shape[1])
    for _ in range(4000):
        p = 1 / (1 + np.exp(-z @ w))
        w -= 0.5 * (z.T @ (p - y) / len(y) + 1e-3 * np.r_[w[:-1], 0])
    return lambda rows: np.hstack([(rows - mean) / spread, np.ones((len(rows), 1))]) @ w


def placed(dump: dict, order: Callable[[dict], list[dict]]) -> dict[str, float]:
    """Evidence first, and within the first 500 / 1,000 / 2,000 tokens, of the candidates in ``order``."""
    first, within = [], {b: [] for b in BUDGETS}
    for q in answerable(dump):
        ranked = order(q)
        first.append(bool(ranked) and ranked[0]["id"] in q["evidence_chunks"])
        used, reached = 0, None
        for c in ranked:
            used += dump["chunks"][str(c["id"])]["tokens"]
            if c["id"] in q["evidence_chunks"]:
                reached = used
                break
        for b in BUDGETS:
            within[b].append(reached is not None and reached <= b)
    return {"first": float(np.mean(first)), **{str(b): float(np.mean(v)) for b, v in within.items()}}


def ranking_report(folder: Path) -> str:
    dumps = {p.stem: json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))}
    lines = [
        "| community | order | evidence first | within 500 | within 1,000 | within 2,000 |",
        "|---|---|---|---|---|---|",
    ]
    for name, dump in dumps.items():
        model = fitted([d for other, d in dumps.items() if other != name])

        def mixed(q: dict, model=model, dump=dump) -> list[dict]:
            scores = model(np.array([features(q, c, dump["chunks"]) for c in q["candidates"]]))
            return [q["candidates"][i] for i in np.argsort(-scores, kind="stable")]

        for label, order in (("shipped", lambda q: q["candidates"]), ("fitted on the other three", mixed)):
            got = placed(dump, order)
            lines.append(
                f"| {name} | {label} | {got['first']:.2f} | {got['500']:.2f} | {got['1000']:.2f} | {got['2000']:.2f} |"
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    asked = commands.add_parser("dump", help="ask every question and probe; one JSON per community")
    asked.add_argument("--dataset", type=Path, default=ROOT.parent / "shared" / "datasets" / "hoa-dev")
    asked.add_argument("--out", type=Path, required=True)
    asked.add_argument("--communities", default="", help="comma-separated subset (default: all)")
    asked.add_argument("--foreign", action="store_true", help="also ask each community the others' questions")
    shown = commands.add_parser("report", help="status right per design and community, from the dumps")
    shown.add_argument("folder", type=Path)
    ordered = commands.add_parser("ranking", help="the shipped order against a mix fitted on the other communities")
    ordered.add_argument("folder", type=Path)
    args = parser.parse_args(argv)
    if args.command == "dump":
        return dump(args)
    print((ranking_report if args.command == "ranking" else report)(args.folder), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
