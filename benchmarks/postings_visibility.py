"""What a portfolio's largest community pays for postings autovacuum has not yet come by, on a
database that benchmarks/portfolio.py kept (`--keep DIR`):

    .venv/bin/python benchmarks/postings_visibility.py --keep DIR --out benchmarks/postings_visibility/results.md

The full-text leg reads bm25_postings by an index-only scan of its impact index; a posting on a
page the visibility map does not yet mark all-visible is checked against the table's heap too.
A load leaves its postings that way until a vacuum. Autovacuum's insert threshold scales with the
table (1,000 + 0.2 x its rows by default): at 92.8M postings, a community loaded today waits for
18.5M more inserts; `sql/097_postings_autovacuum.sql` makes it a fixed number.

The largest community's postings are written again as a load writes them (deleted, the table
vacuumed, inserted back: new rows on pages not yet all-visible), then, in three states, its
questions (each state its own, none asked before, two searches of other communities before each):
hybrid_search as the product runs it and the full-text leg alone (no vector), with the heap
fetches of one long list's read (EXPLAIN). States: *as loaded*; *after autovacuum*, once
pg_stat_user_tables says autovacuum came by (waiting up to `--wait` seconds; with the table's
default settings it does not come, and a VACUUM stands in for it, as `arc-retrieval db maintain`
runs it); and the seconds autovacuum took to come. Then what a vacuum pass costs after 097's
threshold's worth of writes (:func:`pass_costs`). The community's postings are as before at the
end (the same rows).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))

from portfolio import SEED
from portfolio_large import HYBRID, Largest, largest, portfolio_parser
from scale_communities import Corpus, pct, server, vector_text

STATS = (
    "select coalesce(last_autovacuum, 'epoch'), n_ins_since_vacuum from pg_stat_user_tables "
    "where relname = 'bm25_postings'"
)


def reload_postings(conn, name: str) -> float:  # type: ignore[no-untyped-def]
    """Write ``name``'s postings again as a load leaves them; returns the seconds it took."""
    start = time.perf_counter()
    conn.execute("create temporary table reload as select * from bm25_postings where community = %s", (name,))
    conn.execute("delete from bm25_postings where community = %s", (name,))
    conn.execute("vacuum bm25_postings")
    conn.execute("insert into bm25_postings select * from reload")
    conn.execute("drop table reload")
    return time.perf_counter() - start


def heap_fetches(conn, name: str) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    """Rows read and heap fetches of the community's longest list, read as the leg reads one."""
    lexeme = conn.execute(
        "select lexeme from bm25_terms where community = %s order by kept desc limit 1", (name,)
    ).fetchone()[0]
    plan = conn.execute(
        "explain (analyze, format json) select chunk_id, weight from bm25_postings "
        "where community = %s and lexeme = %s order by weight desc limit 5000",
        (name, lexeme),
    ).fetchone()[0]
    scan = plan[0]["Plan"]["Plans"][0]
    rows, fetches = int(scan["Actual Rows"]), int(scan.get("Heap Fetches", 0))
    return rows, fetches


def measure(conn, big: Largest, corpus: Corpus, batch: int, queries: int, rng) -> dict[str, list[float]]:  # type: ignore[no-untyped-def]
    """hybrid_search and the full-text leg alone, each its own questions, interleaved."""
    rows = {
        "hybrid_search": (True, corpus.questions(big.k, queries, batch=batch)),
        "full-text leg alone": (False, corpus.questions(big.k, queries, batch=batch + 1)),
    }
    times: dict[str, list[float]] = {label: [] for label in rows}
    for j in range(queries):
        for label, (vector, (qv, qt)) in rows.items():
            for idx in rng.choice(len(big.neighbours), size=2, replace=False):
                c, q, v = big.neighbours[idx]
                conn.execute(HYBRID, {"q": q, "v": v, "c": c, "ef": None}).fetchall()
            params = {"q": qt[j], "v": vector_text(qv[j]) if vector else None, "c": big.name, "ef": None}
            start = time.perf_counter()
            conn.execute(HYBRID, params).fetchall()
            times[label].append((time.perf_counter() - start) * 1000)
    return times


def wait_for_autovacuum(conn, since, seconds: float) -> float | None:  # type: ignore[no-untyped-def]
    """Seconds from ``since`` (the load's end) to autovacuum's pass over bm25_postings, None if it
    did not come within ``seconds``."""
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        last, _ = conn.execute(STATS).fetchone()
        if last > since:
            return (last - since).total_seconds()
        time.sleep(2)
    return None


def pass_costs(conn, name: str) -> list[tuple[str, float, str]]:  # type: ignore[no-untyped-def]
    """What a vacuum of bm25_postings costs after what 097's threshold lets through: 100,000
    postings inserted (a new community's; copies of ``name``'s under another community), then as
    many again with 20,000 of ``name``'s deleted among them (a list's floor rising drops its lowest
    postings). Autovacuum stays off meanwhile; the rows are as before at the end."""
    conn.execute("alter table bm25_postings set (autovacuum_enabled = false)")
    notices: list[str] = []
    conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
    costs = []

    def timed(label: str) -> None:
        notices.clear()
        start = time.perf_counter()
        conn.execute("vacuum (verbose) bm25_postings")
        took = time.perf_counter() - start
        scans = next((n.split("index scans: ")[1].split()[0] for n in notices if "index scans: " in n), "?")
        costs.append((label, took, scans))

    copy = (
        "insert into bm25_postings select chunk_id, lexeme || %s, weight, 'zz-benchmark' "
        "from bm25_postings where community = %s limit 100000"
    )
    try:
        conn.execute("vacuum bm25_postings")
        conn.execute(copy, ("n", name))
        timed("100,000 postings inserted")
        conn.execute(copy, ("x", name))
        conn.execute(
            "create temporary table gone as select * from bm25_postings where community = %s "
            "order by random() limit 20000",
            (name,),
        )
        conn.execute("delete from bm25_postings p using gone g where p.chunk_id = g.chunk_id and p.lexeme = g.lexeme")
        timed("100,000 inserted, 20,000 deleted")
    finally:
        conn.execute("delete from bm25_postings where community = 'zz-benchmark'")
        if conn.execute("select to_regclass('pg_temp.gone')").fetchone()[0]:
            conn.execute("insert into bm25_postings select * from gone")
            conn.execute("drop table gone")
        conn.execute("alter table bm25_postings reset (autovacuum_enabled)")
        conn.execute("vacuum bm25_postings")
    return costs


def main() -> None:
    parser = portfolio_parser(__doc__, queries=40)
    parser.add_argument("--wait", type=float, default=300, help="seconds to wait for autovacuum")
    parser.add_argument("--out", type=Path, default=None, help="also write the results here (markdown)")
    args = parser.parse_args()
    corpus = Corpus(0.3)
    big = largest(args, corpus)
    rng = np.random.default_rng(SEED)
    with (
        server(args.server, args.keep / args.server, args.shared_buffers) as url,
        psycopg.connect(url, autocommit=True) as conn,
    ):
        version = conn.execute("show server_version").fetchone()[0]
        options = conn.execute("select reloptions from pg_class where relname = 'bm25_postings'").fetchone()[0]
        postings = conn.execute("select count(*) from bm25_postings").fetchone()[0]
        own = conn.execute("select count(*) from bm25_postings where community = %s", (big.name,)).fetchone()[0]
        wv, wt = corpus.questions(big.k, args.warmup, batch=3)
        for j in range(args.warmup):
            conn.execute(HYBRID, {"q": wt[j], "v": vector_text(wv[j]), "c": big.name, "ef": None}).fetchall()
        took = reload_postings(conn, big.name)
        since = conn.execute("select now()").fetchone()[0]
        states = [("as loaded", heap_fetches(conn, big.name), measure(conn, big, corpus, 20, args.queries, rng))]
        came = wait_for_autovacuum(conn, since, args.wait)
        if came is None:
            conn.execute("vacuum bm25_postings")
        label = "after autovacuum" if came is not None else "after a VACUUM (autovacuum did not come)"
        states.append((label, heap_fetches(conn, big.name), measure(conn, big, corpus, 30, args.queries, rng)))
        costs = pass_costs(conn, big.name)
    lines = [
        f"Largest community {big.name}, {big.size:,} chunks, {own:,} of the {postings:,} postings "
        f"(Postgres {version}, shared_buffers {args.shared_buffers}); bm25_postings options: {options or 'defaults'}",
        "",
        f"Its postings written again in {took:.1f} s; autovacuum came by "
        + (f"{came:.0f} s later." if came is not None else f"not within {args.wait:.0f} s."),
        "",
        f"{args.queries} questions a row (each state its own), after {args.warmup} warm-up questions.",
        "",
        "| state | longest list: rows read, heap fetches | hybrid_search p50 / p95 ms "
        "| full-text leg alone p50 / p95 ms |",
        "|---|---|---|---|",
    ]
    for label, (rows, fetches), times in states:
        h, f = times["hybrid_search"], times["full-text leg alone"]
        lines.append(f"| {label} | {rows:,}, {fetches:,} | {pct(h, 50)} / {pct(h, 95)} | {pct(f, 50)} / {pct(f, 95)} |")
    lines += [
        "",
        "What a vacuum pass over bm25_postings costs after what that threshold lets through (VACUUM, "
        "autovacuum's cost limits aside):",
        "",
        "| after | seconds | index scans |",
        "|---|---|---|",
        *[f"| {label} | {took:.2f} | {scans} |" for label, took, scans in costs],
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        command = " ".join("DIR" if a == str(args.keep) else a for a in sys.argv[1:])
        args.out.write_text(f"Command: `python benchmarks/postings_visibility.py {command}`\n\n" + text)


if __name__ == "__main__":
    main()
