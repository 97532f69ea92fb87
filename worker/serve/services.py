"""What the routes share: built once by ``create_app`` and found through ``current_app``: the
knowledge-base service every route calls, and what the HTTP doors add around it (metrics, and
the gate with its tokens, rate limits and failed-authentication brake)."""

from __future__ import annotations

from dataclasses import dataclass

from flask import current_app

from ..runtime import Runtime
from ..service.knowledge import KnowledgeService
from .gate import Gate
from .metrics import Metrics


@dataclass
class Services:
    knowledge: KnowledgeService
    metrics: Metrics
    gate: Gate

    @property
    def runtime(self) -> Runtime:
        return self.knowledge.runtime

    @property
    def admin_token(self) -> str | None:
        """The token ingesting, deleting and the keeper's pages ask for (None: open)."""
        return self.gate.tokens.get("admin")


def services() -> Services:
    return current_app.extensions["arc"]
