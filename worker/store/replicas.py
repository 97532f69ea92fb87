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
from typing import TypeVar

import psycopg

from ..errors import DatabaseUnavailable
from . import sqlfiles
from .database import Database
from .rows import one_row

log = logging.getLogger("arc.replicas")

T = TypeVar("T")

# How often a question re-reads the version of a replica that is behind, while it waits.
POLL_SECONDS = 0.005


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
        for index in self._order():
            replica, stats = self.replicas[index], self.stats[index]
            try:
                with replica.connection(timeout=self.timeout) as conn:
                    if not self._caught_up(conn, min_version, stats):
                        stats.behind += 1
                        continue
                    result = work(conn)
                stats.searches += 1
                return result
            except (DatabaseUnavailable, psycopg.Error) as exc:
                self._failed(stats, exc)
        with self.primary.connection() as conn:
            result = work(conn)
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
