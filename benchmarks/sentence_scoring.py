"""Sentence-aware order and small-to-big contexts, replayed on an answer dataset.

Each community is ingested once into its own database through the normal path (as
``arc-retrieval eval`` does), its status calibrated, and every question asked of the retriever
(``Retriever.answer``, the webhook's own call) under several variants, at the default context
and at fixed token budgets:

* ``base``: the shipped configuration;
* ``sent-<top>-<share>``: the first ``top`` candidates re-ordered by
  ``(1 - share) x final_score + share x best sentence cosine`` (``worker/retrieve/sentences.py``);
* ``section``: each chunk that goes in brings the rest of its section (its document's chunks with
  the same section path, up to ``SECTION_RADIUS`` either side) when the whole section fits the
  budget, else goes in alone (measured at the fixed budgets only: by default it has no budget).

Per community: evidence in context, evidence in SOURCE 1, mean context tokens; the sentence
stage's own time per question (p50 / p95); and the AUROC of answerable against unanswerable for
the best relevance, the best sentence cosine among the first candidates, and their mean.

    python benchmarks/sentence_scoring.py --dataset ../shared/datasets/hoa-dev \\
        --out benchmarks/sentence_scoring
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from worker.config import Settings  # noqa: E402
from worker.embeddings import CachedEmbedder, build_embedder  # noqa: E402
from worker.evaluation.answer_harness import VectorCache, _webhook_client, each_community  # noqa: E402
from worker.evaluation.answers import evidence_found, load_answer_dataset, split_sources  # noqa: E402
from worker.evaluation.metrics import percentile  # noqa: E402
from worker.models import RetrievalRequest  # noqa: E402
from worker.retrieve import context as context_stage  # noqa: E402
from worker.retrieve import sentences as sentence_stage  # noqa: E402

BUDGETS = (None, 500, 1000, 2000)
SECTION_RADIUS = 8
SENTENCE_VARIANTS = ((10, 0.3), (10, 0.5))
SIGNAL_TOP = 10


def auroc(positives: list[float], negatives: list[float]) -> float | None:
    if not positives or not negatives:
        return None
    wins = sum((p > n) + 0.5 * (p == n) for p in positives for n in negatives)
    return wins / (len(positives) * len(negatives))


class SectionAssembly:
    """``context.assemble`` with each kept chunk's whole section brought along when it fits."""

    def __init__(self, backend):
        self.backend = backend
        self.on = False
        self._original = context_stage.assemble

    def __call__(self, ranked, *, counter, token_budget, min_relevance, max_chunks=8, min_chunks=0,
                 floor=None, neighbours=None):
        if not self.on:
            return self._original(ranked, counter=counter, token_budget=token_budget,
                                  min_relevance=min_relevance, max_chunks=max_chunks, min_chunks=min_chunks,
                                  floor=floor, neighbours=neighbours)
        budget = context_stage._Budget(counter, token_budget)
        chosen, seen, matched = [], set(), 0
        floor = min_relevance if floor is None else min(floor, min_relevance)
        for chunk in ranked:
            if matched >= max_chunks:
                break
            needed = floor if matched < min_chunks else min_relevance
            if chunk.id in seen or chunk.final_score < needed:
                continue
            section = [n for n in self.backend.neighbours(chunk.id, SECTION_RADIUS)
                       if n.document_id == chunk.document_id and n.section_path == chunk.section_path
                       and n.id not in seen and n.id != chunk.id]
            for n in section:
                n.final_score = 0.0
            group = [chunk] + section
            cost = sum(budget.cost(c) for c in group)  # conservative: a separator per block
            if budget.used + cost <= budget.limit:
                take = group
            elif budget.fits(chunk):
                take = [chunk]
            else:
                continue
            for c in take:
                budget.take(c)
                chosen.append(c)
                seen.add(c.id)
            matched += 1
        context = context_stage._render(chosen, counter)
        while context.tokens > token_budget and len(chosen) > 1:
            chosen.pop()
            context = context_stage._render(chosen, counter)
        return context


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", type=Path, default=ROOT.parent / "shared" / "datasets" / "hoa-dev")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--communities", default="", help="comma-separated subset (default: all)")
    parser.add_argument("--no-section", action="store_true", help="leave the section variant out")
    parser.add_argument("--at-least-chunk", action="store_true",
                        help="a chunk's sentence term is at least its own cosine (the sentence only adds)")
    args = parser.parse_args(argv)
    if args.at_least_chunk:
        plain = sentence_stage.best_sentences

        def at_least_chunk(question, chunks, vectors):
            best = plain(question, chunks, vectors)
            return {c.id: max(best.get(c.id, 0.0), c.vector_score or 0.0) for c in chunks}

        sentence_stage.best_sentences = at_least_chunk

    dataset = load_answer_dataset(args.dataset)
    settings = Settings.from_env()
    embedder = CachedEmbedder(build_embedder(settings), maxsize=100_000)
    data_dir = settings.database.data_dir.resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    cache = VectorCache.of_passages(data_dir, embedder)
    wanted = [c for c in args.communities.split(",") if c]
    rows: list[dict] = []
    for each in each_community(dataset, settings=settings, embedder=embedder, cache=cache, data_dir=data_dir,
                               only=wanted):
        cache.save()
        _, retriever = _webhook_client(settings, each.db, embedder)
        if settings.status.status_calibration:
            retriever.calibrate_now()
        rows += replay(retriever, each.community, each.questions, section_variant=not args.no_section)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "questions.json").write_text(json.dumps(rows, indent=1) + "\n")
    summary = summarise(rows)
    (args.out / "results.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps(summary, indent=1))
    return 0


def replay(retriever, community: str, questions, section_variant: bool = True) -> list[dict]:
    base_policy = retriever.policy
    section = SectionAssembly(retriever.backend)
    context_stage.assemble = section
    captured: dict[str, float] = {}
    original = retriever._by_sentence

    def by_sentence(embedding, candidates, boosts):
        best = sentence_stage.best_sentences(embedding, candidates[:SIGNAL_TOP], retriever.sentence_vectors)
        captured["best_sentence"] = max(best.values(), default=0.0)
        return original(embedding, candidates, boosts)

    retriever._by_sentence = by_sentence
    rows = []
    variants = [("base", 0, 0.0)] + [(f"sent-{t}-{s}", t, s) for t, s in SENTENCE_VARIANTS]
    variants += [("section", 0, 0.0)] if section_variant else []
    try:
        for q in questions:
            row = {"id": q.id, "community": community, "kind": q.kind, "results": {}}
            for name, top, share in variants:
                retriever.policy = replace(base_policy, sentence_top=top or SIGNAL_TOP,
                                           sentence_share=share if top else 1e-9)
                section.on = name == "section"
                for b in BUDGETS:
                    if name == "section" and b is None:
                        continue
                    request = RetrievalRequest(query=q.question) if b is None else \
                        RetrievalRequest(query=q.question, token_budget=b)
                    captured.clear()
                    start = time.perf_counter()
                    answer = retriever.answer(request)
                    ms = (time.perf_counter() - start) * 1000
                    sources = split_sources(answer.context)
                    found = q.kind == "answerable" and evidence_found(q.evidence, answer.context)
                    first = (q.kind == "answerable" and bool(sources)
                             and evidence_found(q.evidence, sources[0]))
                    row["results"][f"{name}@{b or 'default'}"] = {
                        "evidence": found, "source1": first, "tokens": answer.context_tokens,
                        "status": answer.status, "ms": round(ms, 1),
                        "sentences_ms": answer.timings_ms.get("sentences")}
                    if name == "base" and b is None:
                        # the stage's cost with no sentence cached (a fresh process, a new question)
                        fresh = sentence_stage.SentenceVectors(retriever.embedder.embed)
                        vector = retriever.embedder.embed_query(answer.query.normalized)
                        start = time.perf_counter()
                        sentence_stage.best_sentences(vector, answer_candidates(retriever, request), fresh)
                        row["cold_sentences_ms"] = round((time.perf_counter() - start) * 1000, 1)
                        row["cold_sentences"] = fresh.embedded
                        row["best_relevance"] = (answer.confidence or {}).get("relevance")
                        row["best_sentence"] = captured.get("best_sentence")
            rows.append(row)
    finally:
        retriever.policy = base_policy
        context_stage.assemble = section._original
        retriever._by_sentence = original
    return rows


def answer_candidates(retriever, request):
    """The first candidates the sentence stage saw for ``request`` (from the search cache)."""
    seen = {}
    original = retriever._by_sentence

    def grab(embedding, candidates, boosts):
        seen["c"] = candidates[:SIGNAL_TOP]
        return candidates

    retriever._by_sentence = grab
    try:
        retriever.answer(request)
    finally:
        retriever._by_sentence = original
    return seen.get("c", [])


def summarise(rows: list[dict]) -> dict:
    out: dict[str, dict] = {}
    for community in sorted({r["community"] for r in rows} | {"all"}):
        mine = [r for r in rows if community in ("all", r["community"])]
        answerable = [r for r in mine if r["kind"] == "answerable"]
        negatives = [r for r in mine if r["kind"] != "answerable"]
        keys = list(mine[0]["results"])
        table = {}
        for key in keys:
            ans = [r["results"][key] for r in answerable]
            table[key] = {"evidence": round(np.mean([a["evidence"] for a in ans]), 3),
                          "source1": round(np.mean([a["source1"] for a in ans]), 3),
                          "tokens": round(float(np.mean([r["results"][key]["tokens"] for r in mine]))),
                          "p50_ms": round(percentile([r["results"][key]["ms"] for r in mine], 50), 1)}
            stage = [r["results"][key]["sentences_ms"] for r in mine if r["results"][key]["sentences_ms"]]
            if stage and not key.startswith("section"):
                table[key]["sentences_p50_ms"] = round(percentile(stage, 50), 1)
                table[key]["sentences_p95_ms"] = round(percentile(stage, 95), 1)

        def signal(f, answerable=answerable, negatives=negatives):
            return auroc([f(r) for r in answerable], [f(r) for r in negatives])

        cold = [r["cold_sentences_ms"] for r in mine if "cold_sentences_ms" in r]
        table["cold_sentence_stage"] = {"p50_ms": round(percentile(cold, 50), 1),
                                        "p95_ms": round(percentile(cold, 95), 1),
                                        "sentences_mean": round(float(np.mean(
                                            [r["cold_sentences"] for r in mine])))}
        table["auroc"] = {
            "best_relevance": signal(lambda r: r["best_relevance"] or 0.0),
            "best_sentence": signal(lambda r: r["best_sentence"] or 0.0),
            "mean": signal(lambda r: ((r["best_relevance"] or 0.0) + (r["best_sentence"] or 0.0)) / 2)}
        out[community] = table
    return out


if __name__ == "__main__":
    raise SystemExit(main())
