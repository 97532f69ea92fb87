"""The search backend through Supabase's RPC route (PostgREST's ``POST /rest/v1/rpc/<function>``,
a ``supabase`` client): the same SQL functions as on Postgres."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date
from typing import Any, cast

from ..errors import DatabaseUnavailable
from ..models import ChunkResult
from . import rpc
from .calibrations import RpcCalibrations
from .search import (
    AnswerCall,
    Answered,
    CommunityRefused,
    DocumentDate,
    SearchParams,
    answered,
    chunk_of,
    refuses_community,
)


class SupabaseBackend:
    """The same SQL function through Supabase's PostgREST RPC route."""

    def __init__(self, url: str, key: str, client: Any | None = None):
        if client is None:
            from supabase import create_client

            client = create_client(url, key)
        self.client = client

    def search(self, params: SearchParams, min_version: int | None = None) -> list[ChunkResult]:
        args = params.sql_params()
        # hybrid_search takes the compounds' spelling in its expansion (the one call, arc_answer,
        # spells them itself): asked first, one more request, for a question that has words
        words = args.pop("compound_words")
        spelled = self.compound_spellings(words, params.community) if words else []
        args["expansion_text"] = " ".join(w for w in (params.expansion_text, *spelled) if w) or None
        # PostgREST picks the function by its argument names; a null vector is simply omitted.
        args = {k: v for k, v in args.items() if v is not None}
        return [chunk_of(row) for row in self._rpc("hybrid_search", args)]

    def answer(self, params: SearchParams, call: AnswerCall) -> Answered:
        from postgrest.exceptions import APIError

        args = {k: v for k, v in {**params.sql_params(), **call.sql_params()}.items() if v is not None}
        try:
            return answered(cast(dict[str, Any], rpc.call(self.client, "arc_answer", args)))
        except DatabaseUnavailable as exc:
            cause = exc.__cause__
            if isinstance(cause, APIError) and cause.code == "22023" and refuses_community(cause.message or ""):
                raise CommunityRefused(cause.message or "community") from exc
            raise

    def neighbours(self, chunk_id: int, radius: int = 1) -> list[ChunkResult]:
        return [chunk_of(row) for row in self._rpc("chunk_neighbours", {"chunk_id": chunk_id, "radius": radius})]

    def compound_spellings(self, words: Sequence[str], community: str | None = None) -> list[str]:
        return list(
            rpc.call(self.client, "arc_compound_spellings", {"words": list(words), "community": community}) or []
        )

    def calibration_chunks(self, limit: int, community: str | None = None) -> list[str]:
        return [
            row["content"]
            for row in self._rpc("arc_calibration_chunks", {"sample_size": limit, "community": community})
        ]

    def document_dates(self, community: str, ids: list[str] | None = None) -> dict[str, DocumentDate]:
        rows = self._rpc("arc_document_dates", {"community": community, "ids": ids})
        return {
            r["document_id"]: DocumentDate(
                r["document_id"],
                r["document_name"],
                date.fromisoformat(r["effective_date"]) if r.get("effective_date") else None,
            )
            for r in rows
        }

    def calibration_store(self) -> RpcCalibrations:
        """The stored status calibrations, through the same RPC route."""
        return RpcCalibrations(self.client)

    def version(self, community: str | None = None) -> int:
        # the zero-argument function is the whole knowledge base's counter
        args = {} if community is None else {"community": community}
        try:
            # a reply that is no number raises TypeError or ValueError
            return int(rpc.call(self.client, "knowledge_base_version", args))
        except (TypeError, ValueError) as exc:
            raise DatabaseUnavailable("supabase rpc knowledge_base_version failed") from exc

    def communities(self) -> list[str]:
        return [row["community"] for row in self._rpc("community_names", {})]

    def _rpc(self, function: str, args: dict[str, Any]) -> list[dict[str, Any]]:
        # postgrest types a reply as any JSON; these functions return rows
        return cast(list[dict[str, Any]], rpc.call(self.client, function, args) or [])
