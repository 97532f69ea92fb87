"""Thread pools for provider calls (embeddings, the LLM, the speculative full-text search) with a
bounded queue: past ``workers + queue`` calls in flight a new call is refused at once with
:class:`ProvidersBusy` (503 with Retry-After), instead of queueing behind calls whose requests
have already given up.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from ..errors import ProvidersBusy


class BoundedExecutor:
    def __init__(self, name: str, *, workers: int, queue: int):
        self.name = name
        self.capacity = workers + queue
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=name)
        self._slots = threading.BoundedSemaphore(self.capacity)
        self._in_flight = 0
        self._lock = threading.Lock()

    @property
    def in_flight(self) -> int:
        """Calls queued or running."""
        with self._lock:
            return self._in_flight

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        if not self._slots.acquire(blocking=False):
            raise ProvidersBusy(f"{self.capacity} {self.name} calls are already in flight")
        with self._lock:
            self._in_flight += 1
        try:
            future = self._pool.submit(fn, *args, **kwargs)
        except BaseException:
            self._release(None)
            raise
        future.add_done_callback(self._release)
        return future

    def _release(self, _future: Future | None) -> None:
        with self._lock:
            self._in_flight -= 1
        self._slots.release()

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
