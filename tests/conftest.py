"""Shared fixtures: one real embedded Postgres (pgvector) for the session, a fresh database per
test module that needs one, the real local embedding model, and the Flask app over them."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from worker.config import Settings
from worker.store.database import Database
from worker.store.embedded import EmbeddedPostgres
from worker.embeddings import CachedEmbedder, LocalEmbedder
from worker.ingest.ingestor import Ingestor, ingest_sample_corpus
from worker.runtime import Runtime


@pytest.fixture(scope="session")
def pg_server(tmp_path_factory) -> Iterator[str]:
    """The server's URL (the ``postgres`` maintenance database)."""
    base = tmp_path_factory.mktemp("pg")
    server = EmbeddedPostgres(base)
    url = server.start()
    yield url
    server.stop()


def _database_url(server_url: str, name: str) -> str:
    base, _, query = server_url.partition("?")
    return base.rsplit("/", 1)[0] + f"/{name}" + (f"?{query}" if query else "")


PG15_BIN = Path("/usr/lib/postgresql/15/bin")
PG15_VECTOR = Path("/usr/share/postgresql/15/extension/vector--0.8.0.sql")


@pytest.fixture(scope="session")
def pg15_server() -> Iterator[str]:
    """Supabase's combination, PostgreSQL 15 + pgvector 0.8.0 (scripts/install-postgres15.sh, run by
    `make test`), as a throwaway cluster on a loopback port. Returns the maintenance database URL."""
    import shutil
    import socket
    import subprocess
    import tempfile

    if not (PG15_BIN / "postgres").exists() or not PG15_VECTOR.exists():
        pytest.skip("PostgreSQL 15 + pgvector 0.8.0 not installed (scripts/install-postgres15.sh)")
    base = Path(tempfile.mkdtemp(prefix="arc-pg15-"))
    data, sock = base / "data", base / "sock"
    sock.mkdir()
    as_postgres: list[str] = []
    if os.geteuid() == 0:  # initdb refuses root: run the cluster as the package's postgres user
        shutil.chown(base, "postgres")
        shutil.chown(sock, "postgres")
        as_postgres = ["runuser", "-u", "postgres", "--"]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    subprocess.run([*as_postgres, str(PG15_BIN / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres",
                    "--no-sync"], check=True, capture_output=True)
    subprocess.run([*as_postgres, str(PG15_BIN / "pg_ctl"), "-D", str(data), "-l", str(base / "log"), "-w",
                    "-o", f"-p {port} -k {sock} -c listen_addresses=127.0.0.1 -c fsync=off", "start"],
                   check=True, capture_output=True)
    try:
        yield f"postgresql://postgres:@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run([*as_postgres, str(PG15_BIN / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"],
                       capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session", params=["embedded", "pg15"])
def database_factory(request):
    """Factory of new empty databases on each target: the embedded Postgres 18 + pgvector 0.8.2, and
    Supabase's PostgreSQL 15 + pgvector 0.8.0."""
    server = request.getfixturevalue("pg_server" if request.param == "embedded" else "pg15_server")

    def make(prefix: str = "t") -> str:
        name = f"{prefix}_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(f'create database "{name}"')
        return _database_url(server, name)

    make.target = request.param
    return make


@pytest.fixture(scope="session")
def make_database(pg_server):
    """Factory: a new empty database on the session server; returns its URL."""

    def make(prefix: str = "t") -> str:
        name = f"{prefix}_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(pg_server, autocommit=True) as conn:
            conn.execute(f'create database "{name}"')
        return _database_url(pg_server, name)

    return make


@pytest.fixture(scope="session")
def embedder() -> CachedEmbedder:
    return CachedEmbedder(LocalEmbedder())


def wait_until_waiting(watcher: psycopg.Connection, *, pid: int | None = None, event: str | None = None) -> None:
    """Until a backend (``pid``, or any) waits for a lock (of kind ``event``, such as 'advisory')."""
    deadline = time.monotonic() + 10
    while not watcher.execute(
            "select count(*) from pg_stat_activity where wait_event_type = 'Lock' "
            "and (%(pid)s::int is null or pid = %(pid)s) and (%(event)s::text is null or wait_event = %(event)s)",
            {"pid": pid, "event": event}).fetchone()[0]:
        assert time.monotonic() < deadline, f"no backend waited for a lock (pid {pid}, event {event}) within 10 s"
        time.sleep(0.02)


def make_settings(tmp: Path, database_url: str, **overrides) -> Settings:
    overrides.setdefault("rate_limit", 0)  # rate limiting has its own tests
    return Settings.from_env({}, data_dir=tmp, database_url=database_url, **overrides)


@pytest.fixture(scope="module")
def sample_runtime(make_database, embedder, tmp_path_factory) -> Iterator[Runtime]:
    """A migrated database holding the sample corpus."""
    url = make_database("sample")
    settings = make_settings(tmp_path_factory.mktemp("data"), url)
    db = Database(url)
    db.migrate(embedder.dim)
    ingest_sample_corpus(Ingestor(db, embedder))
    runtime = Runtime(settings, db, embedder)
    yield runtime
    db.close()


@pytest.fixture(scope="module")
def app(sample_runtime):
    from worker.serve.app import create_app

    return create_app(runtime=sample_runtime)


@pytest.fixture()
def client(app):
    return app.test_client()


@pytest.fixture(autouse=True, scope="session")
def _no_proxy_env():
    # The OpenAI stand-in and the PostgREST stand-in listen on loopback; never route via a proxy.
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY"):
        os.environ.pop(var, None)
    os.environ["NO_PROXY"] = "127.0.0.1,localhost"
