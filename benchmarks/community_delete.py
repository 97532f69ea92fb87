"""What deleting a community whole costs in a portfolio, on a database that benchmarks/portfolio.py
kept (`--keep DIR`):

    .venv/bin/python benchmarks/community_delete.py --keep DIR --out benchmarks/community_delete/results.md

For the median, the 99th percentile's and the largest community: `arc_delete_community` as
`arc-retrieval communities delete` runs it (one transaction, the writers' lock, no statement
timeout), timed, with what it removed; meanwhile another community is probed every 50 ms (a
hybrid_search and a one-row write of its own chunks, as benchmarks/portfolio.py probes a first
load), and the longest either waited is reported. Each delete is rolled back, so the kept
database stays as built (`--commit` keeps the deletes).
"""

from __future__ import annotations

import statistics
import sys
import threading
import time
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))

from portfolio import Probe, size_of
from portfolio_large import kept_command, kept_portfolio_parser
from scale_communities import Corpus, community_name, server, vector_text

ROOT = Path(__file__).resolve().parent.parent


def delete(url: str, name: str, commit: bool) -> tuple[float, dict[str, int]]:
    """Delete ``name`` as the product does; its seconds and what it removed."""
    with psycopg.connect(url) as conn:
        start = time.perf_counter()
        conn.execute("select pg_advisory_xact_lock(hashtext('arc-retrieval:writes'))")  # the writers' lock
        conn.execute("set local statement_timeout = 0")
        removed = dict(conn.execute("select kind, removed from arc_delete_community(%s)", (name,)).fetchall())
        if commit:
            conn.commit()
        seconds = time.perf_counter() - start
        if not commit:
            conn.rollback()
    return seconds, removed


def measured(url: str, name: str, other: str, vector: str, commit: bool) -> dict:
    probe = Probe(url, other, vector)
    thread = threading.Thread(target=probe.run)
    thread.start()
    time.sleep(0.5)
    before_search, before_write = len(probe.search_ms), len(probe.write_ms)
    baseline = statistics.median(probe.search_ms) if probe.search_ms else 0.0
    seconds, removed = delete(url, name, commit)
    time.sleep(0.3)
    probe.stop.set()
    thread.join()
    during_search, during_write = probe.search_ms[before_search:], probe.write_ms[before_write:]
    return {
        "community": name,
        "seconds": round(seconds, 2),
        "removed": removed,
        "search_ms_before": round(baseline, 1),
        "search_max_ms": round(max(during_search, default=0.0), 1),
        "write_max_ms": round(max(during_write, default=0.0), 1),
        "probes": len(during_search),
    }


def main() -> None:
    parser = kept_portfolio_parser(__doc__)
    parser.add_argument("--commit", action="store_true", help="keep the deletes (the kept database loses them)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    sizes = [size_of(k, args.large_min, args.large_max) for k in range(args.communities)]
    order = sorted(range(args.communities), key=lambda k: (sizes[k], k))
    picks = {"median": order[len(order) // 2], "p99": order[int(len(order) * 0.99)], "largest": order[-1]}
    other = order[len(order) // 3]
    corpus = Corpus(0.3)  # the spread benchmarks/portfolio.py builds with
    vectors, _ = corpus.questions(other, 1, batch=1)
    rows = []
    with server(args.server, args.keep / args.server, args.shared_buffers) as url:
        with psycopg.connect(url, autocommit=True) as conn:
            version = conn.execute("select current_setting('server_version')").fetchone()[0]
        for label, k in picks.items():
            row = measured(url, community_name(k), community_name(other), vector_text(vectors[0]), args.commit)
            rows.append({"which": label, "chunks": sizes[k], **row})
            print(rows[-1], flush=True)

    command = kept_command("community_delete.py", args.keep)
    lines = [
        "# Deleting a community whole, in a portfolio",
        "",
        f"Command: `{command}`",
        "",
        f"{args.communities:,} communities (benchmarks/portfolio.py's database), Postgres {version}. Each delete "
        f"{'committed' if args.commit else 'rolled back afterwards'}; another community ({community_name(other)}, "
        f"{sizes[other]} chunks) probed every 50 ms meanwhile.",
        "",
        "| community | chunks | seconds | removed | other's search: before, longest during (ms) "
        "| other's one-row write, longest (ms) | probes |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        removed = ", ".join(f"{n} {kind}" for kind, n in r["removed"].items() if n)
        lines.append(
            f"| {r['which']} ({r['community']}) | {r['chunks']:,} | {r['seconds']} | {removed} | "
            f"{r['search_ms_before']}, {r['search_max_ms']} | {r['write_max_ms']} | {r['probes']} |"
        )
    text = "\n".join(lines) + "\n"
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
