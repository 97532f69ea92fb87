"""The search backend on Postgres (a psycopg 3 pool): ``hybrid_search`` and ``arc_answer`` on the
primary, or spread over read replicas when there are any (``replicas.py``)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import psycopg

from ..errors import DatabaseUnavailable
from ..models import ChunkResult
from . import sqlfiles
from .calibrations import PostgresCalibrations
from .database import Database
from .replicas import Checked, ReadReplicas
from .rows import one_row
from .search import (
    AnswerCall,
    Answered,
    CommunityRefused,
    DocumentDate,
    SearchParams,
    answered,
    as_float32,
    chunk_of,
    refuses_community,
)

# A question's one call is a read: on a connection that broke in the pool it is asked again.
ANSWER_ATTEMPTS = 3


class PostgresBackend:
    """Searches and neighbour fetches on the primary, or spread over read replicas when there are
    any (worker/store/replicas.py): a replica serves a question only once it has replayed the
    version the primary reports for it."""

    def __init__(self, db: Database, replicas: ReadReplicas | None = None):
        self.db = db
        self.replicas = replicas

    def search(self, params: SearchParams, min_version: int | None = None) -> list[ChunkResult]:
        def run(conn: psycopg.Connection) -> list[dict[str, Any]]:
            with _search_time_bounded():
                cur = conn.cursor(row_factory=psycopg.rows.dict_row)
                return cur.execute(sqlfiles.query("hybrid_search"), params.sql_params(as_float32)).fetchall()

        if self.replicas is None:
            with self.db.connection() as conn:
                rows = run(conn)
        else:
            # The primary's version for every search (another process may have just ingested):
            # the caller's, when it read one, else one short row read.
            rows = self.replicas.read(run, self.replicas.primary_version() if min_version is None else min_version)
        return [chunk_of(row) for row in rows]

    def answer(self, params: SearchParams, call: AnswerCall) -> Answered:
        """A question's reads in one call; over read replicas two: the primary's version, then the
        call on a replica that has replayed it (the call checks that itself)."""
        if self.replicas is not None:
            return self._answer_on_replica(params, call, self.replicas)
        args = {**params.sql_params(as_float32), **call.sql_params()}
        for attempt in range(1, ANSWER_ATTEMPTS + 1):
            try:
                # a read asked again on a broken connection: its first goes unchecked
                with self.db.connection(checked=attempt > 1) as conn:
                    return answered(_answer_call(conn, args))
            except DatabaseUnavailable as exc:
                # a connection that broke while it sat in the pool (its liveness check is skipped
                # for one used moments ago, database.py): the call is a read, asked again on another
                if attempt == ANSWER_ATTEMPTS or not isinstance(exc.__cause__, psycopg.OperationalError):
                    raise
        raise AssertionError("unreachable")

    def _answer_on_replica(self, params: SearchParams, call: AnswerCall, replicas: ReadReplicas) -> Answered:
        """The call on a replica that has replayed the primary's version (read first: another
        process may have just ingested), which the call checks itself."""
        floor = replicas.primary_version()
        args = {**params.sql_params(as_float32), **replace(call, min_version=floor).sql_params()}

        def run(conn: psycopg.Connection) -> Checked[Answered]:
            body = _answer_call(conn, args)
            lag = None if body.get("lag") is None else float(body["lag"])
            return Checked(answered(body) if int(body["replayed"]) >= floor else None, lag)

        return replicas.read_checked(run, floor)

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
        return [chunk_of(row) for row in rows]

    def compound_spellings(self, words: Sequence[str], community: str | None = None) -> list[str]:
        with self.db.connection() as conn:
            found = conn.execute(sqlfiles.query("compound_spellings"), {"words": list(words), "community": community})
            return list(one_row(found)[0])

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


def _answer_call(conn: psycopg.Connection, args: dict[str, Any]) -> dict[str, Any]:
    """``arc_answer``'s object, its refusals as the worker's errors."""
    try:
        with _search_time_bounded():
            return one_row(conn.execute(sqlfiles.query("answer"), args))[0] or {}
    except psycopg.errors.InvalidParameterValue as exc:
        if refuses_community(str(exc)):
            raise CommunityRefused(str(exc).splitlines()[0]) from exc
        raise


@contextmanager
def _search_time_bounded() -> Iterator[None]:
    """A search cancelled by the statement timeout, as the worker's error."""
    try:
        yield
    except psycopg.errors.QueryCanceled as exc:
        raise DatabaseUnavailable("the search took longer than the statement timeout") from exc


def _version_query(community: str | None) -> tuple[str, dict[str, Any]]:
    """One community's counter, or with none named the whole knowledge base's (the status
    calibration's key): knowledge_base_version(NULL) is a community that does not exist, 0."""
    if community is None:
        return sqlfiles.query("knowledge_base_version"), {}
    return sqlfiles.query("community_version"), {"community": community}
