"""The Flask app: ``POST /webhook/arc-retrieval`` and friends.

``create_app()`` builds everything from the environment (what gunicorn and ``arc-retrieval
serve`` call); tests pass settings or a ready :class:`~worker.runtime.Runtime`.
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any

import psycopg
from flask import Flask, Response, g, jsonify, request
from pydantic import ValidationError
from werkzeug.exceptions import HTTPException

from .config import Settings
from .responses import error as _error
from .responses import refused as _refused
from .responses import validation_error as _validation_error
from .documents_api import DOCUMENTS_ROUTE, documents
from .errors import ArcError, DatabaseUnavailable, IngestError
from .ingest import Ingestor
from .metrics import Metrics, cache_families, pool_families
from .models import IngestRequest, IngestResponse, RetrievalRequest, RetrievalResponse, unwrap
from .openapi import openapi_document
from .pipeline import ContextPolicy, Retriever, Thresholds
from .querylog import QueryLog
from .rerank import LLMReranker
from .runtime import Runtime, open_runtime
from .search import PostgresBackend, SearchCache, SupabaseBackend
from .admission import Admission, Overloaded
from .security import FailedAuthGuard, RateLimiter, client_key, token_matches

log = logging.getLogger("arc.app")

RETRIEVAL_ROUTE = "/webhook/arc-retrieval"
INGEST_ROUTE = "/webhook/arc-ingest"


def build_reranker(settings: Settings) -> LLMReranker | None:
    if settings.reranker != "llm":
        return None
    from .embeddings import make_openai_client

    client = make_openai_client(settings, timeout=settings.llm_timeout, for_embeddings=False, max_retries=0)
    return LLMReranker(client, settings.llm_model, timeout=settings.llm_timeout,
                       guard_min=settings.low_confidence_below)


def build_retriever(runtime: Runtime) -> Retriever:
    settings = runtime.settings
    if settings.supabase_url:
        backend = SupabaseBackend(settings.supabase_url, settings.supabase_key)
    else:
        backend = PostgresBackend(runtime.db)
    return Retriever(embedder=runtime.embedder, backend=backend, reranker=build_reranker(settings),
                     thresholds=Thresholds(settings.no_results_below, settings.low_confidence_below),
                     policy=ContextPolicy(min_relevance=settings.min_relevance,
                                          min_context_chunks=settings.min_context_chunks),
                     embedding_timeout=settings.embedding_timeout,
                     search_cache=SearchCache(ttl_seconds=settings.search_cache_seconds))


def create_app(settings: Settings | None = None, runtime: Runtime | None = None,
               retriever: Retriever | None = None) -> Flask:
    if runtime is None:
        runtime = open_runtime(settings or Settings.from_env())
    settings = runtime.settings
    retriever = retriever or build_retriever(runtime)
    query_log = QueryLog(runtime.db)

    app = Flask("arc-retrieval")
    app.config["MAX_CONTENT_LENGTH"] = settings.max_body_bytes
    app.extensions["arc"] = {"runtime": runtime, "retriever": retriever}

    metrics = Metrics()
    metrics.watch(lambda: cache_families(runtime.embedder.hits, runtime.embedder.misses, retriever.search_cache.hits))
    metrics.watch(lambda: pool_families(runtime.db.pool_stats()))
    app.extensions["arc"]["metrics"] = metrics
    limiter = RateLimiter(settings.rate_limit)
    auth_guard = FailedAuthGuard(settings.auth_failures_per_minute)
    admission = Admission(settings.max_concurrent, settings.max_queue, settings.queue_timeout)
    app.extensions["arc"]["admission"] = admission
    admin_token = settings.ingest_token or settings.api_token
    tokens = {RETRIEVAL_ROUTE: settings.api_token, INGEST_ROUTE: admin_token, DOCUMENTS_ROUTE: admin_token}
    app.register_blueprint(documents)

    @app.before_request
    def _request_id() -> Any:
        incoming = request.headers.get("X-Request-ID", "")
        g.request_id = incoming[:100] if incoming and incoming.isprintable() else uuid.uuid4().hex
        g.started = time.perf_counter()
        route = DOCUMENTS_ROUTE if request.path.startswith(DOCUMENTS_ROUTE + "/") else request.path
        if route not in tokens:
            return None
        address = request.remote_addr or "unknown"
        if wait := auth_guard.blocked(address):
            return _refused("too many failed authentication attempts; retry after the Retry-After delay", wait)
        presented = request.headers.get(settings.auth_header)
        if not token_matches(tokens[route], presented):
            auth_guard.failed(address)
            return _error(401, "unauthorized", "unauthorized")
        if wait := limiter.acquire(client_key(presented if tokens[route] else None, address)):
            return _refused("too many requests; retry after the Retry-After delay", wait)
        return None

    @app.after_request
    def _echo_request_id(response: Response) -> Response:
        response.headers["X-Request-ID"] = g.get("request_id", "")
        route = request.url_rule.rule if request.url_rule is not None else "unmatched"
        metrics.requests.labels(route, str(response.status_code)).inc()
        if "started" in g:
            metrics.latency.labels(route).observe(time.perf_counter() - g.started)
        return response

    @app.post(RETRIEVAL_ROUTE)
    def retrieve() -> Any:
        payload = _json_body()
        try:
            req = RetrievalRequest.model_validate(unwrap(payload))
        except ValidationError as exc:
            return _validation_error(exc)
        runtime.ensure_schema()
        with admission.slot():
            answer = retriever.answer(req, request_id=g.request_id)
        metrics.observe_answer(answer.status, answer.timings_ms, answer.warnings)
        query_log.record(answer)
        return jsonify(answer.model_dump(mode="json", exclude_none=False))

    ingestor = Ingestor(runtime.db, runtime.embedder)

    @app.post(INGEST_ROUTE)
    def ingest() -> Any:
        from .readers import html_to_markdown, parse_markdown, parse_text

        if request.files:
            upload = request.files.get("file")
            if upload is None:
                return _error(422, "invalid_input", "file: send the document in a form field named file", "file")
            try:
                text = upload.read().decode("utf-8")
            except UnicodeDecodeError:
                return _error(422, "invalid_input", "file: must be UTF-8 text or Markdown", "file")
            fields = {k: v for k, v in request.form.items()}
            if "is_binding" in fields:
                fields["is_binding"] = fields["is_binding"].lower() in ("1", "true", "yes", "on")
            suffix = (upload.filename or "").lower().rpartition(".")[2]
            fields.setdefault("format", {"txt": "text", "html": "html", "htm": "html"}.get(suffix, "markdown"))
            payload: Any = {**fields, "text": text}
        else:
            payload = unwrap(_json_body())
        try:
            req = IngestRequest.model_validate(payload)
        except ValidationError as exc:
            return _validation_error(exc)
        runtime.ensure_schema()
        parsed = (parse_text(req.text) if req.format == "text"
                  else parse_markdown(html_to_markdown(req.text) if req.format == "html" else req.text))
        document = ingestor.prepare_text(parsed, document_id=req.document_id, name=req.name,
                                         document_type=req.document_type, is_binding=req.is_binding,
                                         supersedes=req.supersedes, superseded_by=req.superseded_by,
                                         metadata={"source": "webhook"},
                                         amends=tuple(req.amends))
        with admission.slot():
            report = ingestor.write([document])
        retriever.search_cache.clear()
        return jsonify(IngestResponse(status="ingested", document_id=document.document_id,
                                      document_name=document.name, chunks=report.chunks,
                                      replaced_chunks=report.replaced_chunks,
                                      amended_chunks=report.amended_chunks, notes=list(report.notes),
                                      request_id=g.request_id).model_dump(mode="json"))

    @app.get("/healthz")
    def healthz() -> Any:
        return jsonify({"status": "ok"})

    @app.get("/readyz")
    def readyz() -> Any:
        db_ok = runtime.db.ping()
        if db_ok:
            try:
                runtime.ensure_schema()
            except Exception:  # a schema error is also "not ready"; it is logged by ensure_schema
                db_ok = False
        body = {"status": "ready" if db_ok else "not_ready", "database": db_ok,
                "embedding_model": runtime.embedder.model}
        return jsonify(body), 200 if db_ok else 503

    @app.get("/metrics")
    def prometheus() -> Any:
        return Response(metrics.render(), mimetype="text/plain; version=0.0.4")

    @app.get("/openapi.json")
    def openapi() -> Any:
        return jsonify(openapi_document())

    @app.errorhandler(ArcError)
    def _arc_error(exc: ArcError) -> Any:
        if isinstance(exc, DatabaseUnavailable):
            log.warning("database unavailable", extra={"reason": str(exc)})
            response = _error(exc.status, exc.code, "the knowledge base is temporarily unavailable; retry shortly")
        else:
            response = _error(exc.status, exc.code, str(exc), exc.field if isinstance(exc, IngestError) else None)
        if exc.retry_after:
            response.headers["Retry-After"] = str(exc.retry_after)
        return response

    @app.errorhandler(Overloaded)
    def _overloaded(exc: Overloaded) -> Any:
        return _refused(f"the worker is at capacity ({exc}); retry after the Retry-After delay", exc.retry_after)

    @app.errorhandler(psycopg.OperationalError)
    def _database_dropped(exc: psycopg.OperationalError) -> Any:
        # The connection broke mid-request (restart, failover): retryable, not a bug.
        return _arc_error(DatabaseUnavailable(type(exc).__name__))

    @app.errorhandler(HTTPException)
    def _http_error(exc: HTTPException) -> Any:
        code = {400: "bad_request", 404: "not_found", 405: "method_not_allowed", 413: "payload_too_large",
                415: "unsupported_media_type"}.get(exc.code or 500, "http_error")
        field = "body" if exc.code in (400, 413, 415) else None
        return _error(exc.code or 500, code, exc.description or code, field)

    @app.errorhandler(Exception)
    def _unexpected(exc: Exception) -> Any:
        # Logged with its type only: a stack trace can carry document text or secrets.
        log.error("unexpected error", extra={"error_type": type(exc).__name__})
        return _error(500, "internal_error", "the worker failed to answer; the error was logged")

    return app


def _json_body() -> Any:
    from werkzeug.exceptions import BadRequest, UnsupportedMediaType

    if not request.is_json:
        raise UnsupportedMediaType("send the request as JSON (Content-Type: application/json)")
    payload = request.get_json(silent=True)
    if payload is None:
        raise BadRequest("the body is not valid JSON")
    if not isinstance(payload, dict):
        raise BadRequest("the body must be a JSON object")
    return payload


__all__ = ["create_app", "build_retriever", "RetrievalResponse"]
