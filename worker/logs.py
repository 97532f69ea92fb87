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
    root.setLevel(wanted if wanted in logging.getLevelNamesMapping() else "INFO")
    for noisy in ("httpx", "openai", "psycopg.pool", "urllib3", "pgserver"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
