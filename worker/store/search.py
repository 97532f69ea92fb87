"""What a search asks and what it returns, whichever backend runs it: the ``hybrid_search`` SQL
function's parameters (:class:`SearchParams`), a question's one call (``arc_answer``:
:class:`AnswerCall` and :class:`Answered`), the rows as the worker's chunks, and the backend's
protocol. The backends: ``postgres_search.py`` (psycopg) and ``supabase_search.py`` (PostgREST's
RPC route).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import date
from typing import Any, Protocol

import numpy as np

from ..models import ChunkResult

CHUNK_FIELDS = (
    "id",
    "document_id",
    "document_name",
    "document_type",
    "section_path",
    "page_number",
    "chunk_index",
    "is_binding",
    "superseded_by",
    "content",
    "token_count",
)


def vector_literal(vector: np.ndarray) -> str:
    """A vector's text form, for PostgREST's JSON (psycopg sends the binary one, :func:`as_float32`)."""
    return "[" + ",".join(f"{x:.7g}" for x in np.asarray(vector, dtype=np.float32)) + "]"


def as_float32(vector: np.ndarray) -> np.ndarray:
    """A vector as pgvector's psycopg adapter sends it (binary, every float32 exact)."""
    return np.asarray(vector, dtype=np.float32)


@dataclass(frozen=True)
class SearchParams:
    query_text: str
    embedding: np.ndarray | None
    match_count: int = 40
    vector_weight: float = 0.7
    fts_weight: float = 0.3
    fusion: str = "weighted"
    document_types: tuple[str, ...] | None = None
    binding_only: bool = False
    include_superseded: bool = False
    expansion_text: str | None = None  # extra words for the full-text leg only (worker/retrieve/vocabulary.py)
    # the question's words: the full-text leg also reads their compounds as the knowledge base
    # spells them (sql/functions/arc_compound_spellings.sql), added to expansion_text by the database
    compound_words: tuple[str, ...] = ()
    community: str | None = None  # the one community both legs read (sql/functions/hybrid_search.sql)
    as_of: date | None = None  # only what was in force that day (in_force.py); superseded documents then count

    def cache_key(self) -> str:
        values = asdict(self)
        embedding = values.pop("embedding")
        digest = hashlib.sha256(repr(sorted(values.items())).encode())
        if embedding is not None:
            digest.update(np.asarray(embedding, dtype=np.float32).tobytes())
        return digest.hexdigest()

    def sql_params(self, vector: Callable[[np.ndarray], Any] = vector_literal) -> dict[str, Any]:
        """The search function's arguments, the question's vector as ``vector`` gives it (its text
        form by default, which PostgREST's JSON carries; psycopg sends pgvector's binary form)."""
        return {
            "query_text": self.query_text,
            "query_embedding": None if self.embedding is None else vector(self.embedding),
            "match_count": self.match_count,
            "vector_weight": self.vector_weight,
            "fts_weight": self.fts_weight,
            "fusion": self.fusion,
            "document_types": list(self.document_types) if self.document_types else None,
            "binding_only": self.binding_only,
            "include_superseded": self.include_superseded or self.as_of is not None,
            "expansion_text": self.expansion_text,
            "compound_words": list(self.compound_words),
            "community": self.community,
            "filter_as_of": None if self.as_of is None else self.as_of.isoformat(),
        }


@dataclass(frozen=True)
class Answered:
    """What a question's one call (``sql/functions/arc_answer.sql``) read: the community it reads
    (None: the knowledge base holds none), that community's version, the stored status
    calibration's row, the confirmations' stamp, the candidates (None: the cached
    ones, read at ``known_version``, still stand), the best candidates' neighbours and the dates
    of the documents that replaced a candidate."""

    community: str | None
    version: int
    calibration: dict[str, Any] | None
    confirmations: str | None
    rows: list[ChunkResult] | None
    # the best candidates' neighbours (chunk id -> the chunks around it, itself left out), read with
    # the rows: context assembly asks the database only for a chunk outside them
    neighbours: dict[int, list[ChunkResult]] | None = None
    # the documents that replaced a candidate, with the day each took effect, read with the rows
    dates: dict[str, DocumentDate] | None = None
    # as of a date, the same search over every version (no date, superseded included)
    unfiltered: list[ChunkResult] | None = None


class CommunityRefused(Exception):
    """The search refused the community asked for (none named among several, or not there)."""


@dataclass(frozen=True)
class NeighbourReach:
    """Whose neighbours a question's one call reads: those of the ``of`` best fused candidates and
    of each leg's best ``leg_top`` and, at ``depth`` 2, those neighbours' own (a passage that
    carries the sentences around it reads past a neighbour the context added)."""

    of: int = 0
    leg_top: int = 0
    depth: int = 1

    def covers(self, other: NeighbourReach) -> bool:
        return self.of >= other.of and self.leg_top >= other.leg_top and self.depth >= other.depth


@dataclass(frozen=True)
class AnswerCall:
    """What a question's one call asks besides the search."""

    calibration_model: str | None = None
    known_version: int | None = None
    neighbours: NeighbourReach = NeighbourReach()
    # a read replica's check: the knowledge-base version it must have replayed (replicas.py)
    min_version: int | None = None

    def sql_params(self) -> dict[str, Any]:
        return {
            "calibration_model": self.calibration_model,
            "known_version": self.known_version,
            "neighbours_of": self.neighbours.of,
            "neighbours_leg_top": self.neighbours.leg_top,
            "neighbours_depth": self.neighbours.depth,
            "min_version": self.min_version,
        }


def answered(body: dict[str, Any] | None) -> Answered:
    body = body or {}
    rows = body.get("rows")
    return Answered(
        community=body.get("community"),
        version=int(body.get("version") or 0),
        calibration=body.get("calibration"),
        confirmations=body.get("confirmations"),
        rows=None if rows is None else [chunk_of(row) for row in rows],
        neighbours=_neighbours(body.get("neighbours")),
        dates=_dates(body.get("dates")),
        unfiltered=None if body.get("unfiltered") is None else [chunk_of(row) for row in body["unfiltered"]],
    )


def _dates(rows: list[dict[str, Any]] | None) -> dict[str, DocumentDate] | None:
    if rows is None:
        return None
    return {
        row["document_id"]: DocumentDate(
            row["document_id"],
            row["document_name"],
            None if row["effective_date"] is None else date.fromisoformat(row["effective_date"]),
        )
        for row in rows
    }


def _neighbours(body: dict[str, Any] | None) -> dict[int, list[ChunkResult]] | None:
    """Each chunk's neighbours as the call sends them: ids per chunk, every neighbour's row once."""
    if body is None:
        return None
    chunks = {int(row["id"]): chunk_of(row) for row in body["chunks"]}
    return {int(chunk_id): [chunks[int(i)] for i in ids] for chunk_id, ids in body["of"].items()}


def refuses_community(message: str) -> bool:
    return "community" in message


class SearchBackend(Protocol):
    def search(self, params: SearchParams, min_version: int | None = None) -> list[ChunkResult]:
        """The candidates; ``min_version``: the knowledge-base version the caller already read
        (a read replica must have replayed it), so that it is not read twice."""
        ...

    def answer(self, params: SearchParams, call: AnswerCall) -> Answered:
        """The search and what else a question reads, in one call. Raises :class:`CommunityRefused`."""
        ...

    def version(self, community: str | None = None) -> int:
        """A community's change counter (008, per community since 030); none named, the whole knowledge base's."""
        ...

    def communities(self) -> list[str]:
        """The communities holding chunks (030's knowledge_communities)."""
        ...

    def neighbours(self, chunk_id: int, radius: int = 1) -> list[ChunkResult]: ...

    def compound_spellings(self, words: Sequence[str], community: str | None = None) -> list[str]:
        """The knowledge base's spelling of the compounds of a question's ``words``
        (sql/functions/arc_compound_spellings.sql); None reads every community."""
        ...

    def document_dates(self, community: str, ids: list[str] | None = None) -> dict[str, DocumentDate]:
        """A community's documents named in ``ids`` (None: all) with the day each took effect."""
        ...

    def calibration_chunks(self, limit: int, community: str | None = None) -> list[str]:
        """A fixed sample of a community's chunk texts (None: every community's) for the status
        calibration (worker/confidence.py)."""
        ...


@dataclass(frozen=True)
class DocumentDate:
    """A stored document's name and the day it took effect (None: undated)."""

    document_id: str
    name: str
    effective_date: date | None


def chunk_of(row: dict[str, Any]) -> ChunkResult:
    data: dict[str, Any] = {
        k: row.get(k)
        for k in (*CHUNK_FIELDS, "vector_score", "fts_score", "bm25_score", "fused_score", "vector_rank", "fts_rank")
    }
    data["fused_score"] = data["fused_score"] or 0.0
    metadata = row.get("metadata") or {}
    if isinstance(metadata, dict) and metadata.get("amended_by"):
        data["amended_by"] = metadata["amended_by"]
        data["amended_by_name"] = metadata.get("amended_by_name")
    if isinstance(metadata, dict) and metadata.get("effective_date"):
        data["effective_date"] = metadata["effective_date"]
    return ChunkResult(**data)
