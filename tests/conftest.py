"""Shared fixtures: one real embedded Postgres (pgvector) for the session, a fresh database per
test module that needs one, the real local embedding model, and the Flask app over them."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from worker.config import Settings
from worker.database import Database
from worker.embedded import EmbeddedPostgres
from worker.embeddings import CachedEmbedder, LocalEmbedder
from worker.ingest import Ingestor, ingest_sample_corpus
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
    return server_url.replace("/postgres?", f"/{name}?", 1)


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
    from worker.app import create_app

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
