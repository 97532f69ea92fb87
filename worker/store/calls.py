"""How many round trips to the database a piece of work makes.

Across a network every call to the database costs a round trip before any work, so an answer
says how many it made (``timings_ms.database_calls``). :func:`counted` opens a tally for the
code run inside it (and for work it hands to other threads with :func:`contextvars.copy_context`);
every statement a pooled or standalone connection sends (:class:`CountingCursor`, the pool's
liveness check included) and every Supabase RPC (``rpc.call``) adds one.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import psycopg


@dataclass
class Tally:
    calls: int = 0


_current: ContextVar[Tally | None] = ContextVar("arc_database_calls", default=None)


@contextmanager
def counted() -> Iterator[Tally]:
    """A tally of the database calls made inside the block."""
    tally = Tally()
    token = _current.set(tally)
    try:
        yield tally
    finally:
        _current.reset(token)


def one() -> None:
    """One round trip, counted in the open tally (if any)."""
    tally = _current.get()
    if tally is not None:
        tally.calls += 1


class CountingCursor(psycopg.Cursor):
    """A cursor that counts each statement it sends (one round trip in autocommit mode)."""

    def execute(self, *args: Any, **kwargs: Any) -> CountingCursor:
        one()
        return super().execute(*args, **kwargs)
