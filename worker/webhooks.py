"""The two webhooks n8n calls: ``POST /webhook/arc-retrieval`` (evidence for a question) and
``POST /webhook/arc-ingest`` (a document, as JSON or a form upload)."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, g, jsonify, request
from pydantic import ValidationError
from werkzeug.exceptions import BadRequest, UnsupportedMediaType

from .errors import InvalidInput
from .models import IngestRequest, IngestResponse, RetrievalRequest, unwrap
from .readers import html_to_markdown, parse_markdown, parse_text
from .responses import validation_error
from .services import services

RETRIEVAL_ROUTE = "/webhook/arc-retrieval"
INGEST_ROUTE = "/webhook/arc-ingest"

webhooks = Blueprint("webhooks", __name__)


@webhooks.post(RETRIEVAL_ROUTE)
def retrieve() -> Any:
    try:
        req = RetrievalRequest.model_validate(unwrap(json_body()))
    except ValidationError as exc:
        return validation_error(exc)
    arc = services()
    arc.runtime.ensure_schema()
    with arc.admission.slot():
        answer = arc.retriever.answer(req, request_id=g.request_id)
    arc.metrics.observe_answer(answer.status, answer.timings_ms, answer.warnings)
    arc.query_log.record(answer)
    return jsonify(answer.model_dump(mode="json", exclude_none=False))


@webhooks.post(INGEST_ROUTE)
def ingest() -> Any:
    if request.mimetype == "multipart/form-data":
        payload = _uploaded_document()
    else:
        payload = unwrap(json_body("send the document as JSON (Content-Type: application/json) or as a form "
                                   "upload (multipart/form-data, the file in a field named file)"))
    try:
        req = IngestRequest.model_validate(payload)
    except ValidationError as exc:
        return validation_error(exc)
    arc = services()
    arc.runtime.ensure_schema()
    parsed = (parse_text(req.text) if req.format == "text"
              else parse_markdown(html_to_markdown(req.text) if req.format == "html" else req.text))
    document = arc.ingestor.prepare_text(parsed, document_id=req.document_id, name=req.name,
                                         document_type=req.document_type, is_binding=req.is_binding,
                                         supersedes=req.supersedes, superseded_by=req.superseded_by,
                                         metadata={"source": "webhook"}, amends=tuple(req.amends))
    with arc.admission.slot():
        report = arc.ingestor.write([document])
    arc.retriever.search_cache.clear()
    return jsonify(IngestResponse(status="ingested", document_id=document.document_id,
                                  document_name=document.name, chunks=report.chunks,
                                  replaced_chunks=report.replaced_chunks,
                                  amended_chunks=report.amended_chunks, notes=list(report.notes),
                                  request_id=g.request_id).model_dump(mode="json"))


def _uploaded_document() -> dict[str, Any]:
    """A form upload as an ingest payload: its fields and the file's text."""
    upload = request.files.get("file")
    if upload is None:
        raise InvalidInput("send the document in a form field named file", "file")
    try:
        text = upload.read().decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInput("must be UTF-8 text or Markdown", "file") from None
    fields: dict[str, Any] = dict(request.form.items())
    if "is_binding" in fields:
        fields["is_binding"] = fields["is_binding"].lower() in ("1", "true", "yes", "on")
    suffix = (upload.filename or "").lower().rpartition(".")[2]
    fields.setdefault("format", {"txt": "text", "html": "html", "htm": "html"}.get(suffix, "markdown"))
    return {**fields, "text": text}


def json_body(not_json: str = "send the request as JSON (Content-Type: application/json)") -> dict[str, Any]:
    if not request.is_json:
        raise UnsupportedMediaType(not_json)
    payload = request.get_json(silent=True)
    if payload is None:
        raise BadRequest("the body is not valid JSON")
    if not isinstance(payload, dict):
        raise BadRequest("the body must be a JSON object")
    return payload
