"""Stage 3: hybrid search through the ``hybrid_search`` SQL function.

Two backends call the same function: :class:`PostgresBackend` (psycopg 3 pool) and
:class:`SupabaseBackend` (the ``supabase`` client's ``rpc``, i.e. PostgREST). Results are cached
for a few minutes, keyed by everything that changes them.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import asdict, dataclass
from datetime import date
from typing import Any, Protocol, cast

import numpy as np
import psycopg
from cachetools import TTLCache

from ..errors import DatabaseUnavailable
from ..models import ChunkResult
from ..store import rpc, sqlfiles
from ..store.calibrations import PostgresCalibrations, RpcCalibrations
from ..store.database import Database
from ..store.replicas import ReadReplicas
from ..store.rows import one_row
from .in_force import DocumentDate

# A question's one call is a read: on a connection that broke in the pool it is asked again.
ANSWER_ATTEMPTS = 3

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
    community: str | None = None  # the one community both legs read (sql/functions/hybrid_search.sql)
    as_of: date | None = None  # only what was in force that day (in_force.py); superseded documents then count

    def cache_key(self) -> str:
        values = asdict(self)
        embedding = values.pop("embedding")
        digest = hashlib.sha256(repr(sorted(values.items())).encode())
        if embedding is not None:
            digest.update(np.asarray(embedding, dtype=np.float32).tobytes())
        return digest.hexdigest()

    def sql_params(self) -> dict[str, Any]:
        return {
            "query_text": self.query_text,
            "query_embedding": None if self.embedding is None else _vector_literal(self.embedding),
            "match_count": self.match_count,
            "vector_weight": self.vector_weight,
            "fts_weight": self.fts_weight,
            "fusion": self.fusion,
            "document_types": list(self.document_types) if self.document_types else None,
            "binding_only": self.binding_only,
            "include_superseded": self.include_superseded or self.as_of is not None,
            "expansion_text": self.expansion_text,
            "community": self.community,
            "filter_as_of": None if self.as_of is None else self.as_of.isoformat(),
        }


@dataclass(frozen=True)
class Answered:
    """What a question's one call (``sql/functions/arc_answer.sql``) read: the community it reads
    (None: the knowledge base holds none), that community's version, the words' frequencies, the
    stored status calibration's row, the confirmations' stamp, and the candidates (None: the
    cached ones, read at ``known_version``, still stand)."""

    community: str | None
    version: int
    frequencies: dict[str, int]
    calibration: dict[str, Any] | None
    confirmations: str | None
    rows: list[ChunkResult] | None


class CommunityRefused(Exception):
    """The search refused the community asked for (none named among several, or not there)."""


@dataclass(frozen=True)
class AnswerCall:
    """What a question's one call asks besides the search."""

    lookup_words: tuple[str, ...] = ()
    calibration_model: str | None = None
    known_version: int | None = None

    def sql_params(self) -> dict[str, Any]:
        return {
            "lookup_words": list(self.lookup_words),
            "calibration_model": self.calibration_model,
            "known_version": self.known_version,
        }


def _answered(body: dict[str, Any] | None) -> Answered:
    body = body or {}
    rows = body.get("rows")
    return Answered(
        community=body.get("community"),
        version=int(body.get("version") or 0),
        frequencies={str(k): int(v) for k, v in (body.get("frequencies") or {}).items()},
        calibration=body.get("calibration"),
        confirmations=body.get("confirmations"),
        rows=None if rows is None else [_chunk(row) for row in rows],
    )


def _refuses_community(message: str) -> bool:
    return "community" in message


class SearchBackend(Protocol):
    def search(self, params: SearchParams, min_version: int | None = None) -> list[ChunkResult]:
        """The candidates; ``min_version``: the knowledge-base version the caller already read
        (a read replica must have replayed it), so that it is not read twice."""
        ...

    def answer(self, params: SearchParams, call: AnswerCall) -> Answered | None:
        """The search and what else a question reads, in one call, where ``one_call`` says the
        backend can (None otherwise). Raises :class:`CommunityRefused`."""
        ...

    def version(self, community: str | None = None) -> int:
        """A community's change counter (008, per community since 030); none named, the whole knowledge base's."""
        ...

    def communities(self) -> list[str]:
        """The communities holding chunks (030's knowledge_communities)."""
        ...

    def neighbours(self, chunk_id: int, radius: int = 1) -> list[ChunkResult]: ...

    def word_frequencies(self, words: list[str], community: str | None = None) -> dict[str, int]:
        """How many of a community's chunks hold each word (0: none, -1: a stopword); None sums
        over every community (020, per community since 032)."""
        ...

    def document_dates(self, community: str, ids: list[str] | None = None) -> dict[str, DocumentDate]:
        """A community's documents named in ``ids`` (None: all) with the day each took effect."""
        ...

    def calibration_chunks(self, limit: int, community: str | None = None) -> list[str]:
        """A fixed sample of a community's chunk texts (None: every community's) for the status
        calibration (worker/confidence.py)."""
        ...


class PostgresBackend:
    """Searches and neighbour fetches on the primary, or spread over read replicas when there are
    any (worker/store/replicas.py): a replica serves a question only once it has replayed the
    version the primary reports for it."""

    def __init__(self, db: Database, replicas: ReadReplicas | None = None):
        self.db = db
        self.replicas = replicas

    @property
    def one_call(self) -> bool:
        """A question's reads in one call (:meth:`answer`); not over read replicas, where the
        primary's version is read first to choose a replica that has replayed it."""
        return self.replicas is None

    def search(self, params: SearchParams, min_version: int | None = None) -> list[ChunkResult]:
        def run(conn: psycopg.Connection) -> list[dict[str, Any]]:
            try:
                cur = conn.cursor(row_factory=psycopg.rows.dict_row)
                return cur.execute(sqlfiles.query("hybrid_search"), params.sql_params()).fetchall()
            except psycopg.errors.QueryCanceled as exc:
                raise DatabaseUnavailable("the search took longer than the statement timeout") from exc

        if self.replicas is None:
            with self.db.connection() as conn:
                rows = run(conn)
        else:
            # The primary's version for every search (another process may have just ingested):
            # the caller's, when it read one, else one short row read.
            rows = self.replicas.read(run, self.replicas.primary_version() if min_version is None else min_version)
        return [_chunk(row) for row in rows]

    def answer(self, params: SearchParams, call: AnswerCall) -> Answered | None:
        if self.replicas is not None:
            return None
        args = {**params.sql_params(), **call.sql_params()}
        for attempt in range(1, ANSWER_ATTEMPTS + 1):
            try:
                with self.db.connection() as conn:
                    return _answered(one_row(conn.execute(sqlfiles.query("answer"), args))[0])
            except psycopg.errors.InvalidParameterValue as exc:
                if _refuses_community(str(exc)):
                    raise CommunityRefused(str(exc).splitlines()[0]) from exc
                raise
            except psycopg.errors.QueryCanceled as exc:
                raise DatabaseUnavailable("the search took longer than the statement timeout") from exc
            except DatabaseUnavailable as exc:
                # a connection that broke while it sat in the pool (its liveness check is skipped
                # for one used moments ago, database.py): the call is a read, asked again on another
                if attempt == ANSWER_ATTEMPTS or not isinstance(exc.__cause__, psycopg.OperationalError):
                    raise
        raise AssertionError("unreachable")

    def version(self, community: str | None = None) -> int:
        if self.replicas is not None:
            # a replica serves a search once it has replayed the whole knowledge base's version
            return self.replicas.primary_version()
        with self.db.connection() as conn:
            return one_row(conn.execute(*_version_query(community)))[0]

    def communities(self) -> list[str]:
        with self.db.connection() as conn:
            return [row[0] for row in conn.execute(sqlfiles.query("communities")).fetchall()]

    def neighbours(self, chunk_id: int, radius: int = 1) -> list[ChunkResult]:
        def run(conn: psycopg.Connection) -> list[dict[str, Any]]:
            cur = conn.cursor(row_factory=psycopg.rows.dict_row)
            return cur.execute(sqlfiles.query("chunk_neighbours"), {"chunk_id": chunk_id, "radius": radius}).fetchall()

        if self.replicas is None:
            with self.db.connection() as conn:
                rows = run(conn)
        else:
            # The search that found this chunk read at most the highest version seen so far.
            rows = self.replicas.read(run, self.replicas.floor)
        return [_chunk(row) for row in rows]

    def word_frequencies(self, words: list[str], community: str | None = None) -> dict[str, int]:
        if not words:
            return {}
        with self.db.connection() as conn:
            return dict(
                conn.execute(sqlfiles.query("word_frequencies"), {"words": words, "community": community}).fetchall()
            )

    def calibration_chunks(self, limit: int, community: str | None = None) -> list[str]:
        with self.db.connection() as conn:
            return [
                row[0]
                for row in conn.execute(
                    sqlfiles.query("calibration_chunks"), {"limit": limit, "community": community}
                ).fetchall()
            ]

    def document_dates(self, community: str, ids: list[str] | None = None) -> dict[str, DocumentDate]:
        with self.db.connection() as conn:
            rows = conn.execute(sqlfiles.query("document_dates"), {"community": community, "ids": ids}).fetchall()
        return {row[0]: DocumentDate(row[0], row[1], row[2]) for row in rows}

    def calibration_store(self) -> PostgresCalibrations:
        """The stored status calibrations, on the primary (a replica host reads the one measured there)."""
        return PostgresCalibrations(self.db)


class SupabaseBackend:
    """The same SQL function through Supabase's PostgREST RPC route."""

    def __init__(self, url: str, key: str, client: Any | None = None):
        if client is None:
            from supabase import create_client

            client = create_client(url, key)
        self.client = client

    one_call = True  # a question's reads in one RPC (:meth:`answer`)

    def search(self, params: SearchParams, min_version: int | None = None) -> list[ChunkResult]:
        args = params.sql_params()
        # PostgREST picks the function by its argument names; a null vector is simply omitted.
        args = {k: v for k, v in args.items() if v is not None}
        return [_chunk(row) for row in self._rpc("hybrid_search", args)]

    def answer(self, params: SearchParams, call: AnswerCall) -> Answered | None:
        from postgrest.exceptions import APIError

        args = {k: v for k, v in {**params.sql_params(), **call.sql_params()}.items() if v is not None}
        try:
            return _answered(cast(dict[str, Any], rpc.call(self.client, "arc_answer", args)))
        except DatabaseUnavailable as exc:
            cause = exc.__cause__
            if isinstance(cause, APIError) and cause.code == "22023" and _refuses_community(cause.message or ""):
                raise CommunityRefused(cause.message or "community") from exc
            raise

    def neighbours(self, chunk_id: int, radius: int = 1) -> list[ChunkResult]:
        return [_chunk(row) for row in self._rpc("chunk_neighbours", {"chunk_id": chunk_id, "radius": radius})]

    def word_frequencies(self, words: list[str], community: str | None = None) -> dict[str, int]:
        if not words:
            return {}
        return {
            row["word"]: int(row["df"])
            for row in self._rpc("arc_word_frequencies", {"words": words, "community": community})
        }

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


class SearchCache:
    """Result lists for a few minutes, each valid only for the knowledge-base version it was read
    at: any change to the chunks, by any process, makes every older entry a miss."""

    def __init__(self, ttl_seconds: float = 300, maxsize: int = 2048):
        self.enabled = ttl_seconds > 0
        self._cache: TTLCache = TTLCache(maxsize=maxsize, ttl=max(ttl_seconds, 1e-9))
        self._lock = threading.Lock()
        self.hits = 0

    def get(self, params: SearchParams, version: int) -> list[ChunkResult] | None:
        if not self.enabled:
            return None
        with self._lock:
            found = self._cache.get(params.cache_key())
        if found is not None and found[0] == version:
            self.hits += 1
            return [c.model_copy() for c in found[1]]
        return None

    def held(self, params: SearchParams) -> tuple[int, list[ChunkResult]] | None:
        """The entry for ``params`` and the version it was read at, whatever that is (the one
        call checks the version in the database, :class:`AnswerCall`)."""
        if not self.enabled:
            return None
        with self._lock:
            found = self._cache.get(params.cache_key())
        return None if found is None else (found[0], [c.model_copy() for c in found[1]])

    def put(self, params: SearchParams, version: int, results: list[ChunkResult]) -> None:
        if not self.enabled:
            return
        with self._lock:
            self._cache[params.cache_key()] = (version, [c.model_copy() for c in results])

    def clear(self) -> None:
        with self._lock:
            self._cache.clear()


def _version_query(community: str | None) -> tuple[str, dict[str, Any]]:
    """One community's counter, or with none named the whole knowledge base's (the status
    calibration's key): knowledge_base_version(NULL) is a community that does not exist, 0."""
    if community is None:
        return sqlfiles.query("knowledge_base_version"), {}
    return sqlfiles.query("community_version"), {"community": community}


def _vector_literal(vector: np.ndarray) -> str:
    # Text form works for both psycopg and PostgREST (JSON) without a driver-specific adapter.
    return "[" + ",".join(f"{x:.7g}" for x in np.asarray(vector, dtype=np.float32)) + "]"


def _chunk(row: dict[str, Any]) -> ChunkResult:
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
