"""What runs around every request: its id, the name it asked for and where a browser's request
came from (worker/serve/hosts.py), authentication and rate limits before; its metrics and the
headers a browser reads after. Routes outside ``Services.tokens`` (health, and metrics and the
OpenAPI document unless ARC_OPS_TOKEN is set) are open. Authentication is
:func:`~worker.serve.security.authenticate`, the check every door makes; a community token that
reads only (no ``write@``) may not ingest or delete."""

from __future__ import annotations

import time
import uuid
from typing import Any

from flask import Response, current_app, g, request

from .community_scope import ALLOWED
from .confirmations import CONFIRM_ROUTE, FEEDBACK_ROUTE
from .documents_api import DOCUMENTS_ROUTE
from .hosts import BROWSER_HEADERS, CONTENT_SECURITY_POLICY, HEALTH_PATHS, HostPolicy
from .responses import error, refused
from .security import CLOSED, authenticate, client_key, token_matches
from .services import services
from .webhooks import INGEST_ROUTE, RETRIEVAL_ROUTE

# The routes that check every community they touch (community_scope.checked): the only ones a
# token limited to communities opens; the operator's /metrics and /openapi.json stay closed to it.
COMMUNITY_ROUTES = (RETRIEVAL_ROUTE, INGEST_ROUTE, DOCUMENTS_ROUTE, CONFIRM_ROUTE, FEEDBACK_ROUTE)
HOSTS = "arc.hosts"  # the app's HostPolicy, in app.extensions
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


def _writes(route: str, method: str) -> bool:
    """Whether a request on a community route ingests or deletes."""
    return route in (INGEST_ROUTE, CONFIRM_ROUTE) or (route == DOCUMENTS_ROUTE and method not in SAFE_METHODS)


def _misdirected() -> Any:
    """421 for a name this worker does not answer to (DNS rebinding, a wrong proxy), 403 for a
    browser's request that changes something from a page not of this worker; None: go on."""
    hosts: HostPolicy = current_app.extensions[HOSTS]
    if request.path not in HEALTH_PATHS and not hosts.allows(request.host):
        return error(
            421,
            "misdirected_request",
            "this worker does not answer to that Host name; add it to ARC_ALLOWED_HOSTS if it is yours",
        )
    origin = request.headers.get("Origin")
    if request.method not in SAFE_METHODS and origin is not None and not hosts.same_site(origin, request.host):
        return error(403, "forbidden", "this request came from a page of another site (its Origin)")
    return None


def _protected_route(path: str, tokens: dict[str, str | None]) -> str | None:
    for route in tokens:
        if path == route or path.startswith(route + "/"):
            return route
    return None


def before_request() -> Any:
    incoming = request.headers.get("X-Request-ID", "")
    g.request_id = incoming[:100] if incoming and incoming.isprintable() else uuid.uuid4().hex
    g.started = time.perf_counter()
    if (refusal := _misdirected()) is not None:
        return refusal
    arc = services()
    route = _protected_route(request.path, arc.tokens)
    if route is None:
        return None
    expected = arc.tokens[route]
    if expected == CLOSED:
        return error(
            403,
            "forbidden",
            "this worker has no ARC_INGEST_TOKEN: set it to ingest and delete "
            "(or ARC_INGEST_WITH_API_TOKEN=true to let the retrieval token do so)",
        )
    settings = arc.runtime.settings
    address = request.remote_addr or "unknown"
    auth = settings.auth
    presented = request.headers.get(auth.auth_header)
    verdict = authenticate(
        expected,
        presented,
        address=address,
        guard=arc.auth_guard,
        route=route,
        community_tokens=auth.community_tokens if route in COMMUNITY_ROUTES else None,
        failures=arc.metrics.auth_failures,
    )
    if verdict.retry_after:
        return refused(
            "too many failed authentication attempts; retry after the Retry-After delay", verdict.retry_after
        )
    if not verdict.ok and route == CONFIRM_ROUTE and token_matches(auth.api_token, presented):
        return error(403, "forbidden", "the agents' token may not confirm answers: use the keeper's (ingest) token")
    if not verdict.ok:
        return error(401, "unauthorized", "unauthorized")
    if not verdict.write and _writes(route, request.method):
        return error(
            403,
            "forbidden",
            "this community token reads only: ingesting and deleting need one marked write@ in ARC_COMMUNITY_TOKENS",
        )
    # a token limited to communities: the routes check each community they touch against it
    setattr(g, ALLOWED, verdict.communities)
    if wait := arc.limiter.acquire(client_key(presented if expected else None, address)):
        return refused("too many requests; retry after the Retry-After delay", wait)
    return None


def after_request(response: Response) -> Response:
    response.headers["X-Request-ID"] = g.get("request_id", "")
    for header, value in BROWSER_HEADERS.items():
        response.headers.setdefault(header, value)
    if response.mimetype == "text/html":
        response.headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
    route = request.url_rule.rule if request.url_rule is not None else "unmatched"
    metrics = services().metrics
    metrics.requests.labels(route, str(response.status_code)).inc()
    if "started" in g:
        metrics.latency.labels(route).observe(time.perf_counter() - g.started)
    return response
