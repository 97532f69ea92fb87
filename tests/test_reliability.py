"""Faults, hostile input, metrics and data safety, against real Postgres processes."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from dataclasses import replace

import psycopg
import pytest

from tests.helpers import make_settings, wait_until_waiting
from tests.openai_standin import OpenAIStandin
from worker.store import sqlfiles
from worker.serve.app import create_app
from worker.store.database import Database
from worker.store.embedded import EmbeddedPostgres
from worker.embeddings import CachedEmbedder, OpenAIEmbedder
from worker.ingest.ingestor import Ingestor
from worker.retrieve.pipeline import Retriever
from worker.runtime import Runtime, open_runtime
from worker.store.postgres_search import PostgresBackend
from tests.helpers import FastEmbedder
from tests.helpers import big_document as document

ROUTE = "/webhook/arc-retrieval"


def test_metrics_endpoint(client):
    client.post(ROUTE, json={"query": "fence height"})
    client.post(ROUTE, json={"query": "fence height"})
    client.post(ROUTE, json={})
    text = client.get("/metrics").get_data(as_text=True)
    assert 'arc_requests_total{route="/webhook/arc-retrieval",status="200"}' in text
    assert 'arc_requests_total{route="/webhook/arc-retrieval",status="422"}' in text
    assert 'arc_stage_seconds_bucket{le="0.005",stage="search"}' in text
    assert 'arc_cache_hits_total{cache="embedding"}' in text and 'arc_cache_hits_total{cache="search"}' in text
    assert 'arc_pool{stat="pool_size"}' in text
    assert "arc_reranker_fallbacks_total" in text and "arc_embedding_fallbacks_total" in text


def test_database_down_at_start_then_back(tmp_path, embedder):
    server = EmbeddedPostgres(tmp_path / "pg")
    url = server.start()
    server.stop()
    settings = make_settings(tmp_path, url)
    runtime = Runtime(settings, Database(url, connect_timeout=1), embedder, schema_ready=False)
    app = create_app(runtime=runtime)
    client = app.test_client()
    assert client.get("/healthz").status_code == 200
    assert client.get("/readyz").status_code == 503
    down = client.post(ROUTE, json={"query": "fence"})
    assert down.status_code == 503 and down.headers["Retry-After"] and down.get_json()["error"] == "database_unavailable"
    server = EmbeddedPostgres(tmp_path / "pg")
    server.start()
    try:
        deadline = time.monotonic() + 20
        while client.get("/readyz").status_code != 200 and time.monotonic() < deadline:
            time.sleep(0.3)
        r = client.post(ROUTE, json={"query": "fence"})
        assert r.status_code == 200 and r.get_json()["status"] == "no_results"  # empty but working
    finally:
        runtime.db.close()
        server.stop()


def test_open_runtime_starts_without_a_database(tmp_path):
    settings = make_settings(tmp_path, "postgresql://postgres@/postgres?host=/nonexistent&connect_timeout=1")
    runtime = open_runtime(settings)
    assert runtime.schema_ready is False
    runtime.close()


def test_hybrid_function_carries_its_own_statement_timeout(sample_runtime):
    with sample_runtime.db.connect() as conn:
        config = conn.execute("select proconfig from pg_proc where proname = 'hybrid_search'").fetchone()[0]
    assert "statement_timeout=5s" in config


def test_slow_embedding_provider_degrades_within_the_timeout(sample_runtime):
    with OpenAIStandin() as standin:
        standin.reset(delay=5.0)
        settings = sample_runtime.settings.replace(**{
            "openai_api_key": standin.api_key, "openai_base_url": standin.base_url, "embedding_provider": "openai",
            "embedding_model": "text-embedding-3-large", "embedding_dim": 384, "embedding_timeout": 1.0})
        slow = CachedEmbedder(OpenAIEmbedder(settings))
        retriever = Retriever(embedder=slow, backend=PostgresBackend(sample_runtime.db), reranker=None,
                              embedding_timeout=1.0)
        client = create_app(runtime=Runtime(settings, sample_runtime.db, slow), retriever=retriever).test_client()
        start = time.monotonic()
        answer = client.post(ROUTE, json={"query": "How tall can a fence be?"}).get_json()
        assert time.monotonic() - start < 1.0 + 1.0
        assert any(w.startswith("degraded:") for w in answer["warnings"]) and answer["chunks"]
        # the full-text leg ran while the embedding was awaited: nothing is left to search afterwards
        assert answer["timings_ms"]["search"] < 50


HOSTILE = ["'; drop table knowledge_chunks; --", "\\' or 1=1 --", "$$; select pg_sleep(10); $$",
           "ünïcödé ∑ 𝔘 \u202e\u200b\ufeff", "a\x00b", "x" * 100_000, "' | '", "!!!", "&&|| <-> :*"]


@pytest.mark.parametrize("value", HOSTILE)
def test_hostile_values_through_every_field(client, sample_runtime, value):
    bodies = [{"query": value}, {"query": "fence", "document_types": [value]}, {"query": "fence", "fusion": value},
              {"query": "fence", "top_k": value}, {"query": "fence", "weights": {"vector": value, "fts": 1}},
              {"query": "fence", "binding_only": value}, {value[:50]: "x", "query": "fence"},
              {"body": {"query": value}}, {"chatInput": value}]
    for body in bodies:
        r = client.post(ROUTE, json=body)
        assert r.status_code < 500, (body, r.get_json())
        assert r.status_code in (200, 413, 422), (body, r.status_code)
    with sample_runtime.db.connect() as conn:
        assert conn.execute("select count(*) from knowledge_chunks").fetchone()[0] > 0


def test_secrets_and_documents_stay_out_of_logs(sample_runtime, caplog):
    settings = sample_runtime.settings.replace(**{"api_token": "super-secret-token-123456789"})
    client = create_app(runtime=Runtime(settings, sample_runtime.db, sample_runtime.embedder)).test_client()
    with caplog.at_level(logging.DEBUG):
        client.post(ROUTE, json={"query": "fence"}, headers={"X-ARC-Token": "super-secret-token-123456789"})
        client.post(ROUTE, json={"query": "fence"}, headers={"X-ARC-Token": "wrong-token-456"})
    text = caplog.text
    assert "super-secret-token-123456789" not in text and "wrong-token-456" not in text
    assert "Maximum fence height" not in text


KILL_SCRIPT = textwrap.dedent("""
    import sys
    from tests.helpers import FastEmbedder, big_document as document
    from worker.store.database import Database
    from worker.ingest.ingestor import Ingestor
    Ingestor(Database(sys.argv[1], statement_timeout_ms=600000), FastEmbedder()).write(
        [document("v2", 30000)], batch_documents=1)
""")


def test_ingest_killed_midway_keeps_the_previous_version(make_database):
    url = make_database("kill")
    db = Database(url)
    db.migrate(384)
    Ingestor(db, FastEmbedder()).write([document("v1", 50)])
    process = subprocess.Popen([sys.executable, "-c", KILL_SCRIPT, url], cwd=os.getcwd(), start_new_session=True)
    try:
        with psycopg.connect(url, autocommit=True) as watch:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                row = watch.execute("select count(*) from pg_stat_activity where query ilike 'copy knowledge_chunks%'"
                                    " and state = 'active'").fetchone()
                if row[0]:
                    break
                time.sleep(0.05)
            else:
                pytest.fail("the ingest never reached COPY")
            time.sleep(0.5)
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            deadline = time.monotonic() + 30
            while watch.execute("select count(*) from pg_stat_activity where query ilike 'copy knowledge_chunks%'"
                                ).fetchone()[0] and time.monotonic() < deadline:
                time.sleep(0.1)
            rows = watch.execute("select count(*), min(document_name), max(document_name) from knowledge_chunks "
                                 "where document_id = 'big-doc'").fetchone()
            assert rows == (50, "Big v1", "Big v1")
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    report = Ingestor(db, FastEmbedder()).write([document("v3", 80)])
    assert report.replaced_chunks == 50
    with db.connect() as conn:
        assert conn.execute("select count(*), min(document_name) from knowledge_chunks where document_id = 'big-doc'"
                            ).fetchone() == (80, "Big v3")
        # the statistics agree with the table after the crash and the replace
        n, total = conn.execute("select n_docs, total_length from bm25_corpus").fetchone()
        assert (n, total) == conn.execute("select count(*), sum(fts_length) from knowledge_chunks").fetchone()
    db.close()


def test_concurrent_ingests_of_one_document_end_with_one_version(make_database):
    url = make_database("conc")
    db = Database(url)
    db.migrate(384)
    errors: list[BaseException] = []

    def load(version: str, size: int) -> None:
        try:
            Ingestor(Database(url), FastEmbedder()).write([document(version, size)])
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=load, args=(f"v{i}", 200 + 37 * i)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    with db.connect() as conn:
        count, names = conn.execute("select count(*), count(distinct document_name) from knowledge_chunks").fetchone()
        name = conn.execute("select min(document_name) from knowledge_chunks").fetchone()[0]
        indexes = conn.execute("select count(distinct chunk_index) from knowledge_chunks").fetchone()[0]
    assert names == 1 and count == indexes == 200 + 37 * int(name.split("v")[1])
    db.close()


def test_a_load_waits_for_another_writer_while_holding_nothing(make_database):
    """Another writer deletes doc-b and marks doc-a's rows (as a delete releases the documents it
    superseded) while a load of doc-a and doc-b starts. The load once took a per-document lock,
    deleted doc-a (holding the BM25 corpus row) and then waited for doc-b's lock: the other
    writer's delete waited for that corpus row, a deadlock. Now every writer takes one write lock
    before anything else."""
    url = make_database("lockorder")
    db = Database(url)
    db.migrate(384)
    ingestor = Ingestor(db, FastEmbedder())
    pair = [replace(document("v1", 3), document_id=name) for name in ("doc-a", "doc-b")]
    ingestor.write(pair)
    errors: list[BaseException] = []

    def load() -> None:
        try:
            ingestor.write([replace(d, name=f"{d.document_id} v2") for d in pair])
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    with psycopg.connect(url) as other, psycopg.connect(url, autocommit=True) as watcher:
        other.execute(sqlfiles.query("lock_writes"))
        other.execute("delete from knowledge_chunks where document_id = 'doc-b'")
        thread = threading.Thread(target=load)
        thread.start()
        wait_until_waiting(watcher, event="advisory")  # the load, for the other writer
        try:
            other.execute("update knowledge_chunks set superseded_by = null where document_id = 'doc-a'")
            other.commit()
        except psycopg.Error as exc:
            errors.append(exc)
        thread.join(timeout=30)
    assert not errors, errors
    with db.connect() as conn:
        assert conn.execute("select count(*), min(document_name) from knowledge_chunks").fetchone() == (6, "doc-a v2")
    db.close()
