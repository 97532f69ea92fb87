"""Search throughput with 0, 1 and 2 read replicas: a primary of PostgreSQL 15 + pgvector 0.8.0 and
streaming standbys made with ``pg_basebackup -R``, all on this machine.

    .venv/bin/python benchmarks/replicas.py --datasets ../shared/datasets --chunks 20000 \
        --seconds 20 --threads 8 --out benchmarks/replicas

What runs is the worker's own search path (PostgresBackend + ReadReplicas: the primary's version
read, the replica's version check, hybrid_search) from N client threads in a closed loop, with
the questions' vectors made beforehand, so the numbers are the database side of a question. The
chunks are sentences of hoa-dev's governing documents (read from --datasets, never copied) with
random unit vectors; the questions are hoa-dev's. Every server and the client share this
machine's cores: replicas here cannot add capacity, only show the overhead of routing; the
per-server throughput is what the README's scale-out model multiplies.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import socket
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import psycopg

from worker.embeddings import LocalEmbedder
from worker.ingest.ingestor import Ingestor
from worker.ingest.readers import parse_text
from worker.models import DocumentFields
from worker.retrieve.preprocess import normalize
from worker.store.postgres_search import PostgresBackend
from worker.store.search import SearchParams
from worker.store.database import Database
from worker.store.replicas import ReadReplicas

PG15_BIN = Path("/usr/lib/postgresql/15/bin")


class FixedVectors:
    """An embedder stand-in for loading: the vectors are given, only the tokenizer is real."""

    def __init__(self, real: LocalEmbedder, seed: int = 7):
        self.real = real
        self.rng = np.random.default_rng(seed)
        self.model, self.dim, self.max_tokens = real.model, real.dim, real.max_tokens

    def count_tokens(self, text: str) -> int:
        return self.real.count_tokens(text)

    def embed(self, texts):
        v = self.rng.standard_normal((len(texts), self.dim)).astype(np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(cmd: list[str]) -> None:
    subprocess.run(cmd, check=True, capture_output=True)


def start(as_postgres: list[str], data: Path, port: int, sock: Path, log: Path) -> None:
    run([*as_postgres, str(PG15_BIN / "pg_ctl"), "-D", str(data), "-l", str(log), "-w", "-o",
         f"-p {port} -k {sock} -c listen_addresses=127.0.0.1 -c fsync=off -c shared_buffers=256MB", "start"])


def sentences(datasets: Path) -> list[str]:
    out: list[str] = []
    for path in sorted((datasets / "hoa-dev").glob("*/documents/**/*.md")):
        text = re.sub(r"\s+", " ", path.read_text(errors="ignore"))
        out += [s for s in re.split(r"(?<=[.!?])\s+", text) if 40 <= len(s) <= 600]
    return out


def load(url: str, n_chunks: int, datasets: Path, embedder: LocalEmbedder) -> int:
    db = Database(url, statement_timeout_ms=3_600_000)  # one large first load
    db.migrate(embedder.dim)
    pool = sentences(datasets)
    rng = random.Random(7)
    fixed = FixedVectors(embedder)
    ingestor = Ingestor(db, fixed)
    documents, total, i = [], 0, 0
    while total < n_chunks:
        text = "\n\n".join(" ".join(rng.choice(pool) for _ in range(rng.randint(2, 6))) for _ in range(40))
        doc = ingestor.prepare_text(parse_text(text),
                                    DocumentFields(document_id=f"doc-{i}", name=f"Document {i}",
                                                   document_type=rng.choice(["ccr", "design_guidelines", "other"])))
        documents.append(doc)
        total += len(doc.chunks)
        i += 1
    ingestor.write(documents)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("vacuum analyze")
    db.close()
    return total


def measure(backend: PostgresBackend, params: list[SearchParams], seconds: float, threads: int) -> dict:
    latencies: list[float] = []
    errors = 0
    stop = time.monotonic() + seconds
    lock = threading.Lock()

    def client(offset: int) -> None:
        nonlocal errors
        i = offset
        while time.monotonic() < stop:
            started = time.perf_counter()
            try:
                backend.search(params[i % len(params)])
                took = (time.perf_counter() - started) * 1000
                with lock:
                    latencies.append(took)
            except Exception:
                with lock:
                    errors += 1
            i += 1

    workers = [threading.Thread(target=client, args=(k * 17,)) for k in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    latencies.sort()
    return {"searches": len(latencies), "errors": errors, "req_per_s": round(len(latencies) / seconds, 1),
            "p50_ms": round(statistics.median(latencies), 2),
            "p95_ms": round(latencies[int(0.95 * (len(latencies) - 1))], 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=Path, default=Path("../shared/datasets"))
    parser.add_argument("--chunks", type=int, default=20000)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/replicas"))
    args = parser.parse_args()

    base = Path(tempfile.mkdtemp(prefix="arc-replicas-bench-"))
    as_postgres: list[str] = []
    sock = base / "sock"
    sock.mkdir()
    if os.geteuid() == 0:
        shutil.chown(base, "postgres")
        shutil.chown(sock, "postgres")
        as_postgres = ["runuser", "-u", "postgres", "--"]
    ports = [free_port() for _ in range(3)]
    datas = [base / "primary", base / "standby1", base / "standby2"]
    urls = [f"postgresql://postgres:@127.0.0.1:{p}/arc" for p in ports]
    run([*as_postgres, str(PG15_BIN / "initdb"), "-D", str(datas[0]), "-A", "trust", "-U", "postgres", "--no-sync"])
    start(as_postgres, datas[0], ports[0], sock, base / "primary.log")
    started: list[Path] = [datas[0]]
    try:
        with psycopg.connect(urls[0].replace("/arc", "/postgres"), autocommit=True) as conn:
            conn.execute("create database arc")
        embedder = LocalEmbedder()
        loaded = load(urls[0], args.chunks, args.datasets, embedder)
        for k in (1, 2):
            run([*as_postgres, str(PG15_BIN / "pg_basebackup"), "-h", "127.0.0.1", "-p", str(ports[0]), "-U",
                 "postgres", "-D", str(datas[k]), "-R", "-X", "stream"])
            start(as_postgres, datas[k], ports[k], sock, base / f"standby{k}.log")
            started.append(datas[k])
        questions = [normalize(json.loads(line)["question"])
                     for line in (args.datasets / "hoa-dev" / "questions.jsonl").open()]
        vectors = embedder.embed(questions)
        params = [SearchParams(query_text=q, embedding=v) for q, v in zip(questions, vectors)]
        primary = Database(urls[0], pool_size=args.threads)
        rows = []
        for n_replicas in (0, 1, 2):
            replicas = [Database(u, pool_size=args.threads) for u in urls[1:1 + n_replicas]]
            reads = ReadReplicas(primary, replicas) if replicas else None
            backend = PostgresBackend(primary, reads)
            measure(backend, params, 3, args.threads)  # warm caches and pools
            result = measure(backend, params, args.seconds, args.threads)
            if reads:
                result["per_database"] = {s.name: s.searches for s in reads.all_stats()}
            rows.append({"replicas": n_replicas, **result})
            print(json.dumps(rows[-1]))
            for r in replicas:
                r.close()
        primary.close()
    finally:
        for data in started:
            subprocess.run([*as_postgres, str(PG15_BIN / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"],
                           capture_output=True)
        shutil.rmtree(base, ignore_errors=True)
    write(rows, loaded, args)


def write(rows: list[dict], chunks: int, args: argparse.Namespace) -> None:
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps({"chunks": chunks, "threads": args.threads,
                                                       "seconds": args.seconds, "rows": rows}, indent=2) + "\n")
    lines = [
        "# Search throughput with read replicas",
        "",
        f"{chunks:,} chunks (384 dims), {args.threads} client threads in a closed loop, {args.seconds:g} s per "
        f"row, `nproc` = {os.cpu_count()}: every server and the client share these cores.",
        "",
        f"Command: `.venv/bin/python benchmarks/replicas.py --datasets ../shared/datasets --chunks {args.chunks} "
        f"--seconds {args.seconds:g} --threads {args.threads} --out {args.out}`",
        "",
        "| replicas | searches/s | p50 ms | p95 ms | errors | searches by database |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        per = ", ".join(f"{k} {v}" for k, v in r.get("per_database", {}).items()) or "primary only"
        lines.append(f"| {r['replicas']} | {r['req_per_s']} | {r['p50_ms']} | {r['p95_ms']} | {r['errors']} | {per} |")
    (args.out / "results.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
