"""The keeper's confirmed answers and the chat's votes (``sql/050_confirmations.sql``), read and
written with psycopg, and read through Supabase's RPC route (:class:`RpcConfirmationReads`) by a
worker that searches there. What a confirmation is and how a question is matched to one:
``worker/retrieve/confirmed.py``; this module only moves rows in and out."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import numpy as np

from . import rpc, sqlfiles
from .database import Database
from .rows import moment

Answer = Literal["passage", "none"]
State = Literal["confirmed", "stale"]


@dataclass(frozen=True)
class StoredConfirmation:
    """One confirmation as it stands today: ``chunk_id`` is the chunk that holds its confirmed text
    now (None for a "none" answer or a stale one), ``reason`` why a stale one is stale."""

    id: int
    community: str
    query: str
    answer: Answer
    document_id: str | None
    section_path: str | None
    embedding: np.ndarray
    embedding_model: str
    created_at: datetime
    chunk_id: int | None
    state: State
    reason: str | None


@dataclass(frozen=True)
class ConfirmedChunk:
    """The chunk a keeper names, as stored today."""

    id: int
    document_id: str
    chunk_index: int
    section_path: str
    content_md5: str
    content: str


@dataclass(frozen=True)
class NewConfirmation:
    community: str
    query: str
    answer: Answer
    embedding: np.ndarray
    embedding_model: str
    chunk: ConfirmedChunk | None = None


def _stored(community: str, row: Mapping[str, Any]) -> StoredConfirmation:
    """One row of ``arc_confirmations``, as psycopg or PostgREST's JSON gives it."""
    created = moment(row["created_at"])
    assert created is not None  # the column is not null
    return StoredConfirmation(
        id=int(row["id"]),
        community=community,
        query=row["query"],
        answer=row["answer"],
        document_id=row["document_id"],
        section_path=row["section_path"],
        embedding=np.asarray(row["embedding"], dtype=np.float32),
        embedding_model=row["embedding_model"],
        created_at=created,
        chunk_id=row["chunk_id"],
        state=row["state"],
        reason=row["reason"],
    )


class RpcConfirmationReads:
    """A community's confirmations and their stamp through Supabase's RPC route (the functions
    ``arc_confirmations`` and ``arc_confirmation_stamp``), for a worker that searches there; the
    keeper's writes go through the database URL, as ingestion does."""

    def __init__(self, client: Any):
        self.client = client

    def read(self, community: str) -> list[StoredConfirmation]:
        rows = rpc.call(self.client, "arc_confirmations", {"community": community}) or []
        return [_stored(community, row) for row in rows]

    def stamp(self, community: str) -> str:
        return str(rpc.call(self.client, "arc_confirmation_stamp", {"community": community}) or "")


@dataclass(frozen=True)
class Vote:
    request_id: str
    community: str | None
    helpful: bool
    source: int | None


class ConfirmationStore:
    def __init__(self, db: Database):
        self.db = db

    def read(self, community: str) -> list[StoredConfirmation]:
        import psycopg

        with self.db.connection() as conn:
            cur = conn.cursor(row_factory=psycopg.rows.dict_row)
            rows = cur.execute(sqlfiles.query("confirmations"), {"community": community}).fetchall()
        return [_stored(community, row) for row in rows]

    def stamp(self, community: str) -> str:
        """The community's knowledge-base version and confirmations' state, as one value: equal
        stamps, the same confirmations with the same validity."""
        with self.db.connection() as conn:
            row = conn.execute(sqlfiles.query("confirmation_stamp"), {"community": community}).fetchone()
        return str(row[0]) if row else ""

    def chunk(self, community: str, chunk_id: int) -> ConfirmedChunk | None:
        with self.db.connection() as conn:
            row = conn.execute(
                sqlfiles.query("confirmation_chunk"), {"community": community, "chunk_id": chunk_id}
            ).fetchone()
        return ConfirmedChunk(*row) if row else None

    def chunks(self, community: str) -> list[tuple[int, str, str]]:
        """Every chunk of a community: id, document, text (an import looks its evidence up)."""
        with self.db.connection() as conn:
            return [tuple(r) for r in conn.execute(sqlfiles.query("community_chunk_texts"), {"community": community})]

    def add(self, new: NewConfirmation) -> int:
        """Store it (a question confirmed before in this community gets the new answer); its id."""
        chunk = new.chunk
        with self.db.connection() as conn:
            row = conn.execute(
                sqlfiles.query("upsert_confirmation"),
                {
                    "community": new.community,
                    "query": new.query,
                    "answer": new.answer,
                    "document_id": chunk.document_id if chunk else None,
                    "chunk_index": chunk.chunk_index if chunk else None,
                    "section_path": chunk.section_path if chunk else None,
                    "content_md5": chunk.content_md5 if chunk else None,
                    "embedding": [float(x) for x in new.embedding],
                    "embedding_model": new.embedding_model,
                },
            ).fetchone()
        assert row is not None  # insert ... returning always returns the row
        return int(row[0])

    def delete(self, confirmation_id: int, community: str | None) -> str | None:
        """Remove one (within ``community`` when named); the community it was of, None if none."""
        with self.db.connection() as conn:
            row = conn.execute(
                sqlfiles.query("delete_confirmation"), {"id": confirmation_id, "community": community}
            ).fetchone()
        return row[0] if row else None

    def community_of(self, confirmation_id: int) -> str | None:
        with self.db.connection() as conn:
            row = conn.execute(sqlfiles.query("confirmation_community"), {"id": confirmation_id}).fetchone()
        return row[0] if row else None

    def logged_request(self, request_id: str) -> tuple[bool, str | None]:
        """Whether the query log holds an answer under ``request_id``, and its community."""
        with self.db.connection() as conn:
            row = conn.execute(sqlfiles.query("logged_request"), {"request_id": request_id}).fetchone()
        return (row is not None, row[0] if row else None)

    def vote(self, vote: Vote) -> int:
        with self.db.connection() as conn:
            row = conn.execute(
                sqlfiles.query("insert_feedback"),
                {
                    "request_id": vote.request_id,
                    "community": vote.community,
                    "helpful": vote.helpful,
                    "source": vote.source,
                },
            ).fetchone()
        assert row is not None
        return int(row[0])
