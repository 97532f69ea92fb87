"""The answer record: what the service (knowledge.py) does with a resident's answer before a door
(the webhook, Dify's /retrieval, the MCP tools) hands it over: say when the knowledge base is
empty, keep it in the query log, log one line."""

from __future__ import annotations

import logging

from ..models import RetrievalResponse
from ..store import knowledge_base
from ..store.database import Database
from ..store.querylog import QueryLog

# The webhook's logger name, which operators' log filters already use.
log = logging.getLogger("arc.webhook")


def record_answer(answer: RetrievalResponse, db: Database, query_log: QueryLog) -> None:
    if answer.status == "no_results" and knowledge_base.is_empty(db):
        answer.warnings.append(knowledge_base.EMPTY_WARNING)
    query_log.record(answer)
    log_answer(answer)


def log_answer(answer: RetrievalResponse) -> None:
    """One INFO line per question, enough to follow a conversation in the logs (the request id
    comes with every line); never the question's text, a credential or a passage."""
    score = "-" if answer.best_score is None else f"{answer.best_score:.2f}"
    log.info(
        f"question {answer.status}: best {score}, {len(answer.chunks)} chunks, {answer.context_tokens} "
        f"tokens, {answer.timings_ms.get('total', 0.0):.0f} ms",
        extra={
            "status": answer.status,
            "best_score": answer.best_score,
            "chunks": len(answer.chunks),
            "sources": answer.sources,
            "context_tokens": answer.context_tokens,
            "ms": round(answer.timings_ms.get("total", 0.0), 1),
            "warnings": len(answer.warnings),
        },
    )
