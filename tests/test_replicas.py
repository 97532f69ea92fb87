"""Searches on read replicas, for real: a primary of Supabase's PostgreSQL 15 + pgvector 0.8.0 and
a streaming standby made from it with ``pg_basebackup -R``, the worker served by gunicorn
(``arc-retrieval serve``) with ``ARC_READ_DATABASE_URLS`` naming the standby.

Shown: the searches run on the standby (``pg_stat_user_functions``, ``track_functions=all``);
writes stay on the primary; a change committed on the primary is in the next answer even when
the standby has not replayed it (replay paused), through the search cache too; and the standby
stopped in the middle of a load costs no answer."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
import requests

from worker.config import ConfigError, Settings
from worker.embeddings import CachedEmbedder
from worker.ingest.ingestor import Ingestor, ingest_sample_corpus
from worker.ingest.readers import parse_text
from worker.models import DocumentFields
from worker.store.database import Database

from tests.helpers import PG15_BIN, PG15_VECTOR, wait_for

ROOT = Path(__file__).resolve().parent.parent
RULE = "Hammocks strung between two trees must come down between November and March."


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Cluster:
    data: Path
    port: int
    sock: Path
    log: Path
    as_postgres: list[str]

    @property
    def url(self) -> str:
        return f"postgresql://postgres:@127.0.0.1:{self.port}/arc"

    def start(self) -> None:
        subprocess.run([*self.as_postgres, str(PG15_BIN / "pg_ctl"), "-D", str(self.data), "-l", str(self.log),
                        "-w", "-o", f"-p {self.port} -k {self.sock} -c listen_addresses=127.0.0.1 "
                        "-c fsync=off -c track_functions=all", "start"], check=True, capture_output=True)

    def stop(self, mode: str = "fast") -> None:
        subprocess.run([*self.as_postgres, str(PG15_BIN / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w",
                        "stop"], capture_output=True)

    def function_calls(self, name: str) -> int:
        with psycopg.connect(self.url, autocommit=True) as conn:
            row = conn.execute("select coalesce(sum(calls), 0) from pg_stat_user_functions where funcname = %s",
                               (name,)).fetchone()
        return int(row[0])


@pytest.fixture(scope="module")
def pair(embedder: CachedEmbedder) -> Iterator[tuple[Cluster, Cluster]]:
    """A primary holding the sample corpus, and a streaming standby of it."""
    if not (PG15_BIN / "postgres").exists() or not PG15_VECTOR.exists():
        pytest.skip("PostgreSQL 15 + pgvector 0.8.0 not installed (scripts/install-postgres15.sh)")
    base = Path(tempfile.mkdtemp(prefix="arc-replica-"))
    as_postgres: list[str] = []
    if os.geteuid() == 0:
        shutil.chown(base, "postgres")
        as_postgres = ["runuser", "-u", "postgres", "--"]
    sock = base / "sock"
    sock.mkdir()
    if as_postgres:
        shutil.chown(sock, "postgres")
    primary = Cluster(base / "primary", free_port(), sock, base / "primary.log", as_postgres)
    standby = Cluster(base / "standby", free_port(), sock, base / "standby.log", as_postgres)
    subprocess.run([*as_postgres, str(PG15_BIN / "initdb"), "-D", str(primary.data), "-A", "trust", "-U",
                    "postgres", "--no-sync"], check=True, capture_output=True)
    primary.start()
    try:
        with psycopg.connect(primary.url.replace("/arc", "/postgres"), autocommit=True) as conn:
            conn.execute("create database arc")
        db = Database(primary.url)
        db.migrate(embedder.dim)
        ingest_sample_corpus(Ingestor(db, embedder))
        subprocess.run([*as_postgres, str(PG15_BIN / "pg_basebackup"), "-h", "127.0.0.1", "-p", str(primary.port),
                        "-U", "postgres", "-D", str(standby.data), "-R", "-X", "stream"],
                       check=True, capture_output=True)
        standby.start()
        yield primary, standby
    finally:
        standby.stop("immediate")
        primary.stop()
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def worker(pair, tmp_path_factory) -> Iterator[str]:
    """``arc-retrieval serve`` (gunicorn, two processes) over the primary, searching the standby."""
    primary, standby = pair
    port = free_port()
    data = tmp_path_factory.mktemp("data")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARC_") and k != "DATABASE_URL"}
    env.update({"DATABASE_URL": primary.url, "ARC_READ_DATABASE_URLS": standby.url,
                "ARC_REPLICA_MAX_WAIT_MS": "50", "ARC_REPLICA_TIMEOUT_MS": "1000", "ARC_REPLICA_RETRY_SECONDS": "2",
                "ARC_DATA_DIR": str(data), "ARC_BIND": f"127.0.0.1:{port}", "WEB_CONCURRENCY": "2",
                "ARC_AUTH_DISABLED": "1", "ARC_RATE_LIMIT": "0"})
    log_path = data / "worker.log"
    with log_path.open("w") as log:
        process = subprocess.Popen([sys.executable, "-m", "worker.cli", "serve"], env=env, cwd=ROOT, stdout=log,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert process.poll() is None and time.monotonic() < deadline, log_path.read_text()[-3000:]
            try:
                if requests.get(f"{url}/readyz", timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                pass
            time.sleep(0.3)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)
        assert "Traceback" not in log_path.read_text()


def ask(url: str, query: str) -> dict:
    response = requests.post(f"{url}/webhook/arc-retrieval", json={"query": query}, timeout=30)
    assert response.status_code == 200, response.text
    return response.json()


def settle_stats() -> None:
    # A backend reports its function counts when idle for a moment (PG 15: at most every
    # 10 s while it stays connected); the worker's pooled connections stay open.
    time.sleep(11)


def test_searches_run_on_the_standby_and_writes_on_the_primary(pair, worker):
    primary, standby = pair
    before_primary, before_standby = primary.function_calls("hybrid_search"), standby.function_calls("hybrid_search")
    for question in ("How tall can a backyard fence be?", "What paint colours are allowed?",
                     "Do I need approval for a shed?", "Can I park a boat in the driveway?"):
        assert ask(worker, question)["status"] != "no_results"
    settle_stats()
    assert standby.function_calls("hybrid_search") - before_standby >= 4
    assert primary.function_calls("hybrid_search") == before_primary
    # The query log is a write: it is on the primary (written off the answer's path, so soon after).
    def logged() -> bool:
        with psycopg.connect(primary.url) as conn:
            return conn.execute("select count(*) from query_log").fetchone()[0] >= 4

    wait_for(logged, 10, "the query log's rows on the primary")
    metrics = requests.get(f"{worker}/metrics", timeout=10).text
    assert 'arc_database_searches_total{database="replica1"}' in metrics
    assert "postgresql://" not in metrics


def test_a_replica_host_answers_calibrated_from_the_stored_calibration(pair, worker):
    """The worker searching the standby decides the status on the calibration stored with the
    knowledge base, not on one it measures itself: a mark written into the stored row is what
    its answer reports."""
    primary, _ = pair
    assert ask(worker, "How tall can a backyard fence be?")["confidence"]["calibrated"] is True
    with psycopg.connect(primary.url, autocommit=True) as conn:
        floor, version = conn.execute("select floor, kb_version from status_calibrations "
                                      "where community = 'default'").fetchone()
        assert version == conn.execute("select knowledge_base_version('default')").fetchone()[0]
        conn.execute("update status_calibrations set floor = 0.0123 where community = 'default'")
        try:
            answer = ask(worker, "Do I need approval for a shed?")
        finally:
            conn.execute("update status_calibrations set floor = %s where community = 'default'", (floor,))
    assert answer["confidence"]["calibrated"] is True and answer["confidence"]["floor"] == 0.0123
    assert answer["confidence"]["kb_version"] == version


def test_a_change_on_the_primary_is_in_the_next_answer_though_the_standby_lags(pair, worker, embedder):
    primary, standby = pair
    question = "When do hammocks have to come down?"
    ask(worker, question)  # cached now, from before the change
    with psycopg.connect(standby.url, autocommit=True) as conn:
        conn.execute("select pg_wal_replay_pause()")
    try:
        db = Database(primary.url)
        ingestor = Ingestor(db, embedder)
        ingestor.write([ingestor.prepare_text(parse_text(RULE),
                                              DocumentFields(document_id="hammock-rule", name="Hammock Rule",
                                                             document_type="design_guidelines"))])
        db.close()
        answer = ask(worker, question)
        assert answer["chunks"] and answer["chunks"][0]["document_id"] == "hammock-rule", answer["chunks"][:2]
        with psycopg.connect(standby.url) as conn:  # the standby really had not replayed it
            assert not conn.execute("select count(*) from knowledge_chunks where document_id = 'hammock-rule'"
                                    ).fetchone()[0]
    finally:
        with psycopg.connect(standby.url, autocommit=True) as conn:
            conn.execute("select pg_wal_replay_resume()")
    # Once replayed, the standby serves it.
    deadline = time.monotonic() + 10
    while True:
        with psycopg.connect(standby.url) as conn:
            if conn.execute("select count(*) from knowledge_chunks where document_id = 'hammock-rule'").fetchone()[0]:
                break
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert ask(worker, question)["chunks"][0]["document_id"] == "hammock-rule"
    assert 'arc_database_behind_total{database="replica1"}' in requests.get(f"{worker}/metrics", timeout=10).text


def test_the_standby_stopped_mid_load_costs_no_answer(pair, worker):
    _primary, standby = pair
    questions = ["fence height", "paint colours", "shed approval", "boat parking", "tree removal",
                 "solar panels", "pool rules", "holiday lights"]
    outcomes: list[int | str] = []
    stop = threading.Event()

    def load(offset: int) -> None:
        i = offset
        while not stop.is_set():
            try:
                response = requests.post(f"{worker}/webhook/arc-retrieval",
                                         json={"query": f"{questions[i % len(questions)]} {i}"}, timeout=30)
                outcomes.append(response.status_code)
            except requests.RequestException as exc:
                outcomes.append(type(exc).__name__)
            i += 1

    threads = [threading.Thread(target=load, args=(n * 100,)) for n in range(4)]
    for thread in threads:
        thread.start()
    try:
        time.sleep(3)
        standby.stop("immediate")
        time.sleep(4)
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=60)
        standby.start()
    assert len(outcomes) > 20
    assert [o for o in outcomes if o != 200] == []
    metrics = requests.get(f"{worker}/metrics", timeout=10).text
    assert 'arc_database_errors_total{database="replica1"}' in metrics


def test_replicas_setting_is_checked_without_echoing_secrets():
    with pytest.raises(ConfigError) as err:
        Settings.from_env({"ARC_READ_DATABASE_URLS": "postgresql://u:pw@h/db"})
    assert "DATABASE_URL" in str(err.value) and "pw" not in str(err.value)
    with pytest.raises(ConfigError) as err:
        Settings.from_env({"DATABASE_URL": "postgresql://h/db", "ARC_READ_DATABASE_URLS": "mysql://u:secret@h/db"})
    assert "ARC_READ_DATABASE_URLS" in str(err.value) and "secret" not in str(err.value)
    settings = Settings.from_env({"DATABASE_URL": "postgresql://h/db",
                                  "ARC_READ_DATABASE_URLS": " postgresql://a/db , postgresql://b/db ,"})
    assert settings.database.read_database_urls == ("postgresql://a/db", "postgresql://b/db")
    assert Settings.from_env({}).database.read_database_urls == ()


class CountingReplicas:
    """Read replicas over the primary itself, counting the version reads that reach the primary."""

    def __new__(cls, db: Database):
        from worker.store.replicas import ReadReplicas

        class Counting(ReadReplicas):
            reads = 0

            def primary_version(self) -> int:
                Counting.reads += 1
                return super().primary_version()

        return Counting(db, [db])


def test_a_question_reads_the_primarys_version_once(sample_runtime):
    """The search cache and the replica each read the primary's version; the search now takes
    the one the cache read instead of asking again."""
    from worker.models import RetrievalRequest
    from worker.retrieve.pipeline import Retriever
    from worker.store.postgres_search import PostgresBackend

    replicas = CountingReplicas(sample_runtime.db)
    retriever = Retriever(embedder=CachedEmbedder(sample_runtime.embedder), reranker=None,
                          backend=PostgresBackend(sample_runtime.db, replicas))
    try:
        retriever.answer(RetrievalRequest(query="How tall can a backyard fence be?"))
        assert type(replicas).reads == 1
    finally:
        retriever.close()
