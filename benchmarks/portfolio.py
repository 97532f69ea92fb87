"""A management company's portfolio: thousands of communities of long-tailed sizes in one knowledge
base, each searched as the product searches it.

    .venv/bin/python benchmarks/portfolio.py --communities 5000 --keep /work/wt/portfolio-data/embedded
    .venv/bin/python benchmarks/portfolio.py --communities 1000 --server pg15 --keep /work/wt/portfolio-data/pg15

The corpus is benchmarks/scale_communities.py's (synthetic, deterministic, 384-dim vectors drawn in a
32-dim latent space, Zipf text of made-up words) and so is its bulk load (set-based, the rows,
statistics and postings the ingest triggers write; its `--check-load` compares the two paths).
Only the sizes differ: community k has `size_of(k)` chunks, most 50-500, one in 500 of
10,000-50,000 (`--large-min`/`--large-max`), so 5,000 communities hold about 1.2M chunks.

The load leaves the schema as a bulk load does (one global HNSW index, no index of any
community's own). `--own-indexes` then makes what the checkout makes for a knowledge base of
several communities (`select arc_community_vector_indexes()`: an index and a vector-leg function
for each community past `arc_community_index_min_chunks()`, and no global index), once, timed;
the state is kept with `--keep`.

Measured for the smallest, the median and the largest community (and the 90th percentile's):

* the vector leg alone, each way it can be read: the global HNSW index filtered on the community
  (iterative scans, ef_search 120, as hybrid_search runs it without an index of the community's
  own), while the database has one; an exact scan of the community's rows through the btree on
  community (every distance);
  the community's own index, on its vector table (its leg's statement, sorting off), when it has one;
* hybrid_search as the product runs it: `--neighbours` searches of other communities before each
  timed question (warm session, after `--warmup` untimed questions, in a pass before the legs',
  which read the global index and would evict the community's own pages between its questions);
  and in a fresh session (a new connection, its first search);
* vector recall@40 against the exact 40 nearest chunks of the community (numpy, from the
  generated vectors);
* planning: EXPLAIN's planning time of the leg in a fresh session, and the first hybrid_search of
  a fresh session against the next ones;
* a new community's first load through the ingest path (triggers on): its time, the schema
  objects it creates, and what other communities wait meanwhile (a search and a one-row write of
  another community, each probed every 50 ms through the load's commit). The new community is
  removed afterwards (its rows and the objects it made), so the kept database stays as built.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shlex
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scale import reference_ms
from scale_communities import (
    COLUMNS,
    DIM,
    MATCH,
    Corpus,
    build_global_index,
    community_name,
    load_with_triggers,
    pct,
    rows_of,
    seed_avgdl,
    server,
    vector_text,
)

from worker.store import bm25
from worker.store.database import Database
from worker.store.embedded import exit_on_signals

SEED = 61
LEG_WHERE = "c.community = {community} and (c.superseded_by is null)"
LEGS = {
    # hybrid_search's leg without an index of the community's own: the community inside the scan
    "global HNSW, filtered": (
        "select c.id from knowledge_chunks c where (c.community || '') = %(c)s "
        "and c.superseded_by is null order by c.embedding <=> %(v)s::vector limit 40",
        {"hnsw.ef_search": "120", "hnsw.iterative_scan": "relaxed_order"},
    ),
    # `+ 0` keeps the planner off any HNSW index: the btree finds the rows, every distance is computed
    "exact (btree on community)": (
        "select c.id from knowledge_chunks c where c.community = %(c)s "
        "and c.superseded_by is null order by (c.embedding <=> %(v)s::vector) + 0 limit 40",
        {},
    ),
    # the community's own index, on its vector table: the statement of its vector leg function
    "own HNSW": (
        "{own}",
        {"hnsw.ef_search": "120", "hnsw.iterative_scan": "relaxed_order", "enable_sort": "off"},
    ),
}
HYBRID = (
    "select id, vector_rank from hybrid_search(query_text => %(q)s, query_embedding => %(v)s::vector, "
    "match_count => 40, community => %(c)s)"
)
# scale_communities.py's BULK, for a batch of communities at once (%(cs)s): the same rows,
# statistics and postings, each statement grouped by community.
BULK = [
    f"""insert into knowledge_chunks ({COLUMNS}, fts_length, bm25, bm25_generation)
        select s.community, s.document_id, s.document_name, s.document_type, s.section_path, s.chunk_index,
               s.content, s.token_count, s.embedding, bm25_document_length(d.doc),
               bm25_document_vector(d.doc, k.avgdl_indexed, k.k1, k.b), k.generation
          from staged s
          join bm25_corpus k on k.community = s.community
          cross join lateral (select arc_fts_document(s.section_path, s.content) as doc) d
         order by s.ord""",
    """update bm25_corpus k set n_docs = k.n_docs + s.n, total_length = k.total_length + s.len
         from (select community, count(*) as n, coalesce(sum(fts_length), 0) as len from knowledge_chunks
                where community = any (%(cs)s) group by community) s
        where k.community = s.community""",
    """insert into bm25_terms (community, lexeme, df)
       select c.community, t.lexeme, count(*) from knowledge_chunks c, unnest(c.fts) t
        where c.community = any (%(cs)s) group by c.community, t.lexeme order by 1, 2""",
    """insert into bm25_postings (community, chunk_id, lexeme, weight)
       select community, chunk_id, lexeme, weight from (
         select c.community, c.id as chunk_id, t.lexeme, w.weight, k.postings_per_lexeme as keep,
                rank() over (partition by c.community, t.lexeme order by w.weight desc) as place
           from knowledge_chunks c
           join bm25_corpus k on k.community = c.community
          cross join lateral unnest(c.fts) t
          cross join lateral (select coalesce(array_length(t.positions, 1), 1) as tf) f
          cross join lateral (select (f.tf * (k.k1 + 1) / (f.tf + k.k1 * (1 - k.b + k.b * c.fts_length
                                      / greatest(coalesce(k.avgdl_indexed, c.fts_length), 1))))::real as weight) w
          where c.community = any (%(cs)s)
       ) ranked
       where place <= keep""",
    """update bm25_terms s set kept = k.n, floor = case when k.n < s.df then k.lowest end
         from (select community, lexeme, count(*) as n, min(weight) as lowest from bm25_postings
                where community = any (%(cs)s) group by community, lexeme) k
        where s.community = k.community and s.lexeme = k.lexeme""",
    "select knowledge_base_bump(%(cs)s)",
]


def load_batch(url: str, corpus: Corpus, batch: list[tuple[int, int]]) -> None:
    """Communities (k, size) in one transaction, set-based, triggers off (the server's superuser)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("set session_replication_role = replica")
        conn.execute("set work_mem = '256MB'")
        for k, n in batch:
            seed_avgdl(conn, corpus, k, n)
        with conn.transaction():
            conn.execute(
                "create temp table staged (ord integer, community text, document_id text, document_name text, "
                "document_type text, section_path text, chunk_index integer, content text, token_count integer, "
                f"embedding vector({DIM})) on commit drop"
            )
            with conn.cursor().copy(f"copy staged (ord, {COLUMNS}) from stdin") as copy:
                i = 0
                for k, n in batch:
                    for row in rows_of(corpus, k, n):
                        copy.write_row((i, *row))
                        i += 1
            for i, statement in enumerate(BULK):
                if i == 1:
                    conn.execute("set enable_nestloop = off")
                conn.execute(statement, {"cs": [community_name(k) for k, _ in batch]})


def _load_job(job: tuple) -> None:
    url, spread, batch = job
    load_batch(url, Corpus(spread), batch)


OBJECTS = (
    "select (select count(*) from pg_class k join pg_namespace n on n.oid = k.relnamespace "
    "         where n.nspname = 'public'), "
    "       (select count(*) from pg_proc p join pg_namespace n on n.oid = p.pronamespace "
    "         where n.nspname = 'public')"
)


def size_of(k: int, large_min: int, large_max: int) -> int:
    """Community k's chunk count: lognormal around 180 clipped to 50-2,000; one in 500 large."""
    rng = np.random.default_rng([SEED, k])
    if k % 500 == 499:
        return int(rng.integers(large_min, large_max + 1))
    return int(np.clip(rng.lognormal(np.log(180), 0.6), 50, 2000))


@dataclass
class Sampled:
    """A measured community: its questions, their vectors and exact 40 nearest chunk ids."""

    label: str
    k: int
    name: str
    size: int
    texts: list[str] = field(default_factory=list)
    vectors: list[str] = field(default_factory=list)
    exact: list[set[int]] = field(default_factory=list)
    warmup: list[tuple[str, str]] = field(default_factory=list)  # (text, vector) asked untimed first


def sampled(conn, corpus: Corpus, sizes: list[int], queries: int, warmup: int) -> list[Sampled]:
    order = sorted(range(len(sizes)), key=lambda k: (sizes[k], k))
    picks = {
        "smallest": order[0],
        "median": order[len(order) // 2],
        "p90": order[int(len(order) * 0.9)],
        "p99": order[int(len(order) * 0.99)],
        "largest": order[-1],
    }
    out = []
    for label, k in picks.items():
        s = Sampled(label, k, community_name(k), sizes[k])
        ids = np.zeros(s.size, dtype=np.int64)
        for i, doc, chunk in conn.execute(
            "select id, document_id, chunk_index from knowledge_chunks where community = %s", (s.name,)
        ):
            ids[int(doc[4:]) * 20 + chunk] = i
        vectors = corpus.chunks(k, s.size)[0]
        qv, qt = corpus.questions(k, queries)
        nearest = np.argsort(-(qv @ vectors.T), axis=1)[:, :MATCH]
        s.texts, s.vectors = list(qt), [vector_text(v) for v in qv]
        s.exact = [set(ids[nearest[j]].tolist()) for j in range(queries)]
        wv, wt = corpus.questions(k, warmup, batch=3)
        s.warmup = [(wt[j], vector_text(wv[j])) for j in range(warmup)]
        out.append(s)
    return out


def own_index(conn, name: str) -> bool:
    return conn.execute(
        "select to_regclass(quote_ident(arc_community_vector_index_name(%s))) is not null", (name,)
    ).fetchone()[0]


def own_leg_sql(conn, name: str) -> str:
    """Community ``name``'s own leg statement, as the checkout writes it, with the leg's
    parameters: the question's vector ``%(v)s``, any type, superseded left out, 40 rows."""
    own = conn.execute("select arc_community_vector_leg_statement(%s)", (name,)).fetchone()[0]
    for param, value in (
        ("$1", "%(v)s::vector"),
        ("$2", "null::text[]"),
        ("$3", "false"),
        ("$4", "false"),
        ("$5", "40"),
    ):
        own = own.replace(param, value)
    return own


def leg_sql(conn, option: str, name: str) -> str:
    """The option's statement for community ``name``."""
    sql = LEGS[option][0]
    return own_leg_sql(conn, name) if sql == "{own}" else sql


def leg(conn, option: str, s: Sampled, j: int) -> list[int]:
    settings = LEGS[option][1]
    sql = leg_sql(conn, option, s.name)
    conn.execute("reset all")
    conn.execute("set enable_seqscan = off")
    for k, v in settings.items():
        conn.execute(f"set {k} = '{v}'")
    return [r[0] for r in conn.execute(sql, {"c": s.name, "v": s.vectors[j]}, prepare=False)]


def hybrid(conn, c: str, q: str, v: str) -> list[int]:
    return [r[0] for r in conn.execute(HYBRID, {"q": q, "v": v, "c": c}).fetchall() if r[1] is not None]


def summary(times: list[float], recalls: list[float]) -> dict:
    return {
        "p50_ms": pct(times, 50),
        "p95_ms": pct(times, 95),
        "recall_at_40": round(statistics.mean(recalls), 4),
        "min_recall_at_40": round(min(recalls), 3),
        "n": len(times),
    }


def measure(url: str, samples: list[Sampled], neighbours: list[tuple], n_neighbours: int, fresh: int) -> list[dict]:
    """Each measured community's questions, `n_neighbours` searches of other communities before each.

    hybrid_search is timed in a pass of its own, after `Sampled.warmup` questions: the legs'
    baselines read the global HNSW index (gigabytes at a portfolio's size), and timed between
    them a large community's own index was evicted before each of its questions, which the
    product never does (benchmarks/scale/communities/results.md measured the same). The legs
    follow, interleaved question by question."""
    rows = []
    rng = np.random.default_rng(SEED)

    def between(conn) -> None:
        conn.execute("reset all")
        for idx in rng.choice(len(neighbours), size=n_neighbours, replace=False):
            hybrid(conn, *neighbours[idx])

    def row(s: Sampled, option: str, times: list[float], recalls: list[float]) -> dict:
        return {"community": s.label, "name": s.name, "chunks": s.size, "option": option, **summary(times, recalls)}

    with psycopg.connect(url, autocommit=True) as conn:
        for s in samples:
            for text, vector in s.warmup:
                between(conn)
                hybrid(conn, s.name, text, vector)
            times, recalls = [], []
            for j in range(len(s.texts)):
                between(conn)
                start = time.perf_counter()
                ids = hybrid(conn, s.name, s.texts[j], s.vectors[j])
                times.append((time.perf_counter() - start) * 1000)
                recalls.append(len(s.exact[j] & set(ids)) / MATCH)
            rows.append(row(s, "hybrid_search (warm session, neighbours between)", times, recalls))
        has_own = {s.name: own_index(conn, s.name) for s in samples}
        has_global = conn.execute("select to_regclass('knowledge_chunks_embedding_hnsw') is not null").fetchone()[0]
        options = [o for o in LEGS if o != "own HNSW" and (has_global or o != "global HNSW, filtered")]
        options += ["own HNSW"] if all(has_own.values()) else []
        for s in samples:  # warm-up: each option once per question of the first few
            for j in range(min(5, len(s.texts))):
                for o in options:
                    leg(conn, o, s, j)
        for s in samples:
            timings: dict[str, list[float]] = {o: [] for o in options}
            leg_recalls: dict[str, list[float]] = {o: [] for o in options}
            for j in range(len(s.texts)):
                for o in options:
                    between(conn)
                    start = time.perf_counter()
                    ids = leg(conn, o, s, j)
                    timings[o].append((time.perf_counter() - start) * 1000)
                    leg_recalls[o].append(len(s.exact[j] & set(ids)) / MATCH)
            rows += [row(s, o, timings[o], leg_recalls[o]) for o in options]
    # a fresh session: a new connection, its first hybrid_search, then a second one; and the leg's
    # planning time there (EXPLAIN)
    for s in samples:
        first, second, planning = [], [], []
        for j in range(min(fresh, len(s.texts))):
            with psycopg.connect(url, autocommit=True) as conn:
                start = time.perf_counter()
                hybrid(conn, s.name, s.texts[j], s.vectors[j])
                first.append((time.perf_counter() - start) * 1000)
                start = time.perf_counter()
                hybrid(conn, s.name, s.texts[(j + 1) % len(s.texts)], s.vectors[(j + 1) % len(s.texts)])
                second.append((time.perf_counter() - start) * 1000)
            with psycopg.connect(url, autocommit=True) as conn:
                # the leg as hybrid_search reads it: a small community exactly
                option = "own HNSW" if own_index(conn, s.name) else "exact (btree on community)"
                settings = LEGS[option][1]
                sql = leg_sql(conn, option, s.name)
                for k, v in settings.items():
                    conn.execute(f"set {k} = '{v}'")
                plan = conn.execute(
                    "explain (summary, format json) " + sql,
                    {"c": s.name, "v": s.vectors[j]},
                ).fetchone()[0]
                planning.append(plan[0]["Planning Time"])
        rows.append(
            {
                "community": s.label,
                "name": s.name,
                "chunks": s.size,
                "option": "hybrid_search, fresh session: first search",
                "p50_ms": pct(first, 50),
                "p95_ms": pct(first, 95),
                "n": len(first),
            }
        )
        rows.append(
            {
                "community": s.label,
                "name": s.name,
                "chunks": s.size,
                "option": "hybrid_search, fresh session: second search",
                "p50_ms": pct(second, 50),
                "p95_ms": pct(second, 95),
                "n": len(second),
            }
        )
        rows.append(
            {
                "community": s.label,
                "name": s.name,
                "chunks": s.size,
                "option": "vector leg planning in a fresh session (EXPLAIN)",
                "p50_ms": pct(planning, 50),
                "p95_ms": pct(planning, 95),
                "n": len(planning),
            }
        )
    return rows


@dataclass
class Probe:
    """Another community's search and one-row write, timed every 50 ms while a load runs."""

    url: str
    community: str
    vector: str
    search_ms: list[float] = field(default_factory=list)
    write_ms: list[float] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        with psycopg.connect(self.url, autocommit=True) as conn:
            chunk = conn.execute(
                "select min(id) from knowledge_chunks where community = %s", (self.community,)
            ).fetchone()[0]
            while not self.stop.is_set():
                start = time.perf_counter()
                hybrid(conn, self.community, "fence", self.vector)
                self.search_ms.append((time.perf_counter() - start) * 1000)
                start = time.perf_counter()
                conn.execute("update knowledge_chunks set token_count = token_count where id = %s", (chunk,))
                self.write_ms.append((time.perf_counter() - start) * 1000)
                time.sleep(0.05)


def first_load(url: str, corpus: Corpus, k: int, size: int, other: Sampled) -> dict:
    """A new community's first load through the ingest path, timed with another community probed."""
    name = community_name(k)
    with psycopg.connect(url, autocommit=True) as conn:
        before = conn.execute(OBJECTS).fetchone()
    probe = Probe(url, other.name, other.vectors[0])
    thread = threading.Thread(target=probe.run)
    thread.start()
    time.sleep(0.5)
    baseline_search, baseline_write = len(probe.search_ms), len(probe.write_ms)
    start = time.perf_counter()
    load_with_triggers(url, corpus, k, size)
    seconds = time.perf_counter() - start
    time.sleep(0.3)
    probe.stop.set()
    thread.join()
    with psycopg.connect(url, autocommit=True) as conn:
        after = conn.execute(OBJECTS).fetchone()
        # remove it: its rows (the delete triggers keep the BM25 tables right) and what it made
        conn.execute("delete from knowledge_chunks where community = %s", (name,))
        conn.execute(
            conn.execute(
                "select format('drop table if exists %%I', arc_community_vector_table_name(%s))", (name,)
            ).fetchone()[0]
        )
        conn.execute(
            conn.execute(
                "select format('drop function if exists %%I(vector, text[], boolean, boolean, integer)', "
                "arc_community_vector_leg_name(%s))",
                (name,),
            ).fetchone()[0]
        )
    during_search = probe.search_ms[baseline_search:]
    during_write = probe.write_ms[baseline_write:]
    return {
        "community": name,
        "chunks": size,
        "seconds": round(seconds, 2),
        "relations_created": after[0] - before[0],
        "functions_created": after[1] - before[1],
        "other_search_max_ms": round(max(during_search, default=0), 1),
        "other_write_max_ms": round(max(during_write, default=0), 1),
        "other_probes": len(during_search),
    }


def run(args) -> dict:
    folder = args.keep or Path(tempfile.mkdtemp(prefix="arc-portfolio-"))
    sizes = [size_of(k, args.large_min, args.large_max) for k in range(args.communities)]
    state_file = folder / f"state-{args.server}.json"
    state = json.loads(state_file.read_text()) if state_file.exists() else {}
    result: dict = {
        "server": args.server,
        "communities": args.communities,
        "chunks": sum(sizes),
        "sizes": {
            "min": min(sizes),
            "median": int(np.median(sizes)),
            "p90": int(np.percentile(sizes, 90)),
            "max": max(sizes),
            "at_least_10000": sum(s >= 10000 for s in sizes),
        },
        "shared_buffers": args.shared_buffers,
    }
    corpus = Corpus(args.spread)
    with server(args.server, folder / args.server, args.shared_buffers) as url:
        Database(url, statement_timeout_ms=0).migrate(DIM)
        with psycopg.connect(url, autocommit=True) as conn:
            result["postgres"] = conn.execute("select current_setting('server_version')").fetchone()[0]
            result["pgvector"] = conn.execute(
                "select extversion from pg_extension where extname = 'vector'"
            ).fetchone()[0]
            count = conn.execute("select count(*) from knowledge_chunks").fetchone()[0]
            if "load_seconds" not in state:
                if count:
                    raise SystemExit(f"{folder} holds a partial load ({count} chunks): delete it")
                conn.execute("drop index if exists knowledge_chunks_embedding_hnsw")
                start = time.perf_counter()
                batches: list[list[tuple[int, int]]] = [[]]
                for k, n in enumerate(sizes):
                    if sum(b[1] for b in batches[-1]) >= 10000:
                        batches.append([])
                    batches[-1].append((k, n))
                with multiprocessing.get_context("spawn").Pool(args.workers) as pool:
                    jobs = [(url, args.spread, b) for b in batches]
                    for done, _ in enumerate(pool.imap_unordered(_load_job, jobs), 1):
                        print(f"loaded {done}/{len(batches)} batches, {time.perf_counter() - start:.0f} s", flush=True)
                state["load_seconds"] = round(time.perf_counter() - start, 1)
                bm25.vacuum(Database(url, statement_timeout_ms=0))
                state_file.write_text(json.dumps(state))
            if "global_hnsw_build_seconds" not in state:
                # its own step, so a stopped build resumes here (with more maintenance_work_mem);
                # none with --own-indexes: the checkout drops it once every community past the size
                # has its own (arc_community_vector_indexes), so building it would be wasted
                state["global_hnsw_build_seconds"] = (
                    None if args.own_indexes else round(build_global_index(conn, args.maintenance_work_mem), 1)
                )
                conn.execute("analyze")
                state_file.write_text(json.dumps(state))
            if args.own_indexes and "own_indexes_seconds" not in state:
                conn.execute(f"set maintenance_work_mem = '{args.maintenance_work_mem}'")
                start = time.perf_counter()
                conn.execute("select count(*) from arc_community_vector_indexes()")
                state["own_indexes_seconds"] = round(time.perf_counter() - start, 1)
                conn.execute("analyze knowledge_chunks")
                state_file.write_text(json.dumps(state))
            result.update(state)
            result["own_indexes"] = conn.execute(
                "select count(*) from pg_indexes where indexname like 'arc\\_hnsw\\_%%' "
                "or indexname like 'knowledge\\_chunks\\_hnsw\\_%%'"
            ).fetchone()[0]
            result["table_total_mb"] = round(  # knowledge_chunks and the communities' vector tables
                conn.execute(
                    "select pg_total_relation_size('knowledge_chunks') "
                    "       + coalesce(sum(pg_total_relation_size(c.oid)), 0) from pg_class c "
                    "where c.relkind = 'r' and c.relname like 'arc\\_vectors\\_%%'"
                ).fetchone()[0]
                / 2**20
            )
            result["reference_ms"] = reference_ms(conn)
            samples = sampled(conn, corpus, sizes, args.queries, args.warmup)
            if args.own_for_sampled:
                # the measured communities' own indexes alone (the partial index's leg, without
                # the planning cost of an index for every community)
                conn.execute(f"set maintenance_work_mem = '{args.maintenance_work_mem}'")
                for s in samples:
                    conn.execute("select arc_community_vector_index(%s)", (s.name,))
                conn.execute("analyze knowledge_chunks")
        result["sampled"] = {s.label: {"name": s.name, "chunks": s.size} for s in samples}
        measured_k = {s.k for s in samples}
        others = [k for k in range(0, args.communities, max(args.communities // 200, 1)) if k not in measured_k]
        neighbours = []
        for k in others:
            qv, qt = corpus.questions(k, 3, batch=2)
            neighbours += [(community_name(k), qt[j], vector_text(qv[j])) for j in range(3)]
        with psycopg.connect(url, autocommit=True) as conn:
            # what a serving worker does at its start (sql/functions/arc_warm_communities.sql)
            result["warmed"] = [r[0] for r in conn.execute("select community from arc_warm_communities()")]
        load_before = os.getloadavg()[0]
        result["rows"] = measure(url, samples, neighbours, args.neighbours, args.fresh)
        if args.first_load:
            result["first_load"] = first_load(url, corpus, args.communities + 1000, 200, samples[1])
        result["load_average_before_after"] = [round(load_before, 1), round(os.getloadavg()[0], 1)]
        for row in result["rows"]:
            print(json.dumps(row), flush=True)
        print(json.dumps(result.get("first_load")), flush=True)
    return result


def write(result: dict, out: Path, command: str) -> None:
    """results.json (every run, by server, communities and design) and results.md from them."""
    out.mkdir(parents=True, exist_ok=True)
    result = {**result, "command": command}
    key = lambda r: (r["server"], r["communities"], r["own_indexes"] > 0, r.get("design", ""))  # noqa: E731
    earlier = json.loads((out / "results.json").read_text())["runs"] if (out / "results.json").exists() else []
    runs = [r for r in earlier if key(r) != key(result)] + [result]
    (out / "results.json").write_text(json.dumps({"runs": runs}, indent=2) + "\n")
    analysis = ""
    marker = "## What it says"
    if (out / "results.md").exists():
        _, found, rest = (out / "results.md").read_text().partition(marker)
        analysis = found + rest
    lines = ["# A portfolio: one community among thousands of long-tailed sizes", ""]
    for r in runs:
        s = r["sizes"]
        lines += [
            f"## {r['communities']:,} communities, {r['chunks']:,} chunks, {r['own_indexes']:,} communities' own "
            f"indexes ({r.get('design', 'checkout')}; Postgres {r['postgres']}, pgvector {r['pgvector']})",
            "",
            f"Command: `{r['command']}`",
            "",
            f"Sizes: min {s['min']}, median {s['median']}, p90 {s['p90']}, max {s['max']:,}; "
            f"{s['at_least_10000']} of 10,000 or more. Load {r['load_seconds']:.0f} s, "
            + (
                f"global HNSW {r['global_hnsw_build_seconds']:.0f} s"
                if r["global_hnsw_build_seconds"] is not None
                else "no global HNSW"
            )
            + (
                f", every community's own index and leg (arc_community_vector_indexes) {r['own_indexes_seconds']:.0f} s"
                if "own_indexes_seconds" in r
                else ""
            )
            + f". Table {r['table_total_mb']:,} MB. Reference {r['reference_ms']} ms; load average "
            f"{r['load_average_before_after'][0]} before, {r['load_average_before_after'][1]} after (2 shared cores)."
            + (f" Warmed at the start, as a serving worker does: {', '.join(r['warmed'])}." if r.get("warmed") else ""),
            "",
            "| community | chunks | option | p50 ms | p95 ms | recall@40 | lowest recall@40 | n |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for row in r["rows"]:
            lines.append(
                f"| {row['community']} | {row['chunks']:,} | {row['option']} | {row['p50_ms']} | {row['p95_ms']} | "
                f"{row.get('recall_at_40', '')} | {row.get('min_recall_at_40', '')} | {row['n']} |"
            )
        if r.get("first_load"):
            f = r["first_load"]
            lines += [
                "",
                f"A new community's first load ({f['chunks']} chunks, ingest path, triggers on): "
                f"{f['seconds']} s; schema objects created: {f['relations_created']} relations, "
                f"{f['functions_created']} functions; another community probed {f['other_probes']} times "
                f"meanwhile: slowest search {f['other_search_max_ms']} ms, slowest one-row write "
                f"{f['other_write_max_ms']} ms.",
            ]
        lines.append("")
    (out / "results.md").write_text("\n".join(lines) + ("\n" + analysis if analysis else ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--communities", type=int, default=5000)
    parser.add_argument("--large-min", type=int, default=10000)
    parser.add_argument("--large-max", type=int, default=50000)
    parser.add_argument("--queries", type=int, default=40, help="timed questions per measured community")
    parser.add_argument(
        "--warmup", type=int, default=40, help="untimed questions per measured community before its timed ones"
    )
    parser.add_argument("--fresh", type=int, default=10, help="fresh sessions per measured community")
    parser.add_argument(
        "--neighbours", type=int, default=2, help="untimed searches of other communities before each timed question"
    )
    parser.add_argument("--spread", type=float, default=0.3)
    parser.add_argument("--workers", type=int, default=2, help="processes loading communities")
    parser.add_argument("--server", choices=("embedded", "pg15"), default="embedded")
    parser.add_argument("--shared-buffers", default="2GB")
    parser.add_argument(
        "--maintenance-work-mem",
        default="4GB",
        help="for the HNSW builds: 1.3M chunks' graph needs about 2.6 GB, and past memory the build slows fivefold",
    )
    parser.add_argument(
        "--own-indexes",
        action="store_true",
        help="first make what the checkout makes for several communities (arc_community_vector_indexes)",
    )
    parser.add_argument(
        "--own-for-sampled", action="store_true", help="make an index of their own for the measured communities only"
    )
    parser.add_argument(
        "--first-load",
        action="store_true",
        help="also time a new community's first load (with --own-indexes: else the checkout "
        "makes every missing index then)",
    )
    parser.add_argument("--design", default="", help="a label for the run (the schema measured)")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/portfolio"))
    parser.add_argument("--keep", type=Path, default=None, help="keep the database here; a later run re-measures only")
    args = parser.parse_args()
    exit_on_signals()
    command = " ".join(
        ["python benchmarks/portfolio.py"]
        + [
            f"--{k.replace('_', '-')} {shlex.quote(str(v))}"
            for k, v in vars(args).items()
            if v not in (None, "") and not isinstance(v, bool) and k not in ("out", "keep")
        ]
        + [f"--{k.replace('_', '-')}" for k, v in vars(args).items() if v is True]
        + [f"--out {args.out}"]
        + (["--keep DIR"] if args.keep else [])
    )
    result = run(args)
    if args.design:
        result["design"] = args.design
    write(result, args.out, command)


if __name__ == "__main__":
    main()
