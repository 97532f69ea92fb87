"""Keeping the stored BM25 weights in step with the corpus (``sql/010_bm25_maintenance.sql``).

A load that moves the average chunk length by more than 5% opens a new generation at once; the
chunks are then rewritten in steps of :data:`STEP_ROWS`, each its own short transaction, so no
statement comes near the statement timeout and nothing waits on a lock while holding another.
Ingestion spends at most :data:`STEP_SECONDS` on steps after a load and never fails because of
them; ``arc-retrieval db maintain`` finishes the rest.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import psycopg

from . import sqlfiles
from .database import Database
from .rows import one_row

log = logging.getLogger("arc.bm25")

# A step of 2,000 chunks takes about 0.7 s on this 2-core machine (3,000 chunks/s), far from
# the 5 s statement timeout; 2 s of steps after a load keeps ingestion prompt.
STEP_ROWS = 2000
STEP_SECONDS = 2.0


@dataclass(frozen=True)
class RefreshReport:
    opened_generation: bool
    rewritten: int
    stale: int  # chunks still written with an older average length


def refresh(
    db: Database,
    *,
    seconds: float | None = STEP_SECONDS,
    step_rows: int = STEP_ROWS,
    force: bool = False,
    community: str | None = None,
) -> RefreshReport:
    """Open a new generation if the average length drifted, then rewrite stale chunks for at most
    ``seconds`` (None: until none is left); ``force`` opens one even without drift (after a change
    of k1 or b). A failed step is logged and ends the run; the next
    one carries on where it stopped. ``community``: that community's statistics only (None: all)."""
    opened, rewritten = False, 0
    deadline = None if seconds is None else time.monotonic() + seconds
    try:
        with db.connect() as conn:
            named = {"force": force, "community": community}
            opened = bool(one_row(conn.execute(sqlfiles.query("bm25_refresh"), named))[0])
            conn.commit()
            while deadline is None or time.monotonic() < deadline:
                step = {"max_rows": step_rows, "community": community}
                done = one_row(conn.execute(sqlfiles.query("bm25_refresh_step"), step))[0]
                conn.commit()
                rewritten += done
                if done == 0:
                    break
            stale = one_row(conn.execute(sqlfiles.query("bm25_stale_chunks"), {"community": community}))[0]
            conn.commit()
    except psycopg.Error as exc:
        log.warning("bm25 refresh paused", extra={"error": type(exc).__name__, "rewritten": rewritten})
        return RefreshReport(opened, rewritten, -1)
    if rewritten or opened:
        log.info("bm25 refresh", extra={"opened_generation": opened, "rewritten": rewritten, "stale": stale})
    return RefreshReport(opened, rewritten, stale)


def vacuum(db: Database) -> None:
    """Vacuum and analyze the chunks and their postings, as after a large load or refresh.

    A load churns the postings (a list's floor rises and its lowest postings go): until a vacuum,
    this one or autovacuum's whenever it comes by, marks their pages all-visible, every posting
    the full-text leg reads from the impact index is checked against the table's heap as well.
    """
    with db.connect() as conn:
        conn.autocommit = True
        conn.execute("set statement_timeout = 0")  # minutes at a million chunks; never a search's budget
        for table in ("knowledge_chunks", "bm25_postings"):
            conn.execute(f"vacuum (analyze) {table}")
