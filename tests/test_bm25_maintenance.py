"""BM25 maintenance never fails or blocks ingestion: a drifted average length over 50k chunks
is caught up in bounded steps after an ingest that itself succeeds under the default statement
timeout, and steps run alongside re-ingests and deletes without a deadlock."""

from __future__ import annotations

import threading
import time

import psycopg
import pytest
from click.testing import CliRunner

from tests.helpers import make_settings, wait_until_waiting
from tests.helpers import assert_statistics_exact
from worker.store import bm25
from worker.serve.app import create_app
from worker.cli import main
from worker.store.database import Database
from worker.ingest.ingestor import Ingestor, ingest_sample_corpus
from worker.runtime import Runtime

BULK_INSERT = """
insert into knowledge_chunks (document_id, document_name, document_type, section_path, chunk_index,
                              is_binding, content, token_count)
select 'bulk-' || (i / 100), 'Bulk ' || (i / 100), 'other', 'Rules > Item ' || (i %% 100), i %% 100, true,
       'Rule ' || i || ': fences, sheds and paint colours need approval. ' || repeat('Owner ' || i || ' notes. ', 1 + i %% 25),
       20
from generate_series(%(start)s, %(stop)s - 1) i
"""
NOTICE = "# Pool Rules\n\n## Hours\n\nThe community pool opens at 7 am and closes at 9 pm from May to September.\n"


def bulk_load(url: str, start: int, stop: int) -> None:
    with psycopg.connect(url) as conn:  # no statement timeout: this is the test's own setup
        conn.execute(BULK_INSERT, {"start": start, "stop": stop})


def weights_out_of_date(db: Database) -> int:
    with db.connect() as conn:
        return conn.execute(
            "select count(*) from knowledge_chunks c, bm25_corpus k "
            "where c.bm25 is distinct from bm25_document_vector(c.fts, k.avgdl_indexed, k.k1, k.b)").fetchone()[0]


def test_an_ingest_over_50k_chunks_with_a_drifted_average_succeeds_and_the_weights_catch_up(
        make_database, embedder, tmp_path):
    url = make_database("bm25_scale")
    settings = make_settings(tmp_path, url, ingest_token="ingest-token-0123456789abcdef", api_token="ask-token-0123456789abcdefgh")
    db = Database(url, statement_timeout_ms=settings.database.statement_timeout_ms)  # the default, 5 s
    db.migrate(embedder.dim)
    bulk_load(url, 0, 50_000)
    with db.connect() as conn:
        # The weights were written for an average length twice today's: the drift a corpus of
        # short chunks ingested after long ones produces.
        conn.execute("update bm25_corpus set avgdl_indexed = 2 * total_length::float8 / n_docs")
        conn.execute("select bm25_refresh(true)")
        conn.commit()
    client = create_app(runtime=Runtime(settings, db, embedder)).test_client()

    started = time.monotonic()
    reply = client.post("/webhook/arc-ingest", headers={"X-ARC-Token": "ingest-token-0123456789abcdef"},
                        json={"text": NOTICE, "document_type": "other", "document_id": "pool-rules"})
    took = time.monotonic() - started
    assert reply.status_code == 200, reply.get_json()
    assert took < bm25.STEP_SECONDS + 10
    with db.connect() as conn:
        stale = conn.execute("select bm25_stale_chunks()").fetchone()[0]
    assert 0 < stale < 50_000  # part of the rewrite was done, none of it blocked the ingest

    answer = client.post("/webhook/arc-retrieval", headers={"X-ARC-Token": "ask-token-0123456789abcdefgh"},
                         json={"query": "When does the pool close?"}).get_json()
    assert answer["chunks"][0]["document_id"] == "pool-rules"

    report = bm25.refresh(db, seconds=None)  # what `arc-retrieval db maintain` runs
    assert report.stale == 0 and report.rewritten == stale
    assert weights_out_of_date(db) == 0
    assert_statistics_exact(db)
    db.close()


def test_refresh_steps_alongside_reingests_and_deletes_never_deadlock(make_database, embedder):
    url = make_database("bm25_concurrent")
    db = Database(url)
    db.migrate(embedder.dim)
    ingestor = Ingestor(db, embedder)
    ingest_sample_corpus(ingestor)
    bulk_load(url, 0, 6_000)
    errors: list[BaseException] = []
    refreshes: list[bm25.RefreshReport] = []
    stop = threading.Event()

    def guarded(work):
        def run():
            try:
                while not stop.is_set():
                    work()
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)
        return run

    def reingest() -> None:
        ingest_sample_corpus(ingestor)

    def delete_and_reload() -> None:
        with db.connect() as conn:
            conn.execute("delete from knowledge_chunks where document_id in ('bulk-3', 'bulk-7')")
            conn.commit()
        bulk_load(url, 300, 400)
        bulk_load(url, 700, 800)

    def refresh() -> None:
        refreshes.append(bm25.refresh(db, seconds=0.5, step_rows=500, force=True))

    threads = [threading.Thread(target=guarded(w)) for w in (reingest, delete_and_reload, refresh, refresh)]
    for thread in threads:
        thread.start()
    time.sleep(8)
    stop.set()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors, errors
    assert refreshes and all(r.stale >= 0 for r in refreshes), "a refresh step hit a database error"
    assert sum(r.rewritten for r in refreshes) > 0
    assert bm25.refresh(db, seconds=None).stale == 0
    assert weights_out_of_date(db) == 0
    assert_statistics_exact(db)
    db.close()


CHUNK = """
insert into knowledge_chunks (document_id, document_name, document_type, section_path, chunk_index,
                              is_binding, content, token_count)
values (%s, %s, 'other', '', 0, true, %s, 1)
"""
WORDS = {"p": "Apricot trees.", "q": "Zucchini beds.", "r": "Zucchini rows."}


@pytest.mark.parametrize("write", ["insert", "delete"])
def test_writers_sharing_words_in_crossed_order_do_not_deadlock(make_database, embedder, write):
    """A holds a word and writes another that B took while waiting for A: the statistics
    triggers once locked words before the corpus row every writer updates, so B held "zucchini"
    while waiting for A's corpus row, and A's second statement then waited for B's "zucchini"."""
    url = make_database(f"bm25_lock_order_{write}")
    Database(url).migrate(embedder.dim)
    with psycopg.connect(url) as conn:
        conn.execute(CHUNK, ("seed", "Seed", " ".join(WORDS.values())))  # every word already counted
        if write == "delete":
            for doc, text in WORDS.items():
                conn.execute(CHUNK, (doc, doc, text))

    def run(conn: psycopg.Connection, doc: str) -> None:
        if write == "insert":
            conn.execute(CHUNK, (doc, doc, WORDS[doc]))
        else:
            conn.execute("delete from knowledge_chunks where document_id = %s", (doc,))

    errors: list[BaseException] = []

    def finish(conn: psycopg.Connection, doc: str) -> None:
        try:
            run(conn, doc)
            conn.commit()
        except psycopg.Error as exc:
            errors.append(exc)
            conn.rollback()

    with psycopg.connect(url) as a, psycopg.connect(url) as b, psycopg.connect(url, autocommit=True) as watcher:
        run(a, "p")
        thread = threading.Thread(target=finish, args=(b, "q"))
        thread.start()
        wait_until_waiting(watcher, pid=b.info.backend_pid)
        finish(a, "r")
        thread.join(timeout=30)
    assert not errors, errors
    db = Database(url)
    assert_statistics_exact(db)
    db.close()


@pytest.mark.parametrize("rows", [1, 2000])
def test_a_step_rewrites_at_most_what_it_is_given(make_database, embedder, rows):
    url = make_database(f"bm25_step_{rows}")
    db = Database(url)
    db.migrate(embedder.dim)
    bulk_load(url, 0, 3000)
    with db.connect() as conn:
        conn.execute("select bm25_refresh(true)")
        assert conn.execute("select bm25_refresh_step(%s)", (rows,)).fetchone()[0] == rows
        assert conn.execute("select bm25_stale_chunks()").fetchone()[0] == 3000 - rows
    db.close()


def test_db_maintain_leaves_the_postings_readable_from_their_index_alone(make_database, embedder, tmp_path,
                                                                         monkeypatch):
    url = make_database("bm25_vacuum")
    Database(url).migrate(embedder.dim)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("alter table bm25_postings set (autovacuum_enabled = false)")
    bulk_load(url, 0, 6_000)  # "fenc" is in every chunk: its list's floor rises, postings go
    monkeypatch.setenv("DATABASE_URL", url)
    monkeypatch.setenv("ARC_DATA_DIR", str(tmp_path))

    result = CliRunner().invoke(main, ["db", "maintain"])

    assert result.exit_code == 0, result.output
    with psycopg.connect(url) as conn:
        conn.execute("set enable_seqscan = off; set enable_bitmapscan = off")  # the plan hybrid_search gets
        plan = conn.execute("explain (analyze, format json) select chunk_id from bm25_postings "
                            "where community = 'default' and lexeme = 'fenc' order by weight desc limit 500").fetchone()[0]
    scan = plan[0]["Plan"]["Plans"][0]
    assert scan["Node Type"] == "Index Only Scan" and scan["Actual Rows"] == 500
    # without a vacuum every entry read is checked against the heap, as after any large load
    assert scan["Heap Fetches"] == 0


def _postings_options(url: str) -> set[str]:
    with psycopg.connect(url) as conn:
        return set(conn.execute("select reloptions from pg_class where relname = 'bm25_postings'").fetchone()[0] or [])


AUTOVACUUM_AFTER_LOADS = {"autovacuum_vacuum_insert_scale_factor=0", "autovacuum_vacuum_insert_threshold=100000"}


def test_autovacuum_comes_by_the_postings_after_a_fixed_number_of_inserts(database_factory, embedder):
    """A load's postings are read at a heap fetch each until a vacuum; autovacuum's default insert
    threshold grows with the table (a fifth of it), so in a large portfolio a new community waited
    for millions of other inserts. A fresh database and an upgraded one (097) both set a fixed one."""
    fresh = database_factory("postings_autovacuum")
    Database(fresh).migrate(embedder.dim)
    assert _postings_options(fresh) == AUTOVACUUM_AFTER_LOADS

    upgraded = database_factory("postings_autovacuum_upgrade")
    Database(upgraded).migrate(embedder.dim)
    with psycopg.connect(upgraded, autocommit=True) as conn:  # a database of before 097
        conn.execute("alter table bm25_postings reset (autovacuum_vacuum_insert_scale_factor, "
                     "autovacuum_vacuum_insert_threshold)")
        conn.execute("delete from schema_migrations where name = '097_postings_autovacuum'")
    assert _postings_options(upgraded) == set()
    db = Database(upgraded)
    assert "097_postings_autovacuum" in db.migrate(embedder.dim)
    db.close()
    assert _postings_options(upgraded) == AUTOVACUUM_AFTER_LOADS
