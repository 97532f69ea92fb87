"""The OpenAPI 3.1 document served at ``/openapi.json``, generated from the pydantic models."""

from __future__ import annotations

from functools import cache
from typing import Any, get_args

from pydantic.json_schema import models_json_schema

from .. import __version__
from ..models import (
    DOCUMENT_ID_PATTERN,
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
from .confirmations import openapi_paths as confirmation_paths
from .dify import DIFY_ROUTE, DifyError, DifyRequest, DifyResponse

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


@cache
def openapi_document() -> dict[str, Any]:
    _, schema = models_json_schema(
        [
            (RetrievalRequest, "validation"),
            (RetrievalResponse, "serialization"),
            (ErrorResponse, "serialization"),
            (IngestRequest, "validation"),
            (IngestResponse, "serialization"),
            (DocumentList, "serialization"),
            (DocumentDetail, "serialization"),
            (DeleteResponse, "serialization"),
            (DifyRequest, "validation"),
            (DifyResponse, "serialization"),
            (DifyError, "serialization"),
            (ConfirmRequest, "validation"),
            (Confirmation, "serialization"),
            (ConfirmationList, "serialization"),
            (ConfirmationDeleted, "serialization"),
            (FeedbackRequest, "validation"),
            (Recorded, "serialization"),
        ],
        ref_template=REF,
    )
    components = schema.get("$defs", {})

    def ok(description: str, model: str) -> dict[str, Any]:
        return {
            "description": description,
            "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{model}"}}},
        }

    def error(description: str) -> dict[str, Any]:
        return {
            "description": description,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorResponse"}}},
        }

    return {
        "openapi": "3.1.0",
        "info": {
            "title": "arc-retrieval",
            "version": __version__,
            "description": "Hybrid retrieval over governing documents, for n8n agents.",
        },
        "paths": {
            "/webhook/arc-retrieval": {
                "post": {
                    "operationId": "retrieve",
                    "summary": "Ranked evidence and a ready [SOURCE n] context for a question",
                    "requestBody": {
                        "required": True,
                        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/RetrievalRequest"}}},
                    },
                    "responses": {
                        "200": {
                            "description": "An answer (status success, low_confidence or no_results)",
                            "content": {
                                "application/json": {"schema": {"$ref": "#/components/schemas/RetrievalResponse"}}
                            },
                        },
                        "400": error("Malformed JSON, or no `community` where the knowledge base holds several"),
                        "401": error("Missing or wrong token"),
                        "403": error("The token is limited to other communities"),
                        "404": error("No such community in this knowledge base"),
                        "413": error("Body too large"),
                        "415": error("Not JSON"),
                        "422": error("A field is invalid; `field` names it"),
                        "429": error("Rate limited; see Retry-After"),
                        "503": error(
                            "Database unavailable, or the embedding/LLM provider calls are full; see Retry-After"
                        ),
                    },
                }
            },
            "/webhook/arc-ingest": {
                "post": {
                    "operationId": "ingestDocument",
                    "summary": "Store a document, chunked and embedded, replacing the one with the same "
                    "document_id (ingest token)",
                    "requestBody": {
                        "required": True,
                        "content": {
                            "application/json": {"schema": {"$ref": "#/components/schemas/IngestRequest"}},
                            "multipart/form-data": {"schema": _upload_schema()},
                        },
                    },
                    "responses": {
                        "200": ok("Stored", "IngestResponse"),
                        "400": error("Malformed JSON"),
                        "401": error("Missing or wrong token"),
                        "403": error("The token is limited to other communities, or ingestion needs ARC_INGEST_TOKEN"),
                        "413": error("Body too large"),
                        "415": error("Neither JSON nor a form upload"),
                        "422": error("A field is invalid, or the document cannot be stored; `field` names it"),
                        "429": error("Rate limited; see Retry-After"),
                        "503": error(
                            "Database unavailable, the embedding provider calls are full, or another "
                            "load holds the knowledge base past ARC_WRITE_LOCK_WAIT; see Retry-After"
                        ),
                    },
                }
            },
            "/webhook/arc-documents": {
                "get": {
                    "operationId": "listDocuments",
                    "summary": "Every document of the knowledge base (ingest token)",
                    "responses": {
                        "200": ok("The documents", "DocumentList"),
                        "401": error("Missing or wrong token"),
                        "429": error("Rate limited; see Retry-After"),
                        "503": error("Database unavailable; see Retry-After"),
                    },
                }
            },
            "/webhook/arc-documents/{document_id}": {
                "parameters": [
                    {
                        "name": "document_id",
                        "in": "path",
                        "required": True,
                        "schema": {"type": "string", "pattern": DOCUMENT_ID_PATTERN, "maxLength": 200},
                    }
                ],
                "get": {
                    "operationId": "showDocument",
                    "summary": "One document and its chunks, in order (ingest token)",
                    "responses": {
                        "200": ok("The document", "DocumentDetail"),
                        "401": error("Missing or wrong token"),
                        "404": error("No such document"),
                        "422": error("document_id is malformed"),
                        "429": error("Rate limited; see Retry-After"),
                        "503": error("Database unavailable; see Retry-After"),
                    },
                },
                "delete": {
                    "operationId": "deleteDocument",
                    "summary": "Delete a document, its chunks and statistics, atomically (ingest token)",
                    "responses": {
                        "200": ok("Deleted", "DeleteResponse"),
                        "401": error("Missing or wrong token"),
                        "404": error("No such document"),
                        "422": error("document_id is malformed"),
                        "429": error("Rate limited; see Retry-After"),
                        "503": error(
                            "Database unavailable, or another load holds the knowledge base "
                            "past ARC_WRITE_LOCK_WAIT; see Retry-After"
                        ),
                    },
                },
            },
            DIFY_ROUTE: {
                "post": {
                    "operationId": "difyRetrieval",
                    "summary": "Dify's External Knowledge API: records for a question (the API token as Bearer)",
                    "requestBody": {
                        "required": True,
                        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/DifyRequest"}}},
                    },
                    "responses": {
                        "200": ok("Records, best first", "DifyResponse"),
                        **{
                            code: {
                                "description": what,
                                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/DifyError"}}},
                            }
                            for code, what in (
                                (
                                    "400",
                                    "Not a JSON object, not valid JSON, or nested "
                                    "past ARC_MAX_NESTING; or several communities and "
                                    "knowledge_id names none",
                                ),
                                (
                                    "403",
                                    "1001 malformed Authorization header, 1002 wrong key "
                                    "or a key limited to other communities",
                                ),
                                ("404", "2001 unknown knowledge_id or community"),
                                ("413", "Body too large"),
                                ("415", "Not JSON"),
                                ("422", "A field is invalid; error_msg names it"),
                                ("429", "Rate limited; see Retry-After"),
                                ("503", "Database unavailable, or the providers are full; see Retry-After"),
                            )
                        },
                    },
                }
            },
            **confirmation_paths(ok, error),
            "/healthz": {"get": {"operationId": "healthz", "responses": {"200": {"description": "Process up"}}}},
            "/readyz": {
                "get": {
                    "operationId": "readyz",
                    "responses": {"200": {"description": "Ready"}, "503": {"description": "Database unreachable"}},
                }
            },
            "/metrics": {
                "get": {
                    "operationId": "metrics",
                    "summary": "Prometheus metrics",
                    "responses": {
                        "200": {
                            "description": "The Prometheus text format",
                            "content": {"text/plain": {"schema": {"type": "string"}}},
                        }
                    },
                }
            },
            "/openapi.json": {
                "get": {
                    "operationId": "openapi",
                    "summary": "This document",
                    "responses": {
                        "200": {
                            "description": "OpenAPI 3.1",
                            "content": {"application/json": {"schema": {"type": "object"}}},
                        }
                    },
                }
            },
        },
        "components": {"schemas": components},
    }
