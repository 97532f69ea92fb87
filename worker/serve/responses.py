"""The one JSON error shape every route answers with (``ErrorResponse``), and the handlers
that turn every exception into it."""

from __future__ import annotations

import logging
import math
from typing import Any

import psycopg
from flask import Flask, g, jsonify, render_template, request
from pydantic import ValidationError
from werkzeug.exceptions import HTTPException

from ..errors import ArcError, DatabaseUnavailable
from ..models import ErrorResponse
from ..service.admission import Overloaded

log = logging.getLogger("arc.app")


def error(status: int, code: str, message: str, field: str | None = None) -> Any:
    body = ErrorResponse(error=code, message=message, field=field, request_id=g.get("request_id"))
    response = jsonify(body.model_dump(mode="json"))
    response.status_code = status
    return response


def refused(message: str, wait: float) -> Any:
    """429 with the Retry-After the caller should wait."""
    response = error(429, "rate_limited", message)
    response.headers["Retry-After"] = str(max(1, math.ceil(wait)))
    return response


def validation_error(exc: ValidationError) -> Any:
    """422 naming the first invalid field."""
    first = exc.errors()[0]
    field = ".".join(str(p) for p in first["loc"]) or "body"
    return error(422, "invalid_input", f"{field}: {first['msg']}", field)


def arc_error(exc: ArcError) -> Any:
    if isinstance(exc, DatabaseUnavailable):
        log.warning("database unavailable", extra={"reason": str(exc)})
        response = error(exc.status, exc.code, "the knowledge base is temporarily unavailable; retry shortly")
    else:
        response = error(exc.status, exc.code, str(exc), exc.field)
    if exc.retry_after:
        response.headers["Retry-After"] = str(exc.retry_after)
    return response


def overloaded(exc: Overloaded) -> Any:
    return refused(f"the worker is at capacity ({exc}); retry after the Retry-After delay", exc.retry_after)


def database_dropped(exc: psycopg.OperationalError) -> Any:
    # The connection broke mid-request (restart, failover): retryable, not a bug.
    return arc_error(DatabaseUnavailable(type(exc).__name__))


def _browser() -> bool:
    """A person's browser asking for a page (it prefers HTML), not a client of the APIs."""
    wanted = request.accept_mimetypes.best_match(["application/json", "text/html"])
    return wanted == "text/html" and not request.path.startswith("/webhook/")


def http_error(exc: HTTPException) -> Any:
    if exc.code == 404 and _browser():  # a page that is not there, said as a page
        message = "There is no page at this address. The keeper's pages start at /."
        return render_template("pages/error.html", title="Not found", message=message), 404
    code = {
        400: "bad_request",
        404: "not_found",
        405: "method_not_allowed",
        413: "payload_too_large",
        415: "unsupported_media_type",
    }.get(exc.code or 500, "http_error")
    field = "body" if exc.code in (400, 413, 415) else None
    return error(exc.code or 500, code, exc.description or code, field)


def unexpected(exc: Exception) -> Any:
    # Logged with its type only: a stack trace can carry document text or secrets.
    log.error("unexpected error", extra={"error_type": type(exc).__name__})
    return error(500, "internal_error", "the worker failed to answer; the error was logged")


HANDLERS: tuple[tuple[type[Exception], Any], ...] = (
    (ArcError, arc_error),
    (Overloaded, overloaded),
    (psycopg.OperationalError, database_dropped),
    (HTTPException, http_error),
    (Exception, unexpected),
)


def answer_for(exc: Exception) -> Any:
    """The answer the app's handlers give ``exc``: for a blueprint that words errors its own way
    (Dify's) but keeps the same statuses, messages and Retry-After."""
    return next(handler(exc) for kind, handler in HANDLERS if isinstance(exc, kind))


def register_error_handlers(app: Flask) -> None:
    for kind, handler in HANDLERS:
        app.register_error_handler(kind, handler)
