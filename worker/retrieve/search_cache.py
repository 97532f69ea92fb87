"""Search results kept for a few minutes, each valid only for the knowledge-base version it was
read at (the one call says whether that version still holds, ``first_stage.py``)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from cachetools import TTLCache

from ..models import ChunkResult
from ..store.search import DocumentDate, NeighbourReach, SearchParams


@dataclass(frozen=True)
class Held:
    """A search's result as read at ``version``: its rows and, when the one call read them, the
    best rows' neighbours (chunk id -> the chunks around it), the dates of the documents that
    replaced a row and, as of a date, the search over every version (none of which can change
    without the version)."""

    version: int
    rows: list[ChunkResult]
    neighbours: dict[int, list[ChunkResult]] | None = None
    dates: dict[str, DocumentDate] | None = None
    reach: NeighbourReach = field(default_factory=NeighbourReach)  # whose neighbours were read
    unfiltered: list[ChunkResult] | None = None  # as of a date, the search over every version

    def copy(self) -> Held:
        # callers change their chunks' scores in place: each gets its own
        neighbours = None if self.neighbours is None else {k: list(v) for k, v in self.neighbours.items()}
        unfiltered = None if self.unfiltered is None else [c.model_copy() for c in self.unfiltered]
        return Held(self.version, [c.model_copy() for c in self.rows], neighbours, self.dates, self.reach, unfiltered)


class SearchCache:
    """Result lists for a few minutes, each valid only for the knowledge-base version it was read
    at: any change to the chunks, by any process, makes every older entry a miss."""

    def __init__(self, ttl_seconds: float = 300, maxsize: int = 2048):
        self.enabled = ttl_seconds > 0
        self._cache: TTLCache = TTLCache(maxsize=maxsize, ttl=max(ttl_seconds, 1e-9))
        self._lock = threading.Lock()
        self.hits = 0

    def get(self, params: SearchParams, version: int) -> list[ChunkResult] | None:
        found = self.held(params)
        if found is not None and found.version == version:
            self.hits += 1
            return found.rows
        return None

    def held(self, params: SearchParams) -> Held | None:
        """The entry for ``params``, whatever version it was read at (the one call checks the
        version in the database, :class:`AnswerCall`)."""
        if not self.enabled:
            return None
        with self._lock:
            found: Held | None = self._cache.get(params.cache_key())
        return None if found is None else found.copy()

    def put(self, params: SearchParams, held: Held) -> None:
        if not self.enabled:
            return
        with self._lock:
            self._cache[params.cache_key()] = held.copy()

    def clear(self) -> None:
        with self._lock:
            self._cache.clear()
