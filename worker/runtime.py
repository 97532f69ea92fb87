"""Building the long-lived pieces once: settings -> database (embedded or given) -> embedder."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from .config import Settings
from .database import Database
from .embedded import EmbeddedPostgres
from .embeddings import CachedEmbedder, build_embedder

log = logging.getLogger("arc.runtime")


@dataclass
class Runtime:
    settings: Settings
    db: Database
    embedder: CachedEmbedder
    embedded: EmbeddedPostgres | None = None

    def close(self) -> None:
        self.db.close()
        if self.embedded is not None:
            self.embedded.stop()


def database_url(settings: Settings) -> tuple[str, EmbeddedPostgres | None]:
    if settings.database_url:
        return settings.database_url, None
    embedded = EmbeddedPostgres(settings.data_dir)
    return embedded.start(), embedded


def open_runtime(settings: Settings, *, migrate: bool = True) -> Runtime:
    """Start what the settings ask for. Raises SchemaMismatch on a wrong embedding size."""
    url, embedded = database_url(settings)
    db = Database(url, pool_size=settings.pool_size, statement_timeout_ms=settings.statement_timeout_ms)
    embedder = CachedEmbedder(build_embedder(settings))
    if migrate:
        db.check_dimension(embedder.model, embedder.dim)
        db.migrate(embedder.dim)
    return Runtime(settings, db, embedder, embedded)
