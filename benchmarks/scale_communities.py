"""Many communities in one knowledge base: one community's search when it is a small share of a
large HNSW index (pgvector's known weak spot), and the ways around it.

    .venv/bin/python benchmarks/scale_communities.py --communities 100 --per-community 10000 \
        --partitions --check-load --out benchmarks/scale/communities --keep /tmp/arc-scale-communities

(about 75 minutes of load and index builds on 2 cores, 25 GB of disk; a later run with the same
--keep measures only.)

The corpus is synthetic and made here, deterministically (nothing is read or downloaded):

* vectors: 384 dims (the local model's), drawn in a 32-dim latent space and projected, so that
  nearest neighbours mean something (real sentence embeddings have a low intrinsic dimension).
  300 topics are shared by every community; each community writes about half of them, with
  weights of its own, and is shifted a little (sister associations write about the same fences
  and pools in nearly the same words). A filtered HNSW scan therefore meets mostly other
  communities' chunks: the share of a question's 400 nearest chunks that are its community's is
  measured and reported.
* text: about 100 words a chunk from a Zipf distribution over 20,000 made-up words, a quarter of
  them from the chunk's topic's own 40 words. Questions are 3-10 words, half of them their
  topic's, the rest from the same Zipf distribution without its 100 most frequent words: those
  play the stopwords, which Postgres drops from a real question (`to_tsvector('english')`) and
  which these made-up words are not (the chunks keep them: longer lists no question reads).

The load bypasses the per-row ingest triggers (at about 300 chunks/s they would take an hour for
1M) and writes the very rows, statistics and postings they write, set-based: `--check-load`
loads a small corpus both ways and compares every BM25 table (it must say "identical").

Measured, for a few communities each (`--sample`), `--queries` questions per community. Every
option answers every question once, the options interleaved question by question (a shared
machine's load then falls on all alike), after a warm-up with other questions:

* the vector leg alone (its own SQL statement, as hybrid_search runs it), for each option:
  - global-*: the one global HNSW index, the community filtered during the scan (031), with
    pgvector 0.8's iterative scans off / relaxed_order / strict_order and several ef_search and
    hnsw.max_scan_tuples;
  - exact: the community's chunks through its btree, every distance computed and sorted;
  - partial: an HNSW index per community, as the checkout makes it (on the community's vector
    table, sql/096; the runs in results.md read a partial index `where community = '...'` on
    knowledge_chunks), the leg's statement planned on every call, with sorting off;
  - partition: a copy of (id, community, embedding) list-partitioned by community, an HNSW
    index per partition, the community a parameter (run-time pruning);
* the whole hybrid_search (both legs and the fusion): the checkout's (which reads the
  communities' own indexes the run made), and each of its legs alone; and 031's as of BASELINE (the global index,
  relaxed_order) with its strict_order variant (from git);
* vector recall@40 against the exact 40 nearest chunks of that community (computed in numpy
  from the generated vectors).

The checkout's own rows (its hybrid_search, its legs alone, the partial index's statement) are
timed in a first pass, among themselves; the baselines (the global index's options and the older
functions, with the checkout's function once more for comparison) in a second. Before every timed
question, `--neighbours` searches of other communities run untimed, as in a knowledge base whose
every community is asked: the measured community shares the caches with its neighbours' reads.

`--server pg15` runs the same on Debian's PostgreSQL 15 + pgvector 0.8.0 (Supabase's versions;
scripts/install-postgres15.sh) instead of the embedded Postgres 18.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import re
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import numpy as np
import psycopg

from worker.store import bm25
from worker.store.database import Database
from worker.store.embedded import EmbeddedPostgres, exit_on_signals

from scale import reference_ms  # the same yardstick as benchmarks/scale/ (this folder is on sys.path)

DIM = 384
LATENT = 32
TOPICS = 300
VOCABULARY = 20000
STOPWORDS = 100  # the most frequent made-up words, never in a question
SEED = 2024
MATCH = 40
DOC_TYPES = ["design_guidelines", "ccr", "response_letter", "application_form", "other"]
TYPE_WEIGHTS = [0.35, 0.15, 0.3, 0.05, 0.15]
ROOT = Path(__file__).resolve().parent.parent
ANALYSIS = "## What it says"
PG15_BIN = Path("/usr/lib/postgresql/15/bin")
# The same fixed statement as benchmarks/scale.py: says what kind of machine a run had.
# ---- the corpus ---------------------------------------------------------------------------------

class Corpus:
    """Community k's chunks and questions, the same on every call and every machine."""

    def __init__(self, spread: float = 0.3, sigma: float = 1.0, noise: float = 0.02):
        root = np.random.default_rng(SEED)
        self.projection = root.normal(size=(DIM, LATENT)) / np.sqrt(DIM)
        self.centers = root.normal(size=(TOPICS, LATENT))
        self.spread, self.sigma, self.noise = spread, sigma, noise
        syllables = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]
        words: dict[str, None] = {}
        while len(words) < VOCABULARY:
            words["".join(root.choice(syllables, size=int(root.integers(2, 4))))] = None
        self.words = np.array(list(words))
        ranks = np.arange(1, VOCABULARY + 1) ** -1.07
        self.zipf = ranks / ranks.sum()
        self.content = ranks[STOPWORDS:] / ranks[STOPWORDS:].sum()
        self.topic_words = root.integers(200, VOCABULARY, size=(TOPICS, 40))

    def _profile(self, k: int):
        rng = np.random.default_rng([SEED, k])
        offset = rng.normal(scale=self.spread, size=LATENT)
        topics = rng.choice(TOPICS, size=TOPICS // 2, replace=False)
        weights = rng.dirichlet(np.full(len(topics), 0.5))
        return offset, topics, weights

    def _draw(self, rng, k: int, n: int, words_mean: int, words_sd: int, question: bool = False):
        offset, topics, weights = self._profile(k)
        topic = topics[rng.choice(len(topics), size=n, p=weights)]
        latent = self.centers[topic] + offset + rng.normal(scale=self.sigma, size=(n, LATENT))
        vectors = latent @ self.projection.T + rng.normal(scale=self.noise, size=(n, DIM))
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        lengths = np.clip(rng.normal(words_mean, words_sd, size=n).astype(int), max(words_mean // 3, 3), 3 * words_mean)
        if question:  # content words: no stopwords (the 100 most frequent), half of them the topic's
            drawn = STOPWORDS + rng.choice(VOCABULARY - STOPWORDS, size=int(lengths.sum()), p=self.content)
            own = rng.random(len(drawn)) < 0.5
        else:
            drawn = rng.choice(VOCABULARY, size=int(lengths.sum()), p=self.zipf)
            own = rng.random(len(drawn)) < 0.25
        owner = np.repeat(topic, lengths)
        drawn[own] = self.topic_words[owner[own], rng.integers(0, 40, size=int(own.sum()))]
        texts = [" ".join(part) for part in np.split(self.words[drawn], np.cumsum(lengths)[:-1])]
        return vectors.astype(np.float32), texts

    def chunks(self, k: int, n: int):
        """(vectors, texts, document types) of community k's n chunks."""
        rng = np.random.default_rng([SEED, k, 0])
        vectors, texts = self._draw(rng, k, n, 100, 30)
        types = rng.choice(len(DOC_TYPES), size=n, p=TYPE_WEIGHTS)
        return vectors, texts, [DOC_TYPES[t] for t in types]

    def questions(self, k: int, n: int, batch: int = 1):
        """(vectors, texts) of n questions asked of community k (batch 0: warm-up questions)."""
        return self._draw(np.random.default_rng([SEED, k, 1, batch]), k, n, 6, 2, question=True)


def community_name(k: int) -> str:
    return f"c{k:03d}"


def vector_text(v: np.ndarray) -> str:
    # the worker's literal (_vector_literal: 7 significant digits), formatted in one operation
    return "[" + ",".join(["%.7g"] * len(v)) % tuple(v.tolist()) + "]"


# ---- servers ------------------------------------------------------------------------------------

@contextmanager
def server(kind: str, folder: Path, shared_buffers: str) -> Iterator[str]:
    """A running server holding the data in `folder` (kept between runs with --keep)."""
    folder.mkdir(parents=True, exist_ok=True)
    settings = {"shared_buffers": shared_buffers, "max_parallel_maintenance_workers": "1",
                "max_wal_size": "4GB", "checkpoint_timeout": "30min"}
    if kind == "embedded":
        pg = EmbeddedPostgres(folder)
        url = pg.start()
        with psycopg.connect(url, autocommit=True) as conn:
            changed = [k for k, v in settings.items() if conn.execute(f"show {k}").fetchone()[0] != v]
            for k in changed:
                conn.execute(f"alter system set {k} = '{settings[k]}'")
        if changed:
            pg.stop()
            url = pg.start()
        try:
            yield url
        finally:
            pg.stop()
        return
    if not (PG15_BIN / "postgres").exists():
        raise SystemExit("PostgreSQL 15 is not installed (scripts/install-postgres15.sh)")
    data, sock = folder / "data15", folder / "sock15"
    sock.mkdir(exist_ok=True)
    run_as = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    if os.geteuid() == 0:
        for path in (folder, sock):
            shutil.chown(path, "postgres")
    if not data.exists():
        subprocess.run([*run_as, str(PG15_BIN / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres",
                        "--no-sync"], check=True, capture_output=True)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    options = f"-p {port} -k {sock} -c listen_addresses=127.0.0.1 -c fsync=off " + " ".join(
        f"-c {k}={v}" for k, v in settings.items())
    subprocess.run([*run_as, str(PG15_BIN / "pg_ctl"), "-D", str(data), "-l", str(folder / "log15"), "-w",
                    "-o", options, "start"], check=True, capture_output=True)
    try:
        yield f"postgresql://postgres:@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run([*run_as, str(PG15_BIN / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"],
                       capture_output=True)


# ---- the load -----------------------------------------------------------------------------------

COLUMNS = "community, document_id, document_name, document_type, section_path, chunk_index, content, token_count, embedding"


def rows_of(corpus: Corpus, k: int, n: int):
    vectors, texts, types = corpus.chunks(k, n)
    name = community_name(k)
    for i in range(n):
        # chunk i of community k is chunk i % 20 of document i // 20 (position_of reads it back)
        yield (name, f"doc-{i // 20}", f"Document {i // 20}", types[i], f"Section {i % 20}", i % 20,
               texts[i], len(texts[i].split()), vector_text(vectors[i]))


def seed_avgdl(conn, corpus: Corpus, k: int, n: int) -> None:
    # as ingestion does before a community's first load: avgdl from the documents about to load
    texts = corpus.chunks(k, n)[1][:500]
    conn.execute("select bm25_seed_avgdl(%s::text[], %s::text[], %s)", ([f"Section {i % 20}" for i in range(len(texts))],
                                                                        texts, community_name(k)))


def load_with_triggers(url: str, corpus: Corpus, k: int, n: int) -> None:
    """The ingest path's SQL: a COPY into knowledge_chunks, every trigger firing."""
    with psycopg.connect(url, autocommit=True) as conn:
        seed_avgdl(conn, corpus, k, n)
        with conn.transaction(), conn.cursor().copy(f"copy knowledge_chunks ({COLUMNS}) from stdin") as copy:
            for row in rows_of(corpus, k, n):
                copy.write_row(row)


# What the triggers (030's bm25_chunk_weights, bm25_community_stats_on_insert, bm25_postings_add,
# knowledge_base_touch_communities) leave behind, computed for one community at once. The
# postings are bm25_postings_rebuild()'s statement for one community, with bm25_term_weight's
# arithmetic inline (a SQL function with SET is never inlined: 70M calls at 1M chunks).
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
         from (select count(*) as n, coalesce(sum(fts_length), 0) as len from knowledge_chunks
                where community = %(c)s) s
        where k.community = %(c)s""",
    """insert into bm25_terms (community, lexeme, df)
       select %(c)s, t.lexeme, count(*) from knowledge_chunks c, unnest(c.fts) t
        where c.community = %(c)s group by t.lexeme order by t.lexeme""",
    """insert into bm25_postings (community, chunk_id, lexeme, weight)
       select community, chunk_id, lexeme, weight from (
         select c.community, c.id as chunk_id, t.lexeme, w.weight, k.postings_per_lexeme as keep,
                rank() over (partition by t.lexeme order by w.weight desc) as place
           from knowledge_chunks c
           join bm25_corpus k on k.community = c.community
          cross join lateral unnest(c.fts) t
          cross join lateral (select coalesce(array_length(t.positions, 1), 1) as tf) f
          cross join lateral (select (f.tf * (k.k1 + 1) / (f.tf + k.k1 * (1 - k.b + k.b * c.fts_length
                                      / greatest(coalesce(k.avgdl_indexed, c.fts_length), 1))))::real as weight) w
          where c.community = %(c)s
       ) ranked
       where place <= keep""",
    """update bm25_terms s set kept = k.n, floor = case when k.n < s.df then k.lowest end
         from (select lexeme, count(*) as n, min(weight) as lowest from bm25_postings
                where community = %(c)s group by lexeme) k
        where s.community = %(c)s and s.lexeme = k.lexeme""",
    "select knowledge_base_bump(array[%(c)s])",
]


def load_bulk(url: str, corpus: Corpus, k: int, n: int) -> None:
    """One community, set-based, triggers off (session_replication_role: the server's superuser)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("set session_replication_role = replica")
        conn.execute("set work_mem = '256MB'")
        seed_avgdl(conn, corpus, k, n)
        with conn.transaction():
            conn.execute("create temp table staged (ord integer, community text, document_id text, document_name text, "
                         "document_type text, section_path text, chunk_index integer, content text, token_count integer, "
                         f"embedding vector({DIM})) on commit drop")
            with conn.cursor().copy(f"copy staged (ord, {COLUMNS}) from stdin") as copy:
                for i, row in enumerate(rows_of(corpus, k, n)):
                    copy.write_row((i, *row))
            for i, statement in enumerate(BULK):
                # after the chunks (their BM25 functions' own plans on Postgres 15 take 350 ms a row
                # with nested loops off): fresh tables without statistics would get nested loops over
                # sequential scans (minutes for one community's words)
                if i == 1:
                    conn.execute("set enable_nestloop = off")
                conn.execute(statement, {"c": community_name(k)})


def _load_one(job: tuple) -> float:
    url, k, n, spread, bulk = job
    start = time.perf_counter()
    (load_bulk if bulk else load_with_triggers)(url, Corpus(spread), k, n)
    return time.perf_counter() - start


def load(url: str, communities: int, per: int, spread: float, workers: int, bulk: bool = True) -> float:
    start = time.perf_counter()
    jobs = [(url, k, per, spread, bulk) for k in range(communities)]
    if workers > 1:
        with multiprocessing.get_context("spawn").Pool(workers) as pool:
            for done, _ in enumerate(pool.imap_unordered(_load_one, jobs), 1):
                if done % 10 == 0:
                    print(f"loaded {done}/{communities} communities, {time.perf_counter() - start:.0f} s", flush=True)
    else:
        for job in jobs:
            _load_one(job)
    return time.perf_counter() - start


CHECKED = {
    "knowledge_chunks": "select community, document_id, chunk_index, fts_length, bm25::text, bm25_generation, "
                        "embedding::text from knowledge_chunks order by 1, 2, 3",
    "bm25_corpus": "select community, n_docs, total_length, avgdl_indexed, generation from bm25_corpus order by 1",
    "bm25_terms": "select community, lexeme, df, kept, floor from bm25_terms order by 1, 2",
    "bm25_postings": "select p.community, c.document_id, c.chunk_index, p.lexeme, p.weight from bm25_postings p "
                     "join knowledge_chunks c on c.id = p.chunk_id order by 1, 2, 3, 4",
    "knowledge_base_state": "select community, version > 0 from knowledge_base_state order by 1",
}


def check_load(kind: str, folder: Path, communities: int = 3, per: int = 1500) -> dict:
    """Load a small corpus through the triggers and through BULK; every BM25 table must match."""
    seen = {}
    with server(kind, folder / "check", "128MB") as url:
        with psycopg.connect(url, autocommit=True) as conn:
            for name in ("by_triggers", "bulk"):
                conn.execute(f"drop database if exists {name}")
                conn.execute(f"create database {name}")
        for name in ("by_triggers", "bulk"):
            db_url = re.sub(r"/postgres(\?|$)", rf"/{name}\1", url)
            Database(db_url, statement_timeout_ms=0).migrate(DIM)
            load(db_url, communities, per, 0.3, 1, bulk=name == "bulk")
            with psycopg.connect(db_url) as conn:
                seen[name] = {table: conn.execute(sql).fetchall() for table, sql in CHECKED.items()}
    differences = {t: sum(a != b for a, b in zip(seen["by_triggers"][t], seen["bulk"][t]))
                      + abs(len(seen["by_triggers"][t]) - len(seen["bulk"][t])) for t in CHECKED}
    result = {"communities": communities, "chunks_per_community": per,
              "rows": {t: len(seen["bulk"][t]) for t in CHECKED}, "differing_rows": differences,
              "verdict": "identical" if not any(differences.values()) else "DIFFERENT"}
    print(json.dumps(result), flush=True)
    return result


# ---- indexes ------------------------------------------------------------------------------------

def build_global_index(conn, maintenance_work_mem: str) -> float:
    conn.execute(f"set maintenance_work_mem = '{maintenance_work_mem}'")
    start = time.perf_counter()
    conn.execute("create index if not exists knowledge_chunks_embedding_hnsw on knowledge_chunks "
                 "using hnsw (embedding vector_cosine_ops) with (m = 16, ef_construction = 64)")
    return time.perf_counter() - start


def partial_index_name(community: str) -> str:
    """A community's own HNSW index (arc_community_vector_index_name, for the short names here)."""
    return f"arc_hnsw_{community}"


def build_partial_indexes(conn, communities: list[str], maintenance_work_mem: str) -> float:
    """One HNSW index per community, as the product makes it (arc_community_vector_index: on the
    community's vector table)."""
    conn.execute(f"set maintenance_work_mem = '{maintenance_work_mem}'")
    start = time.perf_counter()
    for c in communities:
        conn.execute("select arc_community_vector_index(%s)", (c,))
    conn.execute("analyze knowledge_chunks")
    return time.perf_counter() - start


def drop_partial_indexes(conn, communities: list[str]) -> None:
    for c in communities:
        conn.execute(f"drop table if exists arc_vectors_{c}")


def build_partitions(conn, communities: list[str], maintenance_work_mem: str) -> float:
    """(id, community, embedding) list-partitioned by community, one HNSW index per partition."""
    if conn.execute("select to_regclass('bench_parts')").fetchone()[0]:
        return 0.0
    conn.execute(f"set maintenance_work_mem = '{maintenance_work_mem}'")
    start = time.perf_counter()
    conn.execute(f"create table bench_parts (id bigint not null, community text not null, embedding vector({DIM})) "
                 "partition by list (community)")
    for c in communities:
        conn.execute(f"create table bench_parts_{c} partition of bench_parts for values in ('{c}')")
        conn.execute(f"insert into bench_parts_{c} select id, community, embedding from knowledge_chunks "
                     f"where community = '{c}' order by id")
        conn.execute(f"create index on bench_parts_{c} using hnsw (embedding vector_cosine_ops) "
                     "with (m = 16, ef_construction = 64)")
    conn.execute("vacuum analyze bench_parts")
    return time.perf_counter() - start


# ---- what is measured ---------------------------------------------------------------------------

# The vector leg as 031's hybrid_search runs it (the same where clause, its parameters at their
# defaults), alone. %(c)s is the community, %(v)s the question's vector.
LEG_WHERE = """(%(types)s::text[] is null or (c.document_type || '') = any (%(types)s::text[]))
        and {community}
        and (not %(binding)s or c.is_binding)
        and (%(superseded)s or c.superseded_by is null)"""
LEGS = {
    "global": "select c.id from knowledge_chunks c where " + LEG_WHERE.format(community="(c.community || '') = %(c)s")
              + " order by c.embedding <=> %(v)s::vector limit 40",
    # every distance computed: `+ 0` keeps the planner off the HNSW index, the btree finds the rows
    "exact": "select c.id from knowledge_chunks c where " + LEG_WHERE.format(community="c.community = %(c)s")
             + " order by (c.embedding <=> %(v)s::vector) + 0 limit 40",
    "partition": "select c.id from bench_parts c where c.community = %(c)s order by c.embedding <=> %(v)s::vector limit 40",
}
LEG_DEFAULTS = {"types": None, "binding": False, "superseded": False}

# name -> (statement, session settings); hybrid_search's own: ef_search 3 x 40 = 120, relaxed order
VECTOR_OPTIONS = {
    "global, iterative off": ("global", {"hnsw.ef_search": "120", "hnsw.iterative_scan": "off"}),
    "global, relaxed_order (031)": ("global", {"hnsw.ef_search": "120", "hnsw.iterative_scan": "relaxed_order"}),
    "global, strict_order": ("global", {"hnsw.ef_search": "120", "hnsw.iterative_scan": "strict_order"}),
    "global, relaxed_order, ef_search 400": ("global", {"hnsw.ef_search": "400", "hnsw.iterative_scan": "relaxed_order"}),
    "global, relaxed_order, max_scan_tuples 100000": (
        "global", {"hnsw.ef_search": "120", "hnsw.iterative_scan": "relaxed_order", "hnsw.max_scan_tuples": "100000"}),
    "global, relaxed_order, ef_search 400, max_scan_tuples 100000": (
        "global", {"hnsw.ef_search": "400", "hnsw.iterative_scan": "relaxed_order", "hnsw.max_scan_tuples": "100000"}),
    "exact (btree, every distance)": ("exact", {}),
    # planned with the literal (an EXECUTE's one-shot plan), sorting disabled: with a filter the
    # planner would rather sort the community's rows it finds through the btree (every distance)
    "partial index per community": ("partial", {"hnsw.ef_search": "120", "hnsw.iterative_scan": "relaxed_order",
                                                "plan_cache_mode": "force_custom_plan", "enable_sort": "off"}),
    "partition per community": ("partition", {"hnsw.ef_search": "120", "hnsw.iterative_scan": "relaxed_order"}),
}
COMMON = {"enable_seqscan": "off", "plan_cache_mode": "force_generic_plan"}  # as hybrid_search sets them

HYBRID = ("select id, vector_rank from {function}(query_text => %(q)s, query_embedding => %(v)s::vector, "
          "match_count => 40, community => %(c)s)")


# hybrid_search before the communities' own indexes (033), to time the global index through the
# whole function beside the checkout's own hybrid_search
BASELINE = "f955eee"
# hybrid_search with the communities' own indexes, before its fixed work was trimmed (its
# bm25_query_terms planned on every call), to time the trim beside the checkout's
UNTRIMMED = "fb7d26c"


def _install(conn, commit: str, name: str, order: str | None = None) -> None:
    """031's hybrid_search and bm25_query_terms as of `commit`, as `name` and `name`_terms."""
    text = subprocess.run(["git", "-C", str(ROOT), "show", f"{commit}:sql/031_hybrid_search_communities.sql"],
                          check=True, capture_output=True, text=True).stdout
    terms = text[text.index("create or replace function bm25_query_terms("):text.index("create or replace function chunk_neighbours(")]
    conn.execute(terms.replace("bm25_query_terms", f"{name}_terms"))
    body = text[text.index("create or replace function hybrid_search("):text.index("select arc_service_role_only")]
    body = (body.replace("function hybrid_search(", f"function {name}(", 1)
            .replace("hybrid_search.community", f"{name}.community")
            .replace("bm25_query_terms(", f"{name}_terms("))
    if order:
        body = body.replace("'relaxed_order'", f"'{order}'")
    conn.execute(body)


def function_variants(conn) -> dict[str, str]:
    """hybrid_search as of BASELINE (031: the global index, relaxed_order) and its strict_order
    variant, as of UNTRIMMED, under names of their own, and the checkout's hybrid_search."""
    made = {"this checkout's hybrid_search": "hybrid_search"}
    for label, name, commit, order in (
            (f"031 as of {BASELINE} (global index, relaxed_order)", "bench_hybrid_031", BASELINE, None),
            (f"031 as of {BASELINE}, strict_order", "bench_hybrid_031_strict", BASELINE, "strict_order"),
            (f"031 as of {UNTRIMMED} (own indexes, before the fixed work was trimmed)", "bench_hybrid_untrimmed",
             UNTRIMMED, None)):
        try:
            _install(conn, commit, name, order)
        except (OSError, subprocess.CalledProcessError):
            print(f"no git history holding {commit}: {label} is not timed", flush=True)
            continue
        made[label] = name
    return made


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))], 2)


class Questions:
    """The sampled communities' questions, their exact 40 nearest chunks and the chunk ids."""

    def __init__(self, conn, corpus: Corpus, sample: list[int], per: int, n: int, warmup: int):
        self.items = []  # (community, text, vector literal, exact ids)
        self.warmup = []
        for k in sample:
            name = community_name(k)
            ids = np.zeros(per, dtype=np.int64)
            for i, doc, chunk in conn.execute("select id, document_id, chunk_index from knowledge_chunks "
                                              "where community = %s", (name,)):
                ids[int(doc[4:]) * 20 + chunk] = i
            vectors = corpus.chunks(k, per)[0]
            qv, qt = corpus.questions(k, n)
            nearest = np.argsort(-(qv @ vectors.T), axis=1)[:, :MATCH]
            self.items += [(name, qt[j], vector_text(qv[j]), set(ids[nearest[j]].tolist())) for j in range(n)]
            wv, wt = corpus.questions(k, warmup, batch=0)
            self.warmup += [(name, wt[j], vector_text(wv[j])) for j in range(warmup)]


def _settings(conn, settings: dict[str, str]) -> None:
    conn.execute("reset all")
    for k, v in {**COMMON, **settings}.items():
        conn.execute(f"set {k} = '{v}'")


def leg_statement(conn, community: str) -> str:
    """arc_community_vector_leg_statement for ``community``, its parameters filled in (any type,
    every document, 40 rows) but the question's vector, ``%(v)s``."""
    statement = conn.execute("select arc_community_vector_leg_statement(%s)", (community,)).fetchone()[0]
    for n, value in (("$1", "%(v)s::vector"), ("$2", "null::text[]"), ("$3", "false"), ("$4", "false"), ("$5", "40")):
        statement = statement.replace(n, value)
    return statement


def leg_runner(option: str):
    """(prepare, run) for a vector-leg option: run returns the ids found, with a vector rank."""
    leg, settings = VECTOR_OPTIONS[option]

    def prepare(conn) -> None:
        _settings(conn, settings)

    statements: dict[str, str] = {}

    def run(conn, c: str, q: str, v: str) -> list[int]:
        if leg == "partial":
            # the product's statement for the community's index (ordered as the index is: half
            # precision or as stored), planned on every call, as an EXECUTE in a function is
            if c not in statements:
                statements[c] = leg_statement(conn, c)
            return [r[0] for r in conn.execute(statements[c], {"v": v}, prepare=False)]
        return [r[0] for r in conn.execute(LEGS[leg], {**LEG_DEFAULTS, "c": c, "v": v}, prepare=True)]

    return prepare, run


def hybrid_runner(function: str, text: bool = True, vector: bool = True):
    """The whole function; without the text (vector) it runs the vector (full-text) leg alone."""
    sql = HYBRID.format(function=function)

    def prepare(conn) -> None:
        conn.execute("reset all")

    def run(conn, c: str, q: str, v: str) -> list[int]:
        return [r[0] for r in conn.execute(sql, {"q": q if text else "", "v": v if vector else None, "c": c}).fetchall()
                if r[1] is not None]

    return prepare, run


def neighbour_questions(corpus: Corpus, communities: int, sample: list[int], per: int = 20) -> list[tuple]:
    """Questions of the communities not measured: asked between the timed ones (--neighbours)."""
    pool = []
    for k in range(communities):
        if k not in sample:
            vectors, texts = corpus.questions(k, per, batch=2)
            pool += [(community_name(k), texts[j], vector_text(vectors[j])) for j in range(per)]
    return pool


def measure(conn, questions: Questions, runners: dict[str, tuple], neighbours: int = 0,
            pool: list[tuple] = ()) -> dict[str, dict]:
    """Every option answers every question once, the options interleaved question by question
    (round r gives option o question r + o * N / K): the load of a shared machine then falls on
    every option alike, and no option is timed on a question another has just read. Before each
    timed question, `neighbours` untimed searches of other communities (from `pool`, through the
    checkout's hybrid_search): the measured community then shares the caches with busy
    neighbours, as it would in a knowledge base where every community is asked."""
    names = list(runners)
    rng = random.Random(SEED)
    neighbour = hybrid_runner("hybrid_search")[1]
    for i, (c, q, v) in enumerate(questions.warmup):
        for name in names[i % len(names):] + names[:i % len(names)]:
            runners[name][0](conn)
            runners[name][1](conn, c, q, v)
    n, k = len(questions.items), len(names)
    timings = {name: [] for name in names}
    recalls = {name: [] for name in names}
    returned = {name: [] for name in names}
    for r in range(n):
        for o in [(r + x) % k for x in range(k)]:
            name = names[o]
            c, q, v, exact = questions.items[(r + o * max(n // k, 1)) % n]
            prepare, run = runners[name]
            if neighbours and pool:
                conn.execute("reset all")
                for nc, nq, nv in rng.sample(pool, neighbours):
                    neighbour(conn, nc, nq, nv)
            prepare(conn)
            start = time.perf_counter()
            ids = run(conn, c, q, v)
            timings[name].append((time.perf_counter() - start) * 1000)
            recalls[name].append(len(exact & set(ids)) / MATCH)
            returned[name].append(len(ids))
    conn.execute("reset all")
    return {name: {"p50_ms": pct(timings[name], 50), "p95_ms": pct(timings[name], 95), "p99_ms": pct(timings[name], 99),
                   "recall_at_40": round(statistics.mean(recalls[name]), 4),
                   "min_recall_at_40": round(min(recalls[name]), 3),
                   "rows_returned_mean": round(statistics.mean(returned[name]), 1), "questions": len(timings[name])}
            for name in names}


def community_share(conn, questions: Questions) -> float:
    """How much of a question's 400 nearest chunks (any community) is its own community's."""
    _settings(conn, {"hnsw.ef_search": "400", "hnsw.iterative_scan": "off"})
    shares = []
    for c, _, v, _ in questions.items[::5]:
        rows = conn.execute("select community from knowledge_chunks order by embedding <=> %s::vector limit 400",
                            (v,)).fetchall()
        shares.append(sum(r[0] == c for r in rows) / max(len(rows), 1))
    conn.execute("reset all")
    return round(statistics.mean(shares), 4)


def sizes(conn, communities: list[str]) -> dict:
    one = partial_index_name(communities[0])
    row = conn.execute(
        "select pg_total_relation_size('knowledge_chunks'), pg_relation_size('knowledge_chunks_embedding_hnsw'),"
        " coalesce(pg_relation_size(to_regclass(%s)), 0),"
        " (select coalesce(sum(pg_relation_size(indexrelid)), 0)::bigint from pg_index where indexrelid::regclass::text like 'arc\\_hnsw\\_%%'),"
        " pg_total_relation_size('bm25_postings')", (one,)).fetchone()
    mb = lambda b: round(b / 2**20, 1)  # noqa: E731
    return {"table_total_mb": mb(row[0]), "global_hnsw_mb": mb(row[1]), "one_partial_hnsw_mb": mb(row[2]),
            "all_partial_hnsw_mb": mb(row[3]), "postings_mb": mb(row[4])}


# ---- the run ------------------------------------------------------------------------------------

def run(args) -> dict:
    folder = args.keep or Path(tempfile.mkdtemp(prefix="arc-scale-communities-"))
    communities = [community_name(k) for k in range(args.communities)]
    sample = sorted({round(i * (args.communities - 1) / max(args.sample - 1, 1)) for i in range(args.sample)})
    state_file = folder / f"state-{args.server}.json"
    state = json.loads(state_file.read_text()) if state_file.exists() else {}
    result: dict = {"server": args.server, "communities": args.communities, "chunks_per_community": args.per_community,
                    "chunks": args.communities * args.per_community, "shared_buffers": args.shared_buffers,
                    "sampled_communities": [community_name(k) for k in sample],
                    "questions_per_option": args.queries * len(sample), "warmup_per_option": args.warmup * len(sample)}
    with server(args.server, folder / args.server, args.shared_buffers) as url:
        Database(url, statement_timeout_ms=0).migrate(DIM)
        with psycopg.connect(url, autocommit=True) as conn:
            result["postgres"] = conn.execute("select current_setting('server_version')").fetchone()[0]
            result["pgvector"] = conn.execute("select extversion from pg_extension where extname = 'vector'").fetchone()[0]
            count = conn.execute("select count(*) from knowledge_chunks").fetchone()[0]
            if count != result["chunks"] or "load_seconds" not in state:
                if count:
                    raise SystemExit(f"{folder} holds a different or partial load ({count} chunks): delete it")
                conn.execute("drop index if exists knowledge_chunks_embedding_hnsw")
                state["load_seconds"] = round(load(url, args.communities, args.per_community, args.spread,
                                                   args.workers), 1)
                bm25.vacuum(Database(url, statement_timeout_ms=0))
                state["global_hnsw_build_seconds"] = round(build_global_index(conn, args.maintenance_work_mem), 1)
                state_file.write_text(json.dumps(state))
            print(f"loaded: {state}", flush=True)
            result.update(state)
            corpus = Corpus(args.spread)
            questions = Questions(conn, corpus, sample, args.per_community, args.queries, args.warmup)
            result["reference_ms"] = reference_ms(conn)
            result["community_share_of_nearest_400"] = community_share(conn, questions)
            if "partial_hnsw_build_seconds" not in state:
                state["partial_hnsw_build_seconds"] = round(
                    build_partial_indexes(conn, communities, args.maintenance_work_mem), 1)
                state_file.write_text(json.dumps(state))
            if args.partitions and "partitions_build_seconds" not in state:
                state["partitions_build_seconds"] = round(build_partitions(conn, communities, args.maintenance_work_mem), 1)
                state_file.write_text(json.dumps(state))
            result.update(state)
            # each index's vector leg, as 033 makes it with the index (hybrid_search reads the index
            # through it; without it, through the same statement planned on every call)
            for c in communities:
                conn.execute("select arc_community_vector_leg(%s)", (c,))
            result.update(sizes(conn, communities))
            conn.execute("analyze knowledge_chunks")
            # The checkout's own path first, timed among itself: the baselines read the 2 GB global
            # HNSW index and every community's heap, and interleaved with them the measured
            # community's pages were evicted between its questions (p95 11.9 ms at 1M that way
            # against 8-9 alone). Then the baselines, with the checkout's function timed among them.
            own = {"vector leg: partial index per community": leg_runner("partial index per community"),
                   "hybrid_search: this checkout's hybrid_search": hybrid_runner("hybrid_search"),
                   # which leg bounds the function: each alone
                   "hybrid_search: this checkout's, vector leg alone (no text)": hybrid_runner("hybrid_search", text=False),
                   "hybrid_search: this checkout's, full-text leg alone (no vector)": hybrid_runner("hybrid_search",
                                                                                                  vector=False)}
            baselines = {f"vector leg: {option}": leg_runner(option) for option in VECTOR_OPTIONS
                         if VECTOR_OPTIONS[option][0] != "partial"
                         and (VECTOR_OPTIONS[option][0] != "partition" or (args.partitions and "partitions_build_seconds" in state))
                         and not args.functions_only}
            baselines.update({f"hybrid_search: {label}": hybrid_runner(f) for label, f in function_variants(conn).items()
                              if f != "hybrid_search"})
            baselines["hybrid_search: this checkout's, timed among the baselines"] = hybrid_runner("hybrid_search")
            pool = neighbour_questions(corpus, args.communities, sample)
            result["neighbours"] = args.neighbours if len(pool) >= args.neighbours else 0
            load_before = os.getloadavg()
            measured = measure(conn, questions, own, result["neighbours"], pool)
            measured.update(measure(conn, questions, baselines, result["neighbours"], pool))
            result["load_average_before_after"] = [round(load_before[0], 1), round(os.getloadavg()[0], 1)]
            result["reference_ms_after"] = reference_ms(conn)
            result["options"] = [{"option": name, **m} for name, m in measured.items()]
            for row in result["options"]:
                print(json.dumps(row), flush=True)
    if args.keep is None:
        shutil.rmtree(folder, ignore_errors=True)
    return result


def write(results: list[dict], out: Path) -> None:
    """results.json and results.md under out: these runs, and earlier runs of other servers or sizes."""
    out.mkdir(parents=True, exist_ok=True)
    key = lambda r: (r["server"], r["communities"], r["chunks_per_community"])  # noqa: E731
    earlier = json.loads((out / "results.json").read_text())["runs"] if (out / "results.json").exists() else []
    runs = [r for r in earlier if key(r) not in {key(n) for n in results}] + results
    runs.sort(key=lambda r: (r["server"] != "embedded", -r["chunks"]))
    (out / "results.json").write_text(json.dumps({"runs": runs}, indent=2) + "\n")
    analysis = ""
    if (out / "results.md").exists():
        _, marker, rest = (out / "results.md").read_text().partition(ANALYSIS)
        analysis = marker + rest
    lines = ["# One community among many: vector leg and hybrid_search latency, vector recall@40", ""]
    for r in runs:
        check = r.get("load_check")
        lines += [f"## {r['communities']} communities x {r['chunks_per_community']:,} chunks = {r['chunks']:,} "
                  f"(Postgres {r['postgres']}, pgvector {r['pgvector']}, shared_buffers {r['shared_buffers']})", "",
                  f"Command: `{r['command']}`", "",
                  f"Load {r['load_seconds']:.0f} s, global HNSW build {r['global_hnsw_build_seconds']:.0f} s, "
                  f"{r['communities']} partial HNSW indexes {r['partial_hnsw_build_seconds']:.0f} s"
                  + (f", partitioned copy with its indexes {r['partitions_build_seconds']:.0f} s" if "partitions_build_seconds" in r else "")
                  + f". Table {r['table_total_mb']:,.0f} MB, global HNSW {r['global_hnsw_mb']:,.0f} MB, partial "
                  f"HNSW {r['one_partial_hnsw_mb']:.1f} MB each ({r['all_partial_hnsw_mb']:,.0f} MB together), "
                  f"postings {r['postings_mb']:,.0f} MB. Communities measured: {', '.join(r['sampled_communities'])}, "
                  f"{r['questions_per_option']} questions per row after {r['warmup_per_option']} warm-up questions. "
                  f"A question's community holds {r['community_share_of_nearest_400']:.1%} of its 400 nearest chunks "
                  f"(uniform would be {1 / r['communities']:.1%}). "
                  + (f"Before each timed question, {r['neighbours']} untimed searches of other communities; the checkout's "
                     "rows were timed among themselves, the baselines in a second pass. " if "neighbours" in r else "")
                  + f"Reference {r['reference_ms']} ms. "
                  f"Timed with the load average at {r['load_average_before_after'][0]} before and "
                  f"{r['load_average_before_after'][1]} after (2 cores, shared), reference after {r['reference_ms_after']} ms.", "",
                  "| option | p50 ms | p95 ms | p99 ms | vector recall@40 | lowest recall@40 | vector rows returned |",
                  "|---|---|---|---|---|---|---|"]
        for o in r["options"]:
            lines.append(f"| {o['option']} | {o['p50_ms']} | {o['p95_ms']} | {o['p99_ms']} | {o['recall_at_40']} | "
                         f"{o['min_recall_at_40']} | {o['rows_returned_mean']} |")
        lines.append("")
        if check:
            lines += [f"Load check (`--check-load`): {check['communities']} communities x {check['chunks_per_community']:,} "
                      f"chunks loaded through the ingest triggers and through the bulk path: {check['verdict']} "
                      f"({', '.join(f'{t} {n:,} rows' for t, n in check['rows'].items())}).", ""]
    (out / "results.md").write_text("\n".join(lines) + ("\n" + analysis if analysis else ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--communities", type=int, default=100)
    parser.add_argument("--per-community", type=int, default=10000)
    parser.add_argument("--sample", type=int, default=5, help="communities measured")
    parser.add_argument("--queries", type=int, default=100, help="timed questions per measured community")
    parser.add_argument("--warmup", type=int, default=40, help="warm-up questions per measured community")
    parser.add_argument("--spread", type=float, default=0.3, help="how far apart communities are (latent units)")
    parser.add_argument("--server", choices=("embedded", "pg15"), default="embedded")
    parser.add_argument("--also-pg15", action="store_true", help="then the same on PostgreSQL 15 + pgvector 0.8.0")
    parser.add_argument("--shared-buffers", default="4GB")
    parser.add_argument("--maintenance-work-mem", default="3GB")
    parser.add_argument("--workers", type=int, default=2, help="processes loading communities")
    parser.add_argument("--partitions", action="store_true", help="also measure a partitioned copy")
    parser.add_argument("--check-load", action="store_true", help="first check the bulk load against the triggers")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/scale/communities"))
    parser.add_argument("--functions-only", action="store_true",
                        help="time hybrid_search's versions (and the partial index's leg) alone, not every vector option")
    parser.add_argument("--neighbours", type=int, default=2,
                        help="untimed searches of other communities before each timed question")
    parser.add_argument("--keep", type=Path, default=None, help="keep the databases here; a later run re-measures only")
    args = parser.parse_args()
    exit_on_signals()  # a SIGTERM stops the servers started here (finally blocks run)
    command = " ".join(["python benchmarks/scale_communities.py"]
                       + [f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items()
                          if v is not None and not isinstance(v, bool) and k not in ("out", "keep")]
                       + [f"--{k.replace('_', '-')}" for k, v in vars(args).items() if v is True]
                       + [f"--out {args.out}"] + (["--keep DIR"] if args.keep else []))
    check = None
    if args.check_load:
        with tempfile.TemporaryDirectory(prefix="arc-load-check-") as folder:
            if os.geteuid() == 0:
                shutil.chown(folder, "postgres")
            check = check_load(args.server, Path(folder))
        if check["verdict"] != "identical":
            raise SystemExit("the bulk load does not write what the triggers write")
    results = [{**run(args), "command": command, "load_check": check}]
    write(results, args.out)
    if args.also_pg15:
        args.server = "pg15"
        results.append({**run(args), "command": command.replace("--also-pg15", "--server pg15"), "load_check": check})
        write(results, args.out)


if __name__ == "__main__":
    main()
