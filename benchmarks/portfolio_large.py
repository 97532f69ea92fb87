"""Where a portfolio's largest community spends its hybrid_search time, on a database that
benchmarks/portfolio.py kept (`--keep DIR`):

    .venv/bin/python benchmarks/portfolio_large.py --keep DIR --server pg15 --communities 1000 \
        --large-max 20000 --out benchmarks/portfolio/large.md

On the largest community (its own HNSW index), `--queries` questions not asked before:

* first asks: each question's vector leg as the community's leg function plans it, through
  EXPLAIN (ANALYZE, BUFFERS), asked twice: the first time reads what the question's path through
  the graph needs (pages outside shared buffers: `read`), the second finds it cached (`hit`);
* the steady state: hybrid_search at each `--ef-search` (the function's own default is 120), the
  full-text leg alone and the vector leg alone, after `--warmup` questions, each row its own
  `--queries` questions (interleaved, two searches of other communities before each), and vector
  recall@40 against the exact 40 nearest chunks (numpy, from the generated vectors).

The server is started afresh, so its shared buffers start empty, as after a restart.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))

from portfolio import SEED, size_of
from scale_communities import MATCH, Corpus, community_name, leg_statement, pct, server, vector_text

HYBRID = (
    "select id, vector_rank from hybrid_search(query_text => %(q)s, query_embedding => %(v)s::vector, "
    "match_count => 40, community => %(c)s, ef_search => %(ef)s)"
)


LEG_SETTINGS = ("set enable_sort = off", "set hnsw.ef_search = 120", "set hnsw.iterative_scan = relaxed_order")


def leg_settings(conn) -> None:  # type: ignore[no-untyped-def]
    """The session settings the leg function runs with (arc_community_vector_leg, hybrid_search)."""
    for setting in LEG_SETTINGS:
        conn.execute(setting)


def first_asks(conn, name: str, vectors: list[str]) -> list[dict]:
    """Each question's vector leg twice through EXPLAIN (ANALYZE, BUFFERS): ms, buffers hit and read."""
    statement = leg_statement(conn, name)
    out = []
    for v in vectors:
        for attempt in ("first", "second"):
            leg_settings(conn)
            plan = "\n".join(r[0] for r in conn.execute("explain (analyze, buffers) " + statement, {"v": v}))
            conn.execute("reset all")
            buffers = re.search(r"Buffers: shared (?:hit=(\d+))? ?(?:read=(\d+))?", plan)
            out.append(
                {
                    "attempt": attempt,
                    "ms": float(re.search(r"Execution Time: ([\d.]+)", plan).group(1)),
                    "hit": int((buffers and buffers.group(1)) or 0),
                    "read": int((buffers and buffers.group(2)) or 0),
                }
            )
    return out


def kept_portfolio_parser(description: str) -> argparse.ArgumentParser:
    """The arguments that find the kept portfolio and its communities' sizes."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keep", type=Path, required=True, help="the folder benchmarks/portfolio.py kept")
    parser.add_argument("--server", choices=("embedded", "pg15"), default="embedded")
    parser.add_argument("--communities", type=int, default=5000)
    parser.add_argument("--large-min", type=int, default=10000)
    parser.add_argument("--large-max", type=int, default=50000)
    parser.add_argument("--shared-buffers", default="2GB")
    return parser


def portfolio_parser(description: str, queries: int) -> argparse.ArgumentParser:
    """The arguments that find the kept portfolio and its largest community, and how many questions."""
    parser = kept_portfolio_parser(description)
    parser.add_argument("--queries", type=int, default=queries)
    parser.add_argument("--warmup", type=int, default=40)
    return parser


def kept_command(script: str, keep: Path) -> str:
    """The command line that ran ``script``, the kept folder written DIR: it is this machine's,
    not the results'."""
    return f"python benchmarks/{script} " + " ".join("DIR" if a == str(keep) else a for a in sys.argv[1:])


@dataclass(frozen=True)
class Largest:
    """The portfolio's largest community, and questions of other communities to ask between its own."""

    k: int
    name: str
    size: int
    neighbours: list[tuple[str, str, str]]  # (community, question, vector)


def largest(args: argparse.Namespace, corpus: Corpus) -> Largest:
    sizes = [size_of(k, args.large_min, args.large_max) for k in range(args.communities)]
    k = max(range(args.communities), key=lambda i: sizes[i])
    neighbours = []
    for other in range(0, args.communities, max(args.communities // 200, 1)):
        qv, qt = corpus.questions(other, 2, batch=2)
        neighbours += [(community_name(other), qt[j], vector_text(qv[j])) for j in range(2)]
    return Largest(k, community_name(k), sizes[k], neighbours)


def chunk_ids(conn, community: Largest) -> np.ndarray:  # type: ignore[no-untyped-def]
    """The database id of each generated chunk of ``community``, in the generator's order."""
    ids = np.zeros(community.size, dtype=np.int64)
    for i, doc, chunk in conn.execute(
        "select id, document_id, chunk_index from knowledge_chunks where community = %s", (community.name,)
    ):
        ids[int(doc[4:]) * 20 + chunk] = i
    return ids


def timed_among_others(conn, big: Largest, params: dict, rng: np.random.Generator) -> tuple[float, list]:  # type: ignore[no-untyped-def]
    """hybrid_search with ``params``, after two searches of other communities (so the largest's
    pages compete for the cache as in a portfolio): its milliseconds and rows."""
    for idx in rng.choice(len(big.neighbours), size=2, replace=False):
        c, q, v = big.neighbours[idx]
        conn.execute(HYBRID, {"q": q, "v": v, "c": c, "ef": None}).fetchall()
    start = time.perf_counter()
    rows = conn.execute(HYBRID, params).fetchall()
    return (time.perf_counter() - start) * 1000, rows


def main() -> None:
    parser = portfolio_parser(__doc__, queries=30)
    parser.add_argument("--first", type=int, default=10, help="questions asked first through EXPLAIN")
    parser.add_argument("--ef-search", default="80,100,120")
    parser.add_argument("--out", type=Path, default=None, help="also write the results here (markdown)")
    args = parser.parse_args()
    corpus = Corpus(0.3)
    big = largest(args, corpus)
    k, name = big.k, big.name
    efs = [int(e) for e in args.ef_search.split(",")]
    rng = np.random.default_rng(SEED)
    lines = [f"Largest community {name}, {big.size:,} chunks ({args.server}, shared_buffers {args.shared_buffers})", ""]
    with (
        server(args.server, args.keep / args.server, args.shared_buffers) as url,
        psycopg.connect(url, autocommit=True) as conn,
    ):
        lines.append(f"Postgres {conn.execute('show server_version').fetchone()[0]}")
        fv, _ = corpus.questions(k, args.first, batch=4)
        asks = first_asks(conn, name, [vector_text(v) for v in fv])
        lines += [
            "",
            "| vector leg, a question's | ms p50 | ms max | buffers read p50 | read max | hit p50 |",
            "|---|---|---|---|---|---|",
        ]
        for attempt in ("first", "second"):
            a = [x for x in asks if x["attempt"] == attempt]
            lines.append(
                f"| {attempt} time | {statistics.median(x['ms'] for x in a):.2f} | {max(x['ms'] for x in a):.2f} | "
                f"{statistics.median(x['read'] for x in a):.0f} | {max(x['read'] for x in a)} | "
                f"{statistics.median(x['hit'] for x in a):.0f} |"
            )
        ids = chunk_ids(conn, big)
        vectors = corpus.chunks(k, big.size)[0]
        wv, wt = corpus.questions(k, args.warmup, batch=3)
        for j in range(args.warmup):
            conn.execute(HYBRID, {"q": wt[j], "v": vector_text(wv[j]), "c": name, "ef": None}).fetchall()
        variants = [(f"hybrid_search, ef_search {ef}", True, True, ef) for ef in efs] + [
            ("full-text leg alone", True, False, None),
            ("vector leg alone (ef_search 120)", False, True, None),
        ]
        # each row its own questions, none asked before (a question asked again finds its path cached)
        questions = [corpus.questions(k, args.queries, batch=10 + i) for i in range(len(variants))]
        times: dict[str, list[float]] = {v[0]: [] for v in variants}
        recalls: dict[str, list[float]] = {v[0]: [] for v in variants}
        for j in range(args.queries):
            for (label, text, vector, ef), (qv, qt) in zip(variants, questions, strict=True):
                params = {
                    "q": qt[j] if text else "",
                    "v": vector_text(qv[j]) if vector else None,
                    "c": name,
                    "ef": ef,
                }
                ms, rows = timed_among_others(conn, big, params, rng)
                times[label].append(ms)
                exact = set(ids[np.argsort(-(qv[j] @ vectors.T))[:MATCH]].tolist())
                recalls[label].append(len(exact & {r[0] for r in rows if r[1] is not None}) / MATCH)
        lines += [
            "",
            f"Steady state: {args.queries} questions a row, after {args.warmup} warm-up questions",
            "",
            "| | p50 ms | p95 ms | recall@40 | lowest |",
            "|---|---|---|---|---|",
        ]
        for label in times:
            r = recalls[label]
            lines.append(
                f"| {label} | {pct(times[label], 50)} | {pct(times[label], 95)} | "
                + (f"{statistics.mean(r):.4f} | {min(r):.3f} |" if max(r) > 0 else " | |")
            )
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(f"Command: `{kept_command('portfolio_large.py', args.keep)}`\n\n" + text)


if __name__ == "__main__":
    main()
