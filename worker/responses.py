"""The one JSON error shape every route answers with (``ErrorResponse``)."""

from __future__ import annotations

import math
from typing import Any

from flask import g, jsonify
from pydantic import ValidationError

from .models import ErrorResponse


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
