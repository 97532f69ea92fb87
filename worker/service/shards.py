"""The knowledge-base service's parts bound to one database: the retriever that searches it (its
calibrations, confirmations, search cache and, for the default database, its read replicas),
the ingestor that writes to it and the query log its answers are recorded in.

A knowledge base split over several databases (``ARC_COMMUNITY_DATABASES``,
store/databases.py) has one :class:`Shard` per database, so a community's question is searched,
calibrated and logged where its documents are, and no part of one database serves another's
community. Each part is built on first use: a process that only lists documents builds no
retriever, and one never asked about a database's communities opens no pool to it.
"""

from __future__ import annotations

import threading

from ..ingest.ingestor import Ingestor
from ..retrieve.pipeline import Retriever
from ..runtime import Runtime
from ..store.database import Database
from ..store.querylog import QueryLog
from .build import build_ingestor, build_retriever


class Shard:
    def __init__(
        self,
        runtime: Runtime,
        db: Database,
        *,
        retriever: Retriever | None = None,
        ingestor: Ingestor | None = None,
        progress: bool = False,
    ):
        self.runtime = runtime
        self.db = db
        self.query_log = QueryLog(db)
        self._retriever = retriever
        self._ingestor = ingestor
        self._progress = progress
        self._lock = threading.Lock()

    @property
    def retriever(self) -> Retriever:
        with self._lock:
            if self._retriever is None:
                self._retriever = build_retriever(self.runtime, self.db)
            return self._retriever

    @property
    def ingestor(self) -> Ingestor:
        with self._lock:
            if self._ingestor is None:
                self._ingestor = build_ingestor(self.runtime, self.db, progress=self._progress)
            return self._ingestor

    @property
    def built_retriever(self) -> Retriever | None:
        """The retriever if one was built (closing builds none)."""
        return self._retriever

    def close(self) -> None:
        """Write the queued query-log rows and stop the retriever's background work."""
        self.query_log.close()
        if self._retriever is not None:
            self._retriever.close()
