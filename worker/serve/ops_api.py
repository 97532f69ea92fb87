"""Routes for operators and orchestrators: liveness and readiness, always open (probes carry no
token), and Prometheus metrics and the OpenAPI document, behind ARC_OPS_TOKEN when it is set."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, jsonify

from ..store import knowledge_base
from .gate import OPEN, OPS, door
from .openapi import openapi_document
from .routes import HEALTH_ROUTE, METRICS_ROUTE, OPENAPI_ROUTE, READY_ROUTE
from .services import services

ops = Blueprint("ops", __name__)


@ops.get(HEALTH_ROUTE)
@door(OPEN)
def healthz() -> Any:
    return jsonify({"status": "ok"})


@ops.get(READY_ROUTE)
@door(OPEN)
def readyz() -> Any:
    runtime = services().runtime
    databases = runtime.databases.all()  # ready when every database of the knowledge base answers
    db_ok = all(db.ping() for db in databases)
    if db_ok:
        try:
            runtime.ensure_schema()
        except Exception:  # a schema error is also "not ready"; it is logged by ensure_schema
            db_ok = False
    body = {"status": "ready" if db_ok else "not_ready", "database": db_ok, "embedding_model": runtime.embedder.model}
    empty = all(knowledge_base.is_empty(db) for db in databases) if db_ok else None
    if empty is not None:
        # ready all the same (documents arrive through the ingest webhook), but never silently empty
        body["knowledge_base_empty"] = empty
        if empty:
            body["warning"] = knowledge_base.EMPTY_WARNING
    return jsonify(body), 200 if db_ok else 503


@ops.get(METRICS_ROUTE)
@door(OPS)
def prometheus() -> Any:
    return Response(services().metrics.render(), mimetype="text/plain; version=0.0.4")


@ops.get(OPENAPI_ROUTE)
@door(OPS)
def openapi() -> Any:
    return jsonify(openapi_document())
