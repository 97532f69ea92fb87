"""The knowledge base over HTTP, for admins and the ingest workflow (ingest token):
``GET /webhook/arc-documents``, ``GET`` and ``DELETE /webhook/arc-documents/<document_id>``."""

from __future__ import annotations

import re
from typing import Any

from flask import Blueprint, g, jsonify, request

from ..models import DOCUMENT_ID_PATTERN, DeleteResponse, DocumentDetail, DocumentList
from ..store import knowledge_base
from .gate import Access, door
from .guards import caller
from .responses import error as _error
from .services import services

DOCUMENTS_ROUTE = "/webhook/arc-documents"

documents = Blueprint("documents", __name__, url_prefix=DOCUMENTS_ROUTE)


def _checked(document_id: str) -> Any | None:
    if len(document_id) > 200 or not re.match(DOCUMENT_ID_PATTERN, document_id):
        return _error(422, "invalid_input", "document_id: letters, digits and . _ : - only, at most 200", "document_id")
    return None


def _community() -> str:
    """The `community` query parameter, checked as the retrieval webhook checks its field."""
    return services().knowledge.community(request.args.get("community") or None, caller=caller())


def _unknown(document_id: str) -> Any:
    return _error(404, "not_found", f"document_id: no document {document_id!r} in the knowledge base", "document_id")


READ = Access("admin", scoped=True)
WRITE = Access("admin", scoped=True, write=True)


@documents.get("")
@door(READ)
def list_documents() -> Any:
    community = _community()
    found = services().knowledge.list_documents(community, caller=caller())
    return jsonify(DocumentList(documents=found, community=community, request_id=g.request_id).model_dump(mode="json"))


@documents.get("/<path:document_id>")
@door(READ)
def show_document(document_id: str) -> Any:
    if (bad := _checked(document_id)) is not None:
        return bad
    try:
        summary, chunks = services().knowledge.show(document_id, _community(), caller=caller())
    except knowledge_base.UnknownDocument:
        return _unknown(document_id)
    return jsonify(DocumentDetail(document=summary, chunks=chunks, request_id=g.request_id).model_dump(mode="json"))


@documents.delete("/<path:document_id>")
@door(WRITE)
def delete_document(document_id: str) -> Any:
    if (bad := _checked(document_id)) is not None:
        return bad
    try:
        deleted = services().knowledge.delete(document_id, _community(), caller=caller())
    except knowledge_base.UnknownDocument:
        return _unknown(document_id)
    return jsonify(
        DeleteResponse(
            status="deleted", document_id=document_id, deleted_chunks=deleted, request_id=g.request_id
        ).model_dump(mode="json")
    )
