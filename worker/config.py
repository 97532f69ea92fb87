"""All configuration, read once from the environment and validated before anything starts.

Every setting the worker reads is a field of :class:`Settings`; nothing else in the package
looks at ``os.environ``. ``tests/test_docs.py`` checks that every variable here is documented
in the README.
"""

from __future__ import annotations

import base64
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Literal, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

# The one list of document types (sql/002 checks the same five; tests/test_knowledge_base.py
# keeps the two in step).
DocumentType = Literal["design_guidelines", "ccr", "response_letter", "application_form", "other"]
DOCUMENT_TYPES: tuple[str, ...] = get_args(DocumentType)

LOCAL_MODEL = "all-MiniLM-L6-v2"
LOCAL_DIM = 384
# The second local model: reads about 100 languages, about ten times slower to ingest (README "Models")
MULTILINGUAL_MODEL = "multilingual-e5-small"
LOCAL_MODELS: dict[str, int] = {LOCAL_MODEL: LOCAL_DIM, MULTILINGUAL_MODEL: 384}  # name -> dimensions
OPENAI_MODEL = "text-embedding-3-large"
OPENAI_DIM = 1536

# The rerank services the worker speaks (worker/retrieve/rerank_services.py), and for the hosted
# ones the address and model used when RERANK_BASE_URL / RERANK_MODEL are not set.
RerankService = Literal["cohere", "jina", "voyage", "tei", "infinity"]
RERANK_SERVICES: tuple[str, ...] = get_args(RerankService)
HOSTED_RERANKERS: dict[str, tuple[str, str]] = {
    "cohere": ("https://api.cohere.com", "rerank-v3.5"),
    "jina": ("https://api.jina.ai", "jina-reranker-v2-base-multilingual"),
    "voyage": ("https://api.voyageai.com", "rerank-2.5"),
}


# Off a terminal (a container, n8n, a pipe), a long ingest reports its progress as a log line at
# most this often, and once at the end, instead of a progress bar nobody sees.
PROGRESS_LOG_SECONDS = 10.0


class ConfigError(Exception):
    """A setting is missing, malformed or contradicts another; the message is one line."""


def data_dir_error(data_dir: object, exc: OSError) -> str:
    """One line for a data folder the embedded database cannot use, and what to do."""
    return (f"ARC_DATA_DIR {data_dir}: {exc.strerror or exc}; set ARC_DATA_DIR to a folder this user "
            "can write (the embedded database lives there), or DATABASE_URL to a Postgres of your own")


# Environment variable -> field name. The order is the README's order.
ENV_VARS: dict[str, str] = {
    "DATABASE_URL": "database_url",
    "ARC_DATA_DIR": "data_dir",
    "ARC_READ_DATABASE_URLS": "read_database_urls",
    "ARC_REPLICA_MAX_WAIT_MS": "replica_max_wait_ms",
    "ARC_REPLICA_TIMEOUT_MS": "replica_timeout_ms",
    "ARC_REPLICA_RETRY_SECONDS": "replica_retry_seconds",
    "SUPABASE_URL": "supabase_url",
    "SUPABASE_KEY": "supabase_key",
    "EMBEDDING_PROVIDER": "embedding_provider",
    "EMBEDDING_MODEL": "embedding_model",
    "EMBEDDING_DIM": "embedding_dim",
    "EMBEDDING_TIMEOUT": "embedding_timeout",
    "ARC_EMBEDDING_THREADS": "embedding_threads",
    "OPENAI_API_KEY": "openai_api_key",
    "OPENAI_BASE_URL": "openai_base_url",
    "AZURE_OPENAI_API_KEY": "azure_openai_api_key",
    "AZURE_OPENAI_ENDPOINT": "azure_openai_endpoint",
    "AZURE_OPENAI_API_VERSION": "azure_openai_api_version",
    "RERANKER": "reranker",
    "LLM_MODEL": "llm_model",
    "LLM_TIMEOUT": "llm_timeout",
    "LLM_API_KEY": "llm_api_key",
    "LLM_BASE_URL": "llm_base_url",
    "RERANK_BASE_URL": "rerank_base_url",
    "RERANK_API_KEY": "rerank_api_key",
    "RERANK_MODEL": "rerank_model",
    "RERANK_TIMEOUT": "rerank_timeout",
    "RERANK_SCORE": "rerank_score",
    "RERANK_SUCCESS_SCORE": "rerank_success_score",
    "RERANK_NO_RESULTS_SCORE": "rerank_no_results_score",
    "ARC_API_TOKEN": "api_token",
    "ARC_INGEST_TOKEN": "ingest_token",
    "ARC_COMMUNITY_TOKENS": "community_tokens",
    "ARC_AUTH_HEADER": "auth_header",
    "ARC_AUTH_DISABLED": "auth_disabled",
    "ARC_RATE_LIMIT": "rate_limit",
    "ARC_AUTH_FAILURES_PER_MINUTE": "auth_failures_per_minute",
    "ARC_MAX_CONCURRENT": "max_concurrent",
    "ARC_MAX_QUEUE": "max_queue",
    "ARC_QUEUE_TIMEOUT": "queue_timeout",
    "ARC_MAX_BODY_BYTES": "max_body_bytes",
    "ARC_MAX_UPLOAD_BYTES": "max_upload_bytes",
    "ARC_NO_RESULTS_BELOW": "no_results_below",
    "ARC_LOW_CONFIDENCE_BELOW": "low_confidence_below",
    "ARC_STATUS_CALIBRATION": "status_calibration",
    "ARC_STATUS_ANSWER_TYPES": "status_answer_types",
    "ARC_SUCCESS_AT": "success_at",
    "ARC_NO_RESULTS_AT": "no_results_at",
    "ARC_CALIBRATION_QUESTIONS": "calibration_questions",
    "ARC_NEAR_MISS_REACH": "near_miss_reach",
    "ARC_MIN_RELEVANCE": "min_relevance",
    "ARC_MIN_CONTEXT_CHUNKS": "min_context_chunks",
    "ARC_STATEMENT_TIMEOUT_MS": "statement_timeout_ms",
    "ARC_WRITE_LOCK_WAIT": "write_lock_wait",
    "ARC_POOL_SIZE": "pool_size",
    "ARC_SEARCH_CACHE_SECONDS": "search_cache_seconds",
    "ARC_OCR": "ocr",
    "ARC_OCR_LANGUAGE": "ocr_language",
    "ARC_LOG_LEVEL": "log_level",
    # hostile input and neighbours
    "ARC_INGEST_WITH_API_TOKEN": "ingest_with_api_token",
    "ARC_OPS_TOKEN": "ops_token",
    "ARC_CLIENT_TIMEOUT": "client_timeout",
    "ARC_MAX_INGESTS": "max_ingests",
    "ARC_MAX_PAGES": "max_pages",
    "ARC_MAX_OCR_PAGES": "max_ocr_pages",
    "ARC_MAX_UNPACKED_BYTES": "max_unpacked_bytes",
    "ARC_MAX_NESTING": "max_nesting",
    "ARC_MAX_XML_ELEMENTS": "max_xml_elements",
    "ARC_CONVERT_TIMEOUT": "convert_timeout",
    "ARC_CONVERT_MEMORY_MB": "convert_memory_mb",
    "ARC_READ_TIMEOUT": "read_timeout",
    "ARC_MCP_ALLOWED_HOSTS": "mcp_allowed_hosts",
    "ARC_MCP_ALLOWED_ORIGINS": "mcp_allowed_origins",
    "ARC_ALLOWED_HOSTS": "allowed_hosts",
    "ARC_TRUSTED_PROXIES": "trusted_proxies",
    "ARC_SESSION_IDLE_MINUTES": "session_idle_minutes",
    "ARC_MCP_STREAM_SECONDS": "mcp_stream_seconds",
    "ARC_MCP_STREAMS_PER_CLIENT": "mcp_streams_per_client",
}

class CommunityGrant(BaseModel):
    """What a token of ARC_COMMUNITY_TOKENS reaches: its communities, to read; to ingest and
    delete there too only when its entry says ``write@``."""

    model_config = ConfigDict(frozen=True)

    communities: tuple[str, ...]
    write: bool = False


COMMUNITY_SCOPES = ("read", "write")

# A shared secret shorter than this is refused at start: guessable, or a placeholder left in.
MIN_TOKEN_LENGTH = 24


class Settings(BaseModel):
    """The worker's settings. Build with :meth:`from_env`; tests pass overrides directly."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    database_url: str | None = None
    data_dir: Path = Path(".arc-data")
    # Read replicas of DATABASE_URL: searches and neighbour fetches spread over them; everything
    # that writes stays on DATABASE_URL. A question waits at most replica_max_wait_ms for a
    # replica that has not replayed the latest change, and a replica gets replica_timeout_ms
    # to connect and to search before the question moves on (worker/store/replicas.py).
    read_database_urls: tuple[str, ...] = ()
    replica_max_wait_ms: int = Field(100, ge=0, le=10_000)
    replica_timeout_ms: int = Field(1000, ge=100, le=60_000)
    replica_retry_seconds: float = Field(30.0, gt=0, le=3600)
    supabase_url: str | None = None
    supabase_key: str | None = None

    embedding_provider: Literal["local", "openai", "azure"] | None = None
    embedding_model: str | None = None
    embedding_dim: int | None = None
    embedding_timeout: float = Field(10.0, gt=0, le=300)
    # The local model's onnxruntime threads (0: one per core). The server sets 1 per process:
    # its queries are a few tokens, its processes and request threads are the parallelism, and a
    # per-core pool in every process oversubscribed the CPU and kept SIGINT under load from
    # stopping cleanly (tests/test_shutdown.py).
    embedding_threads: int = Field(0, ge=0, le=256)
    openai_api_key: str | None = None
    openai_base_url: str | None = None
    azure_openai_api_key: str | None = None
    azure_openai_endpoint: str | None = None
    azure_openai_api_version: str = "2024-10-21"

    reranker: Literal["llm", "none", "cohere", "jina", "voyage", "tei", "infinity"] | None = None
    llm_model: str = "gpt-4o"
    llm_timeout: float = Field(15.0, gt=0, le=300)
    llm_api_key: str | None = None
    llm_base_url: str | None = None
    # A rerank service (RERANKER=cohere|jina|voyage|tei|infinity): where it is, its key and model,
    # how long a question waits for it, how its score reads (a 0..1 probability, or a raw logit
    # the worker passes through a sigmoid) and the cuts on the best score that set the status.
    rerank_base_url: str | None = None
    rerank_api_key: str | None = None
    rerank_model: str | None = None
    rerank_timeout: float = Field(5.0, gt=0, le=300)
    rerank_score: Literal["probability", "logit"] = "probability"
    rerank_success_score: float = Field(0.5, ge=0, le=1)
    rerank_no_results_score: float = Field(0.05, ge=0, le=1)

    api_token: str | None = None
    ingest_token: str | None = None
    # Tokens limited to communities, "heronwood,timbers:SECRET1;write@wyndham-forest:SECRET2":
    # each reads (questions, listings) through every door for its communities only (403 for
    # another); only one marked "write@" may also ingest and delete there.
    community_tokens: dict[str, CommunityGrant] = Field(default_factory=dict)
    auth_header: str = "X-ARC-Token"
    auth_disabled: bool = False
    # Per process and per client (its credential, else its address), burst of 2x. 250/s is above
    # what one process serves (benchmarks/load/), so it never refuses traffic the worker can take;
    # admission control below is what bounds the load.
    rate_limit: float = Field(250.0, ge=0)
    auth_failures_per_minute: float = Field(10.0, ge=0)
    max_concurrent: int = Field(8, ge=1, le=1000)   # requests running the pipeline per process
    max_queue: int = Field(16, ge=0, le=10000)      # requests waiting for a slot per process
    queue_timeout: float = Field(10.0, gt=0, le=300)
    max_body_bytes: int = Field(1_000_000, ge=1024)
    # the ingest webhook's own limit: a PDF of scanned pages runs to tens of MB
    max_upload_bytes: int = Field(50_000_000, ge=1024)

    # Fixed cuts on the best relevance, used only while the knowledge base has no calibration.
    no_results_below: float = 0.3
    low_confidence_below: float = 0.5
    # The status calibrated on each knowledge base (worker/confidence.py): cuts on the confidence
    # 0 (what unrelated questions score there) .. 1 (what its own sentences score there).
    status_calibration: bool = True
    # `success` only when the context holds the kind of answer asked for (an amount of money)
    status_answer_types: bool = True
    success_at: float = Field(0.5, ge=0, le=2)
    no_results_at: float = Field(0.2, ge=-1, le=2)
    calibration_questions: int = Field(120, ge=10, le=2000)
    # The top of that scale is at most this many times the near miss's distance from the floor
    # (worker/retrieve/confidence.py; 0: the match alone)
    near_miss_reach: float = Field(1.6, ge=0, le=10)
    min_relevance: float = Field(0.5, ge=0, le=1)
    min_context_chunks: int = Field(6, ge=0, le=20)
    statement_timeout_ms: int = Field(5000, ge=100)
    # Seconds an ingest or delete waits for another one's write lock (a long load) before a
    # retriable 503 knowledge_base_busy; the statement timeout does not cut this wait.
    write_lock_wait: float = Field(30.0, gt=0, le=3600)
    pool_size: int = Field(4, ge=1, le=100)
    search_cache_seconds: float = Field(300.0, ge=0)
    # PDF pages without text (scans) are read by Tesseract; its language packs joined by "+".
    ocr: bool = True
    ocr_language: str = Field("eng", pattern=r"^[A-Za-z_]+(\+[A-Za-z_]+)*$")
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = "INFO"
    # The embedding provider came from a key alone (no EMBEDDING_PROVIDER/MODEL/DIM): the runtime
    # then keeps the local model a knowledge base was built with (worker/runtime.py)
    _embedding_from_key: bool = PrivateAttr(False)
    # The MCP server over HTTP (worker/serve/mcp_server.py): the Host and Origin headers it
    # accepts, comma-separated ("host:*" allows any port), against DNS rebinding. No Origin
    # header (a server-side client such as n8n) is always accepted.
    mcp_allowed_hosts: str = "127.0.0.1:*,localhost:*,[::1]:*"
    mcp_allowed_origins: str = ""
    # An idle GET /mcp event stream (stateless: nothing is ever pushed on it) is closed after
    # this many seconds, and a client (its token, else its address) may hold this many at once
    # per process; more get 429 (worker/serve/stream_limits.py).
    mcp_stream_seconds: float = Field(60.0, gt=0, le=3600)
    mcp_streams_per_client: int = Field(2, ge=1, le=1000)
    # The Host names the webhook, APIs and pages answer to, against DNS rebinding (421 for
    # another; worker/serve/hosts.py): "name" (any port), "name:port", "*" (any). Loopback names
    # always pass ("name:*" as ARC_MCP_ALLOWED_HOSTS writes it: any port). Unset: loopback only,
    # unless ARC_API_TOKEN is set (every door then asks for a token a rebinding page does not
    # have): then any name.
    allowed_hosts: tuple[str, ...] = ()
    # Proxies (addresses or networks) whose X-Forwarded-For/-Proto/-Host/-Port are believed, as
    # gunicorn's forwarded_allow_ips: the client's address, https (the session cookie is then
    # Secure) and the name asked for. "*": any. Unset: none.
    trusted_proxies: tuple[str, ...] = ()
    # A keeper's session on the pages ends after this many minutes without a request, and at
    # sign-out, in every process (kept in the database, sql/035_keeper_sessions.sql).
    session_idle_minutes: float = Field(30.0, gt=0, le=7 * 24 * 60)

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

    # Hostile input and neighbours. The chatbot's token (ARC_API_TOKEN) may ingest and delete
    # only when the admin says so here; otherwise those routes need ARC_INGEST_TOKEN.
    ingest_with_api_token: bool = False
    ops_token: str | None = None  # when set, /metrics and /openapi.json ask for it
    # Seconds a client has to send a request's header (and a body up to ARC_MAX_BODY_BYTES)
    # before its connection is closed; until then it holds no thread (worker/serve/slow_clients.py).
    client_timeout: float = Field(10.0, gt=0, le=300)
    max_ingests: int = Field(1, ge=1, le=100)  # documents read at once per process; more get 429
    max_pages: int = Field(2000, ge=1)
    max_ocr_pages: int = Field(300, ge=0)
    max_unpacked_bytes: int = Field(300_000_000, ge=1_000_000)
    max_nesting: int = Field(100, ge=10, le=500)  # JSON, HTML and Word XML; past 500 parsers recurse out
    max_xml_elements: int = Field(500_000, ge=1000)
    convert_timeout: float = Field(60.0, gt=0, le=3600)
    convert_memory_mb: int = Field(1500, ge=200)
    read_timeout: float = Field(900.0, gt=0, le=86400)  # reading one document, OCR included

    @field_validator("community_tokens", mode="before")
    @classmethod
    def _community_tokens(cls, value: object) -> object:
        if isinstance(value, Mapping):  # {token: (communities...)} as before: read only
            return {token: grant if isinstance(grant, CommunityGrant) else CommunityGrant(communities=tuple(grant))
                    for token, grant in value.items()}
        if not isinstance(value, str):
            return value
        scoped: dict[str, CommunityGrant] = {}
        for entry in filter(None, (e.strip() for e in value.split(";"))):
            names, sep, token = entry.partition(":")
            scope, marked, listed = names.rpartition("@")
            scope = scope.strip().lower() if marked else "read"
            communities = tuple(n.strip() for n in listed.split(",") if n.strip())
            if not sep or not token or not communities or scope not in COMMUNITY_SCOPES:
                raise ValueError("entries are [write@]COMMUNITY[,COMMUNITY...]:TOKEN, separated by ;")
            if len(token) < MIN_TOKEN_LENGTH:  # as strong as the tokens it stands beside
                raise ValueError(f"a community token needs at least {MIN_TOKEN_LENGTH} characters")
            scoped[token] = CommunityGrant(communities=communities, write=scope == "write")
        return scoped

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

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper(cls, value: object) -> object:
        return value.upper() if isinstance(value, str) else value

    # -- settings checked at start, so a typo is one line naming it, not a traceback or a 503 later
    @field_validator("database_url")
    @classmethod
    def _conninfo(cls, value: str | None) -> str | None:
        from urllib.parse import urlsplit

        from psycopg.conninfo import conninfo_to_dict

        if value is not None:
            try:
                conninfo_to_dict(value)
                if value.startswith(("postgres://", "postgresql://")):
                    urlsplit(value).port  # noqa: B018  a port that is no number raises here
            except Exception:  # psycopg's message repeats the URL, password included
                raise ValueError("not a Postgres connection string (postgresql://user:password@host:5432/db)") from None
        return value

    @field_validator("data_dir")
    @classmethod
    def _a_folder(cls, value: Path) -> Path:
        if value.exists() and not value.is_dir():
            raise ValueError(f"{value} is a file, not a folder")
        return value

    @field_validator("auth_header")
    @classmethod
    def _header_name(cls, value: str) -> str:
        if not _HEADER_NAME.fullmatch(value):
            raise ValueError(f"{value!r} is not an HTTP header name (letters, digits and - only, e.g. X-ARC-Token)")
        return value

    @field_validator("supabase_url", "openai_base_url", "azure_openai_endpoint", "llm_base_url",
                     "rerank_base_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        from urllib.parse import urlsplit

        if value is not None:
            parts = urlsplit(value)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError(f"{value[:80]!r} is not an http(s) URL")
        return value

    @field_validator("azure_openai_api_version")
    @classmethod
    def _api_version(cls, value: str) -> str:
        if not _AZURE_API_VERSION.fullmatch(value):
            raise ValueError(f"{value[:40]!r} is not an Azure OpenAI API version (a date, e.g. 2024-10-21)")
        return value

    @field_validator("supabase_key")
    @classmethod
    def _service_key(cls, value: str | None) -> str | None:
        role = _supabase_key_role(value) if value else None
        if role is not None and role != "service_role":
            raise ValueError(f"this is the {role} key; the worker needs the project's service_role key "
                             "(Project Settings > API), the only role that may search")
        return value

    @model_validator(mode="after")
    def _resolve(self) -> Settings:
        # Defaults that depend on other settings are filled here, once, so that the rest of the
        # code reads plain values.
        provider = self.embedding_provider
        if provider is None and self.embedding_model in LOCAL_MODELS:
            provider = "local"  # EMBEDDING_MODEL=multilingual-e5-small alone: a key serves the reranker
        if provider is None:
            if self.azure_openai_endpoint and self.azure_openai_api_key:
                provider = "azure"
            elif self.openai_api_key:
                provider = "openai"
            else:
                provider = "local"
        if provider == "openai" and not self.openai_api_key:
            raise ValueError("EMBEDDING_PROVIDER=openai needs OPENAI_API_KEY")
        if provider == "azure" and not (self.azure_openai_endpoint and self.azure_openai_api_key):
            raise ValueError("EMBEDDING_PROVIDER=azure needs AZURE_OPENAI_ENDPOINT and AZURE_OPENAI_API_KEY")
        model = self.embedding_model or (LOCAL_MODEL if provider == "local" else OPENAI_MODEL)
        if provider == "local" and model not in LOCAL_MODELS:
            raise ValueError(f"EMBEDDING_PROVIDER=local supports EMBEDDING_MODEL={' or '.join(LOCAL_MODELS)}")
        dim = self.embedding_dim or (LOCAL_MODELS[model] if provider == "local" else OPENAI_DIM)
        if provider == "local" and dim != LOCAL_MODELS[model]:
            raise ValueError(f"{model} makes {LOCAL_MODELS[model]}-dim vectors, not EMBEDDING_DIM={dim}")
        if not 1 <= dim <= 2000:
            raise ValueError("EMBEDDING_DIM must be 1..2000 (pgvector's HNSW limit for vector)")
        if bool(self.supabase_url) != bool(self.supabase_key):
            raise ValueError("SUPABASE_URL and SUPABASE_KEY go together")
        if self.supabase_url and not self.database_url:
            # Ingestion and migrations need a direct connection; PostgREST only serves RPC.
            raise ValueError("the Supabase backend also needs DATABASE_URL (its direct Postgres connection)")
        if self.read_database_urls and not self.database_url:
            raise ValueError("ARC_READ_DATABASE_URLS are replicas of DATABASE_URL, which is not set")
        if self.read_database_urls and self.supabase_url:
            raise ValueError("ARC_READ_DATABASE_URLS work with the Postgres backend: unset SUPABASE_URL "
                             "(searches then go to the replicas over Postgres connections)")
        reranker = self.reranker
        if reranker is None:
            reranker = "llm" if self.llm_credentials_present else "none"
        if reranker == "llm" and not self.llm_credentials_present:
            raise ValueError("RERANKER=llm needs LLM_API_KEY, OPENAI_API_KEY or AZURE_OPENAI_API_KEY")
        if reranker in RERANK_SERVICES:
            self._resolve_rerank_service(reranker)
        if self.rerank_no_results_score > self.rerank_success_score:
            raise ValueError("need RERANK_NO_RESULTS_SCORE <= RERANK_SUCCESS_SCORE")
        for var, token in (("ARC_API_TOKEN", self.api_token), ("ARC_INGEST_TOKEN", self.ingest_token),
                           ("ARC_OPS_TOKEN", self.ops_token)):
            if token is not None and len(token) < MIN_TOKEN_LENGTH:
                raise ValueError(f"{var} is {len(token)} characters; use at least {MIN_TOKEN_LENGTH} "
                                 "(e.g. openssl rand -hex 32)")
        if not 0 <= self.no_results_below <= self.low_confidence_below <= 1:
            raise ValueError("need 0 <= ARC_NO_RESULTS_BELOW <= ARC_LOW_CONFIDENCE_BELOW <= 1")
        if self.no_results_at > self.success_at:
            raise ValueError("need ARC_NO_RESULTS_AT <= ARC_SUCCESS_AT")
        self._embedding_from_key = provider != "local" and not (
            self.embedding_provider or self.embedding_model or self.embedding_dim)
        object.__setattr__(self, "embedding_provider", provider)
        object.__setattr__(self, "embedding_model", model)
        object.__setattr__(self, "embedding_dim", dim)
        object.__setattr__(self, "reranker", reranker)
        return self

    def _resolve_rerank_service(self, service: str) -> None:
        """A hosted service's address and model default to its own; a self-hosted one (TEI,
        Infinity) has no address to guess. The hosted ones refuse a request without a key."""
        base_url, model = HOSTED_RERANKERS.get(service, (None, None))
        if service in HOSTED_RERANKERS and not self.rerank_api_key:
            raise ValueError(f"RERANKER={service} needs RERANK_API_KEY")
        if not (self.rerank_base_url or base_url):
            raise ValueError(f"RERANKER={service} needs RERANK_BASE_URL (the server's address, "
                             "e.g. http://127.0.0.1:8080)")
        object.__setattr__(self, "rerank_base_url", self.rerank_base_url or base_url)
        object.__setattr__(self, "rerank_model", self.rerank_model or model)

    @property
    def embedding_from_key(self) -> bool:
        return self._embedding_from_key

    def with_local_embeddings(self, model: str = LOCAL_MODEL) -> Settings:
        """These settings with a local model for embeddings (the LLM settings unchanged)."""
        return self.model_copy(update={"embedding_provider": "local", "embedding_model": model,
                                       "embedding_dim": LOCAL_MODELS[model]})

    @property
    def llm_credentials_present(self) -> bool:
        return bool(self.llm_api_key or self.openai_api_key or self.azure_openai_api_key)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: object) -> Settings:
        """Read every known variable once; raise :class:`ConfigError` with one line on error."""
        environ = os.environ if environ is None else environ
        values: dict[str, object] = {
            field: environ[var] for var, field in ENV_VARS.items() if environ.get(var, "") != ""
        }
        values.update(overrides)
        try:
            return cls(**values)
        except ValidationError as exc:
            raise ConfigError(_one_line(exc)) from None


# A Host name ARC_ALLOWED_HOSTS may list: a DNS name or an address ([v6] in brackets), with an
# optional port.
_ALLOWED_HOST = re.compile(r"(?:[a-z0-9_.-]+|\[[0-9a-f:.]+\])(?::\d{1,5}|:\*)?")
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # RFC 9110's token
_AZURE_API_VERSION = re.compile(r"\d{4}-\d{2}-\d{2}(?:-preview)?")


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
    fields = {field: var for var, field in ENV_VARS.items()}
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"])
        name = fields.get(loc, loc)
        msg = err["msg"].removeprefix("Value error, ")
        parts.append(f"{name}: {msg}" if name else msg)
    return "invalid configuration: " + "; ".join(parts)
