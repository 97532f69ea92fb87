"""The ``query_log``: one row per answer (numbers and the question, never document text), written
off the answer's path.

:meth:`QueryLog.record` queues the row and returns; one background thread per process writes what
has queued, in one statement per batch (at most :data:`BATCH` rows), as soon as it can. Under
load rows wait while the previous batch is written and go in together; idle, a row is written
within milliseconds. :meth:`QueryLog.close` (the service's close, and the interpreter's exit)
writes every queued row before it returns, so a clean stop loses nothing; a crash (SIGKILL, the
machine stopping) loses the rows still queued, at most those of the answers given in the last
moments. A failed write is logged and its rows dropped: the answer matters more than its log row.
"""

from __future__ import annotations

import atexit
import logging
import os
import queue
import threading
import weakref
from typing import Any

from psycopg.types.json import Jsonb

from ..models import RetrievalResponse
from . import sqlfiles
from .database import Database

log = logging.getLogger("arc.querylog")

BATCH = 200  # rows per insert at most
QUEUE_LIMIT = 10_000  # past this many unwritten rows (the database is away), new rows are dropped


class QueryLog:
    def __init__(self, db: Database, enabled: bool = True):
        self.db = db
        self.enabled = enabled
        self._rows: queue.Queue[dict[str, Any]] = queue.Queue(maxsize=QUEUE_LIMIT)
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._pid: int | None = None
        self._pending = 0  # queued or being written
        self._idle = threading.Condition(self._lock)
        atexit.register(_close, weakref.ref(self))

    def record(self, answer: RetrievalResponse) -> None:
        """Queue ``answer``'s row; the background writer inserts it."""
        if not self.enabled:
            return
        try:
            self._rows.put_nowait(row_of(answer))
        except queue.Full:
            log.warning("query_log queue full; row dropped")
            return
        with self._lock:
            self._pending += 1
            if self._thread is None or self._pid != os.getpid() or not self._thread.is_alive():
                # started in the process that records (a gunicorn worker, after the fork)
                self._thread = threading.Thread(target=self._write_forever, name="arc-query-log", daemon=True)
                self._pid = os.getpid()
                self._thread.start()

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until every queued row is written (or dropped); False if ``timeout`` passed first."""
        with self._idle:
            return self._idle.wait_for(lambda: self._pending == 0, timeout=timeout)

    def close(self, timeout: float = 10.0) -> None:
        """Write what is queued before returning (a clean stop loses no row)."""
        if self._thread is not None and self._pid == os.getpid():
            self.flush(timeout)

    def _write_forever(self) -> None:
        while True:
            batch = [self._rows.get()]
            while len(batch) < BATCH:
                try:
                    batch.append(self._rows.get_nowait())
                except queue.Empty:
                    break
            self._write(batch)
            with self._idle:
                self._pending -= len(batch)
                self._idle.notify_all()

    def _write(self, batch: list[dict[str, Any]]) -> None:
        try:
            with self.db.connection(timeout=2.0) as conn, conn.cursor() as cur:
                cur.executemany(sqlfiles.query("insert_query_log"), batch)
        except Exception as exc:  # the answer matters more than its log row
            log.warning("query_log insert failed", extra={"error_type": type(exc).__name__, "rows": len(batch)})


def row_of(answer: RetrievalResponse) -> dict[str, Any]:
    chunks = answer.chunks
    both = sum(1 for c in chunks if c.vector_rank is not None and c.fts_rank is not None)
    vector_only = sum(1 for c in chunks if c.vector_rank is not None and c.fts_rank is None)
    fts_only = sum(1 for c in chunks if c.vector_rank is None and c.fts_rank is not None)
    vector_scores = [c.vector_score for c in chunks if c.vector_score is not None]
    fts_scores = [c.fts_score for c in chunks if c.fts_score is not None]
    return {
        "community": answer.community,
        "request_id": answer.request_id,
        "query": answer.query.original[:2000],
        "normalized_query": answer.query.normalized[:2000],
        "query_type": answer.query.query_type,
        "status": answer.status,
        "best_score": answer.best_score,
        "result_count": answer.sources,
        "candidate_count": len(chunks),
        "both_legs_count": both,
        "vector_only_count": vector_only,
        "fts_only_count": fts_only,
        "avg_vector_score": sum(vector_scores) / len(vector_scores) if vector_scores else None,
        "avg_fts_score": sum(fts_scores) / len(fts_scores) if fts_scores else None,
        "reranked": answer.reranked,
        "warnings": answer.warnings,
        "timings_ms": Jsonb(answer.timings_ms),
        "sources": [c.id for c in sorted((c for c in chunks if c.source is not None), key=lambda c: c.source or 0)],
    }


def _close(ref: weakref.ref) -> None:
    found = ref()
    if found is not None:
        found.close()
