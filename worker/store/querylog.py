"""Writes one ``query_log`` row per answer (numbers and the question, never document text)."""

from __future__ import annotations

import logging

from psycopg.types.json import Jsonb

from ..models import RetrievalResponse
from . import sqlfiles
from .database import Database

log = logging.getLogger("arc.querylog")


class QueryLog:
    def __init__(self, db: Database, enabled: bool = True):
        self.db = db
        self.enabled = enabled

    def record(self, answer: RetrievalResponse) -> None:
        if not self.enabled:
            return
        chunks = answer.chunks
        both = sum(1 for c in chunks if c.vector_rank is not None and c.fts_rank is not None)
        vector_only = sum(1 for c in chunks if c.vector_rank is not None and c.fts_rank is None)
        fts_only = sum(1 for c in chunks if c.vector_rank is None and c.fts_rank is not None)
        vector_scores = [c.vector_score for c in chunks if c.vector_score is not None]
        fts_scores = [c.fts_score for c in chunks if c.fts_score is not None]
        row = {
            "community": answer.community,
            "request_id": answer.request_id,
            "query": answer.query.original[:2000],
            "normalized_query": answer.query.normalized[:2000],
            "query_type": answer.query.query_type,
            "status": answer.status,
            "best_score": answer.best_score,
            "result_count": answer.sources,
            "candidate_count": len(chunks),
            "both_legs_count": both,
            "vector_only_count": vector_only,
            "fts_only_count": fts_only,
            "avg_vector_score": sum(vector_scores) / len(vector_scores) if vector_scores else None,
            "avg_fts_score": sum(fts_scores) / len(fts_scores) if fts_scores else None,
            "reranked": answer.reranked,
            "warnings": answer.warnings,
            "timings_ms": Jsonb(answer.timings_ms),
        }
        try:
            with self.db.connection(timeout=0.5) as conn:
                conn.execute(sqlfiles.query("insert_query_log"), row)
        except Exception as exc:  # the answer matters more than its log row
            log.warning("query_log insert failed", extra={"error_type": type(exc).__name__})
