"""Postgres access: one connection pool per process, migrations, and the schema checks.

The pool is opened lazily in the process that uses it, so a gunicorn master can build the app
before forking without sharing sockets with its workers.

The pool checks a connection is alive before lending it (one round trip) only when it has sat
unused for :data:`CHECK_AFTER_SECONDS` since it was returned or opened: across a network that
check doubled every call. One used moments ago is lent as it is; if it broke meanwhile (the
server restarted), the statement fails with a connection error, the pool drops it, and a
question's search, a read, is asked again on another (``postgres_search.py``,
``ANSWER_ATTEMPTS``). That read asks for its first connection unchecked however long it sat
(``connection(checked=False)``): a quiet worker, a question every few seconds, would otherwise
pay the check on every question; its later attempts are checked.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import psycopg
from pgvector.psycopg import register_vector
from psycopg_pool import ConnectionPool

from ..errors import DatabaseUnavailable, SchemaMismatch, WritesBusy
from . import model_record, sqlfiles
from .calls import CountingCursor

log = logging.getLogger("arc.database")

# A pooled connection returned longer ago than this is checked before it is lent again.
CHECK_AFTER_SECONDS = 5.0
# False while a caller that retries a broken connection itself takes one (the pool runs its check
# in the caller's thread).
_checking: ContextVar[bool] = ContextVar("arc_pool_checks", default=True)


class Database:
    def __init__(
        self,
        url: str,
        *,
        pool_size: int = 4,
        statement_timeout_ms: int = 5000,
        connect_timeout: float = 3.0,
        write_lock_wait: float = 30.0,
    ):
        self.url = url
        self.pool_size = pool_size
        self.statement_timeout_ms = statement_timeout_ms
        self.write_lock_wait = write_lock_wait
        self.connect_timeout = connect_timeout
        self._pool: ConnectionPool | None = None
        self._pool_pid: int | None = None
        self._returned: weakref.WeakKeyDictionary[psycopg.Connection, float] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    # -- connections ---------------------------------------------------------------------------

    def connect(self) -> psycopg.Connection:
        """A standalone connection (CLI, migrations, ingestion)."""
        conn = psycopg.connect(self.url, connect_timeout=int(self.connect_timeout) or 1)
        self._configure(conn)
        return conn

    def _configure(self, conn: psycopg.Connection) -> None:
        conn.cursor_factory = CountingCursor  # each statement counts as a database call (calls.py)
        conn.execute(f"set statement_timeout = {int(self.statement_timeout_ms)}")
        with contextlib.suppress(psycopg.ProgrammingError):  # no vector extension yet (before migrations)
            register_vector(conn)
        conn.commit()
        self._note_return(conn)  # just opened: as fresh as one returned now, lent without a check

    @property
    def pool(self) -> ConnectionPool:
        with self._lock:
            if self._pool is None or self._pool_pid != os.getpid():
                self._pool = ConnectionPool(
                    self.url,
                    min_size=1,
                    max_size=self.pool_size,
                    open=False,
                    configure=self._configure,
                    check=self._check,
                    reset=self._note_return,
                    kwargs={"autocommit": True, "connect_timeout": int(self.connect_timeout) or 1},
                    reconnect_timeout=0,  # keep retrying in the background forever
                    name="arc",
                )
                self._pool.open(wait=False)
                self._pool_pid = os.getpid()
            return self._pool

    def _note_return(self, conn: psycopg.Connection) -> None:
        self._returned[conn] = time.monotonic()

    def _check(self, conn: psycopg.Connection) -> None:
        """The pool's liveness check, for a connection that has sat unused a while (see above)."""
        returned = self._returned.get(conn)
        recent = returned is not None and time.monotonic() - returned < CHECK_AFTER_SECONDS
        if not conn.closed and (recent or not _checking.get()):
            return
        ConnectionPool.check_connection(conn)

    @contextmanager
    def connection(self, timeout: float | None = None, *, checked: bool = True) -> Iterator[psycopg.Connection]:
        """A pooled autocommit connection; :class:`DatabaseUnavailable` if none comes in time.

        ``checked=False``: lent without the liveness check however long it sat, for a read whose
        caller asks again on a connection error (see the module's docstring)."""
        token = _checking.set(checked)
        lent = False
        try:
            with self.pool.connection(timeout=timeout or self.connect_timeout) as conn:
                _checking.reset(token)  # the statements inside are the caller's, checks included
                lent = True
                yield conn
        except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
            raise DatabaseUnavailable(str(exc).splitlines()[0] if str(exc) else "database unavailable") from exc
        except Exception as exc:
            if type(exc).__name__ == "PoolTimeout":
                raise DatabaseUnavailable("no database connection available") from exc
            raise
        finally:
            if not lent:
                _checking.reset(token)

    def ping(self, timeout: float = 1.0) -> bool:
        try:
            with self.connection(timeout=timeout) as conn:
                conn.execute(sqlfiles.query("ping"))
            return True
        except (DatabaseUnavailable, psycopg.Error):
            return False

    def pool_stats(self) -> dict[str, int]:
        """The pool's counters, without opening a pool that does not exist yet."""
        with self._lock:
            pool = self._pool if self._pool_pid == os.getpid() else None
        return pool.get_stats() if pool is not None else {}

    def close(self, timeout: float = 5.0) -> None:
        """Close the pool, waiting up to ``timeout`` seconds for connections in use."""
        with self._lock:
            if self._pool is not None and self._pool_pid == os.getpid():
                self._pool.close(timeout=timeout)
            self._pool = None

    def lock_writes(self, conn: psycopg.Connection) -> None:
        """Take the one write lock every ingest and delete takes first, in ``conn``'s transaction.
        The wait for it is bounded by ``write_lock_wait`` alone, not by the statement timeout,
        which would cut it at 5 s and give an ingest queued behind a long load a bare "database
        unavailable".
        Past the bound: :class:`WritesBusy`, which names the cause and is retriable."""
        conn.execute(sqlfiles.query("write_lock_wait"), {"wait": f"{int(self.write_lock_wait * 1000)}ms"})
        try:
            conn.execute(sqlfiles.query("lock_writes"))
        except psycopg.errors.LockNotAvailable:
            raise WritesBusy(
                f"another ingest or delete has been writing the knowledge base for over "
                f"{self.write_lock_wait:g} s (ARC_WRITE_LOCK_WAIT), so this one was not stored; "
                f"retry after the Retry-After delay"
            ) from None
        conn.execute(sqlfiles.query("write_lock_taken"), {"statement_timeout": str(int(self.statement_timeout_ms))})

    # -- schema --------------------------------------------------------------------------------

    def migrate(self, dim: int) -> list[str]:
        """Apply the files of ``sql/`` that are pending (:func:`sqlfiles.migrations`: the extensions,
        the functions, the numbered migrations), each in its own transaction. Returns their names."""
        applied_now: list[str] = []
        with psycopg.connect(self.url, connect_timeout=int(self.connect_timeout) or 1) as conn:
            conn.execute(sqlfiles.query("function_bodies_unchecked"))
            conn.execute(sqlfiles.query("create_migrations_table"))
            conn.commit()
            for migration in sqlfiles.migrations():
                with conn.transaction():
                    # Serialise concurrent starters (several gunicorn workers, CLI and server).
                    conn.execute(sqlfiles.query("lock_migrations"))
                    done: dict[str, str] = dict(conn.execute(sqlfiles.query("applied_migrations")).fetchall())
                    checksum = migration.checksum(dim)
                    if migration.name in done and (not migration.repeatable or done[migration.name] == checksum):
                        continue
                    conn.execute(migration.render(dim))
                    conn.execute(sqlfiles.query("record_migration"), {"name": migration.name, "checksum": checksum})
                    applied_now.append(migration.name)
        if applied_now:
            log.info("applied migrations", extra={"migrations": applied_now})
        return applied_now

    def embedding_dim(self) -> int | None:
        """The dimension of knowledge_chunks.embedding, or None before migrations."""
        with psycopg.connect(self.url, connect_timeout=int(self.connect_timeout) or 1) as conn:
            row = conn.execute(sqlfiles.query("embedding_type")).fetchone()
        if not row or not row[0]:
            return None
        match = re.fullmatch(r"vector\((\d+)\)", row[0])
        return int(match.group(1)) if match else None

    def check_dimension(self, model: str, dim: int) -> None:
        table_dim = self.embedding_dim()
        if table_dim is not None and table_dim != dim:
            raise SchemaMismatch(
                f"embedding model {model} makes {dim}-dim vectors but knowledge_chunks.embedding "
                f"is vector({table_dim}); use the model the table was built with, or a fresh "
                f"database (ARC_DATA_DIR / DATABASE_URL)"
            )

    def recorded_model(self) -> str | None:
        """The embedding model that wrote the chunks (sql/040), or None while there are none."""
        with psycopg.connect(self.url, connect_timeout=int(self.connect_timeout) or 1) as conn:
            found = model_record.recorded(conn)
        return found.model if found else None

    def check_model(self, model: str, dim: int) -> None:
        """Refuse to start with another model than the one that embedded the chunks (both may
        make vectors of one size); record ``model`` for a knowledge base that has none."""
        with psycopg.connect(self.url, connect_timeout=int(self.connect_timeout) or 1) as conn:
            found = model_record.recorded(conn)
            if found is not None and found.model != model:
                raise SchemaMismatch(model_record.mixing_message(found.model, model))
            if found is not None:
                model_record.record(conn, model, dim)  # a knowledge base filled before the record
