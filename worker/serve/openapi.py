"""The OpenAPI 3.1 document served at ``/openapi.json``: made from :data:`OPERATIONS` (each
route by its constant, its request and answer models, its refusals) and the pydantic models'
own JSON schemas. A new route adds one :class:`Operation`; tests/test_webhook.py checks every
route the app serves is here."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from typing import Any, Literal, get_args

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from .. import __version__
from ..models import (
    COMMUNITY_PATTERN,
    DOCUMENT_ID_PATTERN,
    CommunityDeleted,
    CommunityList,
    DeleteResponse,
    DocumentDetail,
    DocumentList,
    ErrorResponse,
    IngestFields,
    IngestRequest,
    IngestResponse,
    RetrievalRequest,
    RetrievalResponse,
    TextFormat,
)
from ..service.confirmations import (
    Confirmation,
    ConfirmationDeleted,
    ConfirmationList,
    ConfirmRequest,
    FeedbackRequest,
    Recorded,
)
from .communities_api import COMMUNITIES_ROUTE
from .confirmations import CONFIRM_ROUTE, FEEDBACK_ROUTE
from .dify import DIFY_ROUTE, DifyError, DifyRequest, DifyResponse
from .documents_api import DOCUMENTS_ROUTE
from .routes import HEALTH_ROUTE, METRICS_ROUTE, OPENAPI_ROUTE, READY_ROUTE
from .webhooks import INGEST_ROUTE, RETRIEVAL_ROUTE

REF = "#/components/schemas/{model}"


def _upload_schema() -> dict[str, Any]:
    """A form upload: the file, and what describes it (IngestFields) as form fields, which are text."""
    described = IngestFields.model_json_schema(ref_template=REF)
    properties: dict[str, Any] = {
        "file": {
            "type": "string",
            "format": "binary",
            "description": "The document, read by its name's suffix as the command line reads a file: "
            ".md, .txt, .html/.htm (UTF-8), .pdf (scanned pages by OCR) or .docx; "
            "`format` names a text upload's kind instead",
        },
        "format": {"enum": list(get_args(TextFormat))},
    }
    for name, spec in described["properties"].items():
        # an optional field's text branch (an empty field is one left unset)
        text = next((s for s in spec.get("anyOf", [spec]) if s.get("type") != "null"), spec)
        properties[name] = {
            key: value for key, value in {**spec, **text}.items() if key not in ("anyOf", "title", "default")
        }
    properties["is_binding"] = {"type": "string", "description": "1, true, yes or on for true; anything else false"}
    properties["amends"] = {
        "type": "string",
        "contentMediaType": "application/json",
        "contentSchema": described["properties"]["amends"],
        "description": 'The JSON body\'s list as JSON text: '
        '[{"document_id": "ccrs", "sections": ["Article VII Section 4"]}]',
    }
    return {"type": "object", "required": ["file", *described["required"]], "properties": properties}


@dataclass(frozen=True)
class Operation:
    """One route and method as the document gives it: its request body (a model, or a schema
    built here), its answer (a model, or a plain description and media type), and the
    refusals it can give, by status."""

    route: str
    method: str
    operation_id: str
    summary: str | None = None
    request: type[BaseModel] | None = None
    form: bool = False  # also takes a form upload (multipart/form-data)
    response: type[BaseModel] | None = None
    answered: str = ""  # the success's description
    ok: str = "200"  # the success's status (201: something was made)
    media_type: str = "application/json"
    errors: dict[str, str] = field(default_factory=dict)
    error_model: type[BaseModel] = ErrorResponse
    parameters: tuple[dict[str, Any], ...] = ()


TOKEN_REFUSED = {"401": "Missing or wrong token", "429": "Rate limited; see Retry-After"}
KEEPER_REFUSED = {
    **TOKEN_REFUSED,
    "403": "The agents' token or a read-only community token; or another community",
    "503": "Database unavailable; see Retry-After",
}
DOCUMENT_ID = {
    "name": "document_id",
    "in": "path",
    "required": True,
    "schema": {"type": "string", "pattern": DOCUMENT_ID_PATTERN, "maxLength": 200},
}
COMMUNITY = {
    "name": "community",
    "in": "path",
    "required": True,
    "schema": {"type": "string", "pattern": COMMUNITY_PATTERN, "maxLength": 63},
}
WRITE_BUSY = "past ARC_WRITE_LOCK_WAIT; see Retry-After"

OPERATIONS: tuple[Operation, ...] = (
    Operation(
        RETRIEVAL_ROUTE,
        "post",
        "retrieve",
        "Ranked evidence and a ready [SOURCE n] context for a question",
        request=RetrievalRequest,
        response=RetrievalResponse,
        answered="An answer (status success, low_confidence or no_results)",
        errors={
            "400": "Malformed JSON, or no `community` where the knowledge base holds several",
            "401": TOKEN_REFUSED["401"],
            "403": "The token is limited to other communities",
            "404": "No such community in this knowledge base",
            "413": "Body too large",
            "415": "Not JSON",
            "422": "A field is invalid; `field` names it",
            "429": TOKEN_REFUSED["429"],
            "503": "Database unavailable, or the embedding/LLM provider calls are full; see Retry-After",
        },
    ),
    Operation(
        INGEST_ROUTE,
        "post",
        "ingestDocument",
        "Store a document, chunked and embedded, replacing the one with the same document_id (ingest token)",
        request=IngestRequest,
        form=True,
        response=IngestResponse,
        answered="Stored",
        errors={
            "400": "Malformed JSON",
            "401": TOKEN_REFUSED["401"],
            "403": "The token is limited to other communities, or ingestion needs ARC_INGEST_TOKEN",
            "413": "Body too large",
            "415": "Neither JSON nor a form upload",
            "422": "A field is invalid, or the document cannot be stored; `field` names it",
            "429": TOKEN_REFUSED["429"],
            "503": "Database unavailable, the embedding provider calls are full, or another "
            "load holds the knowledge base " + WRITE_BUSY,
        },
    ),
    Operation(
        DOCUMENTS_ROUTE,
        "get",
        "listDocuments",
        "Every document of the knowledge base (ingest token)",
        response=DocumentList,
        answered="The documents",
        errors={**TOKEN_REFUSED, "503": "Database unavailable; see Retry-After"},
    ),
    Operation(
        DOCUMENTS_ROUTE + "/{document_id}",
        "get",
        "showDocument",
        "One document and its chunks, in order (ingest token)",
        response=DocumentDetail,
        answered="The document",
        errors={
            "401": TOKEN_REFUSED["401"],
            "404": "No such document",
            "422": "document_id is malformed",
            "429": TOKEN_REFUSED["429"],
            "503": "Database unavailable; see Retry-After",
        },
        parameters=(DOCUMENT_ID,),
    ),
    Operation(
        DOCUMENTS_ROUTE + "/{document_id}",
        "delete",
        "deleteDocument",
        "Delete a document, its chunks and statistics, atomically (ingest token)",
        response=DeleteResponse,
        answered="Deleted",
        errors={
            "401": TOKEN_REFUSED["401"],
            "404": "No such document",
            "422": "document_id is malformed",
            "429": TOKEN_REFUSED["429"],
            "503": "Database unavailable, or another load holds the knowledge base " + WRITE_BUSY,
        },
        parameters=(DOCUMENT_ID,),
    ),
    Operation(
        COMMUNITIES_ROUTE,
        "get",
        "listCommunities",
        "Each community holding documents that the token reaches, with its chunks (ingest token)",
        response=CommunityList,
        answered="The communities",
        errors={**TOKEN_REFUSED, "503": "Database unavailable; see Retry-After"},
    ),
    Operation(
        COMMUNITIES_ROUTE + "/{community}",
        "delete",
        "deleteCommunity",
        "Delete a community and everything kept of it, atomically (the ingest token of every community)",
        response=CommunityDeleted,
        answered="Deleted, with what was removed by kind",
        errors={
            "401": TOKEN_REFUSED["401"],
            "403": "The agents' token, or a community token: only the keeper of every community deletes one",
            "404": "Nothing is kept under that community",
            "422": "community is malformed",
            "429": TOKEN_REFUSED["429"],
            "503": "Database unavailable, or another load holds the knowledge base " + WRITE_BUSY,
        },
        parameters=(COMMUNITY,),
    ),
    Operation(
        DIFY_ROUTE,
        "post",
        "difyRetrieval",
        "Dify's External Knowledge API: records for a question (the API token as Bearer)",
        request=DifyRequest,
        response=DifyResponse,
        answered="Records, best first",
        error_model=DifyError,
        errors={
            "400": "Not a JSON object, not valid JSON, or nested past ARC_MAX_NESTING; or several "
            "communities and knowledge_id names none",
            "403": "1001 malformed Authorization header, 1002 wrong key or a key limited to other communities",
            "404": "2001 unknown knowledge_id or community",
            "413": "Body too large",
            "415": "Not JSON",
            "422": "A field is invalid; error_msg names it",
            "429": TOKEN_REFUSED["429"],
            "503": "Database unavailable, or the providers are full; see Retry-After",
        },
    ),
    Operation(
        CONFIRM_ROUTE,
        "post",
        "confirmAnswer",
        "Confirm the passage that answers a question, or that the documents do not (keeper's token)",
        request=ConfirmRequest,
        response=Confirmation,
        answered="The confirmation",
        ok="201",
        errors={**KEEPER_REFUSED, "404": "No such chunk in the community", "422": "A field is invalid"},
    ),
    Operation(
        CONFIRM_ROUTE,
        "get",
        "listConfirmations",
        "A community's confirmations with their state (keeper's token)",
        response=ConfirmationList,
        answered="The confirmations",
        errors=KEEPER_REFUSED,
    ),
    Operation(
        CONFIRM_ROUTE + "/{confirmation_id}",
        "delete",
        "deleteConfirmation",
        "Remove a confirmation (keeper's token)",
        response=ConfirmationDeleted,
        answered="Deleted",
        errors={**KEEPER_REFUSED, "404": "No such confirmation"},
        parameters=({"name": "confirmation_id", "in": "path", "required": True, "schema": {"type": "integer"}},),
    ),
    Operation(
        FEEDBACK_ROUTE,
        "post",
        "answerFeedback",
        "A vote from the chat on an answer, by its X-Request-ID (agents' token)",
        request=FeedbackRequest,
        response=Recorded,
        answered="The vote",
        ok="201",
        errors={
            **TOKEN_REFUSED,
            "404": "No answer logged under request_id",
            "422": "A field is invalid",
            "503": "Database unavailable; see Retry-After",
        },
    ),
    Operation(HEALTH_ROUTE, "get", "healthz", answered="Process up", media_type=""),
    Operation(READY_ROUTE, "get", "readyz", answered="Ready", media_type="", errors={"503": "Database unreachable"}),
    Operation(
        METRICS_ROUTE,
        "get",
        "metrics",
        "Prometheus metrics",
        answered="The Prometheus text format",
        media_type="text/plain",
    ),
    Operation(OPENAPI_ROUTE, "get", "openapi", "This document", answered="OpenAPI 3.1"),
)


def _ref(model: type[BaseModel]) -> dict[str, Any]:
    return {"$ref": REF.format(model=model.__name__)}


def _responses(operation: Operation) -> dict[str, Any]:
    answer: dict[str, Any] = {"description": operation.answered}
    if operation.media_type:
        schema = _ref(operation.response) if operation.response is not None else _plain(operation.media_type)
        answer["content"] = {operation.media_type: {"schema": schema}}
    responses = {operation.ok: answer}
    for status, description in operation.errors.items():
        responses[status] = {"description": description}
        if operation.media_type:  # the probes' refusals carry no schema of their own
            responses[status]["content"] = {"application/json": {"schema": _ref(operation.error_model)}}
    return responses


def _plain(media_type: str) -> dict[str, Any]:
    return {"type": "string"} if media_type.startswith("text/") else {"type": "object"}


def _operation(operation: Operation) -> dict[str, Any]:
    built: dict[str, Any] = {"operationId": operation.operation_id}
    if operation.summary:
        built["summary"] = operation.summary
    if operation.request is not None:
        content: dict[str, Any] = {"application/json": {"schema": _ref(operation.request)}}
        if operation.form:
            content["multipart/form-data"] = {"schema": _upload_schema()}
        built["requestBody"] = {"required": True, "content": content}
    built["responses"] = _responses(operation)
    return built


def _models() -> list[tuple[type[BaseModel], Literal["validation", "serialization"]]]:
    """Every model the operations name, once each: requests as they are validated, answers as
    they are written."""
    seen: dict[type[BaseModel], Literal["validation", "serialization"]] = {}
    for operation in OPERATIONS:
        if operation.request is not None:
            seen.setdefault(operation.request, "validation")
        for model in (operation.response, operation.error_model if operation.errors else None):
            if model is not None:
                seen.setdefault(model, "serialization")
    return list(seen.items())


@cache
def openapi_document() -> dict[str, Any]:
    """The document, built from :data:`OPERATIONS` and the pydantic models they name."""
    _, schema = models_json_schema(_models(), ref_template=REF)
    paths: dict[str, dict[str, Any]] = {}
    for operation in OPERATIONS:
        path = paths.setdefault(operation.route, {})
        if operation.parameters:
            path["parameters"] = list(operation.parameters)
        path[operation.method] = _operation(operation)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "arc-retrieval",
            "version": __version__,
            "description": "Hybrid retrieval over governing documents, for n8n agents.",
        },
        "paths": paths,
        "components": {"schemas": schema.get("$defs", {})},
    }
