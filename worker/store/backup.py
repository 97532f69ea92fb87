"""Backups of the knowledge base: one file holding everything it keeps, and its restore.

A backup is ``pg_dump``'s custom archive of schema ``public`` (every table, function, index,
trigger and row the worker keeps, whatever migrations made them; the keeper's sessions without
their rows), written by the ``pg_dump`` that ships with the embedded server. pg_dump reads one
repeatable-read snapshot and takes only ``ACCESS SHARE`` locks, so the worker answers and
ingests while it runs. The file is framed so a damaged one is refused before anything changes::

    arc-retrieval backup 1\\n
    {header as one JSON line}\\n
    <pg_dump custom archive>
    \\narc-retrieval backup end <archive length, 16 digits> <sha256 of all before the trailer>\\n

It is written to a hidden temporary file beside the target, synced, then renamed over it: a
backup stopped at any point leaves no file at the target, or the previous one, whole.

A restore checks the frame and checksum, then runs the archive (through ``pg_restore``'s script
output) in one transaction: the worker's objects are dropped and made again from the archive,
the rows are loaded, the rights are given as a fresh install gives them, and the row counts are
checked against the header before the commit. A restore stopped at any point leaves the
knowledge base as it was. The migrations of this release then bring the schema up to date.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import json
import logging
import os
import re
import subprocess
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

import psutil
import psycopg
from psycopg import sql

from ..scratch import scratch
from . import sqlfiles
from .server_version import bundled_bindir, major_of

MAGIC = b"arc-retrieval backup 1\n"
_TRAILER = re.compile(rb"\narc-retrieval backup end (\d{16}) ([0-9a-f]{64})\n\Z")
TRAILER_SIZE = len(b"\narc-retrieval backup end ") + 16 + 1 + 64 + 1
# Rows of these tables are not the keeper's data: a freshly migrated database has them.
BOOKKEEPING_TABLES = ("schema_migrations", "bm25_corpus", "knowledge_base_state")
# Left out of a backup: signed-in sessions end with the server that issued them.
SESSION_TABLES = ("keeper_sessions",)
_CHUNK = 1 << 20
log = logging.getLogger("arc.backup")
# A restore that Postgres undid to break a deadlock with a serving worker's short transaction is
# run again, this many times in all.
RESTORE_ATTEMPTS = 3


class BackupError(Exception):
    """A backup or restore that cannot go ahead; its message is one line for the command."""


@dataclass(frozen=True)
class BackupHeader:
    """What a backup says about itself (its second line)."""

    created_at: str
    server_version: str  # of the database it was taken from
    pg_dump_version: str
    embedding_dim: int | None
    rows: dict[str, int] = field(default_factory=dict)  # per table, in the dump's snapshot

    def to_line(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode() + b"\n"

    @classmethod
    def from_line(cls, line: bytes) -> BackupHeader:
        data = json.loads(line)
        return cls(
            created_at=str(data["created_at"]),
            server_version=str(data["server_version"]),
            pg_dump_version=str(data["pg_dump_version"]),
            embedding_dim=data.get("embedding_dim"),
            rows={str(k): int(v) for k, v in data["rows"].items()},
        )


@dataclass(frozen=True)
class BackupFile:
    """A checked backup: its header and where its archive lies in the file."""

    path: Path
    header: BackupHeader
    archive_offset: int
    archive_length: int


@dataclass(frozen=True)
class RestoreReport:
    rows: dict[str, int]
    replaced: bool


# -- backup -----------------------------------------------------------------------------------


def _tables_query() -> str:
    return sqlfiles.query("backup_tables")


def _row_counts(conn: psycopg.Connection) -> dict[str, int]:
    counts: dict[str, int] = {}
    for (name,) in conn.execute(_tables_query()).fetchall():
        if name in SESSION_TABLES:
            continue
        row = conn.execute(sql.SQL("select count(*) from public.{}").format(sql.Identifier(name))).fetchone()
        counts[name] = int(row[0]) if row else 0
    return counts


def _embedding_dim(conn: psycopg.Connection) -> int | None:
    row = conn.execute(sqlfiles.query("embedding_type")).fetchone()
    match = re.fullmatch(r"vector\((\d+)\)", row[0]) if row and row[0] else None
    return int(match.group(1)) if match else None


def _pg_dump_version(bindir: Path) -> str:
    out = subprocess.run([str(bindir / "pg_dump"), "--version"], capture_output=True, text=True, check=True)
    return out.stdout.split()[-1]


def write_backup(url: str, target: Path, *, bindir: Path | None = None) -> BackupHeader:
    """Write the knowledge base at ``url`` to ``target`` (replaced whole, or left as it was)."""
    bindir = bindir or bundled_bindir()
    target = Path(target)
    if target.is_dir():
        raise BackupError(f"{target} is a folder; name the backup file to write")
    try:
        return _write_backup(url, target, bindir)
    except psycopg.Error as exc:
        detail = exc.diag.message_primary or (str(exc).splitlines() or [type(exc).__name__])[0]
        raise BackupError(f"the backup failed, {target} is unchanged: {detail}") from None


def _write_backup(url: str, target: Path, bindir: Path) -> BackupHeader:
    partial = target.with_name(f".{target.name}.partial-{os.getpid()}")
    _remove_abandoned(target)
    with psycopg.connect(url) as conn:
        # One snapshot for the counts and for pg_dump: the header describes exactly what it dumps.
        conn.execute("begin isolation level repeatable read read only")
        row = conn.execute("select pg_export_snapshot(), current_setting('server_version')").fetchone()
        assert row is not None
        snapshot, server_version = str(row[0]), str(row[1])
        rows = _row_counts(conn)
        if "knowledge_chunks" not in rows:
            raise BackupError("that database holds no knowledge base (no table knowledge_chunks): nothing to back up")
        header = BackupHeader(
            created_at=datetime.now(UTC).isoformat(timespec="seconds"),
            server_version=server_version,
            pg_dump_version=_pg_dump_version(bindir),
            embedding_dim=_embedding_dim(conn),
            rows=rows,
        )
        command = [
            str(bindir / "pg_dump"),
            "--format=custom",
            "--schema=public",
            f"--snapshot={snapshot}",
            *(f"--exclude-table-data=public.{t}" for t in SESSION_TABLES),
            f"--dbname={url}",
        ]
        try:
            _dump_to(partial, command, header)
        except BaseException:
            with contextlib.suppress(OSError):
                partial.unlink()
            raise
        conn.rollback()
    os.replace(partial, target)
    _sync_folder(target.parent)
    return header


def _dump_to(partial: Path, command: list[str], header: BackupHeader) -> None:
    digest = hashlib.sha256()
    with open(partial, "wb") as out:
        out.write(MAGIC)
        out.write(header.to_line())
        digest.update(MAGIC + header.to_line())
        length = 0
        with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as dump:
            assert dump.stdout is not None and dump.stderr is not None
            for block in iter(lambda: dump.stdout.read(_CHUNK), b""):  # type: ignore[union-attr]
                out.write(block)
                digest.update(block)
                length += len(block)
            error = dump.stderr.read().decode(errors="replace")
        if dump.returncode != 0:
            raise BackupError(f"pg_dump failed: {_first_line(error)}")
        _checkpoint("backup-written")
        out.write(b"\narc-retrieval backup end %016d %s\n" % (length, digest.hexdigest().encode()))
        out.flush()
        os.fsync(out.fileno())
    _checkpoint("backup-synced")


def _remove_abandoned(target: Path) -> None:
    """Remove what a killed backup to ``target`` left (its process no longer runs)."""
    for partial in target.parent.glob(f".{glob.escape(target.name)}.partial-*"):
        pid = partial.name.rsplit("-", 1)[-1]
        if pid.isdigit() and not psutil.pid_exists(int(pid)):
            with contextlib.suppress(OSError):
                partial.unlink()


def _sync_folder(folder: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[0].removeprefix("pg_dump: ").removeprefix("error: ") if lines else "no message"


def _checkpoint(step: str) -> None:
    """Pause at a named step when ``ARC_BACKUP_PAUSE_AT`` names it: how the tests stop a backup
    or restore at a chosen point (they kill the process there)."""
    if os.environ.get("ARC_BACKUP_PAUSE_AT") == step:
        import time

        Path(os.environ.get("ARC_BACKUP_PAUSE_FLAG", os.devnull)).touch()
        time.sleep(3600)


# -- reading a backup --------------------------------------------------------------------------


def read_backup(path: Path) -> BackupFile:
    """Check ``path`` is a whole backup (frame, length, checksum) and return its header; a
    :class:`BackupError` with one line otherwise."""
    path = Path(path)
    try:
        size = path.stat().st_size
        handle = open(path, "rb")  # noqa: SIM115  closed by the with below
    except OSError as exc:
        raise BackupError(f"{path}: {exc.strerror or exc}") from None
    with handle:
        if handle.read(len(MAGIC)) != MAGIC:
            raise BackupError(f"{path} is not an arc-retrieval backup")
        header_line = handle.readline(1 << 24)
        try:
            header = BackupHeader.from_line(header_line)
        except (ValueError, KeyError, TypeError, AttributeError):
            raise BackupError(f"{path} is damaged: its header cannot be read") from None
        offset = len(MAGIC) + len(header_line)
        if size < offset + TRAILER_SIZE:
            raise BackupError(f"{path} is incomplete (cut short): refusing it")
        handle.seek(size - TRAILER_SIZE)
        trailer = _TRAILER.match(handle.read(TRAILER_SIZE))
        if trailer is None or offset + int(trailer[1]) + TRAILER_SIZE != size:
            raise BackupError(f"{path} is incomplete (cut short): refusing it")
        handle.seek(0)
        digest = hashlib.sha256()
        remaining = size - TRAILER_SIZE
        while remaining:
            block = handle.read(min(_CHUNK, remaining))
            if not block:
                raise BackupError(f"{path} is incomplete (cut short): refusing it")
            digest.update(block)
            remaining -= len(block)
        if digest.hexdigest().encode() != trailer[2]:
            raise BackupError(f"{path} is damaged (checksum mismatch): refusing it")
    return BackupFile(path, header, offset, int(trailer[1]))


@contextlib.contextmanager
def _archive_copy(backup: BackupFile) -> Iterator[Path]:
    """The archive alone, in a private temporary file (pg_restore reads a file); a copy that a
    killed restore left is removed first (worker/scratch.py)."""
    with scratch("arc-restore-") as folder:
        archive = folder / "archive.dump"
        with open(backup.path, "rb") as src, open(archive, "wb") as out:
            src.seek(backup.archive_offset)
            remaining = backup.archive_length
            while remaining:
                block = src.read(min(_CHUNK, remaining))
                if not block:
                    raise BackupError(f"{backup.path} changed while it was read")
                out.write(block)
                remaining -= len(block)
        yield archive


# -- restore ----------------------------------------------------------------------------------


def stored_rows(conn: psycopg.Connection) -> dict[str, int]:
    """Rows per table of the knowledge base that are the keeper's data (empty: none)."""
    counts = _row_counts(conn)
    return {name: n for name, n in counts.items() if n and name not in BOOKKEEPING_TABLES}


def restore_backup(url: str, backup: BackupFile, *, replace: bool, bindir: Path | None = None) -> RestoreReport:
    """Restore ``backup`` into the database at ``url`` in one transaction. Refuses a knowledge
    base that holds data unless ``replace``."""
    bindir = bindir or bundled_bindir()
    with _archive_copy(backup) as archive, psycopg.connect(url) as conn:
        server_major = major_of(str(conn.execute("show server_version").fetchone()[0]))  # type: ignore[index]
        held = stored_rows(conn)
        conn.rollback()
        if held and not replace:
            total = sum(held.values())
            raise BackupError(
                f"the knowledge base is not empty ({total} rows, {held.get('knowledge_chunks', 0)} chunks): "
                "restore refuses to overwrite it; pass --replace to replace it with the backup"
            )
        listing = _restore_listing(bindir, archive)
        for attempt in range(1, RESTORE_ATTEMPTS + 1):
            try:
                _restore_once(conn, bindir, archive, listing, backup, server_major)
                break
            except psycopg.errors.DeadlockDetected as exc:
                # a serving worker's short transaction (a calibration stored, a confirmation
                # read) met the restore's locks in another order, and Postgres undid the restore
                if attempt == RESTORE_ATTEMPTS:
                    raise BackupError(f"the restore failed, nothing was changed: {_message(exc)}") from None
                log.warning("restore undone to break a deadlock; running it again", extra={"attempt": attempt})
            except psycopg.Error as exc:
                raise BackupError(f"the restore failed, nothing was changed: {_message(exc)}") from None
    return RestoreReport(rows=backup.header.rows, replaced=bool(held))


def _restore_once(
    conn: psycopg.Connection, bindir: Path, archive: Path, listing: Path, backup: BackupFile, server_major: int
) -> None:
    """One attempt at the restore, in one transaction: pg_restore's script run on ``conn``, the
    rights and versions set, the rows counted against the header; any error undoes it all."""
    script = subprocess.Popen(
        [
            str(bindir / "pg_restore"),
            "--file=-",
            "--clean",
            "--if-exists",
            "--no-owner",
            "--no-privileges",
            f"--use-list={listing}",
            str(archive),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        with conn.transaction():
            conn.execute(sqlfiles.query("backup_restore_lock"))
            previous = _versions(conn)
            conn.execute(sqlfiles.migrations()[0].text, prepare=False)  # the extensions
            assert script.stdout is not None
            _run_script(conn, script.stdout, server_major)
            error = script.stderr.read().decode(errors="replace") if script.stderr else ""
            if script.wait() != 0:
                raise BackupError(f"pg_restore failed: {_first_line(error)}")
            _checkpoint("restore-loaded")
            conn.execute("set local search_path = public, extensions")
            conn.execute(sqlfiles.query("backup_rights"))
            _move_versions_past(conn, previous)
            restored = _row_counts(conn)
            expected = {t: n for t, n in backup.header.rows.items()}
            if {t: restored.get(t) for t in expected} != expected:
                raise BackupError("the restored rows differ from the backup's counts; nothing was changed")
            _checkpoint("restore-before-commit")
    finally:
        if script.poll() is None:
            script.kill()
        script.wait()


def _message(exc: psycopg.Error) -> str:
    return exc.diag.message_primary or str(exc).splitlines()[0]


def _restore_listing(bindir: Path, archive: Path) -> Path:
    """pg_restore's table of contents without the schema ``public`` itself (Postgres makes it;
    dropping it would take the extensions with it)."""
    out = subprocess.run([str(bindir / "pg_restore"), "--list", str(archive)], capture_output=True)
    if out.returncode != 0:
        raise BackupError(f"the backup's archive cannot be read: {_first_line(out.stderr.decode(errors='replace'))}")
    keep = [
        line
        for line in out.stdout.decode().splitlines()
        if not re.match(r"^\d+; \d+ \d+ (SCHEMA - public|COMMENT - SCHEMA public|ACL - SCHEMA public) ", line)
    ]
    listing = archive.with_suffix(".list")
    listing.write_text("\n".join(keep) + "\n")
    return listing


_COPY = re.compile(rb"^COPY .+ FROM stdin;\n\Z")
# Column options a server build keeps for itself (Debian's PostgreSQL 15 here records pg_attver on
# every column): pg_dump copies them, and a server of another build refuses the unknown option.
# The worker sets no column option of its own, so none is lost.
_SERVER_COLUMN_OPTION = re.compile(rb"^ALTER TABLE ONLY \S+ ALTER COLUMN \S+ SET \(pg_attver=\d+\);\n\Z")


def _run_script(conn: psycopg.Connection, script: IO[bytes], server_major: int) -> None:
    """Run pg_restore's script output on ``conn``: statements as they come, each table's rows
    through COPY. psql's ``\\restrict`` lines are skipped, and ``transaction_timeout`` (a setting
    since PostgreSQL 17) on an older server, and a server build's own column options."""
    pending: list[bytes] = []

    def flush() -> None:
        text = b"".join(pending).decode()
        pending.clear()
        if text.strip():
            conn.execute(text, prepare=False)

    for line in script:
        if line.startswith(b"\\"):
            continue
        if server_major < 17 and line.startswith(b"SET transaction_timeout"):
            continue
        if _SERVER_COLUMN_OPTION.match(line):
            continue
        if _COPY.match(line):
            flush()
            with conn.cursor().copy(line.decode().rstrip().rstrip(";")) as copy:
                for row in script:
                    if row == b"\\.\n":
                        break
                    copy.write(row)
            continue
        pending.append(line)
    flush()


def _versions(conn: psycopg.Connection) -> list[tuple[str, int]]:
    row = conn.execute(sqlfiles.query("backup_has_versions")).fetchone()
    if not row or not row[0]:
        return []
    return [(str(c), int(v)) for c, v in conn.execute(sqlfiles.query("backup_versions_before")).fetchall()]


def _move_versions_past(conn: psycopg.Connection, previous: list[tuple[str, int]]) -> None:
    """A worker serving the replaced knowledge base caches searches under each community's
    version: a restored version at or below the one it knew moves past it."""
    for community, version in previous:
        conn.execute(sqlfiles.query("backup_version_past"), {"community": community, "version": version})
