"""What the routes share: built once by ``create_app`` and found through ``current_app``."""

from __future__ import annotations

from dataclasses import dataclass

from flask import current_app

from ..ingest.ingestor import Ingestor
from ..retrieve.pipeline import Retriever
from ..runtime import Runtime
from ..store.querylog import QueryLog
from .admission import Admission
from .metrics import Metrics
from .security import FailedAuthGuard, RateLimiter


@dataclass
class Services:
    runtime: Runtime
    retriever: Retriever
    ingestor: Ingestor
    query_log: QueryLog
    metrics: Metrics
    admission: Admission
    limiter: RateLimiter
    auth_guard: FailedAuthGuard
    # the token each protected route prefix asks for (None: that route is open)
    tokens: dict[str, str | None]
    ingest_admission: Admission


def services() -> Services:
    return current_app.extensions["arc"]
