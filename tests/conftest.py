"""Shared fixtures: one real embedded Postgres (pgvector) for the session, a fresh database per
test module that needs one (the sample corpus's copied from one loaded once per session), the real
local embedding model, and the Flask app over them; and the hook that sorts tests into lanes by
the fixtures they use (see docs/tests.md)."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import requests
from xdist.scheduler import LoadFileScheduling

from tests.helpers import (
    INGEST_TOKEN,
    KEEPER_TOKEN,
    N8N_VERSIONS,
    PG15_BIN,
    PG15_VECTOR,
    ROOT,
    WORKER_DATA,
    WORKER_TOKEN,
    N8nInstall,
    database_url,
    free_port,
    longest_first,
    make_settings,
    stop_process,
    tiny_dataset,
    wait_for,
    work_unit,
)
from worker.embeddings import CachedEmbedder, LocalEmbedder
from worker.ingest.ingestor import Ingestor, ingest_sample_corpus
from worker.runtime import Runtime
from worker.store.database import Database
from worker.store.embedded import EmbeddedPostgres


@pytest.fixture(scope="session")
def pg_server(tmp_path_factory) -> Iterator[str]:
    """The server's URL (the ``postgres`` maintenance database)."""
    base = tmp_path_factory.mktemp("pg")
    server = EmbeddedPostgres(base)
    url = server.start()
    yield url
    server.stop()


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
        return database_url(server, _create_database(server, prefix))

    make.target = request.param
    return make


@pytest.fixture(scope="session")
def make_database(pg_server):
    """Factory: a new empty database on the session server; returns its URL."""

    def make(prefix: str = "t") -> str:
        return database_url(pg_server, _create_database(pg_server, prefix))

    return make


# The databases the test modules made, (server URL, name): each module's are dropped when it ends,
# so a whole run holds one module's databases per test process at a time, not all of them.
_module_databases: list[tuple[str, str]] = []


def _create_database(server: str, prefix: str, template: str | None = None) -> str:
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'create database "{name}"' + (f' template "{template}"' if template else ""))
    _module_databases.append((server, name))
    return name


@pytest.fixture(autouse=True, scope="module")
def _drop_the_modules_databases() -> Iterator[None]:
    made_before = len(_module_databases)
    yield
    for server, name in reversed(_module_databases[made_before:]):
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(f'drop database if exists "{name}" with (force)')
    del _module_databases[made_before:]


@pytest.fixture(scope="session")
def embedder() -> CachedEmbedder:
    return CachedEmbedder(LocalEmbedder())


@pytest.fixture(scope="session")
def sample_template(pg_server, embedder) -> str:
    """The name of a database migrated and holding the sample corpus, loaded once per session and
    never connected to again: each module's ``sample_runtime`` is a copy of it."""
    name = f"sample_template_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(f'create database "{name}"')
    db = Database(database_url(pg_server, name))
    db.migrate(embedder.dim)
    ingest_sample_corpus(Ingestor(db, embedder))
    db.close()
    return name


@pytest.fixture(scope="module")
def sample_runtime(pg_server, sample_template, embedder, tmp_path_factory) -> Iterator[Runtime]:
    """A migrated database holding the sample corpus, the module's own (a copy of
    ``sample_template``, so what one module writes no other module sees)."""
    url = database_url(pg_server, _create_database(pg_server, "sample", template=sample_template))
    settings = make_settings(tmp_path_factory.mktemp("data"), url)
    db = Database(url)
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


@pytest.fixture(scope="session")
def worker_process() -> None:
    """Declares that a test runs the worker, the CLI or the image in a process of its own, which
    starts its own embedded Postgres and loads the model: it puts the test in the database and
    model lanes (`pytest.mark.usefixtures("worker_process")` for a whole module)."""


@pytest.fixture()
def tiny(tmp_path) -> Path:
    """A two-community answer dataset (tests/helpers.py's ``TINY_DOCS`` and ``TINY_QUESTIONS``)."""
    return tiny_dataset(tmp_path / "tiny")


@pytest.fixture()
def keeper(sample_runtime, tmp_path):
    """A test client of the app on the sample corpus, behind the keeper's admin token."""
    from worker.serve.app import create_app

    settings = make_settings(tmp_path, sample_runtime.settings.database.database_url or sample_runtime.db.url,
                             api_token=KEEPER_TOKEN, ingest_token=KEEPER_TOKEN)
    runtime = type(sample_runtime)(settings, sample_runtime.db, sample_runtime.embedder)
    app = create_app(runtime=runtime)
    app.config["TESTING"] = True
    return app.test_client()


# -- a real n8n and the worker it calls (tests/test_n8n*.py) ---------------------------------------


@pytest.fixture(scope="module", params=N8N_VERSIONS)
def n8n_home(request) -> N8nInstall:
    """The pinned n8n, installed once into a cache folder (scripts/install-n8n.sh); a lock keeps two
    test processes from installing the same version at once."""
    env = {**os.environ, "ARC_N8N_VERSION": request.param}
    lock_path = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / f"arc-n8n-{request.param}.lock"
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with lock_path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        out = subprocess.run([str(ROOT / "scripts" / "install-n8n.sh")], check=True, capture_output=True, text=True,
                             timeout=1500, env=env)
    return N8nInstall(Path(out.stdout.strip().splitlines()[-1]), request.param)


@pytest.fixture(scope="module")
def chat_model():
    """The OpenAI chat model the agent calls, stood in for (tests/chat_agent_standin.py)."""
    from tests.chat_agent_standin import ChatAgentStandin

    with ChatAgentStandin() as server:
        yield server


@pytest.fixture(scope="module")
def worker(tmp_path_factory):
    """``arc-retrieval serve --load-sample`` in its own process, as n8n's workflows call it."""
    port = free_port()
    data = tmp_path_factory.mktemp("worker-data")
    WORKER_DATA["dir"] = data
    # Two requests a second per credential (bursts of 4): a burst through n8n meets 429 +
    # Retry-After for certain (admission refusals depend on timing), which the workflows must
    # turn into a wait and a retry, not an error.
    # A writer waits 1 s for another's write lock, then gets 503 + Retry-After: an upload during
    # a long load meets one for certain, which the ingest workflow must wait out and retry.
    env = {**os.environ, "ARC_DATA_DIR": str(data), "ARC_API_TOKEN": WORKER_TOKEN,
           "ARC_INGEST_TOKEN": INGEST_TOKEN, "WEB_CONCURRENCY": "1", "ARC_RATE_LIMIT": "2",
           "ARC_WRITE_LOCK_WAIT": "1"}
    for var in ("DATABASE_URL", "OPENAI_API_KEY", "SUPABASE_URL"):
        env.pop(var, None)
    log = open(data / "worker.log", "w")
    process = subprocess.Popen([sys.executable, "-m", "worker.cli", "serve", "--port", str(port), "--load-sample"],
                               env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=ROOT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: requests.get(f"{url}/readyz", timeout=2).status_code == 200, 120, "the worker")
        yield url
    finally:
        stop_process(process)
        log.close()


@pytest.fixture(scope="module")
def mcp_worker(worker):
    """``arc-retrieval mcp --http`` on the webhook worker's database, with the same token."""
    port = free_port()
    data = WORKER_DATA["dir"]
    env = {**os.environ, "ARC_DATA_DIR": str(data), "ARC_API_TOKEN": WORKER_TOKEN,
           "DATABASE_URL": f"postgresql://postgres:@/postgres?host={data / 'pgdata'}"}
    for var in ("OPENAI_API_KEY", "SUPABASE_URL"):
        env.pop(var, None)
    log = open(data / "mcp.log", "w")
    process = subprocess.Popen([sys.executable, "-m", "worker.cli", "mcp", "--http", "--port", str(port)],
                               env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=ROOT)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        wait_for(lambda: requests.post(url, json={}, timeout=2).status_code == 401, 60, "the MCP server")
        yield url
    finally:
        stop_process(process)
        log.close()


# -- lanes ----------------------------------------------------------------------------------------

# The fixtures that bring up something heavy, by the lane marker they give a test. A test's
# fixture closure (every fixture it uses, directly or through others) decides: a test that uses
# none of these, and is not marked n8n or docker, is a `unit` test (`make test-unit`).
LANE_FIXTURES: dict[str, frozenset[str]] = {
    "database": frozenset({"pg_server", "pg15_server", "worker_process"}),
    "model": frozenset({"embedder", "worker_process"}),
    "browser": frozenset({"browser"}),
    "n8n": frozenset({"n8n_home"}),
}
HEAVY_MARKERS = frozenset({"n8n", "docker"})


def lanes_of(fixturenames: list[str] | tuple[str, ...], markers: set[str]) -> set[str]:
    """The lane markers a test with these fixtures (its whole closure) and markers gets."""
    used = set(fixturenames)
    lanes = {lane for lane, fixtures in LANE_FIXTURES.items() if used & fixtures}
    lanes |= markers & HEAVY_MARKERS
    return lanes or {"unit"}


def pytest_collection_modifyitems(config, items) -> None:
    for item in items:
        markers = {mark.name for mark in item.iter_markers()}
        for lane in sorted(lanes_of(item.fixturenames, markers) - markers):
            item.add_marker(getattr(pytest.mark, lane))


# -- sharing the work out between `make test`'s processes -----------------------------------------


class LongestFirstScheduling(LoadFileScheduling):
    """``--dist loadfile``, with the long modules started first (tests/helpers.py's
    ``LONG_MODULES``) and the n8n modules' versions as units of their own (``work_unit``)."""

    def _split_scope(self, nodeid: str) -> str:
        return work_unit(nodeid)

    def _assign_work_unit(self, node) -> None:
        # The work queue is complete when the first unit is handed out: order it once, then.
        if not getattr(self, "_ordered", False):
            order = longest_first(list(self.workqueue))
            self.workqueue = type(self.workqueue)((unit, self.workqueue[unit]) for unit in order)
            self._ordered = True
        super()._assign_work_unit(node)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getoption("dist") == "loadfile":
        return LongestFirstScheduling(config, log)
    return None
