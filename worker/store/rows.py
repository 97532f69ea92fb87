"""Reading the row of a query that always returns one (an aggregate, a function's result)."""

from __future__ import annotations

from typing import Any

import psycopg


def one_row(cursor: psycopg.Cursor[Any]) -> tuple[Any, ...]:
    """The single row ``cursor`` returned; a query written to return one never returns none."""
    row = cursor.fetchone()
    if row is None:
        raise LookupError("a query that always returns a row returned none")
    return row
