"""The stored status scales of questions in other languages (``sql/043_status_language_scales.sql``),
per community, embedding model and language, read and written directly (psycopg) or through
Supabase's RPC route.

What a language scale is and how it is measured: ``worker/retrieve/status/language_scale.py``. It is
measured with the status calibration (``worker/retrieve/calibration.py``) and stored at the same
knowledge base version; this module only moves the measured numbers in and out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from . import rpc, sqlfiles
from .calibrations import CalibrationStore, PostgresCalibrations, RpcCalibrations


@dataclass(frozen=True)
class StoredScale:
    """One language's scale on the vector leg (cosine similarities), as stored."""

    language: str
    floor: float
    match: float
    near_miss: float
    drop: float
    pairs: int


class LanguageScaleStore(Protocol):
    def read(self, community: str, model: str, version: int) -> dict[str, StoredScale]: ...

    def put(self, community: str, model: str, version: int, scales: list[StoredScale]) -> None: ...


def _scale(row: dict[str, Any]) -> StoredScale:
    return StoredScale(
        language=str(row["language"]),
        floor=float(row["floor"]),
        match=float(row["match"]),
        near_miss=float(row["near_miss"]),
        drop=float(row["language_drop"]),
        pairs=int(row["pairs"]),
    )


def _put_args(community: str, model: str, version: int, scale: StoredScale) -> dict[str, Any]:
    return {
        "community": community,
        "embedding_model": model,
        "language": scale.language,
        "kb_version": version,
        "floor": scale.floor,
        "match": scale.match,
        "near_miss": scale.near_miss,
        "language_drop": scale.drop,
        "pairs": scale.pairs,
    }


class PostgresLanguageScales:
    def __init__(self, calibrations: PostgresCalibrations):
        self.db = calibrations.db

    def read(self, community: str, model: str, version: int) -> dict[str, StoredScale]:
        import psycopg

        with self.db.connection() as conn:
            cur = conn.cursor(row_factory=psycopg.rows.dict_row)
            rows = cur.execute(
                sqlfiles.query("language_scales"),
                {"community": community, "embedding_model": model, "kb_version": version},
            ).fetchall()
        return {row["language"]: _scale(row) for row in rows}

    def put(self, community: str, model: str, version: int, scales: list[StoredScale]) -> None:
        with self.db.connection() as conn:
            for scale in scales:
                conn.execute(sqlfiles.query("store_language_scale"), _put_args(community, model, version, scale))


class RpcLanguageScales:
    """The same functions through PostgREST (a ``supabase`` client's ``rpc``)."""

    def __init__(self, calibrations: RpcCalibrations):
        self.client = calibrations.client

    def read(self, community: str, model: str, version: int) -> dict[str, StoredScale]:
        rows = (
            rpc.call(
                self.client,
                "arc_language_scales",
                {"community": community, "embedding_model": model, "kb_version": version},
            )
            or []
        )
        return {row["language"]: _scale(row) for row in rows}

    def put(self, community: str, model: str, version: int, scales: list[StoredScale]) -> None:
        for scale in scales:
            rpc.call(self.client, "arc_store_language_scale", _put_args(community, model, version, scale))


class LocalLanguageScales:
    """Held in this process only: beside a calibration store that is not a database's."""

    def __init__(self) -> None:
        self._rows: dict[tuple[str, str], tuple[int, dict[str, StoredScale]]] = {}

    def read(self, community: str, model: str, version: int) -> dict[str, StoredScale]:
        held = self._rows.get((community, model))
        return dict(held[1]) if held is not None and held[0] == version else {}

    def put(self, community: str, model: str, version: int, scales: list[StoredScale]) -> None:
        held = self._rows.get((community, model))
        if held is None or held[0] < version:
            held = (version, {})
        if held[0] == version:
            self._rows[(community, model)] = (version, {**held[1], **{s.language: s for s in scales}})


def beside(store: CalibrationStore) -> LanguageScaleStore:
    """The language scales stored where ``store`` keeps the calibrations."""
    if isinstance(store, PostgresCalibrations):
        return PostgresLanguageScales(store)
    if isinstance(store, RpcCalibrations):
        return RpcLanguageScales(store)
    return LocalLanguageScales()
