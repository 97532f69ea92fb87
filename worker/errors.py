"""The worker's exceptions. The HTTP layer turns each into one JSON error shape."""

from __future__ import annotations


class ArcError(Exception):
    """Base class; ``status`` is the HTTP status it maps to."""

    status = 500
    code = "internal_error"


class InputError(ArcError):
    """A request field is invalid. ``field`` names it."""

    status = 422
    code = "invalid_input"

    def __init__(self, message: str, field: str | None = None, status: int | None = None):
        super().__init__(message)
        self.field = field
        if status is not None:
            self.status = status


class DatabaseUnavailable(ArcError):
    status = 503
    code = "database_unavailable"


class SchemaMismatch(ArcError):
    """The table was built for another embedding size: a startup error, never a silent one."""

    status = 500
    code = "schema_mismatch"


class EmbeddingError(ArcError):
    status = 503
    code = "embedding_failed"


class IngestError(ArcError):
    status = 422
    code = "ingest_failed"
