"""The Flask app factory: ``POST /webhook/arc-retrieval`` and friends.

``create_app()`` builds everything from the environment (what gunicorn and ``arc-retrieval
serve`` call); tests pass settings or a ready :class:`~worker.runtime.Runtime`. The routes live
in blueprints (:mod:`worker.serve.webhooks`, :mod:`worker.serve.documents_api`, :mod:`worker.serve.ops_api`), what
runs around them in :mod:`worker.serve.guards`, and every error answer in :mod:`worker.serve.responses`.
"""

from __future__ import annotations

from flask import Flask

from ..config import Settings
from ..ingest.bounds import ReadLimits
from ..ingest.ingestor import Ingestor
from ..ingest.ocr import Ocr
from ..models import RetrievalResponse
from ..retrieve.confidence import StatusCuts
from ..retrieve.pipeline import ContextPolicy, Retriever, Thresholds
from ..retrieve.rerank import LLMReranker
from ..retrieve.search import PostgresBackend, SearchCache, SupabaseBackend
from ..runtime import Runtime, open_runtime
from ..store.querylog import QueryLog
from ..store.replicas import ReadReplicas
from . import guards, pages
from .admission import Admission
from .dify import dify
from .documents_api import DOCUMENTS_ROUTE, documents
from .hosts import HostPolicy, TrustedProxies
from .metrics import Metrics, cache_families, database_families, pool_families
from .ops_api import OPS_ROUTES, ops
from .responses import register_error_handlers
from .security import FailedAuthGuard, RateLimiter, admin_token
from .services import Services
from .webhooks import INGEST_ROUTE, RETRIEVAL_ROUTE, webhooks


def build_reranker(settings: Settings) -> LLMReranker | None:
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
                     cuts=StatusCuts(settings.success_at, settings.no_results_at, settings.status_answer_types),
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
                        timeout=settings.replica_timeout_ms / 1000, retry_after=settings.replica_retry_seconds)


def create_app(settings: Settings | None = None, runtime: Runtime | None = None,
               retriever: Retriever | None = None) -> Flask:
    if runtime is None:
        runtime = open_runtime(settings or Settings.from_env())
    settings = runtime.settings
    retriever = retriever or build_retriever(runtime)
    admin = admin_token(settings.api_token, settings.ingest_token, settings.ingest_with_api_token)
    ops_tokens = dict.fromkeys(OPS_ROUTES, settings.ops_token) if settings.ops_token else {}
    arc = Services(
        runtime=runtime, retriever=retriever,
        ingestor=Ingestor(runtime.db, runtime.embedder, ocr=Ocr(settings.ocr, settings.ocr_language),
                          limits=ReadLimits.from_settings(settings)),
        query_log=QueryLog(runtime.db), metrics=Metrics(),
        admission=Admission(settings.max_concurrent, settings.max_queue, settings.queue_timeout),
        limiter=RateLimiter(settings.rate_limit), auth_guard=FailedAuthGuard(settings.auth_failures_per_minute),
        tokens={RETRIEVAL_ROUTE: settings.api_token, INGEST_ROUTE: admin, DOCUMENTS_ROUTE: admin, **ops_tokens},
        # reading documents (parsing, conversion, OCR) has its own small bound, inside the
        # general one, so uploads can never take every slot questions need
        ingest_admission=Admission(settings.max_ingests, settings.max_ingests, settings.queue_timeout))
    arc.metrics.watch(lambda: cache_families(runtime.embedder.hits, runtime.embedder.misses,
                                             retriever.search_cache.hits))
    arc.metrics.watch(lambda: pool_families(runtime.db.pool_stats()))
    replicas = getattr(getattr(retriever, "backend", None), "replicas", None)  # a test may pass a bare retriever
    if replicas is not None:
        arc.metrics.watch(lambda: database_families(replicas.all_stats()))

    app = Flask("arc-retrieval")
    app.config["MAX_CONTENT_LENGTH"] = settings.max_body_bytes
    app.extensions["arc"] = arc
    app.extensions[guards.HOSTS] = HostPolicy.from_settings(settings)
    app.wsgi_app = TrustedProxies(app.wsgi_app, settings.trusted_proxies)  # type: ignore[method-assign]
    app.before_request(guards.before_request)
    app.after_request(guards.after_request)
    for blueprint in (webhooks, documents, ops, dify):
        app.register_blueprint(blueprint)
    register_error_handlers(app)
    pages.init_app(app)
    return app


__all__ = ["create_app", "build_retriever", "RetrievalResponse", "RETRIEVAL_ROUTE", "INGEST_ROUTE"]
