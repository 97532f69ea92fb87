"""The portfolio's largest community after a restart, with and without the worker's warming of the
large communities' full-text pages (sql/functions/arc_warm_communities.sql), on a database that
benchmarks/portfolio.py kept (`--keep DIR`):

    .venv/bin/python benchmarks/portfolio_warm.py --keep DIR --rounds 3 --out benchmarks/portfolio/warm.md

Each round starts the server twice, so its shared buffers start empty as after a restart: once
measured as started, once after `select * from arc_warm_communities()` (what a serving worker
runs at its start, in the background). Then, as benchmarks/portfolio_large.py's steady state
does: `--warmup` questions of the largest community, and `--queries` new ones for each of
hybrid_search, its full-text leg alone and its vector leg alone, two searches of other
communities before each. The two kinds of start alternate, so the operating system's cache and
the machine's other work fall on both alike.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import numpy as np
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))

from portfolio import DIM
from portfolio_large import HYBRID, Largest, kept_command, largest, portfolio_parser, timed_among_others
from scale_communities import Corpus, pct, server, vector_text

from worker.store.database import Database

LEGS = {"hybrid_search": (True, True), "full-text leg alone": (True, False), "vector leg alone": (False, True)}


def measure(conn, corpus: Corpus, big: Largest, queries: int, warmup: int, batch: int) -> dict[str, list[float]]:  # type: ignore[no-untyped-def]
    """Each leg's times over new questions of the largest community, others' searches between."""
    rng = np.random.default_rng(batch)
    wv, wt = corpus.questions(big.k, warmup, batch=3)
    for j in range(warmup):
        conn.execute(HYBRID, {"q": wt[j], "v": vector_text(wv[j]), "c": big.name, "ef": None}).fetchall()
    asked = {leg: corpus.questions(big.k, queries, batch=batch + i) for i, leg in enumerate(LEGS)}
    times: dict[str, list[float]] = {leg: [] for leg in LEGS}
    for j in range(queries):
        for leg, (text, vector) in LEGS.items():
            qv, qt = asked[leg]
            params = {
                "q": qt[j] if text else "",
                "v": vector_text(qv[j]) if vector else None,
                "c": big.name,
                "ef": None,
            }
            times[leg].append(timed_among_others(conn, big, params, rng)[0])
    return times


def main() -> None:
    parser = portfolio_parser(__doc__, queries=60)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None, help="also write the results here (markdown)")
    args = parser.parse_args()
    corpus = Corpus(0.3)
    big = largest(args, corpus)
    rows = []
    for r in range(args.rounds):
        for warmed in (False, True):
            with (
                server(args.server, args.keep / args.server, args.shared_buffers) as url,
                psycopg.connect(url, autocommit=True) as conn,
            ):
                Database(url, statement_timeout_ms=0).migrate(DIM)  # this checkout's functions
                read, took = [], 0.0
                if warmed:
                    start = time.perf_counter()
                    read = conn.execute("select community, pages from arc_warm_communities()").fetchall()
                    took = time.perf_counter() - start
                times = measure(conn, corpus, big, args.queries, args.warmup, batch=100 + 10 * r + 5 * warmed)
            rows.append((r + 1, warmed, read, took, times))
            print(rows[-1][:4], {k: (pct(v, 50), pct(v, 95)) for k, v in times.items()}, flush=True)
    lines = [
        f"Largest community {big.name}, {big.size:,} chunks ({args.server}, shared_buffers {args.shared_buffers}); "
        f"{args.queries} new questions a row after {args.warmup} warm-up questions, two other communities' "
        "searches before each",
        "",
        "| round | start | warmed (estimated pages) | warming s | hybrid_search p50 / p95 ms | full-text leg alone | "
        "vector leg alone |",
        "|---|---|---|---|---|---|---|",
    ]
    for r, warmed, read, took, times in rows:
        cells = " | ".join(f"{pct(times[leg], 50)} / {pct(times[leg], 95)}" for leg in LEGS)
        what = ", ".join(f"{c} ({p:,})" for c, p in read) if warmed else "-"
        lines.append(f"| {r} | {'warmed' if warmed else 'as started'} | {what} | {took:.2f} | {cells} |")
    lines += ["", "| start | hybrid_search p50, mean of rounds | p95, mean | p95, highest |", "|---|---|---|---|"]
    for warmed in (False, True):
        h = [t["hybrid_search"] for _, w, _, _, t in rows if w == warmed]
        p50 = statistics.mean(pct(t, 50) for t in h)
        p95 = [pct(t, 95) for t in h]
        lines.append(
            f"| {'warmed' if warmed else 'as started'} | {p50:.2f} | {statistics.mean(p95):.2f} | {max(p95):.2f} |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(f"Command: `{kept_command('portfolio_warm.py', args.keep)}`\n\n" + text)


if __name__ == "__main__":
    main()
