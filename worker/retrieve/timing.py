"""Per-stage timing of one answer, in milliseconds (the answer's ``timings_ms``)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager


class Timer:
    def __init__(self) -> None:
        self.timings: dict[str, float] = {}
        self._start = time.perf_counter()

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.timings[name] = round((time.perf_counter() - start) * 1000, 2)

    def total(self) -> float:
        return round((time.perf_counter() - self._start) * 1000, 2)
