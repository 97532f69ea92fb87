"""Structured JSON logs on stderr: one object per line, with the request id when there is one.

Fields passed with ``extra=`` become keys. Messages never carry document text, tokens or keys;
exceptions are logged by type only.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_STANDARD = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        try:
            from flask import g, has_request_context

            if has_request_context() and g.get("request_id"):
                entry["request_id"] = g.request_id
        except ImportError:
            pass
        entry.update({k: v for k, v in record.__dict__.items() if k not in _STANDARD and not k.startswith("_")})
        return json.dumps(entry, default=str)


def configure_logging(level: str | None = None) -> None:
    root = logging.getLogger()
    if any(isinstance(h.formatter, JsonFormatter) for h in root.handlers):
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root.handlers[:] = [handler]
    wanted = (level or os.environ.get("ARC_LOG_LEVEL") or "INFO").upper()
    # An unknown level is reported, in one line, by the settings check that follows; logging
    # itself must not fail first with a traceback.
    level_name = wanted if wanted in logging.getLevelNamesMapping() else "INFO"
    root.setLevel(level_name)
    # the handler filters too: a library that lowers its own logger's level (bm25s sets DEBUG on
    # import) still writes nothing below the level asked for
    handler.setLevel(level_name)
    for noisy in ("httpx", "openai", "psycopg.pool", "urllib3", "pgserver"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


# step, done, total, unit: told of every step of every bar (see watching_progress)
ProgressWatcher = Callable[[str, int, int, str], None]
_watcher: ContextVar[ProgressWatcher | None] = ContextVar("arc_progress_watcher", default=None)


@contextmanager
def watching_progress(watcher: ProgressWatcher) -> Iterator[None]:
    """Tell ``watcher(step, done, total, unit)`` of each progress bar this thread starts, as it
    starts and at every update, not only every ``every`` seconds: the keeper's pages follow an
    upload's ingest (OCR page n of N, chunks embedded, stored) through the bars the command line
    draws and the logs report, without a second account of it."""
    token = _watcher.set(watcher)
    try:
        yield
    finally:
        _watcher.reset(token)


class LogProgress:
    """tqdm's ``update``/``close`` as INFO log lines ("embedding Pool Rules: 512/2048 chunks"), at
    most every ``every`` seconds (config.PROGRESS_LOG_SECONDS) and once at the end: progress where
    no terminal shows a bar."""

    def __init__(
        self,
        total: int,
        desc: str,
        unit: str,
        logger: logging.Logger,
        every: float,
        watcher: ProgressWatcher | None = None,
    ):
        self.total, self.desc, self.unit, self.log = total, desc, unit, logger
        self.done = 0
        self.every = every
        self.last = time.monotonic()
        self.closed = False
        self.watcher = watcher
        if watcher is not None:
            watcher(desc, 0, total, unit)

    def update(self, n: int = 1) -> None:
        self.done += n
        if self.watcher is not None:
            self.watcher(self.desc, self.done, self.total, self.unit)
        if time.monotonic() - self.last >= self.every and self.done < self.total:
            self._say()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._say()

    def _say(self) -> None:
        self.last = time.monotonic()
        self.log.info(
            f"{self.desc}: {self.done}/{self.total} {self.unit}s",
            extra={"step": self.desc, "done": self.done, "total": self.total},
        )

    def __enter__(self) -> LogProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def progress(total: int, desc: str, unit: str, *, terminal: bool, logger: logging.Logger, every: float):
    """A progress bar on a terminal, log lines (at most one per ``every`` seconds) elsewhere; told
    to a watcher too when one watches (a server's thread, never a terminal's bar)."""
    if terminal:
        from tqdm import tqdm

        return tqdm(total=total, desc=desc, unit=unit)
    return LogProgress(total, desc, unit, logger, every, _watcher.get())
