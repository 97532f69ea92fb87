"""The two webhooks n8n calls: ``POST /webhook/arc-retrieval`` (evidence for a question) and
``POST /webhook/arc-ingest`` (a document, as JSON or a form upload)."""

from __future__ import annotations

import json
import logging
import select
import socket
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any

from flask import Blueprint, g, jsonify, request
from pydantic import ValidationError
from werkzeug.exceptions import BadRequest, UnsupportedMediaType

from ..errors import IngestError, InvalidInput
from ..ingest.bounds import Budget, json_depth_exceeds
from ..ingest.readers import ParsedDocument, parse_formatted
from ..models import (
    IngestFields,
    IngestRequest,
    IngestResponse,
    RetrievalRequest,
    TextFormat,
    unwrap,
)
from ..service.knowledge import DocumentInput, IngestReport, ScopedIngestor
from .gate import Access, door
from .guards import caller
from .responses import validation_error
from .services import services

RETRIEVAL_ROUTE = "/webhook/arc-retrieval"
INGEST_ROUTE = "/webhook/arc-ingest"

webhooks = Blueprint("webhooks", __name__)
log = logging.getLogger("arc.webhook")


@webhooks.post(RETRIEVAL_ROUTE)
@door(Access("api", scoped=True))
def retrieve() -> Any:
    try:
        req = RetrievalRequest.model_validate(unwrap(json_body()))
    except ValidationError as exc:
        return validation_error(exc)
    answer = services().knowledge.ask(req, caller=caller(), request_id=g.request_id)
    return jsonify(answer.model_dump(mode="json", exclude_none=False))


@webhooks.post(INGEST_ROUTE)
@door(Access("admin", scoped=True, write=True))
def ingest() -> Any:
    knowledge = services().knowledge
    request.max_content_length = knowledge.runtime.settings.limits.max_upload_bytes
    multipart = request.mimetype == "multipart/form-data"

    def store(ingestor: ScopedIngestor) -> tuple[DocumentInput, IngestReport]:
        if posted is None:
            document, replace, community = _uploaded_document(ingestor, budget=budget)
        else:
            document, replace = _posted_document(posted, ingestor, budget), posted.replace
            community = posted.community
        return document, ingestor.write([document], replace=replace, community=community)

    try:
        # The body is read (from a client that may be slow) before any slot is taken; reading
        # the document (parsing, conversion, OCR) then counts against admission control.
        posted = None if multipart else _posted_request()
        if multipart:
            request.files.get("file")
        budget = Budget(knowledge.ingestor.limits.read_seconds, gone=client_gone(request.environ))
        document, report = knowledge.ingest(store, caller=caller())
    except ValidationError as exc:
        return validation_error(exc)
    log.info(
        "document ingested",
        extra={
            "document_id": document.document_id,
            "document_name": document.name,
            "community": report.community,
            "chunks": report.chunks,
            "replaced": list(report.replaced),
        },
    )
    return jsonify(
        IngestResponse(
            status="ingested",
            community=report.community,
            document_id=document.document_id,
            document_name=document.name,
            chunks=report.chunks,
            replaced_chunks=report.replaced_chunks,
            replaced=list(report.replaced),
            amended_chunks=report.amended_chunks,
            notes=list(report.notes),
            request_id=g.request_id,
        ).model_dump(mode="json")
    )


def _posted_request() -> IngestRequest:
    """A document sent as JSON: its text and what describes it."""
    return IngestRequest.model_validate(
        unwrap(
            json_body(
                "send the document as JSON (Content-Type: application/json) or as a form upload "
                "(multipart/form-data, the file in a field named file)"
            )
        )
    )


def _posted_document(posted: IngestRequest, ingestor: ScopedIngestor, budget: Budget) -> DocumentInput:
    parsed = _parse_posted(posted, ingestor, budget)
    if not (posted.document_id or posted.name or parsed.title):
        # without one, every such text would be stored as "document", each replacing the last
        raise InvalidInput("required when the text has no title and no name is given", "document_id")
    document = ingestor.prepare_text(parsed, posted.document_fields(), metadata={"source": "webhook"})
    document.id_given = posted.document_id is not None  # a text sent again under its named id updates it
    return document


def _parse_posted(posted: IngestRequest, ingestor: ScopedIngestor, budget: Budget) -> ParsedDocument:
    try:
        return parse_formatted(posted.text, posted.format, ingestor.limits, budget)
    except ValueError as exc:  # what the readers refuse (HTML nested too deep)
        raise IngestError(f"text: {exc}", "text") from None
    except RecursionError:
        raise IngestError("text: nested too deeply to read", "text") from None


def client_gone(environ: dict[str, Any]) -> Callable[[], bool]:
    """Whether the caller closed its connection: once the body is read, a readable socket that
    gives no bytes is the end of the stream. Without gunicorn's socket (tests' client): never."""
    sock = environ.get("gunicorn.socket")
    if sock is None:
        return lambda: False

    def gone() -> bool:
        try:
            readable, _, _ = select.select([sock], [], [], 0)
            return bool(readable) and sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
        except BlockingIOError:
            return False
        except (OSError, ValueError):
            return True

    return gone


# What a form upload's `format` field names, as the file-name suffix the readers go by.
FORMAT_SUFFIX: dict[TextFormat, str] = {"markdown": ".md", "text": ".txt", "html": ".html"}
BINARY_SUFFIXES = (".pdf", ".docx")


@dataclass(frozen=True)
class SavedUpload:
    """A form upload saved where the readers read it, and the fields that describe it."""

    copy: Path
    filename: str  # its own name, as the caller sent it
    described: IngestFields

    def read(self, ingestor: ScopedIngestor, budget: Budget | None = None) -> DocumentInput:
        """Read as the command line reads a file (by its suffix: Markdown, text, HTML, PDF with
        OCR for scanned pages, Word)."""
        return ingestor.prepare_file(
            self.copy,
            self.described.document_fields(),
            source_name=self.filename,
            metadata={"source": "webhook"},
            budget=budget,
        )


def _uploaded_document(
    ingestor: ScopedIngestor, form: Mapping[str, str] | None = None, budget: Budget | None = None
) -> tuple[DocumentInput, bool, str | None]:
    """A form upload, read (see :func:`saved_upload` for ``form``)."""
    with tempfile.TemporaryDirectory(prefix="arc-upload-") as folder:
        upload = saved_upload(Path(folder), form)
        return upload.read(ingestor, budget), upload.described.replace, upload.described.community


def saved_upload(folder: Path, form: Mapping[str, str] | None = None) -> SavedUpload:
    """A form upload's fields checked and its file saved in ``folder`` (the caller removes it),
    nothing read yet: the keeper's pages read it after the request has been answered. ``form``:
    the describing fields, when the caller's form holds others of its own."""
    upload = request.files.get("file")
    if upload is None:
        raise InvalidInput("send the document in a form field named file", "file")
    # an empty field is one not filled in (forms, and n8n's ingest workflow, send every field)
    fields: dict[str, Any] = {
        key: value for key, value in (request.form if form is None else form).items() if value.strip()
    }
    for flag in ("is_binding", "replace", "allow_duplicate"):
        if flag in fields:
            fields[flag] = _form_bool(fields[flag], flag)
    if "amends" in fields:  # a list: as the JSON body has it, written out as JSON text
        try:
            fields["amends"] = json.loads(fields["amends"])
        except ValueError:
            raise InvalidInput(
                'JSON text: [{"document_id": "...", "sections": ["Article VII Section 4"]}]', "amends"
            ) from None
    named = fields.pop("format", None)
    if named is not None and named not in FORMAT_SUFFIX:
        raise InvalidInput(f"one of {', '.join(FORMAT_SUFFIX)}", "format")
    # its own name only, whatever path a browser sent with it
    filename = PurePath((upload.filename or "").replace("\\", "/")).name[:255] or "document"
    if not filename.isprintable():  # a NUL or control character: Postgres text refuses NUL
        raise InvalidInput("the file name holds a control character (NUL, newline...); rename the file", "file")
    suffix = PurePath(filename).suffix.lower()
    if named is not None and suffix in BINARY_SUFFIXES:
        raise InvalidInput(f"applies to text uploads; a {suffix} file is read as what it is", "format")
    if named is not None or not suffix:
        suffix = FORMAT_SUFFIX[named or "markdown"]
    described = IngestFields.model_validate(fields)
    copy = folder / f"upload{suffix}"  # the readers go by the suffix, never by the caller's path
    upload.save(copy)
    return SavedUpload(copy, filename, described)


_FORM_TRUE, _FORM_FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def _form_bool(value: str, field: str) -> bool:
    """A form's yes/no field: a value that is neither is an error, not "no"."""
    if value.lower() in _FORM_TRUE:
        return True
    if value.lower() in _FORM_FALSE:
        return False
    raise InvalidInput(f"true or false, got {value[:40]!r}", field)


def json_body(not_json: str = "send the request as JSON (Content-Type: application/json)") -> dict[str, Any]:
    if not request.is_json:
        raise UnsupportedMediaType(not_json)
    try:
        payload = request.get_json(silent=True)
    except RecursionError:  # 50,000 nested brackets exhaust the decoder's stack
        payload = _TOO_DEEP
    limit = services().knowledge.ingestor.limits.max_nesting
    if payload is _TOO_DEEP or json_depth_exceeds(payload, limit):
        raise BadRequest(f"the body nests JSON over {limit} levels deep (ARC_MAX_NESTING)")
    if payload is None:
        raise BadRequest("the body is not valid JSON")
    if not isinstance(payload, dict):
        raise BadRequest("the body must be a JSON object")
    return payload


_TOO_DEEP = object()
