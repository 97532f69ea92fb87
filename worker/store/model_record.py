"""Which embedding model wrote the knowledge base's vectors (sql/040), and the refusal to mix.

The dimension check (Database.check_dimension) cannot tell all-MiniLM-L6-v2 from
multilingual-e5-small: both make 384 numbers. So the model is recorded by name with the first
chunks written, checked when a worker starts and again inside every ingest's transaction, and
changed only by ``arc-retrieval reembed`` (worker/ingest/reembed.py), which embeds every chunk
again. An empty knowledge base takes whichever model writes to it first.
"""

from __future__ import annotations

from dataclasses import dataclass

import psycopg

from ..errors import SchemaMismatch
from . import sqlfiles
from .rows import one_row

# Knowledge bases filled before the model was recorded: a 384-dim one was made by the only
# 384-dim model the worker had, the local MiniLM.
UNRECORDED_384 = "all-MiniLM-L6-v2"


@dataclass(frozen=True)
class RecordedModel:
    model: str
    dim: int


def recorded(conn: psycopg.Connection) -> RecordedModel | None:
    """The model the chunks were embedded with; None when there are no chunks to speak of."""
    chunks, record_table = one_row(conn.execute(sqlfiles.query("model_record_tables")))
    if not chunks or one_row(conn.execute(sqlfiles.query("knowledge_base_empty")))[0]:
        return None
    row = conn.execute(sqlfiles.query("recorded_embedding_model")).fetchone() if record_table else None
    if row is not None:
        return RecordedModel(row[0], row[1])
    dim = _column_dim(conn)
    return RecordedModel(UNRECORDED_384, 384) if dim == 384 else None


def claim(conn: psycopg.Connection, model: str, dim: int) -> None:
    """Refuse ``model`` if the chunks were embedded with another one; else record it. Inside an
    ingest's transaction, after its write lock, so two writers cannot mix models between them."""
    found = recorded(conn)
    if found is not None and found.model != model:
        raise SchemaMismatch(mixing_message(found.model, model))
    conn.execute(sqlfiles.query("record_embedding_model"), {"model": model, "dim": dim})


def record(conn: psycopg.Connection, model: str, dim: int) -> None:
    conn.execute(sqlfiles.query("record_embedding_model"), {"model": model, "dim": dim})


def mixing_message(built: str, configured: str) -> str:
    return (
        f"the knowledge base was embedded with {built} and EMBEDDING_MODEL is {configured}: their vectors "
        f"do not mix. Set EMBEDDING_MODEL={built} again, or run `arc-retrieval reembed` with "
        f"EMBEDDING_MODEL={configured} to embed every chunk again with it"
    )


def _column_dim(conn: psycopg.Connection) -> int | None:
    row = conn.execute(sqlfiles.query("embedding_type")).fetchone()
    if not row or not row[0] or not row[0].startswith("vector("):
        return None
    return int(row[0][len("vector(") : -1])
