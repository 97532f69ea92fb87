"""What runs around every request: its id, authentication and rate limits before, its metrics
after. Routes outside ``Services.tokens`` (health, and metrics and the OpenAPI document unless
ARC_OPS_TOKEN is set) are open."""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any

from flask import Response, g, request

from .community_scope import ALLOWED, scoped_token
from .responses import error, refused
from .security import CLOSED, client_key, token_matches
from .services import services

log = logging.getLogger("arc.auth")


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
    address = request.remote_addr or "unknown"
    expected = arc.tokens[route]
    if expected == CLOSED:
        return error(403, "forbidden", "this worker has no ARC_INGEST_TOKEN: set it to ingest and delete "
                     "(or ARC_INGEST_WITH_API_TOKEN=true to let the retrieval token do so)")
    presented = request.headers.get(arc.runtime.settings.auth_header)
    setattr(g, ALLOWED, None)
    # The token first: a caller holding it is never refused for someone else's failures.
    if not token_matches(expected, presented):
        # a token limited to communities: the routes check each community they touch against it
        scope = scoped_token(presented, arc.runtime.settings.community_tokens)
        if scope is None:
            reason = "missing" if not presented else "wrong"
            arc.metrics.auth_failures.labels(route, reason).inc()
            log.warning("authentication failed", extra={"route": route, "reason": reason, "client": address})
            if wait := arc.auth_guard.blocked(address):
                return refused("too many failed authentication attempts; retry after the Retry-After delay", wait)
            arc.auth_guard.failed(address)
            return error(401, "unauthorized", "unauthorized")
        setattr(g, ALLOWED, scope)
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
