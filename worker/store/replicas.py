"""Searches on read replicas: spread over them, never stale, and never an answer lost to one.

Postgres streaming replicas replay the primary's changes a little later. The knowledge base's
version (sql/008: a counter every change to the chunks moves, in the writer's transaction) says
how far a replica has replayed: a search runs on a replica only once that replica's version has
reached the one the primary reported for the question, so an ingest or delete the primary has
committed is in every answer built after it. A replica behind gets a short wait, then the next
replica, then the primary. A replica that fails or is too slow is skipped for a while and tried
again later; the question goes on to the next one within the same request.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

import psycopg

from ..errors import DatabaseUnavailable
from . import sqlfiles
from .database import Database
from .rows import one_row

log = logging.getLogger("arc.replicas")

T = TypeVar("T")

# How often a question re-reads the version of a replica that is behind, while it waits.
POLL_SECONDS = 0.005


@dataclass(frozen=True)
class Checked(Generic[T]):
    """A read on a database that may not have replayed the version asked for: its result (None:
    it had not) and the replay lag it reported (None: not read)."""

    result: T | None
    lag: float | None = None


@dataclass
class ReplicaStats:
    """What /metrics shows per database (labelled replica1, replica2 ...; never the URL)."""

    name: str
    searches: int = 0
    errors: int = 0
    behind: int = 0  # questions that found it behind the primary and went elsewhere
    lag_seconds: float = 0.0  # Postgres's own replay lag at the last check (grows while the primary is idle)
    healthy: bool = True
    retry_at: float = 0.0


class ReadReplicas:
    def __init__(
        self,
        primary: Database,
        replicas: list[Database],
        *,
        max_wait: float = 0.1,
        timeout: float = 1.0,
        retry_after: float = 30.0,
    ):
        self.primary = primary
        self.replicas = replicas
        self.max_wait = max_wait
        self.timeout = timeout
        self.retry_after = retry_after
        self.stats = [ReplicaStats(f"replica{i + 1}") for i in range(len(replicas))]
        self.primary_stats = ReplicaStats("primary")
        self._turn = itertools.count()
        self._lock = threading.Lock()
        self._floor = 0  # the highest version the primary has reported to this process

    # -- the version reads must reach ------------------------------------------------------------

    def primary_version(self) -> int:
        with self.primary.connection() as conn:
            version = one_row(conn.execute(sqlfiles.query("knowledge_base_version")))[0]
        self.saw(version)
        return version

    def saw(self, version: int) -> None:
        with self._lock:
            self._floor = max(self._floor, version)

    @property
    def floor(self) -> int:
        return self._floor

    # -- reading -----------------------------------------------------------------------------------

    def read(self, work: Callable[[psycopg.Connection], T], min_version: int) -> T:
        """``work`` on the first replica in turn that has replayed ``min_version``, else the primary."""

        def checked(conn: psycopg.Connection, stats: ReplicaStats) -> Checked[T]:
            if not self._caught_up(conn, min_version, stats):
                return Checked(None)
            return Checked(work(conn))

        return self._first(checked, work)

    def read_checked(self, work: Callable[[psycopg.Connection], Checked[T]], min_version: int) -> T:
        """``work``, a read that checks itself whether the database has replayed ``min_version``
        (no result when it has not), on the first replica in turn that has, else the primary:
        one round trip on a replica that is up to date."""

        def checked(conn: psycopg.Connection, stats: ReplicaStats) -> Checked[T]:
            found = work(conn)
            if found.lag is not None:
                stats.lag_seconds = found.lag
            if found.result is None and self._caught_up(conn, min_version, stats):
                found = work(conn)
            return found

        def on_primary(conn: psycopg.Connection) -> T:
            found = work(conn).result
            if found is None:
                raise DatabaseUnavailable("the primary is behind the version it reported")
            return found

        return self._first(checked, on_primary)

    def _first(
        self,
        attempt: Callable[[psycopg.Connection, ReplicaStats], Checked[T]],
        on_primary: Callable[[psycopg.Connection], T],
    ) -> T:
        """``attempt`` on each healthy replica in turn until one has the result, else
        ``on_primary`` on the primary (which has every version it reported)."""
        for index in self._order():
            replica, stats = self.replicas[index], self.stats[index]
            try:
                with replica.connection(timeout=self.timeout) as conn:
                    found = attempt(conn, stats)
            except (DatabaseUnavailable, psycopg.Error) as exc:
                self._failed(stats, exc)
                continue
            if found.result is None:
                stats.behind += 1
                continue
            stats.searches += 1
            return found.result
        with self.primary.connection() as conn:
            result = on_primary(conn)
        self.primary_stats.searches += 1
        return result

    def _order(self) -> list[int]:
        """Healthy replicas in turn, starting one further each question; one whose pause is over
        is healthy again (and is skipped again at once if it still fails)."""
        now = time.monotonic()
        start = next(self._turn)
        count = len(self.replicas)
        order = []
        for step in range(count):
            index = (start + step) % count
            stats = self.stats[index]
            if not stats.healthy and now >= stats.retry_at:
                stats.healthy = True
            if stats.healthy:
                order.append(index)
        return order

    def _caught_up(self, conn: psycopg.Connection, min_version: int, stats: ReplicaStats) -> bool:
        deadline = time.monotonic() + self.max_wait
        while True:
            version, lag = one_row(conn.execute(sqlfiles.query("replica_position")))
            stats.lag_seconds = float(lag or 0.0)
            if version >= min_version:
                return True
            if time.monotonic() + POLL_SECONDS > deadline:
                return False
            time.sleep(POLL_SECONDS)

    def _failed(self, stats: ReplicaStats, exc: Exception) -> None:
        stats.errors += 1
        stats.healthy = False
        stats.retry_at = time.monotonic() + self.retry_after
        # The message names the failure, never the connection string (it may hold a password).
        log.warning(
            "read replica failed; skipped for a while",
            extra={"replica": stats.name, "error": type(exc).__name__, "retry_in_s": self.retry_after},
        )

    def close(self, timeout: float = 5.0) -> None:
        for replica in self.replicas:
            replica.close(timeout)

    def all_stats(self) -> list[ReplicaStats]:
        return [self.primary_stats, *self.stats]
