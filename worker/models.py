"""The webhook's request and response, as pydantic models (and so the OpenAPI document), and
the plain records the doors hand to the layers below (:class:`DocumentFields`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator
from pydantic.dataclasses import dataclass as pydantic_dataclass
from pydantic.json_schema import JsonDict

from .document_types import DOCUMENT_TYPES, DocumentType
from .sections import section_key

DOCUMENT_ID_PATTERN = r"^[A-Za-z0-9._:-]+$"
Status = Literal["success", "low_confidence", "no_results"]
TextFormat = Literal["markdown", "text", "html"]  # how a document sent as text is read
# How each [SOURCE n] block names its passage: document and passage lines, or labelled lines
Citations = Literal["compact", "full"]

MAX_QUERY_CHARS = 2000


def _iso_date(value: Any) -> Any:
    """A date is written YYYY-MM-DD: a number (a timestamp) or another spelling is refused."""
    if isinstance(value, str):
        try:
            return date.fromisoformat(value.strip()) if len(value.strip()) == 10 else _not_a_date(value)
        except ValueError:
            return _not_a_date(value)
    if isinstance(value, date) and not isinstance(value, datetime):
        return value
    return _not_a_date(value)


def _not_a_date(value: Any) -> Any:
    raise ValueError(f"must be a date written YYYY-MM-DD, got {str(value)[:40]!r}")


# An ISO calendar date (2003-08-29), as every door takes effective_date and as_of.
IsoDate = Annotated[date, BeforeValidator(_iso_date), Field(json_schema_extra={"format": "date"})]

# A community's key (sql/030_communities.sql checks the same): what ingest --community and the
# webhook's `community` name. An upgraded single-community database holds DEFAULT_COMMUNITY.
COMMUNITY_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,62}$"
DEFAULT_COMMUNITY = "default"


def _community_field() -> Any:
    return Field(
        default=None,
        min_length=1,
        max_length=63,
        pattern=COMMUNITY_PATTERN,
        description="The community (association) whose documents to use. Optional while the knowledge base "
        "holds one; required (400 otherwise) once it holds several.",
    )


def _not_a_boolean(value: Any) -> Any:
    """JSON's true and false are no numbers (Python's bool is an int: pydantic would take true as 1)."""
    if isinstance(value, bool):
        raise ValueError("a number, not true or false")
    return value


# Every number a door takes: a boolean in its place is a 422 naming the field.
NOT_BOOLEAN = BeforeValidator(_not_a_boolean)
Count = Annotated[int, NOT_BOOLEAN]
Number = Annotated[float, NOT_BOOLEAN]

MIN_WEIGHT = 0.001  # a finer share means nothing, and 5e-324 underflowed in the SQL (a 500)
_WEIGHT_SCHEMA: JsonDict = {"not": {"exclusiveMinimum": 0, "exclusiveMaximum": MIN_WEIGHT}}


class Weights(BaseModel):
    # The schema says what the validators below check, so clients (and schemathesis) know that
    # such a request is invalid rather than learning it from a 422.
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "anyOf": [
                {"properties": {"vector": {"minimum": MIN_WEIGHT}}},
                {"properties": {"fts": {"minimum": MIN_WEIGHT}}},
            ]
        },
    )

    vector: Number = Field(ge=0, le=1, json_schema_extra=_WEIGHT_SCHEMA, description="0, or 0.001 to 1.")
    fts: Number = Field(ge=0, le=1, json_schema_extra=_WEIGHT_SCHEMA, description="0, or 0.001 to 1.")

    @field_validator("vector", "fts")
    @classmethod
    def _zero_or_a_share(cls, value: float) -> float:
        if 0 < value < MIN_WEIGHT:
            raise ValueError(f"a weight is 0 or at least {MIN_WEIGHT}")
        return value

    @model_validator(mode="after")
    def _not_both_zero(self) -> Weights:
        if self.vector + self.fts <= 0:
            raise ValueError("vector and fts weights cannot both be 0")
        return self


class RetrievalRequest(BaseModel):
    """What the webhook accepts. n8n wrappers are unwrapped before validation (see ``unwrap``)."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    query: str = Field(
        min_length=1,
        max_length=MAX_QUERY_CHARS,
        pattern=r"^[^\u0000]*[^\s\u0000][^\u0000]*$",
        description="The question, 1..2000 characters after trimming, no NUL.",
    )
    document_types: list[DocumentType] | None = Field(default=None, max_length=len(DOCUMENT_TYPES))
    binding_only: bool = False
    include_superseded: bool = False
    top_k: Count = Field(default=8, ge=1, le=20, description="Most chunks in the answer.")
    candidates: Count = Field(default=40, ge=1, le=200, description="Candidates per retrieval leg.")
    token_budget: Count = Field(default=4000, ge=50, le=32000)
    min_relevance: Annotated[float, Field(ge=0, le=1), NOT_BOOLEAN] | None = Field(
        default=None,
        description="A hard minimum: chunks below this score stay out of the context and the chunk list "
        "(default: the best ARC_MIN_CONTEXT_CHUNKS (6) need only the no-results threshold, "
        "later ones ARC_MIN_RELEVANCE).",
    )
    weights: Weights | None = None
    fusion: Literal["weighted", "rrf"] | None = None
    rerank: bool | None = Field(default=None, description="Use the LLM reranker (default: when configured).")
    debug: bool = False
    citations: Citations = Field(
        default="compact",
        description="How each [SOURCE n] block names its passage. compact: a line "
        "`[DOCUMENT] name | binding or not binding[, superseded by ...]` above the first SOURCE of each run of "
        "one document's passages, then `[SOURCE n] section | p. N (or pp. N-M)[ | amended by NAME [ID]]`, "
        "a section path's leading `…` standing for the path of the SOURCE above without its last part. "
        "full: labelled lines (Document:, Section:, Page: or Pages:, Binding:, Content:) on every block, "
        "for callers that parse them.",
    )
    community: str | None = _community_field()
    as_of: IsoDate | None = Field(
        default=None,
        description="An ISO date (YYYY-MM-DD): answer from what was in force that day, i.e. documents that had "
        "taken effect and were not yet superseded, and for an amended section the version in force then. "
        "Unset: what is in force now.",
    )

    @field_validator("query")
    @classmethod
    def _no_nul(cls, value: str) -> str:
        if "\x00" in value:
            raise ValueError("must not contain NUL characters")
        return value

    @field_validator("document_types")
    @classmethod
    def _dedupe(cls, value: list[str] | None) -> list[str] | None:
        return list(dict.fromkeys(value)) if value else None


# Keys an n8n Chat Trigger sends next to chatInput; harmless, so not an error.
_N8N_CHAT_KEYS = {"sessionId", "action", "chatInput", "metadata"}


def unwrap(payload: Any) -> Any:
    """Accept the shapes n8n sends: a Webhook node's ``{"body": {...}, "headers": ...}`` and a
    chat trigger's ``{"chatInput": "...", "sessionId": ...}``."""
    if isinstance(payload, dict) and isinstance(payload.get("body"), dict):
        inner = payload["body"]
        # A Webhook node forwards {headers, params, query: {url params}, body: {...}}.
        if "query" in inner or "chatInput" in inner or not isinstance(payload.get("query"), str):
            payload = inner
    if isinstance(payload, dict) and "chatInput" in payload:
        chat_input = payload["chatInput"]
        metadata = payload.get("metadata")
        payload = {k: v for k, v in payload.items() if k not in _N8N_CHAT_KEYS}
        payload.setdefault("query", chat_input)
        # a chat embedded for one association says which in its metadata
        if isinstance(metadata, dict) and metadata.get("community") is not None:
            payload.setdefault("community", metadata["community"])
    return payload


class QueryInfo(BaseModel):
    original: str
    normalized: str
    keywords: list[str]
    query_type: str
    weights: Weights
    fusion: str
    document_types: list[str] | None = Field(description="The hard filter applied (from the request only).")
    filter_source: Literal["request", "none"]
    steered_to: list[str] | None = Field(
        None, description="Document types the phrasing names: their chunks rank higher, nothing is hidden."
    )


class Replacement(BaseModel):
    """The document that replaced a passage: it superseded the passage's whole document, or
    amended its section; ``effective_date`` is when (null: the replacing document is undated)."""

    how: Literal["superseded", "amended"]
    document_id: str
    document_name: str | None = None
    effective_date: date | None = None


class ChunkResult(BaseModel):
    id: int
    document_id: str
    document_name: str
    document_type: str
    section_path: str
    page_number: int | None
    chunk_index: int
    is_binding: bool
    superseded_by: str | None
    content: str
    token_count: int
    amended_by: str | None = Field(None, description="The id of the document that amended this chunk's section.")
    amended_by_name: str | None = None
    effective_date: date | None = Field(None, description="The date its document took effect (null: undated).")
    replaced: Replacement | None = Field(
        None, description="What replaced this passage (a superseding or amending document) and when."
    )
    vector_score: float | None = None
    fts_score: float | None = None
    bm25_score: float | None = None
    fused_score: float = 0.0
    vector_rank: int | None = None
    fts_rank: int | None = None
    relevance: float = Field(0.0, description="The calibrated first-stage score (weighted vector + full-text).")
    rerank_score: float | None = None
    adjusted_score: float | None = None
    rerank_reasoning: str | None = None
    final_score: float = Field(0.0, description="The score statuses and min_relevance act on.")
    source: int | None = Field(None, description="Its [SOURCE n] number in the context, if included.")


class ConfirmedMatch(BaseModel):
    """A confirmed question this one was found like: its id, its wording and the similarity."""

    id: int
    query: str
    similarity: float


class RetrievalResponse(BaseModel):
    status: Status
    message: str | None = None
    query: QueryInfo
    chunks: list[ChunkResult]
    context: str
    context_tokens: int
    sources: int
    best_score: float | None
    confidence: dict[str, Any] | None = Field(
        None,
        description="What the status was decided on: the best first-stage relevance, its calibrated score "
        "(0 = what unrelated questions score on this knowledge base, 1 = what its own sentences "
        "score, or less where its passages are distinct from each other), the anchors (floor, "
        "match, near_miss) and the knowledge-base version they were measured at.",
    )
    reranked: bool
    confirmed: ConfirmedMatch | None = Field(
        None, description="The keeper's confirmation this question took (docs/confirmations.md), if any."
    )
    warnings: list[str]
    usage: dict[str, int] = Field(default_factory=dict)
    timings_ms: dict[str, float | int] = Field(
        description="Milliseconds per stage and in total; `database_calls`: the round trips to the database (a count)."
    )
    request_id: str | None = None
    debug: dict[str, Any] | None = None
    community: str | None = Field(None, description="The community whose documents answered.")


class ErrorResponse(BaseModel):
    error: str
    message: str
    field: str | None = None
    request_id: str | None = None


@pydantic_dataclass(frozen=True, config=ConfigDict(extra="forbid"))
class Amendment:
    """Sections of another document that this one amends ("Article VII Section 4")."""

    document_id: str = Field(min_length=1, max_length=200, pattern=DOCUMENT_ID_PATTERN)
    sections: tuple[str, ...] = Field(min_length=1, max_length=100)

    @field_validator("sections")
    @classmethod
    def _named(cls, sections: tuple[str, ...]) -> tuple[str, ...]:
        for section in sections:
            if len(section) > 200 or not section_key(section):
                raise ValueError(f"{section[:60]!r} names no article or section (e.g. 'Article VII Section 4')")
        return sections

    def to_json(self) -> dict:
        return {"document_id": self.document_id, "sections": list(self.sections)}


@dataclass(frozen=True)
class DocumentFields:
    """What describes one document, whichever door it comes through (the command line, a
    manifest entry, the webhook, an upload): built once and passed to the ingestor as it is.

    It only carries the fields: each door checks its own input, and ``DocumentInput`` checks
    the document made of them. Unnamed, a document is named by its title (else its file name);
    without an id, a file's id is made from its file name, a text's from its name."""

    document_type: str
    document_id: str | None = None
    name: str | None = None
    is_binding: bool = True
    supersedes: str | None = None
    superseded_by: str | None = None
    amends: tuple[Amendment, ...] = ()
    effective_date: date | None = None  # the day it took effect; None: in force from the beginning
    # True: stored even when the community holds the same text under another id. The doors'
    # requests default to False (refused, naming that id) and pass what they were asked.
    allow_duplicate: bool = True

    @classmethod
    def of(cls, described: Any, **more: Any) -> DocumentFields:
        """The fields of a record that names them alike (an ingest request, a manifest entry);
        ``more``: fields it does not hold."""
        return cls(
            document_type=described.document_type,
            document_id=described.document_id,
            name=described.name,
            is_binding=described.is_binding,
            supersedes=described.supersedes,
            superseded_by=described.superseded_by,
            amends=tuple(described.amends),
            effective_date=described.effective_date,
            **more,
        )


class IngestFields(BaseModel):
    """What describes a document, however it comes: JSON (:class:`IngestRequest`) or a form upload."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    document_type: DocumentType
    document_id: str | None = Field(default=None, min_length=1, max_length=200, pattern=DOCUMENT_ID_PATTERN)
    name: str | None = Field(default=None, min_length=1, max_length=300)
    is_binding: bool = True
    supersedes: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        pattern=DOCUMENT_ID_PATTERN,
        description="An older document, already stored, that this one replaces.",
    )
    superseded_by: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        pattern=DOCUMENT_ID_PATTERN,
        description="A newer document, already stored, that replaces this one.",
    )
    amends: list[Amendment] = Field(default_factory=list, max_length=50)
    effective_date: IsoDate | None = Field(
        default=None,
        description="The date the document took effect (YYYY-MM-DD); unset: in force from the beginning.",
    )
    replace: bool = Field(
        False,
        description="Replace a stored document of this id that came from another "
        "source (the same file, or a text sent again under the "
        "document_id it names, always updates it).",
    )
    allow_duplicate: bool = Field(
        False,
        description="Store it even when the community holds the same text "
        "under another document_id (refused otherwise, naming it).",
    )
    community: str | None = _community_field()

    @field_validator("name")
    @classmethod
    def _no_nul_in_name(cls, value: str | None) -> str | None:
        return _no_nul(value)

    def document_fields(self) -> DocumentFields:
        """What ``Ingestor.prepare_text`` and ``prepare_file`` are given to describe the document."""
        return DocumentFields.of(self, allow_duplicate=self.allow_duplicate)


class IngestRequest(IngestFields):
    """``POST /webhook/arc-ingest`` as JSON: the document's text and what describes it."""

    text: str = Field(min_length=1, max_length=5_000_000)
    format: TextFormat = "markdown"

    @field_validator("text")
    @classmethod
    def _no_nul_in_text(cls, value: str) -> str:
        return _no_nul(value)


_Text = TypeVar("_Text", bound=str | None)


def _no_nul(value: _Text) -> _Text:
    if value is not None and "\x00" in value:
        raise ValueError("must not contain NUL characters")
    return value


class IngestResponse(BaseModel):
    status: Literal["ingested"]
    community: str | None = None
    document_id: str
    document_name: str
    chunks: int
    replaced_chunks: int
    replaced: list[str] = Field(default_factory=list, description="The document ids this ingest replaced.")
    amended_chunks: int = Field(0, description="Chunks of other documents' sections this one amends, marked.")
    notes: list[str] = Field(default_factory=list, description="e.g. a named section that matched nothing.")
    request_id: str | None = None


class DocumentSummary(BaseModel):
    """One document of the knowledge base, as ``arc-retrieval documents list`` shows it."""

    document_id: str
    name: str
    document_type: str
    is_binding: bool
    superseded_by: str | None
    amended_by: list[str] = Field(default_factory=list, description="Documents that amended sections of it.")
    effective_date: date | None = Field(None, description="The date it took effect (null: undated).")
    chunks: int
    pages: int | None = Field(
        None,
        description="The last page a chunk starts on (PDFs, and Word files that record "
        "their page breaks); null for text.",
    )
    ingested_at: datetime
    source_file: str | None


class DocumentList(BaseModel):
    documents: list[DocumentSummary]
    community: str | None = None
    request_id: str | None = None


class DocumentChunk(BaseModel):
    id: int
    chunk_index: int
    section_path: str
    page_number: int | None
    token_count: int
    content: str


class DocumentDetail(BaseModel):
    document: DocumentSummary
    chunks: list[DocumentChunk]
    request_id: str | None = None


class DeleteResponse(BaseModel):
    status: Literal["deleted"]
    document_id: str
    deleted_chunks: int
    request_id: str | None = None


class CommunitySummary(BaseModel):
    """A community holding documents, with its chunk count."""

    community: str
    chunks: int


class CommunityList(BaseModel):
    communities: list[CommunitySummary]
    request_id: str | None = None


class CommunityDeleted(BaseModel):
    """A community deleted whole: how many of each kind of row (and its own schema objects) went."""

    status: Literal["deleted"]
    community: str
    removed: dict[str, int]
    request_id: str | None = None
