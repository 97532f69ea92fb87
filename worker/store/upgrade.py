"""``arc-retrieval db upgrade``: move the embedded database to the server's new major version.

A data directory can only be run by the PostgreSQL major version that wrote it. The upgrade
starts the old version's server on it (its programs: ``--old-bindir``, else the folder recorded
at its last start, else Debian's ``/usr/lib/postgresql/MAJOR/bin``) on a private socket, takes a
backup with :mod:`.backup` (the new ``pg_dump`` reads older servers), restores it into a new
data directory made by the embedded server, applies this release's migrations, and checks that
the new one answers with the same rows. Only then is the old directory renamed aside
(``pgdata.pgMAJOR``, kept until the keeper removes it) and the new one moved in; a run stopped
before that leaves the old one in place, and a run stopped between the two renames is finished
at the next start (:func:`.embedded.finish_interrupted_upgrade`).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg

from . import sqlfiles
from .backup import BackupError, read_backup, restore_backup, write_backup
from .database import Database
from .embedded import UPGRADE_READY, UPGRADE_STAGING, EmbeddedPostgres, recorded_server_bindir
from .server_version import bundled_major, data_dir_major, program_major


class UpgradeError(Exception):
    """An upgrade that cannot go ahead; its message is one line for the command."""


@dataclass(frozen=True)
class UpgradeReport:
    old_major: int
    new_major: int
    chunks: int
    kept: Path

    def line(self) -> str:
        return (
            f"moved the embedded database from PostgreSQL {self.old_major} to {self.new_major} "
            f"({self.chunks} chunk(s)); the old copy is kept in {self.kept}: remove it once the worker answers"
        )


def upgrade_data_dir(data_dir: Path, *, old_bindir: Path | None = None) -> UpgradeReport:
    data_dir = Path(data_dir).resolve()
    pgdata = data_dir / "pgdata"
    old, new = data_dir_major(pgdata), bundled_major()
    if old is None:
        raise UpgradeError(f"no embedded database in {pgdata}: nothing to upgrade")
    if old == new:
        raise UpgradeError(f"the embedded database in {pgdata} is PostgreSQL {new} already: nothing to upgrade")
    bindir = _old_programs(pgdata, old, old_bindir)
    kept = data_dir / f"pgdata.pg{old}"
    if kept.exists():
        raise UpgradeError(f"{kept} exists (an earlier upgrade's copy): move or remove it first")
    staging = data_dir / f"{UPGRADE_STAGING}{new}"
    shutil.rmtree(staging, ignore_errors=True)  # a run stopped before its new copy answered
    staging.mkdir(parents=True)
    dump = staging / "old.arcbackup"
    try:
        with _old_server(pgdata, bindir) as old_url:
            header = write_backup(old_url, dump)
        server = EmbeddedPostgres(staging, runtime_dir=data_dir)
        url = server.start()
        try:
            restore_backup(url, read_backup(dump), replace=False)
            if header.embedding_dim:
                Database(url).migrate(header.embedding_dim)
            chunks = _answering_chunks(url)
        finally:
            server.stop()
    except BackupError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise UpgradeError(f"upgrade stopped, the old database is unchanged: {exc}") from None
    expected = header.rows.get("knowledge_chunks", 0)
    if chunks != expected:
        shutil.rmtree(staging, ignore_errors=True)
        raise UpgradeError(f"the new database answers with {chunks} chunk(s), not {expected}: the old one is unchanged")
    dump.unlink()
    (staging / UPGRADE_READY).write_text(f"PostgreSQL {old} -> {new}\n")
    os.replace(pgdata, kept)
    os.replace(staging / "pgdata", pgdata)
    shutil.rmtree(staging, ignore_errors=True)
    return UpgradeReport(old, new, chunks, kept)


def _answering_chunks(url: str) -> int:
    with psycopg.connect(url) as conn:
        conn.execute(sqlfiles.query("ping"))
        row = conn.execute("select count(*) from knowledge_chunks").fetchone()
    return int(row[0]) if row else 0


def _old_programs(pgdata: Path, major: int, given: Path | None) -> Path:
    candidates = [given] if given else [recorded_server_bindir(pgdata, major), Path(f"/usr/lib/postgresql/{major}/bin")]
    for bindir in candidates:
        if bindir is None or not (bindir / "pg_ctl").exists():
            continue
        found = program_major(bindir)
        if found != major:
            raise UpgradeError(f"{bindir} holds PostgreSQL {found}, not {major}, which wrote {pgdata}")
        return bindir
    raise UpgradeError(
        f"the programs of PostgreSQL {major}, which wrote {pgdata}, are not found: give --old-bindir, "
        f"the bin folder of a PostgreSQL {major} with pgvector (Debian's postgresql-{major}, or the pgserver "
        f"folder of the worker release that ran it: .../pgserver/pginstall/bin)"
    )


@contextlib.contextmanager
def _old_server(pgdata: Path, bindir: Path) -> Iterator[str]:
    """The old server running on ``pgdata`` on a private socket only, as the folder's owner."""
    as_owner: list[str] = []
    with tempfile.TemporaryDirectory(prefix="arc-upgrade-") as sock:
        if os.geteuid() == 0:  # Postgres refuses root: run as the user that owns the data directory
            owner = pwd.getpwuid(pgdata.stat().st_uid).pw_name
            shutil.chown(sock, owner)
            as_owner = ["runuser", "-u", owner, "--"]
        pg_ctl = [*as_owner, str(bindir / "pg_ctl"), "-D", str(pgdata), "-w"]
        options = f"-k {sock} -c listen_addresses='' -p 5432"
        log = Path(sock) / "server.log"
        started = subprocess.run([*pg_ctl, "-l", str(log), "-o", options, "start"], capture_output=True, text=True)
        if started.returncode != 0:
            reason = log.read_text().strip().splitlines()[-1:] if log.exists() else [started.stderr.strip()]
            raise UpgradeError(f"the PostgreSQL server in {bindir} did not start on {pgdata}: {' '.join(reason)}")
        try:
            yield f"postgresql://postgres@/postgres?host={sock}&port=5432"
        finally:
            subprocess.run([*pg_ctl, "-m", "fast", "stop"], capture_output=True)
