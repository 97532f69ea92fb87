"""What runs around every request: its id, the name it asked for and where a browser's request
came from (worker/serve/hosts.py), authentication and rate limits before; its metrics and the
headers a browser reads after. Routes declared open (health, and metrics and the
OpenAPI document unless ARC_OPS_TOKEN is set) are open. Between the two, the gate
(worker/serve/gate.py): each route's declared access turns the request into the caller the
routes hand to the knowledge-base service, or into a refusal."""

from __future__ import annotations

import time
import uuid
from typing import Any

from flask import Flask, Response, current_app, g, request
from werkzeug.exceptions import HTTPException, MethodNotAllowed

from ..service.caller import Caller
from .gate import ACCESS, OPEN, SAFE_METHODS, STRICTEST, Access, Knock
from .hosts import BROWSER_HEADERS, CONTENT_SECURITY_POLICY, HEALTH_PATHS, HostPolicy
from .responses import error
from .services import services

HOSTS = "arc.hosts"  # the APIs' HostPolicy, in app.extensions
PAGE_HOSTS = "arc.page_hosts"  # the pages' and the sign-in's HostPolicy (no name opened by a token)
KEEPER_ENDPOINTS = ("pages.login", "pages.logout", "pages.static")  # the pages' open endpoints
DOORS = "arc.doors"  # the access declared per blueprint or endpoint, in app.extensions
CALLER = "caller"  # on flask.g: the Caller the gate made of the request


def _misdirected() -> Any:
    """421 for a name this worker does not answer to (DNS rebinding, a wrong proxy), 403 for a
    browser's request that changes something from a page not of this worker; None: go on."""
    hosts: HostPolicy = current_app.extensions[
        PAGE_HOSTS if _access().token == "keeper" or request.endpoint in KEEPER_ENDPOINTS else HOSTS
    ]
    if request.path not in HEALTH_PATHS and not hosts.allows(request.host):
        return error(
            421,
            "misdirected_request",
            "this worker does not answer to that Host name; add it to ARC_ALLOWED_HOSTS if it is yours",
        )
    origin = request.headers.get("Origin")
    if (
        request.method not in SAFE_METHODS
        and origin is not None
        and not hosts.same_site(origin, request.host, request.scheme)
    ):
        return error(403, "forbidden", "this request came from a page of another site (its Origin)")
    return None


def _access() -> Access:
    """What the matched route declared (its view's :func:`~worker.serve.gate.door`, else its
    endpoint's or blueprint's :func:`declare`); a route that declared nothing is the strictest
    door; a path no route matches is answered 404 by Flask."""
    endpoint = request.endpoint if request.url_rule is not None else _refused_method_endpoint()
    if endpoint is None:
        return OPEN
    view = current_app.view_functions.get(endpoint)
    declared = getattr(view, ACCESS, None)
    if declared is not None:
        return declared
    doors: dict[str, Access] = current_app.extensions.get(DOORS, {})
    if endpoint in doors:
        return doors[endpoint]
    blueprint = endpoint.rpartition(".")[0] or None
    if blueprint is not None and blueprint in doors:
        return doors[blueprint]
    return STRICTEST


def _refused_method_endpoint() -> str | None:
    """The endpoint of a route asked with a method it does not take: its door still checks the
    token before the 405 (a client testing its token with a GET learns whether it is refused)."""
    refused = request.routing_exception
    methods = list(refused.valid_methods or ()) if isinstance(refused, MethodNotAllowed) else []
    if not methods:
        return None
    try:
        endpoint, _ = current_app.url_map.bind_to_environ(request.environ).match(method=methods[0])
    except HTTPException:
        return None
    return str(endpoint)


def declare(app: Flask, name: str, access: Access) -> None:
    """The access of every route of a blueprint (``name``: its name) or of one endpoint."""
    app.extensions.setdefault(DOORS, {})[name] = access


def caller() -> Caller:
    """The caller the gate made of this request (every route passes it to the service)."""
    found: Caller | None = g.get(CALLER)
    if found is None:  # never: before_request sets it for every matched route
        raise RuntimeError("no caller: the gate did not run for this request")
    return found


def before_request() -> Any:
    incoming = request.headers.get("X-Request-ID", "")
    g.request_id = incoming[:100] if incoming and incoming.isprintable() else uuid.uuid4().hex
    g.started = time.perf_counter()
    if (refusal := _misdirected()) is not None:
        return refusal
    knock = Knock(
        route=request.url_rule.rule if request.url_rule is not None else request.path,
        headers=request.headers,
        address=request.remote_addr or "unknown",
    )
    # raises Refused, which the app's handlers (or a blueprint's: Dify, the pages) answer
    setattr(g, CALLER, services().gate.caller(_access(), knock))
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
