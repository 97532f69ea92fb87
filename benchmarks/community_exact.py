"""An exact read of one community's rows, by the community's size: what a community without an
HNSW index of its own costs (sql/094_community_index_size.sql, arc_community_index_min_chunks()).

A table of ``--rows`` chunks (384-dim unit vectors, a short paragraph of text each) held by
communities of 300 chunks, among them one community of each measured size, each community's rows
loaded together as the ingest loads them; a btree on community. For each size, ``--queries``
random questions ask for the 40 nearest chunks of that community the way hybrid_search reads a
small community (the distance plus 0, which no HNSW index orders); the first five are not timed.

    .venv/bin/python benchmarks/community_exact.py --out benchmarks/community_exact
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from worker.store.embedded import EmbeddedPostgres

TEXT = "The owner shall not erect any fence exceeding six feet in height without approval. " * 8
EXACT = "select id from t where community = %s order by (embedding <=> %s::vector) + 0 limit 40"


def _vector(rng: np.random.Generator) -> str:
    v = rng.standard_normal(384).astype(np.float32)
    v /= np.linalg.norm(v)
    return "[" + ",".join(f"{x:.5f}" for x in v) + "]"


def _load(conn: psycopg.Connection, rng: np.random.Generator, community: str, rows: int) -> None:
    with conn.cursor().copy("copy t (community, content, embedding) from stdin") as copy:
        for _ in range(rows):
            copy.write_row((community, TEXT, _vector(rng)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=300_000)
    parser.add_argument("--sizes", default="100,250,500,1000,2000,4000,8000")
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/community_exact"))
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    rng = np.random.default_rng(1)
    rows: list[tuple[int, float, float]] = []
    with tempfile.TemporaryDirectory() as folder:
        server = EmbeddedPostgres(Path(folder))
        with psycopg.connect(server.start(), autocommit=True) as conn:
            conn.execute("create extension if not exists vector")
            conn.execute(
                "create table t (id bigserial primary key, community text not null, content text, "
                "embedding vector(384))"
            )
            per_gap = max((args.rows - sum(sizes)) // len(sizes) // 300, 0)
            filler = 0
            for size in sizes:
                for _ in range(per_gap):
                    _load(conn, rng, f"f{filler}", 300)
                    filler += 1
                _load(conn, rng, f"m{size}", size)
            conn.execute("create index on t (community)")
            conn.execute("analyze t")
            total = conn.execute("select count(*) from t").fetchone()[0]
            for size in sizes:
                times = []
                for _ in range(args.queries):
                    started = time.perf_counter()
                    conn.execute(EXACT, (f"m{size}", _vector(rng))).fetchall()
                    times.append((time.perf_counter() - started) * 1000)
                kept = sorted(times[5:])
                rows.append((size, statistics.median(kept), kept[max(int(0.95 * len(kept)) - 1, 0)]))
                print(f"{size:6d} chunks: p50 {rows[-1][1]:.2f} ms, p95 {rows[-1][2]:.2f} ms", flush=True)
        server.stop()
    args.out.mkdir(parents=True, exist_ok=True)
    lines = [
        "# An exact read of one community's rows, by its size",
        "",
        f"Command: `.venv/bin/python benchmarks/community_exact.py --rows {args.rows} --sizes {args.sizes} "
        f"--queries {args.queries} --out {args.out}`",
        "",
        f"{total:,} chunks of 384 dims on the embedded Postgres, a btree on community; the 40 nearest chunks of one "
        f"community, {args.queries - 5} timed questions each; load average {os.getloadavg()[0]:.1f} at the end "
        "(2 cores).",
        "",
        "| community's chunks | p50 ms | p95 ms |",
        "|---|---|---|",
        *(f"| {size:,} | {p50:.2f} | {p95:.2f} |" for size, p50, p95 in rows),
        "",
    ]
    (args.out / "results.md").write_text("\n".join(lines))


if __name__ == "__main__":
    main()
