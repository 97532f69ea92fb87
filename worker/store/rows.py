"""Reading rows: the row of a query that always returns one (an aggregate, a function's result),
and a timestamp as either way in gives it."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import psycopg


def one_row(cursor: psycopg.Cursor[Any]) -> tuple[Any, ...]:
    """The single row ``cursor`` returned; a query written to return one never returns none."""
    row = cursor.fetchone()
    if row is None:
        raise LookupError("a query that always returns a row returned none")
    return row


def moment(value: object) -> datetime | None:
    """A timestamp as psycopg gives it, or as PostgREST's JSON spells it."""
    if isinstance(value, str):
        return datetime.fromisoformat(value)
    return value if isinstance(value, datetime) else None
