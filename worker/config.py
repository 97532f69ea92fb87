"""All configuration, read once from the environment and validated before anything starts.

Every setting belongs to one group (:class:`Database`, :class:`Embedding`, :class:`Limits`...);
:class:`Settings` is made of the groups, and a part of the worker reads its own:
``settings.limits.max_concurrent``, ``settings.status.success_at``. Nothing else in the package
looks at ``os.environ``. ``python -m worker.config`` prints the README's configuration table (the
settings of ``README_SETTINGS``) and ``python -m worker.config --all`` docs/configuration.md (every
setting, group by group) from the declarations below; ``tests/test_docs.py`` checks both.

The domain's vocabulary the settings name lives in modules of its own: the document types
(``worker/document_types.py``), the embedding models (``worker/embedding_models.py``), the rerank
services (``worker/rerank_providers.py``) and what a community token reaches
(``worker/community_grants.py``).

To add a setting, declare one field in its group, and nothing more:

    max_widgets: int = setting("ARC_MAX_WIDGETS", 8, "widgets per process", ge=1, le=100)

- the field's name is its variable in lower case without ``ARC_`` (``tests/test_settings.py``
  checks it); that name is also what ``Settings.from_env(**overrides)`` and
  :meth:`Settings.replace` take;
- the description is the README table's "meaning" (markdown); ``shown=`` replaces the default
  the table prints when the real default is computed (see below);
- a value that needs parsing or checking gets a ``field_validator`` in the group; a check of
  several settings of one group a ``model_validator(mode="after")`` that raises ``ValueError``
  naming the variables; a default computed from other settings a ``model_validator(mode="before")``
  that returns the filled values (:meth:`Embedding._derive`); across groups, the same in
  :class:`Settings`;
- then write ``python -m worker.config --all > docs/configuration.md`` (and paste
  ``python -m worker.config`` over the README's table if it is one of ``README_SETTINGS``).
"""

from __future__ import annotations

import base64
import json
import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic.fields import FieldInfo

from .community_grants import CommunityGrant, parse_grants
from .embedding_models import LOCAL_DIM, LOCAL_MODEL, LOCAL_MODELS, OPENAI_DIM, OPENAI_MODEL
from .rerank_providers import HOSTED_RERANKERS, RERANK_SERVICES

# Off a terminal (a container, n8n, a pipe), a long ingest reports its progress as a log line at
# most this often, and once at the end, instead of a progress bar nobody sees.
PROGRESS_LOG_SECONDS = 10.0

# A shared secret shorter than this is refused at start: guessable, or a placeholder left in.
MIN_TOKEN_LENGTH = 24


class ConfigError(Exception):
    """A setting is missing, malformed or contradicts another; the message is one line."""


def data_dir_error(data_dir: object, exc: OSError) -> str:
    """One line for a data folder the embedded database cannot use, and what to do."""
    return (
        f"ARC_DATA_DIR {data_dir}: {exc.strerror or exc}; set ARC_DATA_DIR to a folder this user "
        "can write (the embedded database lives there), or DATABASE_URL to a Postgres of your own"
    )


# The settings a new user reaches for first: the README's table shows these; the full reference
# (docs/configuration.md) shows every setting, group by group.
README_SETTINGS = frozenset(
    {
        "DATABASE_URL",
        "ARC_DATA_DIR",
        "SUPABASE_URL",
        "SUPABASE_KEY",
        "EMBEDDING_PROVIDER",
        "EMBEDDING_MODEL",
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "RERANKER",
        "LLM_MODEL",
        "RERANK_BASE_URL",
        "RERANK_API_KEY",
        "RERANK_MODEL",
        "ARC_API_TOKEN",
        "ARC_INGEST_TOKEN",
        "ARC_COMMUNITY_TOKENS",
        "ARC_OPS_TOKEN",
        "ARC_ALLOWED_HOSTS",
        "ARC_TRUSTED_PROXIES",
        "ARC_MAX_CONCURRENT",
        "ARC_STATUS_CALIBRATION",
        "ARC_SUCCESS_AT",
        "ARC_MIN_CONTEXT_CHUNKS",
        "ARC_OCR",
        "ARC_LOG_LEVEL",
    }
)


def setting(env: str, default: Any, description: str, *, shown: str | None = None, **constraints: Any) -> Any:
    """One setting: the environment variable it is read from, its default, what it does (the
    tables' "meaning"), ``shown``: the default as the tables tell it when it is computed, and
    pydantic's constraints (``ge=``, ``le=``, ``pattern=``)."""
    return Field(
        default,
        validation_alias=env,
        description=description,
        json_schema_extra={"shown": shown} if shown is not None else None,
        **constraints,
    )


class Group(BaseModel):
    """A group of settings. Built by name (``Limits(max_concurrent=2)``) or by variable."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_by_name=True, validate_by_alias=True)


# --------------------------------------------------------------------------------------------
class Database(Group):
    """Where the knowledge base lives and how the worker talks to it."""

    database_url: str | None = setting(
        "DATABASE_URL",
        None,
        "Postgres with pgvector (Supabase: the direct or session pooler connection string)",
        shown="unset: embedded",
    )
    # Read replicas of DATABASE_URL: searches and neighbour fetches spread over them; everything
    # that writes stays on DATABASE_URL (worker/store/replicas.py).
    read_database_urls: tuple[str, ...] = setting(
        "ARC_READ_DATABASE_URLS",
        (),
        "comma-separated `postgresql://` URLs of read replicas: searches go to them (`docs/performance.md`)",
    )
    replica_max_wait_ms: int = setting(
        "ARC_REPLICA_MAX_WAIT_MS",
        100,
        "how long a question waits for a replica that has not replayed the latest change",
        ge=0,
        le=10_000,
    )
    replica_timeout_ms: int = setting(
        "ARC_REPLICA_TIMEOUT_MS",
        1000,
        "a replica's budget to connect and search before the question moves on",
        ge=100,
        le=60_000,
    )
    replica_retry_seconds: float = setting(
        "ARC_REPLICA_RETRY_SECONDS", 30.0, "how long a failed replica is skipped", gt=0, le=3600
    )
    data_dir: Path = setting("ARC_DATA_DIR", Path(".arc-data"), "where the embedded database and the caches live")
    supabase_url: str | None = setting(
        "SUPABASE_URL",
        None,
        "search through Supabase's RPC (PostgREST); needs `SUPABASE_KEY` and `DATABASE_URL` (ingestion)",
    )
    supabase_key: str | None = setting(
        "SUPABASE_KEY",
        None,
        "a **secret key** (`sb_secret_...`) or the legacy `service_role` key (publishable or `anon` keys are refused)",
    )
    statement_timeout_ms: int = setting("ARC_STATEMENT_TIMEOUT_MS", 5000, "per-connection statement timeout", ge=100)
    # The statement timeout does not cut this wait.
    write_lock_wait: float = setting(
        "ARC_WRITE_LOCK_WAIT",
        30.0,
        "seconds an ingest or delete waits for another one's write before 503 `knowledge_base_busy`",
        gt=0,
        le=3600,
    )
    pool_size: int = setting("ARC_POOL_SIZE", 4, "connections per worker process", ge=1, le=100)
    # A portfolio split over several Postgres servers (worker/store/databases.py): community ->
    # connection string; every community not listed lives in DATABASE_URL (or the embedded one).
    community_databases: dict[str, str] = setting(
        "ARC_COMMUNITY_DATABASES",
        {},
        "communities kept in other Postgres databases, `COMMUNITY[,COMMUNITY...]=postgresql://...;...`: "
        "their questions, documents, ingests and pages go to that database only; every other community "
        "to `DATABASE_URL` (`docs/performance.md`)",
    )

    @field_validator("database_url")
    @classmethod
    def _conninfo(cls, value: str | None) -> str | None:
        if value is not None:
            _check_conninfo(value)
        return value

    @field_validator("community_databases", mode="before")
    @classmethod
    def _community_databases(cls, value: object) -> object:
        if isinstance(value, str):
            return _parse_community_databases(value)
        if isinstance(value, Mapping):
            return _parse_community_databases(";".join(f"{name}={url}" for name, url in value.items()))
        return value

    @field_validator("read_database_urls", mode="before")
    @classmethod
    def _url_list(cls, value: object) -> object:
        if isinstance(value, str):
            value = tuple(part.strip() for part in value.split(",") if part.strip())
        for url in value if isinstance(value, tuple | list) else ():
            if not isinstance(url, str) or not url.startswith(("postgres://", "postgresql://")):
                # Never echo the value: a connection string holds a password.
                raise ValueError("each entry must be a postgresql:// connection string")
        return value

    @field_validator("data_dir")
    @classmethod
    def _a_folder(cls, value: Path) -> Path:
        if value.exists() and not value.is_dir():
            raise ValueError(f"{value} is a file, not a folder")
        return value

    @field_validator("supabase_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        return _http_url(value)

    @field_validator("supabase_key")
    @classmethod
    def _service_key(cls, value: str | None) -> str | None:
        role = _supabase_key_role(value) if value else None
        if role is not None and role != "service_role":
            raise ValueError(
                f"this is the {role} key; the worker needs the project's service_role key "
                "(Project Settings > API), the only role that may search"
            )
        return value

    @model_validator(mode="after")
    def _together(self) -> Database:
        if bool(self.supabase_url) != bool(self.supabase_key):
            raise ValueError("SUPABASE_URL and SUPABASE_KEY go together")
        if self.supabase_url and not self.database_url:
            # Ingestion and migrations need a direct connection; PostgREST only serves RPC.
            raise ValueError("the Supabase backend also needs DATABASE_URL (its direct Postgres connection)")
        if self.read_database_urls and not self.database_url:
            raise ValueError("ARC_READ_DATABASE_URLS are replicas of DATABASE_URL, which is not set")
        if self.community_databases and self.supabase_url:
            raise ValueError(
                "ARC_COMMUNITY_DATABASES work with the Postgres backend: unset SUPABASE_URL "
                "(each community's database is then searched over its own Postgres connection)"
            )
        if self.read_database_urls and self.supabase_url:
            raise ValueError(
                "ARC_READ_DATABASE_URLS work with the Postgres backend: unset SUPABASE_URL "
                "(searches then go to the replicas over Postgres connections)"
            )
        return self


class Embedding(Group):
    """The model that turns documents and questions into vectors, and the OpenAI or Azure
    account it runs on (the reranker uses the same account unless ``LLM_API_KEY`` is set)."""

    # Unset: derived from the keys in _derive, as are the model and its size.
    embedding_provider: Literal["local", "openai", "azure"] = setting(
        "EMBEDDING_PROVIDER",
        "local",
        "`local`, `openai` or `azure`",
        shown="`openai` if a key is set and the knowledge base is new or built with it, else `local`",
    )
    embedding_model: str = setting(
        "EMBEDDING_MODEL",
        LOCAL_MODEL,
        "model: locally `all-MiniLM-L6-v2` (English) or `multilingual-e5-small` (about 100 languages, "
        "`docs/models.md`); Azure: the deployment name",
        shown=f"`{LOCAL_MODEL}` / `{OPENAI_MODEL}`",
    )
    embedding_dim: int = setting(
        "EMBEDDING_DIM",
        LOCAL_DIM,
        "vector size; must match the table (checked at start)",
        shown=f"{LOCAL_DIM} / {OPENAI_DIM}",
    )
    embedding_timeout: float = setting(
        "EMBEDDING_TIMEOUT", 10.0, "seconds before a question falls back to full text only", gt=0, le=300
    )
    # The server sets 1 per process (worker/serve/gunicorn_conf.py): its queries are a few
    # tokens, its processes and request threads are the parallelism, and a per-core pool in every
    # process oversubscribed the CPU and kept SIGINT under load from stopping cleanly
    # (tests/test_shutdown.py).
    embedding_threads: int = setting(
        "ARC_EMBEDDING_THREADS",
        0,
        "threads of the local model per process (0: one per core)",
        shown="1 in the server, else 0",
        ge=0,
        le=256,
    )
    openai_api_key: str | None = setting(
        "OPENAI_API_KEY", None, "OpenAI key (embeddings and, unless `LLM_API_KEY`, the reranker)"
    )
    openai_base_url: str | None = setting(
        "OPENAI_BASE_URL", None, "any OpenAI-compatible server (Ollama, vLLM, LM Studio)", shown="OpenAI"
    )
    azure_openai_api_key: str | None = setting("AZURE_OPENAI_API_KEY", None, "Azure OpenAI key")
    azure_openai_endpoint: str | None = setting("AZURE_OPENAI_ENDPOINT", None, "`https://<resource>.openai.azure.com`")
    azure_openai_api_version: str = setting("AZURE_OPENAI_API_VERSION", "2024-10-21", "Azure API version")
    # Derived, not read from the environment: the provider came from a key alone (no
    # EMBEDDING_PROVIDER/MODEL/DIM), so the runtime keeps the local model a knowledge base was
    # built with (worker/runtime.py).
    embedding_from_key: bool = False

    @model_validator(mode="before")
    @classmethod
    def _derive(cls, data: Any) -> Any:
        """The provider from the keys when unset, then the model and its size from the provider."""
        if not isinstance(data, Mapping):
            return data
        values = {ENV_VARS.get(key, key): value for key, value in data.items()}  # by name
        provider = values.get("embedding_provider")
        if provider is None and values.get("embedding_model") in LOCAL_MODELS:
            provider = "local"  # EMBEDDING_MODEL=multilingual-e5-small alone: a key serves the reranker
        if provider is None:
            if values.get("azure_openai_endpoint") and values.get("azure_openai_api_key"):
                provider = "azure"
            elif values.get("openai_api_key"):
                provider = "openai"
            else:
                provider = "local"
            values["embedding_from_key"] = provider != "local" and not (
                values.get("embedding_model") or values.get("embedding_dim")
            )
        values["embedding_provider"] = provider
        local = provider == "local"
        model = values.get("embedding_model") or (LOCAL_MODEL if local else OPENAI_MODEL)
        values["embedding_model"] = model
        values["embedding_dim"] = values.get("embedding_dim") or (
            LOCAL_MODELS.get(model, LOCAL_DIM) if local else OPENAI_DIM
        )
        return values

    @field_validator("openai_base_url", "azure_openai_endpoint")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        return _http_url(value)

    @field_validator("azure_openai_api_version")
    @classmethod
    def _api_version(cls, value: str) -> str:
        if not _AZURE_API_VERSION.fullmatch(value):
            raise ValueError(f"{value[:40]!r} is not an Azure OpenAI API version (a date, e.g. 2024-10-21)")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Embedding:
        provider, model, dim = self.embedding_provider, self.embedding_model, self.embedding_dim
        if provider == "openai" and not self.openai_api_key:
            raise ValueError("EMBEDDING_PROVIDER=openai needs OPENAI_API_KEY")
        if provider == "azure" and not (self.azure_openai_endpoint and self.azure_openai_api_key):
            raise ValueError("EMBEDDING_PROVIDER=azure needs AZURE_OPENAI_ENDPOINT and AZURE_OPENAI_API_KEY")
        if provider == "local" and model not in LOCAL_MODELS:
            raise ValueError(f"EMBEDDING_PROVIDER=local supports EMBEDDING_MODEL={' or '.join(LOCAL_MODELS)}")
        if provider == "local" and dim != LOCAL_MODELS[model]:
            raise ValueError(f"{model} makes {LOCAL_MODELS[model]}-dim vectors, not EMBEDDING_DIM={dim}")
        if not 1 <= dim <= 2000:
            raise ValueError("EMBEDDING_DIM must be 1..2000 (pgvector's HNSW limit for vector)")
        return self


class Reranking(Group):
    """The second stage that reorders a question's candidates (worker/retrieve/rerank.py)."""

    # Unset: `llm` when an LLM key is set (derived in Settings._derive, across groups).
    reranker: Literal["llm", "none", "cohere", "jina", "voyage", "tei", "infinity"] = setting(
        "RERANKER",
        "none",
        "`llm`, `none`, or a rerank service: `cohere`, `jina`, `voyage`, `tei`, `infinity`",
        shown="`llm` if an LLM key is set, else `none`",
    )
    llm_model: str = setting("LLM_MODEL", "gpt-4o", "chat model for reranking (Azure: deployment name)")
    llm_timeout: float = setting(
        "LLM_TIMEOUT", 15.0, "seconds; past it the first-stage order is kept with a warning", gt=0, le=300
    )
    llm_api_key: str | None = setting("LLM_API_KEY", None, "a separate key for the reranker", shown="`OPENAI_API_KEY`")
    llm_base_url: str | None = setting(
        "LLM_BASE_URL", None, "a separate server for the reranker", shown="`OPENAI_BASE_URL`"
    )
    # A rerank service (RERANKER=cohere|jina|voyage|tei|infinity): where it is, its key and model,
    # how long a question waits for it, how its score reads (a 0..1 probability, or a raw logit
    # the worker passes through a sigmoid), whether its scale is calibrated on the knowledge base,
    # and the fixed cuts on the best score that set the status without that scale.
    rerank_base_url: str | None = setting(
        "RERANK_BASE_URL",
        None,
        "the rerank service's address; required for `tei` and `infinity`",
        shown="the service's own (Cohere, Jina, Voyage)",
    )
    rerank_api_key: str | None = setting(
        "RERANK_API_KEY", None, "sent as `Authorization: Bearer`; required for Cohere, Jina, Voyage"
    )
    rerank_model: str | None = setting(
        "RERANK_MODEL",
        None,
        "the service's model (none is sent to TEI; optional for Infinity)",
        shown="`rerank-v3.5` / `jina-reranker-v2-base-multilingual` / `rerank-2.5`",
    )
    rerank_timeout: float = setting(
        "RERANK_TIMEOUT", 5.0, "seconds; past it the first-stage order is kept with a warning", gt=0, le=300
    )
    rerank_score: Literal["probability", "logit"] = setting(
        "RERANK_SCORE",
        "probability",
        "the service's score is a 0..1 `probability`, or a raw `logit` the worker puts through a sigmoid",
    )
    rerank_calibration: bool = setting(
        "RERANK_CALIBRATION",
        True,
        "measure the service's score scale on the knowledge base with the status calibration and "
        "cut it there; `false`: the fixed cuts below",
    )
    rerank_success_score: float = setting(
        "RERANK_SUCCESS_SCORE",
        0.5,
        "without the service's calibrated scale, `success` needs its best score at least this",
        ge=0,
        le=1,
    )
    rerank_no_results_score: float = setting(
        "RERANK_NO_RESULTS_SCORE", 0.05, "... and below this the answer is `no_results`", ge=0, le=1
    )

    @model_validator(mode="before")
    @classmethod
    def _derive(cls, data: Any) -> Any:
        """A hosted rerank service's address and model default to its own."""
        if not isinstance(data, Mapping):
            return data
        values = {ENV_VARS.get(key, key): value for key, value in data.items()}  # by name
        base_url, model = HOSTED_RERANKERS.get(str(values.get("reranker")), (None, None))
        values["rerank_base_url"] = values.get("rerank_base_url") or base_url
        values["rerank_model"] = values.get("rerank_model") or model
        return values

    @field_validator("llm_base_url", "rerank_base_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        return _http_url(value)

    @model_validator(mode="after")
    def _service(self) -> Reranking:
        # A self-hosted service (TEI, Infinity) has no address to guess; the hosted ones refuse
        # a request without a key.
        if self.reranker in HOSTED_RERANKERS and not self.rerank_api_key:
            raise ValueError(f"RERANKER={self.reranker} needs RERANK_API_KEY")
        if self.reranker in RERANK_SERVICES and not self.rerank_base_url:
            raise ValueError(
                f"RERANKER={self.reranker} needs RERANK_BASE_URL (the server's address, e.g. http://127.0.0.1:8080)"
            )
        if self.rerank_no_results_score > self.rerank_success_score:
            raise ValueError("need RERANK_NO_RESULTS_SCORE <= RERANK_SUCCESS_SCORE")
        return self


class Auth(Group):
    """Who may use which door (worker/serve/security.py)."""

    api_token: str | None = setting("ARC_API_TOKEN", None, "shared secret for the retrieval webhook, MCP and Dify")
    ingest_token: str | None = setting(
        "ARC_INGEST_TOKEN", None, "shared secret for ingestion, the documents API and the keeper's pages"
    )
    # "heronwood,timbers:SECRET1;write@wyndham-forest:SECRET2": each reads (questions, listings)
    # through every door for its communities only; only one marked "write@" may also ingest and
    # delete there.
    community_tokens: dict[str, CommunityGrant] = setting(
        "ARC_COMMUNITY_TOKENS",
        {},
        "tokens limited to communities, `[write@]COMMUNITY[,COMMUNITY...]:TOKEN;...`: each reads for its "
        "communities only (403 for another); only an entry marked `write@` may also ingest and delete",
    )
    auth_header: str = setting("ARC_AUTH_HEADER", "X-ARC-Token", "header carrying the token (n8n Header Auth)")
    auth_disabled: bool = setting(
        "ARC_AUTH_DISABLED",
        False,
        "allow listening beyond loopback without a token (behind a proxy that authenticates; list the "
        "names it sends in `ARC_ALLOWED_HOSTS`)",
    )
    ingest_with_api_token: bool = setting(
        "ARC_INGEST_WITH_API_TOKEN",
        False,
        "let `ARC_API_TOKEN` also ingest and delete when `ARC_INGEST_TOKEN` is unset "
        "(otherwise those routes answer 403)",
    )
    ops_token: str | None = setting(
        "ARC_OPS_TOKEN", None, "when set, `/metrics` and `/openapi.json` ask for it (`/healthz`, `/readyz` stay open)"
    )
    auth_failures_per_minute: float = setting(
        "ARC_AUTH_FAILURES_PER_MINUTE",
        10.0,
        "failed authentications an address may make a minute before 429 (0: off)",
        ge=0,
    )
    # Kept in the database (sql/035_keeper_sessions.sql), so sign-out ends it in every process.
    session_idle_minutes: float = setting(
        "ARC_SESSION_IDLE_MINUTES",
        30.0,
        "a keeper's session on the pages ends after this many idle minutes (and at sign-out, in every process)",
        gt=0,
        le=7 * 24 * 60,
    )

    @field_validator("community_tokens", mode="before")
    @classmethod
    def _community_tokens(cls, value: object) -> object:
        if isinstance(value, Mapping):  # {token: (communities...)}: a read-only grant
            return {
                token: grant if isinstance(grant, CommunityGrant) else CommunityGrant(communities=tuple(grant))
                for token, grant in value.items()
            }
        if not isinstance(value, str):
            return value
        return parse_grants(value, min_token_length=MIN_TOKEN_LENGTH)

    @field_validator("auth_header")
    @classmethod
    def _header_name(cls, value: str) -> str:
        if not _HEADER_NAME.fullmatch(value):
            raise ValueError(f"{value!r} is not an HTTP header name (letters, digits and - only, e.g. X-ARC-Token)")
        return value

    @model_validator(mode="after")
    def _strong_tokens(self) -> Auth:
        for var, token in (
            ("ARC_API_TOKEN", self.api_token),
            ("ARC_INGEST_TOKEN", self.ingest_token),
            ("ARC_OPS_TOKEN", self.ops_token),
        ):
            if token is not None and len(token) < MIN_TOKEN_LENGTH:
                raise ValueError(
                    f"{var} is {len(token)} characters; use at least {MIN_TOKEN_LENGTH} (e.g. openssl rand -hex 32)"
                )
        return self


class Limits(Group):
    """How much each process takes on at once (worker/service/admission.py, worker/serve/)."""

    # Per client (its credential, else its address). 250/s is above what one process serves
    # (benchmarks/load/), so it never refuses traffic the worker can take; admission control is
    # what bounds the load.
    rate_limit: float = setting(
        "ARC_RATE_LIMIT", 250.0, "requests per second per client and process (burst twice that; 0: off)", ge=0
    )
    max_concurrent: int = setting(
        "ARC_MAX_CONCURRENT", 8, "requests running the pipeline at once, per process", ge=1, le=1000
    )
    max_queue: int = setting(
        "ARC_MAX_QUEUE",
        16,
        "requests waiting for a slot, per process; beyond it: 429 with `Retry-After: 1`",
        ge=0,
        le=10000,
    )
    queue_timeout: float = setting(
        "ARC_QUEUE_TIMEOUT", 10.0, "seconds a request waits for a slot before 429", gt=0, le=300
    )
    max_body_bytes: int = setting("ARC_MAX_BODY_BYTES", 1_000_000, "request body limit (413 above it)", ge=1024)
    # A PDF of scanned pages runs to tens of MB.
    max_upload_bytes: int = setting("ARC_MAX_UPLOAD_BYTES", 50_000_000, "the ingest webhook's body limit", ge=1024)
    # Until the header is in, a connection holds no thread (worker/serve/slow_clients.py).
    client_timeout: float = setting(
        "ARC_CLIENT_TIMEOUT", 10.0, "seconds a client has to send a request's header and body", gt=0, le=300
    )
    max_ingests: int = setting(
        "ARC_MAX_INGESTS", 1, "documents read at once per process; one more may wait, beyond: 429", ge=1, le=100
    )


class Status(Group):
    """How an answer's status (`success`, `low_confidence`, `no_results`) is decided
    (worker/retrieve/status/confidence.py)."""

    # Cuts on the confidence 0 (what unrelated questions score on a knowledge base) .. 1 (what
    # its own sentences score there).
    status_calibration: bool = setting(
        "ARC_STATUS_CALIBRATION", True, "calibrate the status on each knowledge base; `false`: the fixed cuts below"
    )
    status_answer_types: bool = setting(
        "ARC_STATUS_ANSWER_TYPES",
        True,
        "`success` only when the context holds the kind of answer asked for (an amount for \"how much\")",
    )
    status_on_subject: bool = setting(
        "ARC_STATUS_ON_SUBJECT",
        True,
        "`no_results` only for a question nearer to other domains than to the knowledge base; a weak one "
        "on its subject is `low_confidence` with its closest passages",
    )
    success_at: float = setting(
        "ARC_SUCCESS_AT", 0.5, "calibrated confidence from which the status is `success`", ge=0, le=2
    )
    no_results_at: float = setting(
        "ARC_NO_RESULTS_AT", 0.2, "calibrated confidence below which the status is `no_results`", ge=-1, le=2
    )
    near_miss_reach: float = setting(
        "ARC_NEAR_MISS_REACH",
        1.6,
        "the calibrated scale's top is at most this many times the near miss's distance from the floor "
        "(0: the match alone)",
        ge=0,
        le=10,
    )
    calibration_questions: int = setting(
        "ARC_CALIBRATION_QUESTIONS", 120, "sentences of the knowledge base asked back per calibration", ge=10, le=2000
    )
    no_results_below: float = setting(
        "ARC_NO_RESULTS_BELOW", 0.3, "fixed status cut on the best relevance, while uncalibrated"
    )
    low_confidence_below: float = setting(
        "ARC_LOW_CONFIDENCE_BELOW",
        0.5,
        "fixed status cut on the best relevance, while uncalibrated (also the reranker's guard)",
    )

    @model_validator(mode="after")
    def _ordered(self) -> Status:
        if not 0 <= self.no_results_below <= self.low_confidence_below <= 1:
            raise ValueError("need 0 <= ARC_NO_RESULTS_BELOW <= ARC_LOW_CONFIDENCE_BELOW <= 1")
        if self.no_results_at > self.success_at:
            raise ValueError("need ARC_NO_RESULTS_AT <= ARC_SUCCESS_AT")
        return self


class Context(Group):
    """Which chunks go into an answer's context (worker/retrieve/pipeline.py's ContextPolicy)."""

    min_context_chunks: int = setting(
        "ARC_MIN_CONTEXT_CHUNKS",
        6,
        "the best chunks that always go into the context (unless `no_results`); never more than `top_k`",
        ge=0,
        le=20,
    )
    min_relevance: float = setting("ARC_MIN_RELEVANCE", 0.5, "what chunks past those need", ge=0, le=1)


class Search(Group):
    """The first stage's searches (worker/store/search.py and its backends, worker/retrieve/search_cache.py)."""

    search_cache_seconds: float = setting(
        "ARC_SEARCH_CACHE_SECONDS",
        300.0,
        "how long identical searches are served from memory while the knowledge base is unchanged (0: off)",
        ge=0,
    )


class Reading(Group):
    """How documents are read at ingestion: OCR and the bounds on hostile files
    (worker/ingest/ocr.py, worker/ingest/bounds.py)."""

    ocr: bool = setting(
        "ARC_OCR", True, "read PDF pages without text (scans) with Tesseract; `false`: such a page is refused"
    )
    ocr_language: str = setting(
        "ARC_OCR_LANGUAGE",
        "eng",
        "Tesseract's language packs, joined by `+` (`eng+spa`)",
        pattern=r"^[A-Za-z_]+(\+[A-Za-z_]+)*$",
    )
    max_pages: int = setting("ARC_MAX_PAGES", 2000, "pages of a PDF", ge=1)
    max_ocr_pages: int = setting("ARC_MAX_OCR_PAGES", 300, "scanned pages of a PDF that OCR reads", ge=0)
    max_unpacked_bytes: int = setting(
        "ARC_MAX_UNPACKED_BYTES", 300_000_000, "what a `.docx` may unpack to", ge=1_000_000
    )
    # Past 500 the parsers recurse out.
    max_nesting: int = setting(
        "ARC_MAX_NESTING", 100, "nesting depth of JSON bodies, HTML and a Word file's XML", ge=10, le=500
    )
    max_xml_elements: int = setting("ARC_MAX_XML_ELEMENTS", 500_000, "XML elements of a Word file", ge=1000)
    convert_timeout: float = setting(
        "ARC_CONVERT_TIMEOUT",
        60.0,
        "seconds converting one Word file may take (a child process, killed past it)",
        gt=0,
        le=3600,
    )
    convert_memory_mb: int = setting("ARC_CONVERT_MEMORY_MB", 1500, "that child's memory limit", ge=200)
    read_timeout: float = setting(
        "ARC_READ_TIMEOUT", 900.0, "seconds reading one document may take, OCR included", gt=0, le=86400
    )


class Serving(Group):
    """What the servers log, and the Host and Origin headers the MCP server over HTTP accepts
    against DNS rebinding (worker/serve/mcp_server.py)."""

    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = setting(
        "ARC_LOG_LEVEL",
        "INFO",
        "JSON logs on stderr (the servers'; a command shows its warnings only, INFO with `--verbose` or this set)",
    )
    # No Origin header (a server-side client such as n8n) is always accepted.
    mcp_allowed_hosts: str = setting(
        "ARC_MCP_ALLOWED_HOSTS",
        "127.0.0.1:*,localhost:*,[::1]:*",
        "`Host` headers the MCP server over HTTP accepts (`host:*`: any port)",
    )
    mcp_allowed_origins: str = setting(
        "ARC_MCP_ALLOWED_ORIGINS", "", "browser `Origin`s it accepts (a request without one always passes)"
    )
    # Stateless: nothing is ever pushed on a GET /mcp stream (worker/serve/stream_limits.py); a
    # client is its token, else its address.
    mcp_stream_seconds: float = setting(
        "ARC_MCP_STREAM_SECONDS",
        60.0,
        "the MCP server closes an idle event stream (a `GET` of its endpoint) after this many seconds",
        gt=0,
        le=3600,
    )
    mcp_streams_per_client: int = setting(
        "ARC_MCP_STREAMS_PER_CLIENT",
        2,
        "such streams one client may hold at once per process; one more gets 429",
        ge=1,
        le=1000,
    )
    # worker/serve/hosts.py. Unset: loopback only, unless ARC_API_TOKEN is set (every door then
    # asks for a token a rebinding page does not have): then any name.
    allowed_hosts: tuple[str, ...] = setting(
        "ARC_ALLOWED_HOSTS",
        (),
        "the `Host` names the webhooks, APIs and pages answer (421 for another, against DNS rebinding): "
        "`name`, `name:*`, `name:port` or `*`; loopback names always pass",
        shown="unset: loopback names, or (the APIs, not the pages) any name with `ARC_API_TOKEN` set",
    )
    # As gunicorn's forwarded_allow_ips; "*": any.
    trusted_proxies: tuple[str, ...] = setting(
        "ARC_TRUSTED_PROXIES",
        (),
        "addresses or networks of the proxies whose `X-Forwarded-*` headers are believed (client address, "
        "https: the session cookie is then `Secure`, the name asked for)",
    )

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper(cls, value: object) -> object:
        return value.upper() if isinstance(value, str) else value

    @field_validator("allowed_hosts", "trusted_proxies", mode="before")
    @classmethod
    def _comma_list(cls, value: object) -> object:
        if isinstance(value, str):
            return tuple(part.strip().lower() for part in value.split(",") if part.strip())
        return value

    @field_validator("allowed_hosts")
    @classmethod
    def _host_names(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for entry in value:
            if entry != "*" and not _ALLOWED_HOST.fullmatch(entry):
                raise ValueError(f"{entry[:80]!r} is not a host name, name:port or * (e.g. arc.example.org,arc-worker)")
        return value

    @field_validator("trusted_proxies")
    @classmethod
    def _proxy_networks(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        import ipaddress

        for entry in value:
            if entry == "*":
                continue
            try:
                ipaddress.ip_network(entry, strict=False)
            except ValueError:
                raise ValueError(f"{entry[:80]!r} is not an address or network (e.g. 127.0.0.1,10.0.0.0/8)") from None
        return value


# --------------------------------------------------------------------------------------------
class Settings(BaseModel):
    """The worker's settings, one group per concern. Build with :meth:`from_env`; tests pass
    overrides by setting name (``from_env({}, api_token=...)``) or :meth:`replace` them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    database: Database = Field(default_factory=Database)
    embedding: Embedding = Field(default_factory=Embedding)
    reranking: Reranking = Field(default_factory=Reranking)
    auth: Auth = Field(default_factory=Auth)
    limits: Limits = Field(default_factory=Limits)
    status: Status = Field(default_factory=Status)
    context: Context = Field(default_factory=Context)
    search: Search = Field(default_factory=Search)
    reading: Reading = Field(default_factory=Reading)
    serving: Serving = Field(default_factory=Serving)

    @model_validator(mode="before")
    @classmethod
    def _derive(cls, data: Any) -> Any:
        """Defaults across groups: the reranker is the LLM when an LLM key is set."""
        if not isinstance(data, Mapping):
            return data
        reranking, embedding = _given(data.get("reranking")), _given(data.get("embedding"))
        if reranking.get("reranker") is None:
            keys = (
                reranking.get("llm_api_key"),
                embedding.get("openai_api_key"),
                embedding.get("azure_openai_api_key"),
            )
            reranking["reranker"] = "llm" if any(keys) else "none"
        return {**data, "reranking": reranking}

    @model_validator(mode="after")
    def _consistent(self) -> Settings:
        if self.reranking.reranker == "llm" and not self.llm_credentials_present:
            raise ValueError("RERANKER=llm needs LLM_API_KEY, OPENAI_API_KEY or AZURE_OPENAI_API_KEY")
        return self

    @property
    def llm_credentials_present(self) -> bool:
        return bool(self.reranking.llm_api_key or self.embedding.openai_api_key or self.embedding.azure_openai_api_key)

    def with_local_embeddings(self, model: str = LOCAL_MODEL) -> Settings:
        """These settings with a local model for embeddings (the LLM settings unchanged)."""
        return self.replace(embedding_provider="local", embedding_model=model, embedding_dim=LOCAL_MODELS[model])

    def replace(self, **changes: object) -> Settings:
        """These settings with some changed, by setting name (``api_token=...``), validated again."""
        values = {name: dict(getattr(self, name)) for name in type(self).model_fields}
        return _validated(_grouped(changes, values))

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: object) -> Settings:
        """Read every known variable once (an empty one counts as unset), then the ``overrides``
        by setting name; raise :class:`ConfigError` with one line on error."""
        environ = os.environ if environ is None else environ
        read = {name: environ[var] for var, name in ENV_VARS.items() if environ.get(var, "") != ""}
        return _validated(_grouped({**read, **overrides}, {}))


Groups = dict[str, dict[str, object]]  # group -> setting name -> value, before validation


def _given(group: object) -> dict[str, Any]:
    """A group's values as given to :class:`Settings` (a mapping or a built group), by name."""
    if isinstance(group, BaseModel):
        return {name: getattr(group, name) for name in group.model_fields_set}
    if isinstance(group, Mapping):
        return {ENV_VARS.get(str(key), str(key)): value for key, value in group.items()}
    return {}


def _grouped(values: Mapping[str, object], into: Groups) -> Groups:
    """``values`` by setting name, put into their groups."""
    for name, value in values.items():
        if name not in GROUP_OF:
            raise ConfigError(f"invalid configuration: {name}: no such setting")
        into.setdefault(GROUP_OF[name], {})[name] = value
    return into


def _validated(groups: Groups) -> Settings:
    try:
        return Settings.model_validate(groups)
    except ValidationError as exc:
        raise ConfigError(_one_line(exc)) from None


def _settings_fields() -> list[tuple[str, str, FieldInfo]]:
    """(group, name, field) of every setting read from the environment, in the README's order."""
    found = []
    for group, info in Settings.model_fields.items():
        assert isinstance(info.annotation, type) and issubclass(info.annotation, Group), group
        for name, field in info.annotation.model_fields.items():
            if isinstance(field.validation_alias, str):
                found.append((group, name, field))
    return found


# Environment variable -> setting name, and setting name -> its group; the README's order.
ENV_VARS: dict[str, str] = {str(field.validation_alias): name for _, name, field in _settings_fields()}
GROUP_OF: dict[str, str] = {name: group for group, name, _ in _settings_fields()}


def configuration_table(*, readme: bool = True) -> str:
    """A configuration table: the README's (the settings of ``README_SETTINGS``) or, with
    ``readme=False``, every setting."""
    lines = ["| variable | default | meaning |", "|---|---|---|"]
    for _, _, field in _settings_fields():
        if not readme or field.validation_alias in README_SETTINGS:
            lines.append(_row(field))
    return "\n".join(lines)


def configuration_reference() -> str:
    """docs/configuration.md: every setting, group by group, each group with what it is for."""
    parts = [
        "# Configuration",
        "",
        "Every setting is an environment variable, read once at start; an invalid value or combination",
        "stops the worker with one line naming the variable. This page is printed by",
        "`python -m worker.config --all` from the declarations in `worker/config.py`.",
        "",
    ]
    for group, info in Settings.model_fields.items():
        model = info.annotation
        assert isinstance(model, type) and issubclass(model, Group)
        fields = [f for f in model.model_fields.values() if isinstance(f.validation_alias, str)]
        if not fields:
            continue
        about = " ".join((model.__doc__ or "").split()).replace("``", "`")
        parts += [f"## {group.capitalize()}", "", about, "", "| variable | default | meaning |", "|---|---|---|"]
        parts += [_row(f) for f in fields] + [""]
    return "\n".join(parts)


def _row(field: FieldInfo) -> str:
    return f"| `{field.validation_alias}` | {_shown_default(field)} | {field.description} |"


def _shown_default(field: FieldInfo) -> str:
    extra = field.json_schema_extra
    if isinstance(extra, dict) and isinstance(extra.get("shown"), str):
        return str(extra["shown"])
    value = field.default
    if value is None or value in ((), {}):
        return "unset"
    if value == "":
        return "empty"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, int | float):
        return f"{value:.0f}" if float(value).is_integer() else str(value)
    return f"`{value}`"


# A Host name ARC_ALLOWED_HOSTS may list: a DNS name or an address ([v6] in brackets), with an
# optional port ("name:*" as ARC_MCP_ALLOWED_HOSTS writes it: any port).
_ALLOWED_HOST = re.compile(r"(?:[a-z0-9_.-]+|\[[0-9a-f:.]+\])(?::\d{1,5}|:\*)?")
# The connection options libpq takes from a fixed set of values (its documentation's).
_CONNINFO_CHOICES: dict[str, tuple[str, ...]] = {
    "sslmode": ("disable", "allow", "prefer", "require", "verify-ca", "verify-full"),
    "gssencmode": ("disable", "prefer", "require"),
    "channel_binding": ("disable", "prefer", "require"),
    "target_session_attrs": ("any", "read-write", "read-only", "primary", "standby", "prefer-standby"),
    "load_balance_hosts": ("disable", "random"),
}
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # RFC 9110's token
_AZURE_API_VERSION = re.compile(r"\d{4}-\d{2}-\d{2}(?:-preview)?")


def _check_conninfo(value: str) -> None:
    """``ValueError`` for a connection string libpq would refuse; the message never repeats the
    value (it may hold a password)."""
    from urllib.parse import urlsplit

    from psycopg.conninfo import conninfo_to_dict

    try:
        options = conninfo_to_dict(value)
        if value.startswith(("postgres://", "postgresql://")):
            _ = urlsplit(value).port  # a port that is no number raises here
    except Exception:  # psycopg's message repeats the URL, password included
        raise ValueError("not a Postgres connection string (postgresql://user:password@host:5432/db)") from None
    # libpq refuses these only when it connects, and the pool would retry for ever
    for option, allowed in _CONNINFO_CHOICES.items():
        given = options.get(option)
        if given is not None and str(given) not in allowed:
            raise ValueError(f"{option}={str(given)[:40]!r} is not one of {', '.join(allowed)}")


# A community's name as the knowledge base stores it (worker/models.py's COMMUNITY_PATTERN).
_COMMUNITY_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}")


def _parse_community_databases(text: str) -> dict[str, str]:
    """``COMMUNITY[,COMMUNITY...]=postgresql://...;...`` as community -> connection string.
    Entries are separated by ``;`` or new lines (a YAML block or an env file's one line alike);
    a community listed twice, a name the knowledge base could not hold and a URL libpq would
    refuse are errors naming the entry by its communities, never by its URL."""
    routes: dict[str, str] = {}
    for entry in filter(None, (e.strip() for e in re.split(r"[;\n]", text))):
        names, sep, url = entry.partition("=")
        url = url.strip()
        listed = [n.strip() for n in names.split(",") if n.strip()]
        if not sep or not listed or not url.startswith(("postgres://", "postgresql://")):
            raise ValueError(
                "entries are COMMUNITY[,COMMUNITY...]=postgresql://user:password@host:5432/db, separated by ;"
            )
        for name in listed:
            if not _COMMUNITY_NAME.fullmatch(name):
                shown = repr(name[:80]) if re.fullmatch(r"[\w.-]+", name) else "a name"  # never a URL's part
                raise ValueError(f"{shown}: a community is lowercase letters, digits, - and _ (at most 63)")
            if name in routes:
                raise ValueError(f"community {name!r} is listed twice: a community lives in one database")
        try:
            _check_conninfo(url)
        except ValueError as exc:
            raise ValueError(f"the database of {', '.join(listed)}: {exc}") from None
        routes.update(dict.fromkeys(listed, url))
    return routes


def _http_url(value: str | None) -> str | None:
    from urllib.parse import urlsplit

    if value is not None:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{value[:80]!r} is not an http(s) URL")
    return value


def _supabase_key_role(key: str) -> str | None:
    """The role a Supabase key carries: a legacy key is a JWT with a ``role`` claim, a new one
    says it in its prefix; None when the key does not tell."""
    if key.startswith("sb_publishable_"):
        return "anon (publishable)"
    if key.startswith("sb_secret_"):
        return "service_role"
    parts = key.split(".")
    if len(parts) != 3:
        return None
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except ValueError:
        return None
    role = claims.get("role") if isinstance(claims, dict) else None
    return role if isinstance(role, str) else None


def _one_line(exc: ValidationError) -> str:
    """Each error named by its variable (a check across settings names them in its message)."""
    variable = {name: var for var, name in ENV_VARS.items()}
    parts = []
    for err in exc.errors():
        last = str(err["loc"][-1]) if err["loc"] else ""
        name = last if last in ENV_VARS else variable.get(last, "")
        msg = err["msg"].removeprefix("Value error, ")
        parts.append(f"{name}: {msg}" if name else msg)
    return "invalid configuration: " + "; ".join(parts)


if __name__ == "__main__":
    sys.stdout.write((configuration_reference() if "--all" in sys.argv[1:] else configuration_table()) + "\n")
