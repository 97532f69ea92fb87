"""A large community's HNSW index on a vector table of its own, against a partial index on
knowledge_chunks (094's layout), on a portfolio database kept by benchmarks/portfolio.py.

    .venv/bin/python benchmarks/vector_tables.py --keep DIR --out benchmarks/vector_tables

DIR is portfolio.py's ``--keep`` folder, built with ``--own-indexes`` and the same
``--communities`` / ``--large-min`` / ``--large-max`` / ``--spread`` given here. Measured:

* planning in a fresh session (a new connection's first EXPLAIN) of a small community's exact read
  and of each large community's leg, with the vector tables alone (the checkout), with a
  partial index per large community on knowledge_chunks as well (094's layout, made here), and
  with the vector tables alone again once those are dropped: the planner opens every index of
  knowledge_chunks once a session;
* the largest community's vector leg, the statement on the vector table (the checkout's leg)
  and the statement on the partial index (094's leg), interleaved question by question with
  searches of other communities between, and its recall@40 against the exact 40 nearest; in
  ``--rounds`` rounds, one after another (the partial indexes are just built, in the cache, at
  the first).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))

from portfolio import HYBRID, Sampled, own_leg_sql, sampled, size_of
from scale_communities import DIM, Corpus, community_name, pct, server, vector_text

# 094's leg for a community's partial index: the community a literal, ordered at half precision
PARTIAL_LEG = (
    "select c.id, c.embedding <=> %(v)s::vector as distance from knowledge_chunks c "
    "where c.community = {literal} and c.superseded_by is null "
    "order by c.embedding::halfvec({dim}) <=> %(v)s::vector::halfvec({dim}) limit 40"
)
SETTINGS = {
    "enable_seqscan": "off",
    "enable_sort": "off",
    "hnsw.ef_search": "120",
    "hnsw.iterative_scan": "relaxed_order",
}
EXACT_READ = (
    "select c.id from knowledge_chunks c where c.community = {literal} and c.superseded_by is null "
    "order by (c.embedding <=> %(v)s::vector) + 0 limit 40"
)


def literal(community: str) -> str:
    return "'" + community.replace("'", "''") + "'"


def partial_name(community: str) -> str:
    return f"bench_partial_{community}"


def fresh_planning(url: str, statement: str, vector: str, sessions: int) -> list[float]:
    """Planning time (EXPLAIN's) of ``statement`` in ``sessions`` new connections, ms."""
    times = []
    for _ in range(sessions):
        with psycopg.connect(url, autocommit=True) as conn:
            for k, v in SETTINGS.items():
                conn.execute(f"set {k} = '{v}'")
            plan = conn.execute("explain (summary, format json) " + statement, {"v": vector}).fetchone()[0]
            times.append(plan[0]["Planning Time"])
    return times


def planning_rows(url: str, layout: str, small: Sampled, large: list[tuple[str, str]], sessions: int) -> list[dict]:
    rows = []
    exact = EXACT_READ.format(literal=literal(small.name))
    times = fresh_planning(url, exact, small.vectors[0], sessions)
    rows.append(
        {
            "layout": layout,
            "statement": f"exact read of a small community ({small.size} chunks)",
            "p50_ms": pct(times, 50),
            "p95_ms": pct(times, 95),
            "n": len(times),
        }
    )
    times = [t for name, statement in large for t in fresh_planning(url, statement, small.vectors[0], 3)]
    rows.append(
        {
            "layout": layout,
            "statement": f"each large community's leg ({len(large)}, 3 sessions each)",
            "p50_ms": pct(times, 50),
            "p95_ms": pct(times, 95),
            "n": len(times),
        }
    )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", type=Path, required=True, help="portfolio.py's --keep folder")
    parser.add_argument("--server", choices=("embedded", "pg15"), default="embedded")
    parser.add_argument("--shared-buffers", default="2GB")
    parser.add_argument("--maintenance-work-mem", default="4GB")
    parser.add_argument("--communities", type=int, default=5000)
    parser.add_argument("--large-min", type=int, default=10000)
    parser.add_argument("--large-max", type=int, default=50000)
    parser.add_argument("--spread", type=float, default=0.3)
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--sessions", type=int, default=20, help="fresh sessions per planning row")
    parser.add_argument("--neighbours", type=int, default=2)
    parser.add_argument(
        "--rounds", type=int, default=3, help="times the legs are timed, interleaved, one after another"
    )
    parser.add_argument("--out", type=Path, default=Path("benchmarks/vector_tables"))
    args = parser.parse_args()
    sizes = [size_of(k, args.large_min, args.large_max) for k in range(args.communities)]
    corpus = Corpus(args.spread)
    result: dict = {"command": " ".join(["python", *sys.argv]), "rows": []}
    with server(args.server, args.keep / args.server, args.shared_buffers) as url:
        with psycopg.connect(url, autocommit=True) as conn:
            result["postgres"] = conn.execute("select current_setting('server_version')").fetchone()[0]
            large = [
                c
                for (c,) in conn.execute(
                    "select b.community from bm25_corpus b where to_regclass(quote_ident("
                    "arc_community_vector_index_name(b.community))) is not null order by b.n_docs desc"
                )
            ]
            if not large:
                raise SystemExit(f"{args.keep} has no community with a vector table: build it with --own-indexes")
            samples = {s.label: s for s in sampled(conn, corpus, sizes, args.queries, 0)}
            own = [(c, own_leg_sql(conn, c)) for c in large]
        small = samples["median"]
        result["large_communities"] = len(large)
        result["rows"] += planning_rows(url, "a vector table per large community (checkout)", small, own, args.sessions)

        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"set maintenance_work_mem = '{args.maintenance_work_mem}'")
            start = time.perf_counter()
            for c in large:
                conn.execute(
                    f'create index if not exists "{partial_name(c)}" on knowledge_chunks using hnsw '
                    f"((embedding::halfvec({DIM})) halfvec_cosine_ops) with (m = 16, ef_construction = 64) "
                    f"where community = {literal(c)}"
                )
            result["partial_build_seconds"] = round(time.perf_counter() - start, 1)
            conn.execute("analyze knowledge_chunks")
        partial = [(c, PARTIAL_LEG.format(literal=literal(c), dim=DIM)) for c in large]
        try:
            result["rows"] += planning_rows(
                url, "a partial index per large community on knowledge_chunks (094)", small, partial, args.sessions
            )
            for round_ in range(1, args.rounds + 1):
                result["rows"] += legs(url, samples["largest"], corpus, sizes, args, round_)
        finally:
            with psycopg.connect(url, autocommit=True) as conn:
                for c in large:
                    conn.execute(f'drop index if exists "{partial_name(c)}"')
        result["rows"] += planning_rows(
            url, "a vector table per large community (checkout), again", small, own, args.sessions
        )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(result, indent=2) + "\n")
    # the reading below the tables ("## What it says") is kept when the tables are written again
    _, marker, analysis = (
        (args.out / "results.md").read_text().partition("## What it says")
        if (args.out / "results.md").exists()
        else ("", "", "")
    )
    (args.out / "results.md").write_text(report(result) + ("\n" + marker + analysis if marker else ""))
    print(report(result))


def legs(url: str, s: Sampled, corpus: Corpus, sizes: list[int], args, round_: int) -> list[dict]:
    """The largest community's leg both ways, interleaved, other communities searched between."""
    others = [k for k in range(0, len(sizes), max(len(sizes) // 200, 1)) if community_name(k) != s.name]
    neighbours = []
    for k in others:
        qv, qt = corpus.questions(k, 2, batch=2)
        neighbours += [(community_name(k), qt[j], vector_text(qv[j])) for j in range(2)]
    times: dict[str, list[float]] = {"own": [], "partial": []}
    recalls: dict[str, list[float]] = {"own": [], "partial": []}
    with psycopg.connect(url, autocommit=True) as conn, psycopg.connect(url, autocommit=True) as other:
        for k, v in SETTINGS.items():
            conn.execute(f"set {k} = '{v}'")
        statements = {"own": own_leg_sql(conn, s.name), "partial": PARTIAL_LEG.format(literal=literal(s.name), dim=DIM)}
        for j in range(len(s.vectors)):
            for way in ("own", "partial") if j % 2 == 0 else ("partial", "own"):
                for n in range(args.neighbours):
                    c, q, v = neighbours[(j * args.neighbours + n) % len(neighbours)]
                    other.execute(HYBRID, {"q": q, "v": v, "c": c}).fetchall()
                start = time.perf_counter()
                ids = [r[0] for r in conn.execute(statements[way], {"v": s.vectors[j]}, prepare=False)]
                times[way].append((time.perf_counter() - start) * 1000)
                recalls[way].append(len(set(ids) & s.exact[j]) / len(s.exact[j]))
    names = {"own": "its vector table (checkout)", "partial": "a partial index on knowledge_chunks (094)"}
    return [
        {
            "layout": names[w],
            "statement": f"largest community's vector leg ({s.size} chunks), round {round_}",
            "p50_ms": pct(times[w], 50),
            "p95_ms": pct(times[w], 95),
            "recall_at_40": round(statistics.mean(recalls[w]), 4),
            "n": len(times[w]),
        }
        for w in ("own", "partial")
    ]


def report(result: dict) -> str:
    lines = [
        "# A large community's index on its vector table, against a partial index on knowledge_chunks",
        "",
        f"Command: `{result['command']}`",
        "",
        f"Postgres {result['postgres']}; {result['large_communities']} communities with a vector table; the partial "
        f"indexes of 094's layout built in {result['partial_build_seconds']:.0f} s.",
        "",
        "| layout | statement | p50 ms | p95 ms | recall@40 | n |",
        "|---|---|---|---|---|---|",
    ]
    for r in result["rows"]:
        lines.append(
            f"| {r['layout']} | {r['statement']} | {r['p50_ms']} | {r['p95_ms']} | "
            f"{r.get('recall_at_40', '')} | {r['n']} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
