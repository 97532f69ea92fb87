"""The knowledge-base service: what every door (the webhooks, Dify's /retrieval, the MCP tools,
the keeper's pages, the command line) does once it has parsed its input, and before it renders
the result in its own shape.

It owns the rules those calls share: the schema checked before the database is used, admission
control around the work, the answer record (the empty knowledge base said, the query-log row,
the log line) and its metrics, a cancelled read counted, and, after every write, the caches and
the status calibration told that the documents changed, and the caller's reach: every read and
write names the :class:`~worker.service.caller.Caller` the door's gate made, and the service
refuses a community that caller does not reach (and a write by one that reads only) before it
reads or changes anything. What stays with each door: its input's validation, who the caller
is, and the status codes and shapes.
"""

from __future__ import annotations

import logging
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
from ..store import communities, knowledge_base, sqlfiles
from ..store.querylog import QueryLog
from ..store.rows import one_row
from .admission import Admission
from .answer_log import record_answer
from .build import build_ingestor, build_retriever
from .caller import Caller

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
    """One per process and door: the retriever and ingestor (each built on first use when not
    given, so a command that only lists documents builds no retriever), the query log, the
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
        self._retriever = retriever
        self._ingestor = ingestor
        self._progress = progress
        self.query_log = QueryLog(runtime.db)
        self.metrics: AnswerMetrics = metrics or NoMetrics()
        limits = settings.limits
        self.admission = Admission(limits.max_concurrent, limits.max_queue, limits.queue_timeout)
        # reading documents (parsing, conversion, OCR) has its own small bound, inside the
        # general one, so uploads can never take every slot questions need
        self.ingest_admission = Admission(limits.max_ingests, limits.max_ingests, limits.queue_timeout)

    @property
    def retriever(self) -> Retriever:
        if self._retriever is None:
            self._retriever = build_retriever(self.runtime)
        return self._retriever

    @property
    def ingestor(self) -> Ingestor:
        if self._ingestor is None:
            self._ingestor = build_ingestor(self.runtime, progress=self._progress)
        return self._ingestor

    # -- questions ---------------------------------------------------------------------------

    def ask(
        self, request: RetrievalRequest, *, caller: Caller, request_id: str | None = None, record: bool = True
    ) -> RetrievalResponse:
        """The answer to a validated request, in the community ``caller`` reaches (403 for
        another, before anything is read). ``record``: keep it in the query log, log its line
        and count it (False for a keeper's or developer's test question, which is not a
        resident's)."""
        request = request.model_copy(update={"community": caller.reach(request.community)})
        self.runtime.ensure_schema()
        with self.admission.slot():
            answer = self.retriever.ask(AnswerOptions.of(request), request_id=request_id)
        if record:
            record_answer(answer, self.runtime.db, self.query_log)
            self.metrics.observe_answer(answer.status, answer.timings_ms, answer.warnings)
        return answer

    # -- documents ---------------------------------------------------------------------------

    def community(self, named: str | None, *, caller: Caller) -> str:
        """The community a documents call is about: the one named (which must hold documents and
        be one ``caller`` reaches), else the caller's or the knowledge base's only one (several:
        the caller must name one)."""
        named = caller.reach(named)
        self.runtime.ensure_schema()
        return communities.resolve(named, communities.list_communities(self.runtime.db))

    def communities(self) -> dict[str, int]:
        """Each community holding chunks, with its chunk count."""
        return communities.list_communities(self.runtime.db)

    def list_documents(self, community: str, *, caller: Caller) -> list[DocumentSummary]:
        community = _named(caller.reach(community), community)
        self.runtime.ensure_schema()
        return knowledge_base.list_documents(self.runtime.db, community)

    def show(self, document_id: str, community: str, *, caller: Caller) -> tuple[DocumentSummary, list[DocumentChunk]]:
        """One document and its chunks; raises ``knowledge_base.UnknownDocument``."""
        community = _named(caller.reach(community), community)
        self.runtime.ensure_schema()
        return knowledge_base.document_chunks(self.runtime.db, document_id, community)

    def delete(self, document_id: str, community: str, *, caller: Caller) -> int:
        """Delete a document (within an admission slot); the chunks it had. Raises
        ``knowledge_base.UnknownDocument``."""
        community = _named(caller.writes(community), community)
        self.runtime.ensure_schema()
        with self.admission.slot():
            deleted = knowledge_base.delete_document(self.runtime.db, document_id, community)
        self.changed()
        return deleted

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
        self.runtime.ensure_schema()
        with nullcontext() if admitted else self.ingest_slots():
            try:
                result = store(ScopedIngestor(self.ingestor, caller))
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
        community = caller.writes(community)
        return self.ingest(
            lambda scoped: ingest_paths(
                scoped.ingestor, paths, fields, progress=progress, replace=replace, community=community
            ),
            caller=caller,
        )

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
        community = caller.writes(community)
        return self.ingest(
            lambda scoped: ingest_manifest(
                scoped.ingestor,
                folder,
                progress=progress,
                replace=replace,
                community=community,
                allow_duplicate=allow_duplicate,
            ),
            caller=caller,
        )

    def ingest_sample(self, *, progress: bool = False, community: str | None = None, caller: Caller) -> IngestReport:
        """The bundled Cedar Hollow sample corpus."""
        community = caller.writes(community)
        return self.ingest(
            lambda scoped: ingest_sample_corpus(scoped.ingestor, progress=progress, community=community),
            caller=caller,
        )

    def load_sample_if_empty(self, *, caller: Caller) -> None:
        """The sample corpus, when the knowledge base holds nothing (``--load-sample``)."""
        with self.runtime.db.connect() as conn:
            empty = one_row(conn.execute(sqlfiles.query("knowledge_base_empty")))[0]
        if empty:
            self.ingest_sample(caller=caller)

    # -- the process's retriever -------------------------------------------------------------

    def changed(self) -> None:
        """After a write: cached searches would answer from the old documents, and the status's
        scale belongs to the old knowledge base, so the changed communities' calibrations are
        measured and stored now, for every process and door to read. Stored is stored: a failure
        here is logged, and the next question measures what is missing."""
        try:
            self.retriever.knowledge_base_changed()
        except Exception as exc:
            log.warning("knowledge_base_changed failed", extra={"error_type": type(exc).__name__})

    def prepare_calibrations(self) -> None:
        """At a serving process's start: the stored status calibrations answer; whatever is missing
        or stale is measured in the background (retrieve/calibration.py)."""
        self.retriever.prepare_calibrations()

    def close(self) -> None:
        """Write the queued query-log rows and stop the retriever's background work; the runtime
        is its owner's to close."""
        self.query_log.close()
        if self._retriever is not None:
            self._retriever.close()


def _named(reached: str | None, community: str) -> str:
    """The community a call names, once the caller's reach has passed it."""
    return reached if reached is not None else community


class ScopedIngestor:
    """The ingestor as a door's ``store`` sees it: it reads as the ingestor does, and writes only
    to a community its caller may write (403 otherwise, before anything is stored)."""

    def __init__(self, ingestor: Ingestor, caller: Caller):
        self.ingestor = ingestor
        self.caller = caller
        self.limits = ingestor.limits

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
        return self.ingestor.write(documents, embeddings, replace=replace, community=self.caller.writes(community))
