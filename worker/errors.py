"""The worker's exceptions. The HTTP layer turns each into one JSON error shape."""

from __future__ import annotations


class ArcError(Exception):
    """Base class; ``status`` is the HTTP status it maps to."""

    status = 500
    code = "internal_error"
    retry_after: int | None = None  # seconds, sent as Retry-After
    field: str | None = None  # the input at fault, named in the JSON error


class DatabaseUnavailable(ArcError):
    status = 503
    code = "database_unavailable"
    retry_after = 5


class WritesBusy(ArcError):
    """Another ingest or delete held the knowledge base's one write lock past the wait allowed
    (``ARC_WRITE_LOCK_WAIT``): a long load, not a fault. Nothing of this write was stored."""

    status = 503
    code = "knowledge_base_busy"
    retry_after = 5


class ProvidersBusy(ArcError):
    """A provider pool (embeddings, LLM) has no room left: a slow provider, not a bad request."""

    status = 503
    code = "providers_busy"
    retry_after = 2


class SchemaMismatch(ArcError):
    """The table was built for another embedding size: a startup error, never a silent one."""

    status = 500
    code = "schema_mismatch"


class DataDirectoryVersion(ArcError):
    """The embedded database's data directory was written by another PostgreSQL major version."""

    status = 500
    code = "data_directory_version"


class EmbeddingError(ArcError):
    status = 503
    code = "embedding_failed"


class FieldError(ArcError):
    """An error about one input, named in its message and in the JSON error's ``field``."""

    def __init__(self, message: str, field: str):
        super().__init__(f"{field}: {message}")
        self.field = field


class InvalidInput(FieldError):
    """A request the models could not catch (a form upload's file, say)."""

    status = 422
    code = "invalid_input"


class IngestError(ArcError):
    """A document that cannot be stored; ``field`` names the input at fault for the JSON error."""

    status = 422
    code = "ingest_failed"

    def __init__(self, message: str, field: str = "document"):
        super().__init__(message)
        self.field = field


class CommunityRequired(ArcError):
    """The knowledge base holds several communities and the request named none."""

    status = 400
    code = "community_required"
    field = "community"


class UnknownCommunity(ArcError):
    """A community that holds no document here (a typo must not read as an empty answer)."""

    status = 404
    code = "unknown_community"
    field = "community"


class CommunityConflict(ArcError):
    """A community found in a database ``ARC_COMMUNITY_DATABASES`` does not send it to (held by
    two databases, or left behind when the mapping changed): refused, never answered from one."""

    status = 409
    code = "community_conflict"
    field = "community"


class CommunityForbidden(ArcError):
    """A token limited to other communities: refused before anything of this one is read."""

    status = 403
    code = "forbidden"
    field = "community"


class WriteForbidden(ArcError):
    """A caller that may read only (a community token without ``write@``) asked to ingest or delete."""

    status = 403
    code = "forbidden"


class NotFound(FieldError):
    """Something the request names by id that does not exist (or is another community's)."""

    status = 404
    code = "not_found"
