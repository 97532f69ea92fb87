"""Search results kept for a few minutes, each valid only for the knowledge-base version it was
read at (the one call says whether that version still holds, ``first_stage.py``)."""

from __future__ import annotations

import threading

from cachetools import TTLCache

from ..models import ChunkResult
from ..store.search import SearchParams


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
