"""What the routes share: built once by ``create_app`` and found through ``current_app``: the
knowledge-base service every route calls, and what the HTTP doors add around it (metrics,
rate limits, failed-authentication brakes and the tokens of each route)."""

from __future__ import annotations

from dataclasses import dataclass

from flask import current_app

from ..runtime import Runtime
from ..service.knowledge import KnowledgeService
from .metrics import Metrics
from .security import FailedAuthGuard, RateLimiter


@dataclass
class Services:
    knowledge: KnowledgeService
    metrics: Metrics
    limiter: RateLimiter
    auth_guard: FailedAuthGuard
    # the token each protected route prefix asks for (None: that route is open)
    tokens: dict[str, str | None]

    @property
    def runtime(self) -> Runtime:
        return self.knowledge.runtime


def services() -> Services:
    return current_app.extensions["arc"]
