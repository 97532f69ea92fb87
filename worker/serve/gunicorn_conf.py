"""gunicorn settings for the worker (``gunicorn -c python:worker.serve.gunicorn_conf 'worker.serve.app:create_app()'``).

Requests are I/O bound (Postgres, the embedding and LLM APIs), so each process runs threads.
Each process builds its own app: its own connection pool and its own copy of the embedding model
(23 MB), which avoids forking an onnxruntime thread pool. The master starts the embedded
database (when DATABASE_URL is unset), applies migrations once, and stops the database on exit.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time


def _count(variable: str, default: int, maximum: int) -> int:
    """A positive whole number from the environment, or one line naming the variable."""
    raw = os.environ.get(variable, "") or str(default)
    if not raw.isdigit() or not 1 <= int(raw) <= maximum:
        raise SystemExit(f"invalid configuration: {variable}: must be a whole number from 1 to {maximum}, got {raw!r}")
    return int(raw)


def _bind(raw: str) -> str:
    host, _, port = raw.rpartition(":")
    if not raw.startswith("unix:") and (not host or not port.isdigit() or not 0 < int(port) < 65536):
        raise SystemExit(f"invalid configuration: ARC_BIND: expected HOST:PORT or unix:PATH, got {raw!r}")
    return raw


bind = _bind(os.environ.get("ARC_BIND", "") or "127.0.0.1:8080")
workers = _count("WEB_CONCURRENCY", 2, 64)
# gthread, with each request read by the main loop before it takes a thread: slow or idle
# clients cannot hold the threads (worker/serve/slow_clients.py, ARC_CLIENT_TIMEOUT)
worker_class = "worker.serve.slow_clients.BufferingThreadWorker"
# Twice what admission control (worker/service/admission.py) admits, ARC_MAX_CONCURRENT (8) running +
# ARC_MAX_QUEUE (16) waiting: requests past that reach it and are refused at once, instead of
# waiting unseen in gunicorn's own queue (with 24 threads, 128 clients saw p99 1.9 s and no 429).
threads = _count("ARC_THREADS", 48, 1000)
timeout = 60  # a request is bounded by the LLM timeout (15 s) well before this
graceful_timeout = 20  # in-flight requests finish on SIGTERM
keepalive = 5  # n8n reuses connections
preload_app = False
# One onnxruntime thread per process for the local model (Embedding.embedding_threads, worker/config.py).
os.environ.setdefault("ARC_EMBEDDING_THREADS", "1")
accesslog = None
# Which proxies' X-Forwarded-Proto is believed is ARC_TRUSTED_PROXIES's to say (the app's
# ProxyFix, worker/serve/hosts.py), not gunicorn's default of believing any loopback client.
secure_scheme_headers: dict[str, str] = {}
errorlog = "-"
loglevel = "warning"

_embedded = None
# (a file the first ready worker creates, the line it prints or None: a worker makes it once the
# database answers, the listening addresses)
_ready: tuple[str, str | None, list[str]] | None = None


def on_starting(server) -> None:
    global _embedded, _ready
    from worker.config import ConfigError, Settings, data_dir_error
    from worker.errors import ArcError
    from worker.logs import configure_logging
    from worker.runtime import open_runtime
    from worker.serve.security import check_exposure
    from worker.service.caller import LOCAL
    from worker.service.knowledge import KnowledgeService
    from worker.store import knowledge_base

    configure_logging()
    try:
        settings = Settings.from_env()
    except ConfigError as exc:  # one line, as `arc-retrieval serve` prints it, not a traceback
        raise SystemExit(str(exc)) from None
    hosts = [b.rsplit(":", 1)[0] if not b.startswith("unix:") else "localhost" for b in server.cfg.bind]
    check_exposure(hosts, api_token=settings.auth.api_token, auth_disabled=settings.auth.auth_disabled)
    try:
        runtime = open_runtime(settings)
    except OSError as exc:  # the embedded database's folder: one line, as the commands say it
        raise SystemExit(data_dir_error(settings.database.data_dir, exc)) from None
    except ArcError as exc:  # an embedding size the knowledge base was not built with
        raise SystemExit(str(exc)) from None
    if not runtime.schema_ready:
        # Workers start and answer 503 meanwhile; the first to reach the database says it is ready.
        logging.getLogger("arc.server").warning(
            f"waiting for the database at {database_where(runtime)} (DATABASE_URL): questions are "
            "answered with 503 until it answers; check that it runs and that DATABASE_URL names it"
        )
        _ready = (_ready_marker(), None, list(server.cfg.bind))
        return
    if os.environ.get("ARC_LOAD_SAMPLE") == "1":
        knowledge = KnowledgeService(runtime)
        try:
            knowledge.load_sample_if_empty(caller=LOCAL)  # its status calibration measured and stored with it
        finally:
            knowledge.close()
    _ready = (_ready_marker(), ready_line(server.cfg.bind, runtime), list(server.cfg.bind))
    if all(knowledge_base.is_empty(db) for db in runtime.databases.all()):
        logging.getLogger("arc.server").warning(knowledge_base.EMPTY_WARNING)
    runtime.databases.close()
    if runtime.embedded is not None:
        # Workers connect to the database this master started.
        os.environ["DATABASE_URL"] = runtime.db.url
        _embedded = runtime.embedded


def on_exit(server) -> None:
    if _ready is not None:
        for remove, path in ((os.remove, _ready[0]), (os.rmdir, os.path.dirname(_ready[0]))):
            with contextlib.suppress(OSError):
                remove(path)
    if _embedded is not None:
        _embedded.stop()


def ready_line(binds: list[str], runtime) -> str:
    """Where the server listens and which knowledge base it serves (never a password or key)."""
    import psycopg

    from worker.store import sqlfiles

    urls = ", ".join(b if b.startswith("unix:") else f"http://{b}" for b in binds)
    where = database_where(runtime)
    try:
        with runtime.db.connect() as conn:
            documents, chunks = conn.execute(sqlfiles.query("knowledge_base_size")).fetchone()
        size = f"{documents} document(s), {chunks} chunk(s)"
    except psycopg.Error:
        size = "not reachable yet"
    return (
        f"arc-retrieval ready on {urls} (POST /webhook/arc-retrieval): knowledge base {size} in {where}; "
        f"embeddings {runtime.embedder.model}, vector({runtime.embedder.dim})"
    )


def database_where(runtime) -> str:
    """Which database the worker uses, as a person would name it (never the password)."""
    from psycopg.conninfo import conninfo_to_dict

    if runtime.embedded is not None:
        where = f"embedded Postgres in {runtime.embedded.pgdata}"
    else:
        parts = conninfo_to_dict(runtime.db.url)
        user = f"{parts['user']}@" if parts.get("user") else ""
        where = (
            f"Postgres {user}{parts.get('host') or 'localhost'}:{parts.get('port') or 5432}/{parts.get('dbname') or ''}"
        )
    if runtime.settings.database.supabase_url:
        where += f", searched through {runtime.settings.database.supabase_url}"
    if runtime.databases.split:
        where += f", and {len(runtime.databases.all()) - 1} other database(s) (ARC_COMMUNITY_DATABASES)"
    return where


def _ready_marker() -> str:
    from worker.scratch import folder

    return str(folder("arc-ready-") / "announced")


def post_worker_init(worker) -> None:
    """Ctrl-C (SIGINT) or the master's SIGQUIT is gunicorn's quick stop, which drops what is in
    flight anyway: leave at once. gunicorn's own handler first shuts its thread pool down, and a
    signal landing while the main thread held that pool's lock (submitting a request, under
    load) deadlocked the worker until the master's SIGKILL; unwinding with SystemExit instead
    crashed it (SIGSEGV, SIGABRT) under onnxruntime's threads. Installed here, after gunicorn's
    init_signals and before the first request is submitted to that pool.

    The stored status calibrations are read from here on; one missing or stale (documents
    changed by a writer that did not measure) is measured in the background, once across processes."""
    import signal

    for quick in (signal.SIGINT, signal.SIGQUIT):
        signal.signal(quick, lambda *_: _exit_now(0))
    arc = _services(worker)
    if _ready is not None and _ready[1] is None and arc:
        threading.Thread(target=_wait_for_the_database, args=(arc,), name="arc-wait-database", daemon=True).start()
        return
    _announce_once(_ready[1] if _ready else None)
    if arc:
        arc.knowledge.prepare_calibrations()


def _wait_for_the_database(arc, every: float = 2.0) -> None:
    """Retry the schema check (quietly) until the database answers, then say the server is ready
    and calibrate: a ready line means questions can be answered."""
    from worker.errors import DatabaseUnavailable

    while True:
        try:
            arc.runtime.ensure_schema()
            break
        except DatabaseUnavailable:
            time.sleep(every)
        except Exception:  # any error: a schema mismatch is reported by every request; stop waiting
            return
    _announce_once(ready_line(_ready[2], arc.runtime) if _ready else None)
    arc.knowledge.prepare_calibrations()


def _services(worker):
    """The worker process's app's services (serve/services.py), None before the app is loaded."""
    app = getattr(worker, "wsgi", None)
    return getattr(app, "extensions", {}).get("arc") if app is not None else None


def _announce_once(line: str | None) -> None:
    """The first worker to finish loading the app says where and what the server serves (the
    listening socket is open already, so the next request is answered): once per server, not
    once per worker or per restart, as exactly one of them creates the marker file."""
    import sys

    if _ready is None or line is None:
        return
    try:
        os.close(os.open(_ready[0], os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except OSError:
        return
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def worker_int(worker) -> None:
    """A quick stop that lands before post_worker_init, while the app loads: leave at once too."""
    _exit_now(0)


def worker_exit(server, worker) -> None:
    """After a graceful stop (SIGTERM) nothing is in flight: close this process's pools, then
    leave as below. A watchdog makes sure a stuck close cannot outlast the master's patience."""
    import sys
    import threading

    failure = sys.exc_info()[1]
    code = failure.code if isinstance(failure, SystemExit) else (1 if failure else 0)
    code = code if isinstance(code, int) else 1
    watchdog = threading.Timer(3.0, _exit_now, (code,))
    watchdog.daemon = True
    watchdog.start()
    arc = _services(worker)
    try:
        if arc:
            arc.knowledge.close()
            arc.runtime.databases.close(timeout=1.0)
    except Exception:  # any error: nothing may keep the process from leaving
        pass
    _exit_now(code)


def _exit_now(code: int) -> None:
    """Flush the output and exit without Python's finalisation, which under onnxruntime's and the
    tokenizers' native threads crashed the process on every stop (SIGSEGV, or SIGABRT from
    "terminate called after throwing an instance of 'std::system_error'"). Further stop signals
    do nothing meanwhile: one raising SystemExit halfway would skip the exit. They get a handler
    that does nothing rather than SIG_IGN: a signal trapped while the handler is being swapped
    reaches Python after the swap, and CPython reports one that finds SIG_IGN with a traceback
    ("Signal 2 ignored due to race condition")."""
    import signal
    import sys

    for stop in (signal.SIGINT, signal.SIGQUIT, signal.SIGTERM):
        # ValueError: not the main thread (the watchdog): the handlers are already set
        with contextlib.suppress(ValueError):
            signal.signal(stop, _do_nothing)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def _do_nothing(_signum: int, _frame: object) -> None:
    """The handler of a stop signal once the process is leaving."""
