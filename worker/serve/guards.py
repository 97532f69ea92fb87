"""What runs around every request: its id, authentication and rate limits before, its metrics
after. Routes outside ``Services.tokens`` (health, and metrics and the OpenAPI document unless
ARC_OPS_TOKEN is set) are open. Authentication is :func:`~worker.serve.security.authenticate`,
the check every door makes."""

from __future__ import annotations

import time
import uuid
from typing import Any

from flask import Response, g, request

from .community_scope import ALLOWED
from .documents_api import DOCUMENTS_ROUTE
from .responses import error, refused
from .security import CLOSED, authenticate, client_key
from .services import services
from .webhooks import INGEST_ROUTE, RETRIEVAL_ROUTE

# The routes that check every community they touch (community_scope.checked): the only ones a
# token limited to communities opens; the operator's /metrics and /openapi.json stay closed to it.
COMMUNITY_ROUTES = (RETRIEVAL_ROUTE, INGEST_ROUTE, DOCUMENTS_ROUTE)


def _protected_route(path: str, tokens: dict[str, str | None]) -> str | None:
    for route in tokens:
        if path == route or path.startswith(route + "/"):
            return route
    return None


def before_request() -> Any:
    incoming = request.headers.get("X-Request-ID", "")
    g.request_id = incoming[:100] if incoming and incoming.isprintable() else uuid.uuid4().hex
    g.started = time.perf_counter()
    arc = services()
    route = _protected_route(request.path, arc.tokens)
    if route is None:
        return None
    expected = arc.tokens[route]
    if expected == CLOSED:
        return error(403, "forbidden", "this worker has no ARC_INGEST_TOKEN: set it to ingest and delete "
                     "(or ARC_INGEST_WITH_API_TOKEN=true to let the retrieval token do so)")
    settings = arc.runtime.settings
    address = request.remote_addr or "unknown"
    auth = settings.auth
    presented = request.headers.get(auth.auth_header)
    verdict = authenticate(expected, presented, address=address, guard=arc.auth_guard, route=route,
                           community_tokens=auth.community_tokens if route in COMMUNITY_ROUTES else None,
                           failures=arc.metrics.auth_failures)
    if verdict.retry_after:
        return refused("too many failed authentication attempts; retry after the Retry-After delay",
                       verdict.retry_after)
    if not verdict.ok:
        return error(401, "unauthorized", "unauthorized")
    # a token limited to communities: the routes check each community they touch against it
    setattr(g, ALLOWED, verdict.communities)
    if wait := arc.limiter.acquire(client_key(presented if expected else None, address)):
        return refused("too many requests; retry after the Retry-After delay", wait)
    return None


def after_request(response: Response) -> Response:
    response.headers["X-Request-ID"] = g.get("request_id", "")
    route = request.url_rule.rule if request.url_rule is not None else "unmatched"
    metrics = services().metrics
    metrics.requests.labels(route, str(response.status_code)).inc()
    if "started" in g:
        metrics.latency.labels(route).observe(time.perf_counter() - g.started)
    return response
