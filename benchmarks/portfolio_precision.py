"""A large community's vector leg at full and at half precision, side by side on one database that
benchmarks/portfolio.py kept (`--keep DIR`):

    .venv/bin/python benchmarks/portfolio_precision.py --keep DIR --server embedded \
        --communities 5000 --large-max 50000

The largest community has its own index as the checkout makes it; a probe index of the other
precision is built beside it (and dropped after), and each question runs both leg statements
(the product's, `arc_community_vector_leg_statement`, and the same ordered by the other index),
each row its own questions, two searches of other communities before each: ms p50 / p95 and
recall@40 against the exact 40 nearest chunks (numpy, from the generated vectors).
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))

from portfolio import SEED
from portfolio_large import chunk_ids, largest, leg_settings, portfolio_parser
from scale_communities import MATCH, Corpus, leg_statement, pct, server, vector_text

HYBRID = (
    "select id from hybrid_search(query_text => %(q)s, query_embedding => %(v)s::vector, match_count => 40, "
    "community => %(c)s)"
)
SIZE_MB = "select pg_relation_size(to_regclass(quote_ident(%s))) / 1048576.0"


def drop_os_cache() -> bool:
    """Empty the operating system's page cache (root only); whether it was."""
    try:
        os.sync()
        Path("/proc/sys/vm/drop_caches").write_text("1\n")
        return True
    except OSError:
        return False


def main() -> None:
    args = portfolio_parser(__doc__, queries=40).parse_args()
    corpus = Corpus(0.3)
    big = largest(args, corpus)
    k, name, neighbours = big.k, big.name, big.neighbours
    rng = np.random.default_rng(SEED)
    probe = f"probe_precision_{name}"
    with (
        server(args.server, args.keep / args.server, args.shared_buffers) as url,
        psycopg.connect(url, autocommit=True) as conn,
    ):
        own = leg_statement(conn, name)
        dims = conn.execute(
            "select atttypmod from pg_attribute where attrelid = 'knowledge_chunks'::regclass and attname = 'embedding'"
        ).fetchone()[0]
        own_is_half = "halfvec" in own
        half_order = f"order by c.embedding::halfvec({dims}) <=> %(v)s::vector::halfvec({dims})"
        full_order = "order by c.embedding <=> %(v)s::vector"
        other = own.replace(half_order, full_order) if own_is_half else own.replace(full_order, half_order)
        if other == own:
            raise SystemExit(f"the leg statement of {name} orders by neither {full_order!r} nor {half_order!r}")
        column = "embedding vector_cosine_ops" if own_is_half else f"(embedding::halfvec({dims})) halfvec_cosine_ops"
        conn.execute("set maintenance_work_mem = '1GB'")
        conn.execute(f"drop index if exists {probe}")
        conn.execute(
            f"create index {probe} on knowledge_chunks using hnsw ({column}) "
            f"with (m = 16, ef_construction = 64) where community = '{name}'"
        )
    # A build leaves the new index in the operating system's cache and the other index perhaps not:
    # both start cold (the server restarted, the cache dropped) for a fair comparison.
    cold = drop_os_cache()
    variants = {"full precision": other if own_is_half else own, "half precision": own if own_is_half else other}
    with (
        server(args.server, args.keep / args.server, args.shared_buffers) as url,
        psycopg.connect(url, autocommit=True) as conn,
    ):
        try:
            ids = chunk_ids(conn, big)
            vectors = corpus.chunks(k, big.size)[0]
            # each statement warmed by questions of its own, neither timed
            for n, statement in enumerate(variants.values()):
                wv, _ = corpus.questions(k, args.warmup, batch=3 + n)
                leg_settings(conn)
                for v in wv:
                    conn.execute(statement, {"v": vector_text(v)}).fetchall()
                conn.execute("reset all")
            questions = [corpus.questions(k, args.queries, batch=20 + i) for i in range(len(variants))]
            times: dict[str, list[float]] = {v: [] for v in variants}
            recalls: dict[str, list[float]] = {v: [] for v in variants}
            for j in range(args.queries):
                for (label, statement), (qv, _) in zip(variants.items(), questions, strict=True):
                    for idx in rng.choice(len(neighbours), size=2, replace=False):
                        c, q, v = neighbours[idx]
                        conn.execute(HYBRID, {"q": q, "v": v, "c": c}).fetchall()
                    leg_settings(conn)
                    started = time.perf_counter()
                    rows = conn.execute(statement, {"v": vector_text(qv[j])}).fetchall()
                    times[label].append((time.perf_counter() - started) * 1000)
                    conn.execute("reset all")
                    exact = set(ids[np.argsort(-(qv[j] @ vectors.T))[:MATCH]].tolist())
                    recalls[label].append(len(exact & {r[0] for r in rows}) / MATCH)
            own_index = conn.execute("select arc_community_vector_index_name(%s)", (name,)).fetchone()[0]
            index_mb = {
                label: conn.execute(SIZE_MB, (n,)).fetchone()[0] for label, n in (("own", own_index), ("probe", probe))
            }
        finally:
            conn.execute(f"drop index if exists {probe}")
    print(
        "Both indexes cold at the start (server restarted, OS cache dropped)"
        if cold
        else "The OS cache could not be dropped here: the probe, just built, may start warmer"
    )
    precision = "half" if own_is_half else "full"
    print(
        f"Largest community {name}, {big.size:,} chunks ({args.server}); its own index ({precision} precision) "
        f"{index_mb['own']:.0f} MB, the probe {index_mb['probe']:.0f} MB\n"
    )
    print("| vector leg statement | p50 ms | p95 ms | recall@40 | lowest |\n|---|---|---|---|---|")
    for label in variants:
        print(
            f"| {label} | {pct(times[label], 50)} | {pct(times[label], 95)} | "
            f"{statistics.mean(recalls[label]):.4f} | {min(recalls[label]):.3f} |"
        )


if __name__ == "__main__":
    main()
