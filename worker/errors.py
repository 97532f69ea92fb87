"""The worker's exceptions. The HTTP layer turns each into one JSON error shape."""

from __future__ import annotations


class ArcError(Exception):
    """Base class; ``status`` is the HTTP status it maps to."""

    status = 500
    code = "internal_error"


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
