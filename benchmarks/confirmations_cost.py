"""What the keeper's confirmations add to a question: the matcher's time (``Retriever.confirmations
.match``, the one call the pipeline makes) and the whole answer's, with 0, 10, 100 and 1,000
confirmations in the community, on one embedded database holding the sample corpus.

    .venv/bin/python benchmarks/confirmations_cost.py --out benchmarks/confirmations_cost

The confirmations are real rows (``sql/050_confirmations.sql``), each naming a real chunk, with
embeddings of real question wordings (the sample's questions and the homeowner questions, with a
numbered suffix so every one is its own question). Each question is asked once untimed first
(embedding and search caches warm, the confirmations loaded), then in rounds; the matcher is
timed around its call inside the answer. Database calls counted with ``pg_stat_statements``-free
means: a counting wrapper around the version and load callables.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from worker.config import Settings  # noqa: E402
from worker.embeddings import CachedEmbedder, LocalEmbedder  # noqa: E402
from worker.evaluation.metrics import percentile  # noqa: E402
from worker.ingest.ingestor import Ingestor, ingest_sample_corpus  # noqa: E402
from worker.models import RetrievalRequest  # noqa: E402
from worker.retrieve.confirmed import homeowner_questions  # noqa: E402
from worker.runtime import Runtime  # noqa: E402
from worker.service.caller import LOCAL  # noqa: E402
from worker.service.knowledge import KnowledgeService  # noqa: E402
from worker.store.confirmations import ConfirmationStore, ConfirmedChunk, NewConfirmation  # noqa: E402
from worker.store.database import Database  # noqa: E402
from worker.store.embedded import EmbeddedPostgres  # noqa: E402

SIZES = (0, 10, 100, 1000)
ROUNDS = 5


def questions() -> list[str]:
    sample = Path(__file__).resolve().parent.parent / "worker" / "sample_corpus" / "questions.jsonl"
    return [json.loads(line)["question"] for line in sample.read_text().splitlines() if line.strip()]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.mkdtemp(prefix="arc-run-"))
    with tempfile.TemporaryDirectory(prefix="arc-confirm-cost-") as folder:
        server = EmbeddedPostgres(Path(folder))
        url = server.start()
        try:
            results = measure(url, Path(folder))
        finally:
            server.stop()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    lines = [
        "# What confirmations add to a question",
        "",
        f"`.venv/bin/python benchmarks/confirmations_cost.py --out {args.out}` on this 2-core machine "
        f"(shared), embedded Postgres, sample corpus, all-MiniLM-L6-v2; {results['questions']} questions "
        f"x {ROUNDS} rounds per size, caches warm.",
        "",
        "| confirmations | matcher p50 ms | matcher p95 ms | answer p50 ms | answer p95 ms | database calls by the matcher per question |",
        "|---|---|---|---|---|---|",
    ]
    for row in results["sizes"]:
        lines.append(
            f"| {row['confirmations']} | {row['match_p50_ms']} | {row['match_p95_ms']} | {row['answer_p50_ms']} "
            f"| {row['answer_p95_ms']} | {row['db_calls_per_question']} |"
        )
    (args.out / "results.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def measure(url: str, folder: Path) -> dict:
    embedder = CachedEmbedder(LocalEmbedder())
    db = Database(url)
    db.migrate(embedder.dim)
    ingest_sample_corpus(Ingestor(db, embedder))
    settings = Settings.from_env({}, data_dir=folder, database_url=url, search_cache_seconds=300)
    knowledge = KnowledgeService(Runtime(settings, db, embedder))
    retriever = knowledge.retriever
    store = ConfirmationStore(db)
    with db.connect() as conn:
        chunks = [
            ConfirmedChunk(*row)
            for row in conn.execute(
                "select id, document_id, chunk_index, section_path, md5(content), content from knowledge_chunks order by id"
            )
        ]
    asked = questions()
    wordings = [*asked, *homeowner_questions()]
    matcher = retriever.confirmations
    calls = {"n": 0}
    version, load = matcher._stamp, matcher._load
    assert load is not None

    def counted_version(community: str) -> str:
        calls["n"] += 1
        return version(community)

    def counted_load(community: str):
        calls["n"] += 1
        return load(community)

    matcher._stamp, matcher._load = counted_version, counted_load
    timed: list[float] = []
    inner = matcher.match

    def timed_match(*a, **k):
        start = time.perf_counter()
        try:
            return inner(*a, **k)
        finally:
            timed.append((time.perf_counter() - start) * 1000)

    matcher.match = timed_match  # type: ignore[method-assign]
    out = []
    stored = 0
    for size in SIZES:
        while stored < size:
            text = f"{wordings[stored % len(wordings)]} (case {stored})"
            vector = embedder.embed_query(text)
            store.add(NewConfirmation("default", text, "passage", vector, embedder.model, chunks[stored % len(chunks)]))
            stored += 1
        matcher.forget()
        for q in asked:  # warm: embeddings, searches, the confirmations loaded
            knowledge.ask(RetrievalRequest(query=q), caller=LOCAL, record=False)
        timed.clear()
        calls["n"] = 0
        answers: list[float] = []
        for _ in range(ROUNDS):
            for q in asked:
                start = time.perf_counter()
                knowledge.ask(RetrievalRequest(query=q), caller=LOCAL, record=False)
                answers.append((time.perf_counter() - start) * 1000)
        out.append(
            {
                "confirmations": size,
                "match_p50_ms": round(percentile(timed, 50), 3),
                "match_p95_ms": round(percentile(timed, 95), 3),
                "answer_p50_ms": round(percentile(answers, 50), 2),
                "answer_p95_ms": round(percentile(answers, 95), 2),
                "db_calls_per_question": round(calls["n"] / len(answers), 3),
            }
        )
        print(out[-1], flush=True)
    knowledge.close()
    db.close()
    return {"questions": len(asked), "sizes": out}


if __name__ == "__main__":
    main()
