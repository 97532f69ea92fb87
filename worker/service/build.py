"""The long-lived parts the service is built from, by the settings: the retriever (its search
backend, read replicas, reranker, thresholds) and the ingestor (OCR, read limits). The CLI, the
MCP server and the evaluation harness build theirs here too."""

from __future__ import annotations

from ..config import Settings
from ..ingest.bounds import ReadLimits
from ..ingest.ingestor import Ingestor
from ..ingest.ocr import Ocr
from ..retrieve.confirmed import Confirmations, homeowner_questions
from ..retrieve.pipeline import ContextPolicy, Retriever, Thresholds
from ..retrieve.rerank import LLMReranker, Reranker
from ..retrieve.rerank_services import SHAPES, ScoreScale, ServiceReranker
from ..retrieve.search_cache import SearchCache
from ..retrieve.status.confidence import StatusCuts
from ..runtime import Runtime
from ..store.confirmations import ConfirmationStore, RpcConfirmationReads
from ..store.database import Database
from ..store.postgres_search import PostgresBackend
from ..store.replicas import ReadReplicas
from ..store.search import SearchBackend
from ..store.supabase_search import SupabaseBackend


def build_reranker(settings: Settings) -> Reranker | None:
    reranking = settings.reranking
    if reranking.reranker in SHAPES:
        return ServiceReranker(
            reranking.reranker,
            reranking.rerank_base_url or "",
            api_key=reranking.rerank_api_key,
            model=reranking.rerank_model,
            timeout=reranking.rerank_timeout,
            scale=ScoreScale(reranking.rerank_score, reranking.rerank_success_score, reranking.rerank_no_results_score),
            guard_min=settings.status.low_confidence_below,
            calibrated=reranking.rerank_calibration,
        )
    if reranking.reranker != "llm":
        return None
    from ..embeddings import make_openai_client

    client = make_openai_client(settings, timeout=reranking.llm_timeout, for_embeddings=False, max_retries=0)
    return LLMReranker(
        client, reranking.llm_model, timeout=reranking.llm_timeout, guard_min=settings.status.low_confidence_below
    )


def build_retriever(runtime: Runtime, db: Database | None = None) -> Retriever:
    """The retriever of ``db``'s communities (None: the default database's): its searches,
    calibrations, confirmations and replicas are that database's alone."""
    settings = runtime.settings
    database, status = settings.database, settings.status
    db = db or runtime.db
    backend: SearchBackend
    if database.supabase_url:
        assert database.supabase_key is not None  # the settings require both or neither
        backend = SupabaseBackend(database.supabase_url, database.supabase_key)
    else:
        backend = PostgresBackend(db, read_replicas(runtime) if db is runtime.db else None)
    return Retriever(
        embedder=runtime.embedder,
        backend=backend,
        reranker=build_reranker(settings),
        thresholds=Thresholds(status.no_results_below, status.low_confidence_below),
        cuts=StatusCuts(status.success_at, status.no_results_at, status.status_answer_types, status.status_on_subject),
        calibrate=status.status_calibration,
        calibration_questions=status.calibration_questions,
        near_miss_reach=status.near_miss_reach,
        policy=ContextPolicy(**settings.context.model_dump()),
        embedding_timeout=settings.embedding.embedding_timeout,
        search_cache=SearchCache(ttl_seconds=settings.search.search_cache_seconds),
        confirmations=build_confirmations(runtime, backend, db),
    )


def build_confirmations(runtime: Runtime, backend: SearchBackend, db: Database | None = None) -> Confirmations:
    """The keeper's confirmed answers, read where the search reads: ``db`` (the primary; None:
    the default database), or Supabase's RPC route."""
    embedder = runtime.embedder
    store: ConfirmationStore | RpcConfirmationReads = (
        RpcConfirmationReads(backend.client)
        if isinstance(backend, SupabaseBackend)
        else ConfirmationStore(db or runtime.db)
    )
    return Confirmations(
        load=store.read,
        stamp=store.stamp,
        model=embedder.model,
        reference=lambda: embedder.embed_queries(homeowner_questions()),
        words=embedder.embed_queries,
    )


def read_replicas(runtime: Runtime) -> ReadReplicas | None:
    if not runtime.replicas:
        return None
    database = runtime.settings.database
    return ReadReplicas(
        runtime.db,
        runtime.replicas,
        max_wait=database.replica_max_wait_ms / 1000,
        timeout=database.replica_timeout_ms / 1000,
        retry_after=database.replica_retry_seconds,
    )


def build_ingestor(runtime: Runtime, db: Database | None = None, *, progress: bool = False) -> Ingestor:
    """The ingestor writing to ``db`` (None: the default database); ``progress``: draw OCR's
    progress bar (the command line on a terminal)."""
    reading = runtime.settings.reading
    return Ingestor(
        db or runtime.db,
        runtime.embedder,
        ocr=Ocr(reading.ocr, reading.ocr_language, progress=progress),
        limits=ReadLimits.from_settings(reading),
    )
