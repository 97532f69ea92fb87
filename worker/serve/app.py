"""The Flask app factory: ``POST /webhook/arc-retrieval`` and friends.

``create_app()`` builds everything from the environment (what gunicorn and ``arc-retrieval
serve`` call); tests pass settings or a ready :class:`~worker.runtime.Runtime`. The routes live
in blueprints (:mod:`worker.serve.webhooks`, :mod:`worker.serve.documents_api`, :mod:`worker.serve.ops_api`), what
runs around them in :mod:`worker.serve.guards`, and every error answer in :mod:`worker.serve.responses`.
"""

from __future__ import annotations

from flask import Flask

from ..config import Settings
from ..models import RetrievalResponse
from ..runtime import Runtime, open_runtime
from ..service.knowledge import KnowledgeService, Retriever
from . import guards, pages
from .communities_api import communities
from .confirmations import confirmations
from .dify import dify
from .documents_api import documents
from .gate import OPEN, Gate
from .hosts import HostPolicy, TrustedProxies
from .metrics import Metrics, cache_families, database_families, pool_families
from .ops_api import ops
from .responses import register_error_handlers
from .security import FailedAuthGuard, RateLimiter, admin_token
from .services import Services
from .webhooks import INGEST_ROUTE, RETRIEVAL_ROUTE, webhooks


def create_app(
    settings: Settings | None = None,
    runtime: Runtime | None = None,
    retriever: Retriever | None = None,
    service: KnowledgeService | None = None,
) -> Flask:
    """``retriever``: one to answer with instead of the settings' (a test's); ``service``: a
    knowledge-base service to share with another door (its runtime is the app's)."""
    if service is not None:
        runtime = service.runtime
    if runtime is None:
        runtime = open_runtime(settings or Settings.from_env())
    settings = runtime.settings
    metrics = Metrics()
    if service is None:
        service = KnowledgeService(runtime, retriever=retriever, metrics=metrics)
    else:
        service.metrics = metrics
    retriever = service.retriever
    auth = settings.auth
    admin = admin_token(auth.api_token, auth.ingest_token, auth.ingest_with_api_token)
    # the token each kind of door asks for; ops routes are open (no entry) while ARC_OPS_TOKEN is unset
    tokens = {"api": auth.api_token, "admin": admin, **({"ops": auth.ops_token} if auth.ops_token else {})}
    gate = Gate(
        settings,
        tokens=tokens,
        limiter=RateLimiter(settings.limits.rate_limit),
        auth_guard=FailedAuthGuard(auth.auth_failures_per_minute),
        failures=metrics.auth_failures,
    )
    arc = Services(knowledge=service, metrics=metrics, gate=gate)
    arc.metrics.watch(
        lambda: cache_families(runtime.embedder.hits, runtime.embedder.misses, retriever.search_cache.hits)
    )
    arc.metrics.watch(lambda: pool_families(runtime.db.pool_stats()))
    replicas = getattr(getattr(retriever, "backend", None), "replicas", None)  # a test may pass a bare retriever
    if replicas is not None:
        arc.metrics.watch(lambda: database_families(replicas.all_stats()))

    app = Flask("arc-retrieval")
    app.config["MAX_CONTENT_LENGTH"] = settings.limits.max_body_bytes
    app.extensions["arc"] = arc
    app.extensions[guards.HOSTS] = HostPolicy.from_settings(settings)
    app.extensions[guards.PAGE_HOSTS] = HostPolicy.for_pages(settings)
    app.wsgi_app = TrustedProxies(app.wsgi_app, settings.serving.trusted_proxies)  # type: ignore[method-assign]
    guards.declare(app, "static", OPEN)
    app.before_request(guards.before_request)
    app.after_request(guards.after_request)
    for blueprint in (webhooks, documents, communities, ops, dify, confirmations):
        app.register_blueprint(blueprint)
    register_error_handlers(app)
    pages.init_app(app)
    return app


__all__ = ["INGEST_ROUTE", "RETRIEVAL_ROUTE", "RetrievalResponse", "create_app"]
