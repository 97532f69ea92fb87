"""The OpenAPI 3.1 document served at ``/openapi.json``, generated from the pydantic models."""

from __future__ import annotations

from functools import cache
from typing import Any

from pydantic.json_schema import models_json_schema

from . import __version__
from .models import ErrorResponse, RetrievalRequest, RetrievalResponse


@cache
def openapi_document() -> dict[str, Any]:
    _, schema = models_json_schema(
        [(RetrievalRequest, "validation"), (RetrievalResponse, "serialization"), (ErrorResponse, "serialization")],
        ref_template="#/components/schemas/{model}")
    components = schema.get("$defs", {})

    def error(description: str) -> dict[str, Any]:
        return {"description": description,
                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorResponse"}}}}

    return {
        "openapi": "3.1.0",
        "info": {"title": "arc-retrieval", "version": __version__,
                 "description": "Hybrid retrieval over governing documents, for n8n agents."},
        "paths": {
            "/webhook/arc-retrieval": {
                "post": {
                    "operationId": "retrieve",
                    "summary": "Ranked evidence and a ready [SOURCE n] context for a question",
                    "requestBody": {"required": True, "content": {"application/json": {
                        "schema": {"$ref": "#/components/schemas/RetrievalRequest"}}}},
                    "responses": {
                        "200": {"description": "An answer (status success, low_confidence or no_results)",
                                "content": {"application/json": {
                                    "schema": {"$ref": "#/components/schemas/RetrievalResponse"}}}},
                        "400": error("Malformed JSON"),
                        "401": error("Missing or wrong token"),
                        "413": error("Body too large"),
                        "415": error("Not JSON"),
                        "422": error("A field is invalid; `field` names it"),
                        "429": error("Rate limited; see Retry-After"),
                        "503": error("Database unavailable, or the embedding/LLM provider calls are full; see Retry-After"),
                    },
                }
            },
            "/healthz": {"get": {"operationId": "healthz", "responses": {"200": {"description": "Process up"}}}},
            "/readyz": {"get": {"operationId": "readyz", "responses": {
                "200": {"description": "Ready"}, "503": {"description": "Database unreachable"}}}},
        },
        "components": {"schemas": components},
    }
