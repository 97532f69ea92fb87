"""Admission control: how much work one worker process takes on at once.

Every request to n8n's worker comes from one address (the n8n instance), so a per-address rate
limit either refuses n8n's legitimate traffic or protects nothing. What protects a CPU- and
I/O-bound worker is a bound on the work in flight: at most ``max_concurrent`` requests run the
pipeline, at most ``max_queue`` more wait for a slot (each at most ``queue_timeout`` seconds),
and anything beyond is refused at once with 429 and ``Retry-After``, so latency stays bounded
past capacity and n8n's retry (workflows/) picks the request up a second later.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

RETRY_AFTER_SECONDS = 1  # within n8n's default wait between tries (1 s)


class Overloaded(Exception):
    """No slot now: the caller should answer 429 with ``Retry-After``."""

    def __init__(self, reason: str, retry_after: int = RETRY_AFTER_SECONDS):
        super().__init__(reason)
        self.retry_after = retry_after


class Admission:
    def __init__(self, max_concurrent: int, max_queue: int, queue_timeout: float):
        self.max_concurrent = max_concurrent
        self.max_queue = max_queue
        self.queue_timeout = queue_timeout
        self._slots = threading.BoundedSemaphore(max_concurrent)
        self._lock = threading.Lock()
        self._waiting = 0
        self.refused = 0

    @contextmanager
    def slot(self) -> Iterator[None]:
        if not self._slots.acquire(blocking=False):
            with self._lock:
                if self._waiting >= self.max_queue:
                    self.refused += 1
                    raise Overloaded(f"busy: {self.max_concurrent} requests running and {self._waiting} waiting")
                self._waiting += 1
            try:
                acquired = self._slots.acquire(timeout=self.queue_timeout)
            finally:
                with self._lock:
                    self._waiting -= 1
            if not acquired:
                with self._lock:
                    self.refused += 1
                raise Overloaded(f"busy: no slot within {self.queue_timeout:g} s")
        try:
            yield
        finally:
            self._slots.release()

    @property
    def waiting(self) -> int:
        return self._waiting
