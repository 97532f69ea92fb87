"""Building the long-lived pieces once: settings -> database (embedded or given) -> embedder."""

from __future__ import annotations

import logging
import threading
from dataclasses import InitVar, dataclass, field

import psycopg

from .config import Settings
from .embedding_models import LOCAL_DIM, LOCAL_MODEL, LOCAL_MODELS
from .embeddings import CachedEmbedder, build_embedder
from .errors import DatabaseUnavailable
from .store.database import Database
from .store.databases import Databases
from .store.embedded import EmbeddedPostgres

log = logging.getLogger("arc.runtime")


@dataclass
class Runtime:
    """``db``: the default database (``DATABASE_URL`` or the embedded one), which also keeps what
    belongs to no community (the keeper's sessions); ``databases``: it and the databases
    ``ARC_COMMUNITY_DATABASES`` sends communities to (store/databases.py)."""

    settings: Settings
    db: Database
    embedder: CachedEmbedder
    embedded: EmbeddedPostgres | None = None
    schema_ready: bool = True
    replicas: list[Database] = field(default_factory=list)  # read-only, of ``db``: searches only
    community_databases: InitVar[Databases | None] = None
    databases: Databases = field(init=False)

    def __post_init__(self, community_databases: Databases | None) -> None:
        self._schema_lock = threading.Lock()
        self.databases = community_databases or Databases(self.db)
        self._ready: set[Database] = set()  # migrated and checked here, while schema_ready is False

    def database(self, community: str) -> Database:
        """The database that holds ``community``."""
        return self.databases.of(community)

    def ensure_schema(self, db: Database | None = None) -> None:
        """Migrate and check ``db`` (None: every database) once it answers (it may be down at
        start). Once every database is ready, a knowledge base split over several is checked for
        a community held where the mapping does not send it (``CommunityConflict``)."""
        if self.schema_ready or (db is not None and db in self._ready):
            return
        targets = [db] if db is not None else self.databases.all()
        with self._schema_lock:
            unreachable = None
            for target in targets:
                if target in self._ready:
                    continue
                try:
                    target.check_dimension(self.embedder.model, self.embedder.dim)
                    target.migrate(self.embedder.dim)
                    target.check_model(self.embedder.model, self.embedder.dim)
                except psycopg.OperationalError as exc:
                    unreachable = exc
                    continue
                self._ready.add(target)
            if unreachable is not None:
                raise DatabaseUnavailable("database unreachable") from unreachable
            if self.schema_ready or not self._ready.issuperset(self.databases.all()):
                return
            if self.databases.split:
                self.databases.communities()  # a community in two databases stops the start here
            self.schema_ready = True
            log.info("database schema ready")

    def close(self) -> None:
        self.databases.close()
        for replica in self.replicas:
            replica.close()
        if self.embedded is not None:
            self.embedded.stop()


def database_url(settings: Settings) -> tuple[str, EmbeddedPostgres | None]:
    database = settings.database
    if database.database_url:
        return database.database_url, None
    embedded = EmbeddedPostgres(database.data_dir)
    return embedded.start(), embedded


def keep_the_built_model(settings: Settings, db: Database) -> Settings:
    """A key set for the reranker never switches the embeddings of a knowledge base built with
    the local model: its vectors would no longer match any question. Only an explicit
    EMBEDDING_PROVIDER (and a re-ingest) switches; the start says which model it keeps."""
    if not settings.embedding.embedding_from_key:
        return settings
    try:
        built = db.embedding_dim()
        recorded = db.recorded_model()
    except psycopg.OperationalError:
        return settings  # unknown yet: the schema check reports a mismatch when it answers
    if built != LOCAL_DIM or settings.embedding.embedding_dim == LOCAL_DIM:
        return settings
    model = recorded if recorded in LOCAL_MODELS else LOCAL_MODEL
    log.warning(
        f"the knowledge base was built with {model} ({LOCAL_DIM} dims): embeddings stay local, "
        f"the key serves the reranker; set EMBEDDING_PROVIDER={settings.embedding.embedding_provider}"
        " and "
        "re-ingest to switch, or EMBEDDING_PROVIDER=local to silence this"
    )
    return settings.with_local_embeddings(model)


def open_runtime(settings: Settings, *, migrate: bool = True) -> Runtime:
    """Start what the settings ask for. Raises SchemaMismatch on a wrong embedding size."""
    url, embedded = database_url(settings)
    database = settings.database
    db = _database(url, settings)
    settings = keep_the_built_model(settings, db)
    embedder = CachedEmbedder(build_embedder(settings))
    timeout_ms = database.replica_timeout_ms
    replicas = [
        Database(url, pool_size=database.pool_size, statement_timeout_ms=timeout_ms, connect_timeout=timeout_ms / 1000)
        for url in database.read_database_urls
    ]
    databases = Databases.mapped(db, database.community_databases, lambda other: _database(other, settings))
    runtime = Runtime(
        settings, db, embedder, embedded, schema_ready=not migrate, replicas=replicas, community_databases=databases
    )
    if migrate:
        try:
            runtime.ensure_schema()
        except DatabaseUnavailable:
            # Start anyway: /readyz reports not ready, requests get 503 until the database is back.
            log.warning("database unreachable at start; will retry on demand")
    return runtime


def _database(url: str, settings: Settings) -> Database:
    database = settings.database
    return Database(
        url,
        pool_size=database.pool_size,
        statement_timeout_ms=database.statement_timeout_ms,
        write_lock_wait=database.write_lock_wait,
    )
