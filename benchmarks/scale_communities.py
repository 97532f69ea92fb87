"""Many communities in one knowledge base: one community's hybrid_search latency and its vector
recall@40 when it is a small share of a large HNSW index (pgvector's known weak spot).

    .venv/bin/python benchmarks/scale_communities.py --communities 50 --per-community 2000 \
        --out benchmarks/scale_communities

Synthetic but shaped like the worst case: every community draws its chunks' vectors from the
same topics (sister associations write about the same fences and pools), so a filtered HNSW
scan meets mostly other communities' chunks first. Text: sentences of the hoa-dev documents.
Measured per option, for a few communities each: "iterative" (031 as shipped: the HNSW scan
filtered on the community, pgvector 0.8 iterative scans in relaxed order) and "exact" (the
community's chunks read through the btree and sorted by distance, no HNSW).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import psycopg

from worker.retrieve.search import _vector_literal
from worker.store.database import Database
from worker.store.embedded import EmbeddedPostgres

DIM = 384
TOPICS = 400
HOA_DEV = Path(__file__).resolve().parent.parent.parent / "shared" / "datasets" / "hoa-dev"
SEARCH = ("select id, vector_rank from hybrid_search(query_text => %s, query_embedding => %s::vector, "
          "match_count => 40, community => %s)")
EXACT = ("select id from knowledge_chunks where community = %s order by embedding <=> %s::vector limit 40")


def sentences() -> list[str]:
    found = []
    for path in sorted(HOA_DEV.glob("*/documents/*.md")):
        found += [s.strip() for s in re.split(r"(?<=[.!?])\s+", path.read_text(encoding="utf-8")) if len(s.split()) > 5]
    return found


def load(conn, communities: int, per: int, centers: np.ndarray, texts: list[str]) -> float:
    rng = np.random.default_rng(3)
    pick = random.Random(3)
    conn.execute("drop index if exists knowledge_chunks_embedding_hnsw")
    start = time.perf_counter()
    for c in range(communities):
        name = f"c{c:03d}"
        sample = [" ".join(pick.sample(texts, 3)) for _ in range(200)]
        conn.execute("select bm25_seed_avgdl(%s::text[], %s::text[], %s)", ([""] * len(sample), sample, name))
        with conn.cursor().copy("copy knowledge_chunks (community, document_id, document_name, document_type, "
                                "chunk_index, content, token_count, embedding) from stdin") as copy:
            for i in range(per):
                topic = rng.integers(TOPICS)
                v = centers[topic] + rng.normal(scale=0.35 / np.sqrt(DIM), size=DIM)
                v /= np.linalg.norm(v)
                text = " ".join(pick.sample(texts, 3))
                copy.write_row((name, f"doc-{i // 20}", f"Document {i // 20}", "ccr", i % 20, text,
                                len(text.split()), _vector_literal(v.astype(np.float32))))
    load_s = time.perf_counter() - start
    start = time.perf_counter()
    conn.execute("set maintenance_work_mem = '512MB'")
    conn.execute("create index knowledge_chunks_embedding_hnsw on knowledge_chunks "
                 "using hnsw (embedding vector_cosine_ops) with (m = 16, ef_construction = 64)")
    conn.execute("vacuum analyze knowledge_chunks")
    conn.execute("vacuum analyze bm25_postings")
    return load_s, time.perf_counter() - start


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))], 2)


def measure(conn, community: str, centers: np.ndarray, texts: list[str], n: int) -> dict:
    rng = np.random.default_rng(hash(community) % 2**32)
    pick = random.Random(community)
    queries = []
    for _ in range(n):
        v = centers[rng.integers(TOPICS)] + rng.normal(scale=0.5 / np.sqrt(DIM), size=DIM)
        queries.append((" ".join(pick.choice(texts).split()[:6]), _vector_literal((v / np.linalg.norm(v)).astype(np.float32))))
    for q, v in queries[:20]:  # warm-up
        conn.execute(SEARCH, (q, v, community)).fetchall()
    hybrid, exact_ms, recalls = [], [], []
    for q, v in queries:
        t = time.perf_counter()
        rows = conn.execute(SEARCH, (q, v, community)).fetchall()
        hybrid.append((time.perf_counter() - t) * 1000)
        approx = {r[0] for r in rows if r[1] is not None}
        with conn.transaction():
            conn.execute("set local enable_indexscan = off")  # no HNSW: exact, through the btree/bitmap
            t = time.perf_counter()
            exact = {r[0] for r in conn.execute(EXACT, (community, v))}
            exact_ms.append((time.perf_counter() - t) * 1000)
        recalls.append(len(approx & exact) / max(len(exact), 1))
    return {"community": community, "hybrid_p50_ms": pct(hybrid, 50), "hybrid_p95_ms": pct(hybrid, 95),
            "vector_recall_at_40": round(statistics.mean(recalls), 4),
            "exact_vector_p50_ms": pct(exact_ms, 50), "exact_vector_p95_ms": pct(exact_ms, 95)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--communities", type=int, default=50)
    parser.add_argument("--per-community", type=int, default=2000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/scale_communities"))
    args = parser.parse_args()
    centers = np.random.default_rng(1).normal(size=(TOPICS, DIM))
    centers /= np.linalg.norm(centers, axis=1, keepdims=True)
    texts = sentences()
    with tempfile.TemporaryDirectory(prefix="arc-scale-communities-") as folder:
        server = EmbeddedPostgres(Path(folder))
        url = server.start()
        try:
            Database(url, statement_timeout_ms=0).migrate(DIM)
            with psycopg.connect(url, autocommit=True) as conn:
                load_s, index_s = load(conn, args.communities, args.per_community, centers, texts)
                rows = [measure(conn, f"c{c:03d}", centers, texts, args.queries)
                        for c in (0, args.communities // 2, args.communities - 1)]
        finally:
            server.stop()
    result = {"communities": args.communities, "chunks_per_community": args.per_community,
              "chunks": args.communities * args.per_community, "load_seconds": round(load_s, 1),
              "hnsw_build_seconds": round(index_s, 1), "per_community": rows}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
