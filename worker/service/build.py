"""The long-lived parts the service is built from, by the settings: the retriever (its search
backend, read replicas, reranker, thresholds) and the ingestor (OCR, read limits). The CLI, the
MCP server and the evaluation harness build theirs here too."""

from __future__ import annotations

from ..config import Settings
from ..ingest.bounds import ReadLimits
from ..ingest.ingestor import Ingestor
from ..ingest.ocr import Ocr
from ..retrieve.confidence import StatusCuts
from ..retrieve.pipeline import ContextPolicy, Retriever, Thresholds
from ..retrieve.rerank import LLMReranker, Reranker
from ..retrieve.rerank_services import SHAPES, ScoreScale, ServiceReranker
from ..retrieve.search import PostgresBackend, SearchCache, SupabaseBackend
from ..runtime import Runtime
from ..store.replicas import ReadReplicas


def build_reranker(settings: Settings) -> Reranker | None:
    if settings.reranker in SHAPES:
        return ServiceReranker(settings.reranker, settings.rerank_base_url or "",
                               api_key=settings.rerank_api_key, model=settings.rerank_model,
                               timeout=settings.rerank_timeout,
                               scale=ScoreScale(settings.rerank_score, settings.rerank_success_score,
                                                settings.rerank_no_results_score),
                               guard_min=settings.low_confidence_below)
    if settings.reranker != "llm":
        return None
    from ..embeddings import make_openai_client

    client = make_openai_client(settings, timeout=settings.llm_timeout, for_embeddings=False, max_retries=0)
    return LLMReranker(client, settings.llm_model, timeout=settings.llm_timeout,
                       guard_min=settings.low_confidence_below)


def build_retriever(runtime: Runtime) -> Retriever:
    settings = runtime.settings
    if settings.supabase_url:
        backend = SupabaseBackend(settings.supabase_url, settings.supabase_key)
    else:
        backend = PostgresBackend(runtime.db, read_replicas(runtime))
    return Retriever(embedder=runtime.embedder, backend=backend, reranker=build_reranker(settings),
                     thresholds=Thresholds(settings.no_results_below, settings.low_confidence_below),
                     cuts=StatusCuts(settings.success_at, settings.no_results_at,
                                     settings.status_answer_types),
                     calibrate=settings.status_calibration,
                     calibration_questions=settings.calibration_questions,
                     near_miss_reach=settings.near_miss_reach,
                     policy=ContextPolicy(min_relevance=settings.min_relevance,
                                          min_context_chunks=settings.min_context_chunks),
                     embedding_timeout=settings.embedding_timeout,
                     search_cache=SearchCache(ttl_seconds=settings.search_cache_seconds))


def read_replicas(runtime: Runtime) -> ReadReplicas | None:
    if not runtime.replicas:
        return None
    settings = runtime.settings
    return ReadReplicas(runtime.db, runtime.replicas, max_wait=settings.replica_max_wait_ms / 1000,
                        timeout=settings.replica_timeout_ms / 1000,
                        retry_after=settings.replica_retry_seconds)


def build_ingestor(runtime: Runtime, *, progress: bool = False) -> Ingestor:
    """``progress``: draw OCR's progress bar (the command line on a terminal)."""
    settings = runtime.settings
    return Ingestor(runtime.db, runtime.embedder,
                    ocr=Ocr(settings.ocr, settings.ocr_language, progress=progress),
                    limits=ReadLimits.from_settings(settings))
