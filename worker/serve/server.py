"""``arc-retrieval serve``: gunicorn in-process, with the settings of ``gunicorn_conf``."""

from __future__ import annotations

import os

from gunicorn.app.base import BaseApplication

from . import gunicorn_conf


class _Server(BaseApplication):
    def __init__(self, options: dict[str, object]):
        self.options = options
        super().__init__()

    def load_config(self) -> None:
        for key in dir(gunicorn_conf):
            if key in self.cfg.settings and not key.startswith("_"):
                self.cfg.set(key, getattr(gunicorn_conf, key))
        for key, value in self.options.items():
            self.cfg.set(key, value)

    def load(self):
        from .app import create_app

        return create_app()


def run(*, bind: str | None, workers: int | None, load_sample: bool) -> None:
    """``bind`` None: gunicorn_conf's (``ARC_BIND``, default 127.0.0.1:8080)."""
    if load_sample:
        os.environ["ARC_LOAD_SAMPLE"] = "1"
    options: dict[str, object] = {"bind": bind} if bind else {}
    if workers:
        options["workers"] = workers
    _Server(options).run()
