"""The stored status calibrations (``sql/036_status_calibrations.sql``), one per community and
embedding model (and rerank service, when one sets the status: its scale in the ``rerank_*``
columns, ``sql/042_rerank_calibration.sql``) and the success cut its confirmed questions fitted
on it (``sql/092_fitted_success_cut.sql``), read and written directly (psycopg) or through
Supabase's RPC route.

What a calibration is and how it is measured: ``worker/retrieve/status/confidence.py`` and
``worker/retrieve/calibration.py``. This module only moves the measured numbers in and out.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from ..errors import DatabaseUnavailable
from . import rpc, sqlfiles
from .database import Database
from .rows import moment, one_row


@dataclass(frozen=True)
class FittedCut:
    """A community's success cut fitted on its confirmed questions (``worker/retrieve/status/fitted_cut.py``):
    the cut, how many answerable and unanswerable confirmations it rests on, its leave-one-out
    accuracy, and the configured cut's accuracy on the same questions."""

    success_at: float
    answerable: int
    unanswerable: int
    loo_accuracy: float
    configured_accuracy: float
    configured_at: float
    gained: int = 0  # questions the fitted cut, left out, puts right and the configured one does not
    lost: int = 0  # ... and the reverse

    @property
    def in_force(self) -> bool:
        """The fitted cut decides the status: it is below the configured one (the anchored cut only
        lowers it, and stays at the configured cut when its guards refuse) and, left out, it puts more
        of the confirmed questions right than the configured cut."""
        return self.success_at < self.configured_at and self.gained > self.lost


@dataclass(frozen=True)
class StoredCalibration:
    """A community's measured scale at one version, as stored (``too_small``: nothing to measure)."""

    kb_version: int
    floor: float | None
    match: float | None
    near_miss: float | None
    questions: int
    too_small: bool = False
    # A rerank service's scale, measured beside (a calibration stored under a service's name)
    rerank_floor: float | None = None
    rerank_match: float | None = None
    rerank_near_miss: float | None = None
    rerank_failure: str | None = None  # why the service's scale could not be measured
    measured_at: datetime | None = None  # as read back (the database's clock)
    fitted: FittedCut | None = None  # the success cut the confirmed questions fitted on this scale


@dataclass(frozen=True)
class Reading:
    """What is stored for a community (None: nothing yet), and the community's version now."""

    stored: StoredCalibration | None
    current_version: int

    @property
    def fresh(self) -> bool:
        return self.stored is not None and self.stored.kb_version == self.current_version


@dataclass(frozen=True)
class Stale:
    community: str
    current_version: int


class CalibrationStore(Protocol):
    def read(self, community: str, model: str) -> Reading: ...

    def stale(self, model: str) -> list[Stale]:
        """The communities holding chunks whose calibration for ``model`` is missing or stale."""
        ...

    def claim(self, community: str, model: str, version: int, lease_seconds: float) -> bool:
        """True when this caller is to measure ``community`` at ``version`` (nobody else is)."""
        ...

    def put(self, community: str, model: str, stored: StoredCalibration, measured_ms: int) -> None: ...

    def put_fit(self, community: str, model: str, version: int, fit: FittedCut | None) -> bool:
        """Store (None: clear) the fitted success cut of the calibration at ``version``; False when
        the stored calibration is of another version."""
        ...


def as_reading(row: dict[str, Any] | None) -> Reading:
    """A stored calibration's row (``arc_status_calibration``'s columns, by whichever call read it)."""
    if row is None:
        raise DatabaseUnavailable("the stored status calibration could not be read")
    stored = None
    if row.get("kb_version") is not None:
        stored = StoredCalibration(
            kb_version=int(row["kb_version"]),
            floor=row.get("floor"),
            match=row.get("match"),
            near_miss=row.get("near_miss"),
            questions=int(row.get("questions") or 0),
            too_small=bool(row.get("too_small")),
            rerank_floor=row.get("rerank_floor"),
            rerank_match=row.get("rerank_match"),
            rerank_near_miss=row.get("rerank_near_miss"),
            rerank_failure=row.get("rerank_failure"),
            measured_at=moment(row.get("measured_at")),
            fitted=_fit(row),
        )
    return Reading(stored, int(row.get("current_version") or 0))


def _fit(row: dict[str, Any]) -> FittedCut | None:
    if row.get("fitted_success_at") is None:
        return None
    return FittedCut(
        success_at=float(row["fitted_success_at"]),
        answerable=int(row.get("fitted_answerable") or 0),
        unanswerable=int(row.get("fitted_none") or 0),
        loo_accuracy=float(row.get("fitted_loo_accuracy") or 0.0),
        configured_accuracy=float(row.get("fitted_configured_accuracy") or 0.0),
        configured_at=float(row.get("fitted_configured_at") or 0.0),
        gained=int(row.get("fitted_gained") or 0),
        lost=int(row.get("fitted_lost") or 0),
    )


def _fit_args(community: str, model: str, version: int, fit: FittedCut | None) -> dict[str, Any]:
    return {
        "community": community,
        "embedding_model": model,
        "kb_version": version,
        "success_at": fit and fit.success_at,
        "answerable": fit and fit.answerable,
        "unanswerable": fit and fit.unanswerable,
        "loo_accuracy": fit and fit.loo_accuracy,
        "configured_accuracy": fit and fit.configured_accuracy,
        "configured_at": fit and fit.configured_at,
        "gained": fit and fit.gained,
        "lost": fit and fit.lost,
    }


def _put_args(community: str, model: str, stored: StoredCalibration, measured_ms: int) -> dict[str, Any]:
    return {
        "community": community,
        "embedding_model": model,
        "kb_version": stored.kb_version,
        "floor": stored.floor,
        "match": stored.match,
        "near_miss": stored.near_miss,
        "questions": stored.questions,
        "too_small": stored.too_small,
        "measured_ms": int(measured_ms),
        "rerank_floor": stored.rerank_floor,
        "rerank_match": stored.rerank_match,
        "rerank_near_miss": stored.rerank_near_miss,
        "rerank_failure": stored.rerank_failure,
    }


class PostgresCalibrations:
    """On the primary: a calibration stored is read back at once, whichever process asks."""

    def __init__(self, db: Database):
        self.db = db

    def read(self, community: str, model: str) -> Reading:
        import psycopg

        with self.db.connection() as conn:
            cur = conn.cursor(row_factory=psycopg.rows.dict_row)
            return as_reading(
                cur.execute(
                    sqlfiles.query("status_calibration"), {"community": community, "embedding_model": model}
                ).fetchone()
            )

    def stale(self, model: str) -> list[Stale]:
        with self.db.connection() as conn:
            rows = conn.execute(sqlfiles.query("stale_status_calibrations"), {"embedding_model": model}).fetchall()
        return [Stale(row[0], int(row[1])) for row in rows]

    def claim(self, community: str, model: str, version: int, lease_seconds: float) -> bool:
        with self.db.connection() as conn:
            return bool(
                one_row(
                    conn.execute(
                        sqlfiles.query("claim_status_calibration"),
                        {
                            "community": community,
                            "embedding_model": model,
                            "kb_version": version,
                            "lease_seconds": lease_seconds,
                        },
                    )
                )[0]
            )

    def put(self, community: str, model: str, stored: StoredCalibration, measured_ms: int) -> None:
        with self.db.connection() as conn:
            conn.execute(sqlfiles.query("store_status_calibration"), _put_args(community, model, stored, measured_ms))

    def put_fit(self, community: str, model: str, version: int, fit: FittedCut | None) -> bool:
        with self.db.connection() as conn:
            return bool(
                one_row(conn.execute(sqlfiles.query("store_fitted_cut"), _fit_args(community, model, version, fit)))[0]
            )


class RpcCalibrations:
    """The same functions through PostgREST (a ``supabase`` client's ``rpc``)."""

    def __init__(self, client: Any):
        self.client = client

    def _rpc(self, function: str, args: dict[str, Any]) -> Any:
        return rpc.call(self.client, function, args)

    def read(self, community: str, model: str) -> Reading:
        rows = self._rpc("arc_status_calibration", {"community": community, "embedding_model": model}) or []
        return as_reading(rows[0] if rows else None)

    def stale(self, model: str) -> list[Stale]:
        rows = self._rpc("arc_stale_status_calibrations", {"embedding_model": model}) or []
        return [Stale(row["community"], int(row["current_version"])) for row in rows]

    def claim(self, community: str, model: str, version: int, lease_seconds: float) -> bool:
        return bool(
            self._rpc(
                "arc_claim_status_calibration",
                {
                    "community": community,
                    "embedding_model": model,
                    "kb_version": version,
                    "lease_seconds": lease_seconds,
                },
            )
        )

    def put(self, community: str, model: str, stored: StoredCalibration, measured_ms: int) -> None:
        self._rpc("arc_store_status_calibration", _put_args(community, model, stored, measured_ms))

    def put_fit(self, community: str, model: str, version: int, fit: FittedCut | None) -> bool:
        return bool(self._rpc("arc_store_fitted_cut", _fit_args(community, model, version, fit)))
