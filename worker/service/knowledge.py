"""The knowledge-base service: what every door (the webhooks, Dify's /retrieval, the MCP tools,
the keeper's pages, the command line) does once it has parsed its input, and before it renders
the result in its own shape.

It owns the rules those calls share: the schema checked before the database is used, admission
control around the work, the answer record (the empty knowledge base said, the query-log row,
the log line) and its metrics, a cancelled read counted, and, after every write, the caches and
the status calibration told that the documents changed, the database that holds each community
(one :class:`~worker.service.shards.Shard` per database of a knowledge base split by
``ARC_COMMUNITY_DATABASES``), and the caller's reach: every read and
write names the :class:`~worker.service.caller.Caller` the door's gate made, and the service
refuses a community that caller does not reach (and a write by one that reads only) before it
reads or changes anything. What stays with each door: its input's validation, who the caller
is, and the status codes and shapes.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any, Protocol, TypeVar

import numpy as np

from ..errors import ArcError
from ..ingest.bounds import Cancelled
from ..ingest.ingestor import (
    DocumentInput,
    Ingestor,
    IngestReport,
    ingest_manifest,
    ingest_paths,
    ingest_sample_corpus,
)
from ..models import DocumentChunk, DocumentFields, DocumentSummary, RetrievalRequest, RetrievalResponse
from ..retrieve.options import AnswerOptions
from ..retrieve.pipeline import Retriever
from ..runtime import Runtime
from ..store import communities, knowledge_base
from ..store.communities import Warmed
from ..store.database import Database
from ..store.querylog import QueryLog
from .admission import Admission
from .answer_log import record_answer
from .caller import Caller
from .shards import Shard

log = logging.getLogger("arc.service")

T = TypeVar("T")

# With the service, the types the doors name (they import neither the ingestor nor the pipeline).
__all__ = [
    "AnswerMetrics",
    "Caller",
    "DocumentInput",
    "IngestReport",
    "Ingestor",
    "KnowledgeService",
    "NoMetrics",
    "Retriever",
    "ScopedIngestor",
]


class AnswerMetrics(Protocol):
    """What the service counts: each answer (status, stage timings, fallbacks) and each read
    cut short. The HTTP server's Prometheus registry is one (serve/metrics.py)."""

    def observe_answer(self, status: str, timings_ms: dict[str, float], warnings: list[str]) -> None: ...

    def observe_cancelled_ingest(self) -> None: ...


class NoMetrics:
    """For a door with no metrics endpoint (the command line, the MCP server)."""

    def observe_answer(self, status: str, timings_ms: dict[str, float], warnings: list[str]) -> None:
        pass

    def observe_cancelled_ingest(self) -> None:
        pass


class KnowledgeService:
    """One per process and door: per database, the retriever, ingestor and query log (each built
    on first use; ``retriever`` and ``ingestor``, when given, are the default database's), the
    admission bounds and the metrics."""

    def __init__(
        self,
        runtime: Runtime,
        *,
        retriever: Retriever | None = None,
        ingestor: Ingestor | None = None,
        metrics: AnswerMetrics | None = None,
        progress: bool = False,
    ):
        settings = runtime.settings
        self.runtime = runtime
        self._progress = progress
        self._shards = {
            runtime.db: Shard(runtime, runtime.db, retriever=retriever, ingestor=ingestor, progress=progress)
        }
        self._shards_lock = threading.Lock()
        self.metrics: AnswerMetrics = metrics or NoMetrics()
        limits = settings.limits
        self.admission = Admission(limits.max_concurrent, limits.max_queue, limits.queue_timeout)
        # reading documents (parsing, conversion, OCR) has its own small bound, inside the
        # general one, so uploads can never take every slot questions need
        self.ingest_admission = Admission(limits.max_ingests, limits.max_ingests, limits.queue_timeout)
        self.warming: threading.Thread | None = None  # prepare_calibrations's reading of the large communities

    @property
    def retriever(self) -> Retriever:
        """The default database's retriever (the only one, unless the knowledge base is split)."""
        return self._shards[self.runtime.db].retriever

    @property
    def ingestor(self) -> Ingestor:
        """The default database's ingestor: it reads documents as every database's does."""
        return self._shards[self.runtime.db].ingestor

    @property
    def query_log(self) -> QueryLog:
        """The default database's query log."""
        return self._shards[self.runtime.db].query_log

    def shard(self, community: str | None) -> Shard:
        """The parts of the database that holds ``community`` (None: the default database's)."""
        return self.shard_of(self.runtime.database(community) if community is not None else self.runtime.db)

    def shard_of(self, db: Database) -> Shard:
        """The parts bound to ``db``, one of the runtime's databases."""
        with self._shards_lock:
            if db not in self._shards:
                self._shards[db] = Shard(self.runtime, db, progress=self._progress)
            return self._shards[db]

    def flush_query_logs(self) -> bool:
        """Write every database's queued query-log rows now; whether any were queued."""
        return any([shard.query_log.flush() for shard in self.shards()])

    def shards(self) -> list[Shard]:
        """The parts of every database this service has used so far."""
        with self._shards_lock:
            return list(self._shards.values())

    # -- questions ---------------------------------------------------------------------------

    def ask(
        self, request: RetrievalRequest, *, caller: Caller, request_id: str | None = None, record: bool = True
    ) -> RetrievalResponse:
        """The answer to a validated request, in the community ``caller`` reaches (403 for
        another, before anything is read). ``record``: keep it in the query log, log its line
        and count it (False for a keeper's or developer's test question, which is not a
        resident's)."""
        request = request.model_copy(update={"community": self._placed(caller.reach(request.community))})
        shard = self.shard(request.community)
        self.runtime.ensure_schema(shard.db)
        with self.admission.slot():
            answer = shard.retriever.ask(AnswerOptions.of(request), request_id=request_id)
        if record:
            record_answer(answer, shard.db, shard.query_log)
            self.metrics.observe_answer(answer.status, answer.timings_ms, answer.warnings)
        return answer

    # -- documents ---------------------------------------------------------------------------

    def community(self, named: str | None, *, caller: Caller) -> str:
        """The community a documents call is about: the one named (which must hold documents and
        be one ``caller`` reaches), else the caller's or the knowledge base's only one (several:
        the caller must name one)."""
        named = caller.reach(named)
        self.runtime.ensure_schema(self.runtime.database(named) if named is not None else None)
        return communities.resolve(named, self.runtime.databases.communities(named))

    def communities(self) -> dict[str, int]:
        """Each community holding chunks, in every database, with its chunk count (a community
        held by a database the mapping does not send it to: ``CommunityConflict``)."""
        return self.runtime.databases.communities()

    def reached_communities(self, *, caller: Caller) -> dict[str, int]:
        """As :meth:`communities`, only those ``caller`` reaches."""
        known = self.communities()
        if caller.communities is None:
            return known
        return {name: chunks for name, chunks in known.items() if name in caller.communities}

    def _placed(self, named: str | None) -> str | None:
        """The community a question is for, when the knowledge base is split: an unnamed one is
        the only community of every database (or the request is refused), as in one database."""
        if named is not None or not self.runtime.databases.split:
            return named
        return communities.resolve(None, self.communities())

    def list_documents(self, community: str, *, caller: Caller) -> list[DocumentSummary]:
        community = _named(caller.reach(community), community)
        db = self.runtime.database(community)
        self.runtime.ensure_schema(db)
        return knowledge_base.list_documents(db, community)

    def show(self, document_id: str, community: str, *, caller: Caller) -> tuple[DocumentSummary, list[DocumentChunk]]:
        """One document and its chunks; raises ``knowledge_base.UnknownDocument``."""
        community = _named(caller.reach(community), community)
        db = self.runtime.database(community)
        self.runtime.ensure_schema(db)
        return knowledge_base.document_chunks(db, document_id, community)

    def delete(self, document_id: str, community: str, *, caller: Caller) -> int:
        """Delete a document (within an admission slot); the chunks it had. Raises
        ``knowledge_base.UnknownDocument``."""
        community = _named(caller.writes(community), community)
        shard = self.shard(community)
        self.runtime.ensure_schema(shard.db)
        with self.admission.slot():
            deleted = knowledge_base.delete_document(shard.db, document_id, community)
        self.changed()
        return deleted

    def delete_community(self, community: str, *, caller: Caller) -> dict[str, int]:
        """Remove everything kept of a community, in the database that holds it (within an
        admission slot): what was removed, by kind. Only a caller of every community may; raises
        ``UnknownCommunity`` when nothing is kept under that name."""
        caller.may_delete_community()
        shard = self.shard(community)
        self.runtime.ensure_schema(shard.db)
        with self.admission.slot():
            removed = communities.delete(shard.db, community)
        self.changed()
        return removed

    # -- ingesting ---------------------------------------------------------------------------

    @contextmanager
    def ingest_slots(self) -> Iterator[None]:
        """The slots an ingest holds while it reads and stores: one of the few for ingests, and
        one of the general ones."""
        with self.ingest_admission.slot(), self.admission.slot():
            yield

    def ingest(self, store: Callable[[ScopedIngestor], T], *, caller: Caller, admitted: bool = False) -> T:
        """Run ``store``, the door's reading of its document(s) and their writing with the
        ingestor (writing only to communities ``caller`` may write), under the ingest's rules:
        the schema checked, the ingest's slots held (unless ``admitted``: the caller took them
        and holds them), a read cut short (the client left, ARC_READ_TIMEOUT) counted, and the
        documents' change told once stored."""
        caller.may_write()
        if not self.runtime.databases.split:  # split: the database written to is checked when known (writer)
            self.runtime.ensure_schema()
        with nullcontext() if admitted else self.ingest_slots():
            try:
                result = store(ScopedIngestor(self, caller))
            except ArcError as exc:
                if isinstance(exc.__cause__, Cancelled):
                    self.metrics.observe_cancelled_ingest()
                raise
        self.changed()
        return result

    def ingest_files(
        self,
        paths: Iterable[Path],
        fields: DocumentFields,
        *,
        progress: bool = False,
        replace: bool = False,
        community: str | None = None,
        caller: Caller,
    ) -> IngestReport:
        """Files (Markdown, text, HTML, PDF, Word, a BEIR corpus.jsonl) described alike by ``fields``."""

        def store(scoped: ScopedIngestor) -> IngestReport:
            target, ingestor = scoped.writer(community)
            return ingest_paths(ingestor, paths, fields, progress=progress, replace=replace, community=target)

        return self.ingest(store, caller=caller)

    def ingest_manifest(
        self,
        folder: Path,
        *,
        progress: bool = False,
        replace: bool = False,
        community: str | None = None,
        allow_duplicate: bool = False,
        caller: Caller,
    ) -> IngestReport:
        """Every document a folder's ``manifest.json`` lists."""

        def store(scoped: ScopedIngestor) -> IngestReport:
            target, ingestor = scoped.writer(community)
            return ingest_manifest(
                ingestor, folder, progress=progress, replace=replace, community=target, allow_duplicate=allow_duplicate
            )

        return self.ingest(store, caller=caller)

    def ingest_sample(self, *, progress: bool = False, community: str | None = None, caller: Caller) -> IngestReport:
        """The bundled Cedar Hollow sample corpus."""

        def store(scoped: ScopedIngestor) -> IngestReport:
            target, ingestor = scoped.writer(community)
            return ingest_sample_corpus(ingestor, progress=progress, community=target)

        return self.ingest(store, caller=caller)

    def writer(self, community: str | None) -> tuple[str | None, Ingestor]:
        """Where a load of ``community`` (a name the caller may write) goes: the community, and
        the ingestor of its database. In a knowledge base split over several databases an
        unnamed one is resolved across all of them first, and a community held where the mapping
        does not send it is refused before anything is read."""
        if self.runtime.databases.split:
            self.runtime.ensure_schema()
            community = communities.resolve_for_write(community, self.runtime.databases.communities(community))
        shard = self.shard(community)
        self.runtime.ensure_schema(shard.db)
        return community, shard.ingestor

    def load_sample_if_empty(self, *, caller: Caller) -> None:
        """The sample corpus, when the knowledge base holds nothing (``--load-sample``)."""
        if all(knowledge_base.is_empty(db) for db in self.runtime.databases.all()):
            self.ingest_sample(caller=caller)

    # -- the process's retriever -------------------------------------------------------------

    def changed(self) -> None:
        """After a write: cached searches would answer from the old documents, and the status's
        scale belongs to the old knowledge base, so the changed communities' calibrations are
        measured and stored now, for every process and door to read. Stored is stored: a failure
        here is logged, and the next question measures what is missing."""
        for shard in self.shards():
            try:
                shard.retriever.knowledge_base_changed()
            except Exception as exc:
                log.warning("knowledge_base_changed failed", extra={"error_type": type(exc).__name__})

    def prepare_calibrations(self) -> None:
        """At a serving process's start: the stored status calibrations answer; whatever is missing
        or stale is measured in the background (retrieve/calibration.py), in every database. The
        large communities' full-text pages are read into each database's cache meanwhile
        (:meth:`warm`), so the first questions after a restart do not read them from disk."""
        for db in self.runtime.databases.all():
            self.shard_of(db).retriever.prepare_calibrations()
        self.warming = threading.Thread(target=self.warm, name="arc-warm-communities", daemon=True)
        self.warming.start()

    def warm(self) -> list[Warmed]:
        """Read each database's large communities' full-text pages into its shared buffers
        (store/communities.py); a failure is logged, and questions read the pages as they go."""
        warmed: list[Warmed] = []
        for db in self.runtime.databases.all():
            try:
                done = communities.warm(db)
            except Exception as exc:
                log.warning("communities not warmed", extra={"error_type": type(exc).__name__})
                continue
            if done:
                log.info(
                    "communities warmed",
                    extra={"communities": [w.community for w in done], "pages": sum(w.pages for w in done)},
                )
            warmed += done
        return warmed

    def close(self) -> None:
        """Write the queued query-log rows and stop the retriever's background work; the runtime
        is its owner's to close."""
        for shard in self.shards():
            shard.close()


def _named(reached: str | None, community: str) -> str:
    """The community a call names, once the caller's reach has passed it."""
    return reached if reached is not None else community


class ScopedIngestor:
    """The ingestor as a door's ``store`` sees it: it reads as the ingestor does, and writes only
    to a community its caller may write (403 otherwise, before anything is stored)."""

    def __init__(self, service: KnowledgeService, caller: Caller):
        self.service = service
        self.ingestor = service.ingestor  # reads for every database alike; writes go by community
        self.caller = caller
        self.limits = self.ingestor.limits

    def writer(self, community: str | None) -> tuple[str | None, Ingestor]:
        """The community a load goes to and the ingestor of its database (403 for a community
        the caller may not write)."""
        return self.service.writer(self.caller.writes(community))

    def prepare_text(self, *args: Any, **kwargs: Any) -> DocumentInput:
        return self.ingestor.prepare_text(*args, **kwargs)

    def prepare_file(self, *args: Any, **kwargs: Any) -> DocumentInput:
        return self.ingestor.prepare_file(*args, **kwargs)

    def write(
        self,
        documents: list[DocumentInput],
        embeddings: np.ndarray | None = None,
        *,
        replace: bool = True,
        community: str | None = None,
    ) -> IngestReport:
        target, ingestor = self.writer(community)
        return ingestor.write(documents, embeddings, replace=replace, community=target)
