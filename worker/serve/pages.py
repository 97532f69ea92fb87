"""Pages for the knowledge base's keeper: the documents (list, one document, upload, delete), a
retrieval test that shows the answer as the agent gets it beside every score, and the questions
asked. Server-rendered Jinja (autoescaped), a little plain JavaScript, no asset from outside.

They sit behind the admin token (the ingest token; the API token only with
ARC_INGEST_WITH_API_TOKEN=true; with neither, nobody signs in): a login form sets a
signed session cookie, so the token never travels in a URL, and starts a session kept in the
database that sign-out and ARC_SESSION_IDLE_MINUTES end (keeper_sessions.py). Every form
carries a CSRF token; scripts come from files only (the Content-Security-Policy, guards.py).
"""

from __future__ import annotations

import hashlib
import hmac
import math
import os
import re
import secrets
import shutil
import tempfile
import threading
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
from flask import Blueprint, Flask, abort, g, jsonify, redirect, render_template, request, session, url_for
from pydantic import ValidationError
from werkzeug.exceptions import HTTPException

from ..document_types import DOCUMENT_TYPES
from ..errors import DatabaseUnavailable, InvalidInput, UnknownCommunity
from ..models import (
    COMMUNITY_PATTERN,
    DEFAULT_COMMUNITY,
    DOCUMENT_ID_PATTERN,
    DocumentSummary,
    RetrievalRequest,
    RetrievalResponse,
)
from ..service.admission import Overloaded
from ..service.history import histories, timeline
from ..store import knowledge_base, sqlfiles
from . import confirmation_pages, keeper_sessions
from .gate import KEEPER, OPEN, Refused, keeper
from .guards import CALLER, caller, declare
from .security import CLOSED, authenticate
from .services import services
from .upload_jobs import UploadJobs
from .webhooks import saved_upload

pages = Blueprint("pages", __name__, template_folder="templates", static_folder="static", static_url_path="/assets")

PAGE_SIZE = 50
PUBLIC_ENDPOINTS = {"pages.login", "pages.static"}


def init_app(app: Flask) -> None:
    """The session key: derived from a secret kept beside the data (so every worker process signs
    alike) and from the admin token (so rotating the token ends every session)."""
    settings = services_of(app).runtime.settings
    admin = services_of(app).admin_token or ""
    secret = _session_secret(settings.database.data_dir / ".keeper-session-key")
    app.secret_key = hmac.new(secret.encode(), admin.encode(), hashlib.sha256).hexdigest()
    app.config.update(SESSION_COOKIE_HTTPONLY=True, SESSION_COOKIE_SAMESITE="Strict")
    app.session_interface = keeper_sessions.KeeperSessionInterface()
    app.register_blueprint(pages)
    declare(app, pages.name, KEEPER)  # signed in by session (_guard), not by a token
    for endpoint in PUBLIC_ENDPOINTS:
        declare(app, endpoint, OPEN)


def _session_secret(key_file: Path) -> str:
    """The first worker process to start makes the secret; the others read it. It is linked into
    place whole, so gunicorn's workers, which start together, never each keep a key of their own
    (a form signed by one would then be refused by the next as expired)."""
    key_file.parent.mkdir(parents=True, exist_ok=True)
    if not key_file.exists():
        draft = key_file.with_name(f"{key_file.name}.{os.getpid()}")
        draft.write_text(secrets.token_hex(32))
        draft.chmod(0o600)
        try:
            os.link(draft, key_file)
        except FileExistsError:
            pass
        finally:
            draft.unlink()
    return key_file.read_text().strip()


def services_of(app: Flask):
    return app.extensions["arc"]


def _admin_token() -> str | None:
    return services().admin_token


def _signed_in() -> bool:
    """A keeper's session that has not ended (signed out, idle too long), asked once a request."""
    if "signed_in" not in g:
        session_id = session.get(keeper_sessions.SESSION_ID)
        if not session_id:
            g.signed_in = False
        else:
            runtime = services().runtime
            runtime.ensure_schema()
            g.signed_in = keeper_sessions.alive(runtime.db, session_id, runtime.settings.auth.session_idle_minutes)
    return bool(g.signed_in)


def _admin_token_is() -> str | None:
    """Which setting holds the token the pages ask for ("closed": none may open them), for the
    login page to say before anyone tries."""
    token, settings = _admin_token(), services().runtime.settings
    if token is None or token == CLOSED:
        return "closed" if token == CLOSED else None
    return "ARC_INGEST_TOKEN" if settings.auth.ingest_token else "ARC_API_TOKEN"


@pages.before_request
def _guard() -> Any:
    if request.method == "POST":
        sent = request.form.get("csrf_token", "")
        if not sent or not secrets.compare_digest(sent, session.get("csrf", "")):
            abort(400, "the form has expired or did not come from this page: reload it and try again")
    if request.endpoint in PUBLIC_ENDPOINTS:
        return None
    needs_sign_in = _admin_token() is not None
    try:
        setattr(g, CALLER, keeper(caller(), signed_in=needs_sign_in and _signed_in(), needs_sign_in=needs_sign_in))
    except Refused:  # back to the page asked for, its ?community= and all
        if request.endpoint == "pages.upload_status":  # a page's poll, not a page: say it
            return jsonify(error="sign_in", message="the session has ended: sign in again"), 401
        return redirect(url_for("pages.login", next=request.full_path.rstrip("?")))
    return None


def _shown_signed_in() -> bool:
    """Whether a page shows "Sign out": an error page is still shown while the database is away."""
    try:
        return _signed_in()
    except (DatabaseUnavailable, psycopg.OperationalError):
        return False


@pages.errorhandler(HTTPException)
def _error_page(exc: HTTPException) -> Any:
    return render_template("pages/error.html", title=exc.name, message=exc.description), exc.code


@pages.app_template_filter("utc")
def utc(moment: datetime) -> str:
    """A time as the pages show it: in UTC, saying so (the database may hand it in any zone)."""
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%d %H:%M UTC")


@pages.app_context_processor
def _template_globals() -> dict[str, Any]:
    if "csrf" not in session:
        session["csrf"] = secrets.token_urlsafe(32)
    return {
        "csrf_token": session["csrf"],
        "signed_in": _admin_token() is not None and _shown_signed_in(),
        "needs_login": _admin_token() is not None,
        "link": link,
        "admin_token_is": _admin_token_is,
        "community": g.get("community"),
        "communities": g.get("communities", []),
        "community_carried": g.get("carry_community", False),
    }


def link(endpoint: str, **values: Any) -> str:
    """A link to another page that stays in the community this page shows, when it named one or
    the knowledge base holds several: a keeper who chose one is not taken back to another (nor,
    without a default community, to a 400) by following a link."""
    if g.get("carry_community"):
        values.setdefault("community", g.community)
    return url_for(endpoint, **values)


def _community() -> str:
    """The community a page shows (``?community=``, or the form's field): unnamed, the knowledge
    base's only one; among several, the chooser answers. Kept in ``g`` for :func:`link`."""
    named = (request.values.get("community") or "").strip() or None
    known = services().knowledge.communities()
    g.communities = sorted(known) if len(known) > 1 else []
    if named is not None:
        if named not in known:
            abort(404, f"community: no community {named[:80]!r} in this knowledge base")
        chosen = named
    elif len(known) > 1:
        raise ChooseCommunity()
    else:
        chosen = next(iter(known), DEFAULT_COMMUNITY)
    g.community, g.carry_community = chosen, named is not None or len(known) > 1
    return chosen


class ChooseCommunity(Exception):
    """A page of one community asked for without ``?community=`` while the knowledge base holds
    several: the chooser answers instead."""


@dataclass(frozen=True)
class CommunityCard:
    """One community on the chooser."""

    name: str
    documents: int
    chunks: int
    last_ingest: datetime | None
    questions_week: int


@pages.errorhandler(ChooseCommunity)
def _chooser(_: ChooseCommunity) -> Any:
    """Every community, each leading to the page asked for (its query kept) in that community."""
    databases = services().runtime.databases
    cards = []
    for db in databases.all():  # each community from the database that holds it
        with db.connect() as conn:
            rows = conn.execute(sqlfiles.query("community_overview")).fetchall()
        cards += [CommunityCard(*row) for row in rows if databases.of(row[0]) is db]
    cards.sort(key=lambda card: card.name)
    endpoint = request.endpoint if request.method == "GET" and request.endpoint else "pages.documents"
    kept: dict[str, Any] = {**(request.view_args or {}), **request.args.to_dict()}
    g.communities, g.community, g.carry_community = [c.name for c in cards], None, False
    targets = {c.name: url_for(endpoint, **{**kept, "community": c.name}) for c in cards}
    return render_template("pages/choose.html", cards=cards, targets=targets, message=_notice(request.args))


@pages.get("/")
def start() -> str:
    knowledge = services().knowledge
    knowledge.runtime.ensure_schema()
    documents = knowledge.list_documents(_community(), caller=caller())
    return render_template(
        "pages/start.html",
        documents=len(documents),
        chunks=sum(d.chunks for d in documents),
        settings=knowledge.runtime.settings,
    )


@pages.route("/login", methods=["GET", "POST"])
def login() -> Any:
    error = None
    if _admin_token() is None:  # no admin token: the pages are open on loopback, nothing to sign in with
        return render_template("pages/login.html", error=None, open_pages=True)
    if request.method == "POST":
        expected, arc = _admin_token(), services()
        verdict = authenticate(
            expected,
            request.form.get("token") or None,
            address=request.remote_addr or "unknown",
            guard=arc.gate.auth_guard,
            route=request.path,
            failures=arc.metrics.auth_failures,
        )
        if expected is not None and verdict.ok:
            runtime = arc.runtime
            runtime.ensure_schema()
            session.clear()
            idle_minutes = runtime.settings.auth.session_idle_minutes
            session[keeper_sessions.SESSION_ID] = keeper_sessions.start(runtime.db, idle_minutes)
            session["csrf"] = secrets.token_urlsafe(32)
            return redirect(keeper_sessions.own_path(request.args.get("next")) or url_for("pages.start"))
        if verdict.retry_after:  # as every door: the right token first, then the brake
            abort(429, f"too many failed sign-ins; try again in {max(1, math.ceil(verdict.retry_after))} s")
        error = (
            "This worker has no admin token: set ARC_INGEST_TOKEN (or ARC_INGEST_WITH_API_TOKEN=true)."
            if expected == CLOSED
            else "That token is not the admin token."
        )
    return render_template("pages/login.html", error=error), 401 if error else 200


@pages.post("/logout")
def logout() -> Any:
    """Ends the session for good, in every process: a copy of its cookie opens nothing after."""
    keeper_sessions.end(services().runtime.db, session.get(keeper_sessions.SESSION_ID))
    session.clear()
    return redirect(url_for("pages.login"))


# -- documents ---------------------------------------------------------------------------------


@dataclass
class DocumentRow:
    summary: DocumentSummary
    supersedes: list[str]
    amends: list[str]


def _rows(documents: list[DocumentSummary]) -> list[DocumentRow]:
    supersedes: dict[str, list[str]] = {}
    amends: dict[str, list[str]] = {}
    for d in documents:
        if d.superseded_by:
            supersedes.setdefault(d.superseded_by, []).append(d.document_id)
        for by in d.amended_by:
            amends.setdefault(by, []).append(d.document_id)
    return [DocumentRow(d, supersedes.get(d.document_id, []), amends.get(d.document_id, [])) for d in documents]


@pages.get("/documents")
def documents() -> str:
    knowledge = services().knowledge
    knowledge.runtime.ensure_schema()
    found = knowledge.list_documents(_community(), caller=caller())
    pages_total = max(1, math.ceil(len(found) / PAGE_SIZE))
    try:
        page = min(max(int(request.args.get("page", "1")), 1), pages_total)
    except ValueError:
        abort(400, "page: a whole number")
    rows = _rows(found)[(page - 1) * PAGE_SIZE : page * PAGE_SIZE]
    return render_template(
        "pages/documents.html",
        rows=rows,
        page=page,
        pages_total=pages_total,
        total=len(found),
        document_types=DOCUMENT_TYPES,
        message=_notice(request.args),
        query=_question_carried(),
    )


def _question_carried() -> str | None:
    """The question a keeper brought from Questions asked to choose its passage among the documents'."""
    query = (request.args.get("query") or "").strip()
    return query[:2000] or None


@pages.get("/documents/<path:document_id>")
def document(document_id: str) -> str:
    if len(document_id) > 200 or not re.match(DOCUMENT_ID_PATTERN, document_id):
        abort(400, "document_id: letters, digits and . _ : - only")
    try:
        summary, chunks = services().knowledge.show(document_id, _community(), caller=caller())
    except knowledge_base.UnknownDocument:
        abort(404, f"no document {document_id!r} in the knowledge base")
    community = _community()
    history = histories(services().knowledge.list_documents(community, caller=caller())).get(document_id)
    return render_template(
        "pages/document.html", document=summary, chunks=chunks, history=history, query=_question_carried()
    )


@pages.get("/timeline")
def timeline_page() -> str:
    """A community's documents in the order they took effect, each with what it replaced and what replaced it."""
    knowledge = services().knowledge
    knowledge.runtime.ensure_schema()
    documents = knowledge.list_documents(_community(), caller=caller())
    return render_template("pages/timeline.html", entries=timeline(documents))


@pages.post("/documents/upload")
def upload() -> Any:
    """Save the file, take the slots an ingest takes, and answer at once with the job's page; a
    thread of this process ingests it (upload_jobs.py). Bad fields and a busy worker are
    answered here, before any job."""
    knowledge = services().knowledge
    request.max_content_length = knowledge.runtime.settings.limits.max_upload_bytes
    form = {k: v for k, v in request.form.items() if k != "csrf_token"}  # the body, read before a slot
    knowledge.runtime.ensure_schema()
    folder = Path(tempfile.mkdtemp(prefix="arc-upload-"))
    slots = ExitStack()
    handed_over = False
    try:
        try:
            saved = saved_upload(folder, form)
        except (ValidationError, InvalidInput) as exc:
            message = (
                str(exc)
                if isinstance(exc, InvalidInput)
                else "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
            )
            return render_template("pages/error.html", title="Not ingested", message=message), 422
        try:  # reading the document counts against admission control, as on the ingest webhook
            slots.enter_context(knowledge.ingest_slots())
        except Overloaded as exc:
            page = render_template(
                "pages/error.html",
                title="Not ingested: the worker is busy",
                message=f"The worker is busy ({exc}); nothing was stored. Upload it again in a moment.",
            )
            return page, 429, {"Retry-After": str(exc.retry_after)}
        job = _jobs().create(session, file=saved.filename, community=saved.described.community)
        threading.Thread(
            target=job.run, args=(knowledge, saved, folder, slots, caller()), name=f"upload-{job.id[:8]}", daemon=True
        ).start()
        handed_over = True
    finally:
        if not handed_over:
            slots.close()
            shutil.rmtree(folder, ignore_errors=True)
    return redirect(url_for("pages.upload_job", job_id=job.id), 303)


def _jobs() -> UploadJobs:
    return UploadJobs.under(services().runtime.settings.database.data_dir)


@pages.get("/documents/upload/<job_id>")
def upload_job(job_id: str) -> str:
    job = _jobs().find(session, job_id)
    if job is None:
        abort(404, "no such upload in this session (uploads are kept a day)")
    if job["community"]:  # links stay in the community the upload went to, once it holds a document
        known = services().knowledge.communities()
        if job["community"] in known:
            g.community, g.carry_community = job["community"], True
            g.communities = sorted(known) if len(known) > 1 else []
    return render_template("pages/upload_job.html", job=job)


@pages.get("/documents/upload/<job_id>/status")
def upload_status(job_id: str) -> Any:
    """What the job page polls: the stage, how far, and the report or the error."""
    job = _jobs().find(session, job_id)
    if job is None:
        return jsonify(error="not_found", message="no such upload in this session"), 404
    response = jsonify(job)
    response.headers["Cache-Control"] = "no-store"
    return response


@pages.post("/documents/<path:document_id>/delete")
def delete(document_id: str) -> Any:
    if request.form.get("confirm") != document_id:
        abort(400, "confirm: type the document's id to delete it")
    knowledge = services().knowledge
    community = _community()
    try:
        deleted = knowledge.delete(document_id, community, caller=caller())
    except knowledge_base.UnknownDocument:
        abort(404, f"no document {document_id!r} in the knowledge base")
    told: dict[str, Any] = {"notice": "deleted", "document": document_id, "chunks": deleted}
    if community not in knowledge.communities():  # its last: the community is gone
        return redirect(url_for("pages.documents", **told, emptied=community))
    return redirect(link("pages.documents", **told))


@pages.post("/communities/<name>/delete")
def delete_community(name: str) -> Any:
    """A community deleted whole (the keeper types its name to confirm); the pages go on with the
    communities left."""
    if request.form.get("confirm") != name:
        abort(400, "confirm: type the community's name to delete it")
    try:
        removed = services().knowledge.delete_community(name, caller=caller())
    except UnknownCommunity:
        abort(404, f"community: nothing is kept under {name[:80]!r} in this knowledge base")
    return redirect(url_for("pages.documents", notice="community_deleted", gone=name, chunks=removed["chunks"]))


# The notices the documents page shows, by key: only what the worker itself wrote (a link
# cannot put words of its own in the box). Their values are a document id, a count, a community.
NOTICES = {
    "deleted": "Deleted {document} ({chunks} chunks)",
    "community_deleted": "Deleted the community {gone} ({chunks} chunks) and everything kept of it",
}


def _notice(args: Any) -> str | None:
    """The notice a ``?notice=KEY`` asks for, its values checked; None for any other."""
    template = NOTICES.get(args.get("notice", ""))
    document, chunks, emptied = args.get("document", ""), args.get("chunks", ""), args.get("emptied")
    gone = args.get("gone", "")
    if template is None or not chunks.isdigit():
        return None
    if "{document}" in template and not re.fullmatch(DOCUMENT_ID_PATTERN, document):
        return None
    if "{gone}" in template and not re.fullmatch(COMMUNITY_PATTERN, gone):
        return None
    told = template.format(document=document[:200], gone=gone, chunks=int(chunks))
    if emptied is not None and re.fullmatch(COMMUNITY_PATTERN, emptied):
        told += f"; {emptied} holds no documents now"
    return told


@pages.get("/documents/upload")
def upload_form() -> Any:
    """The upload form is on the documents page: a GET of the form's address goes there."""
    named: dict[str, Any] = {"community": c} if (c := request.args.get("community")) else {}
    return redirect(url_for("pages.documents", **named) + "#upload", 303)


# -- retrieval testing ------------------------------------------------------------------------


@pages.route("/ask", methods=["GET", "POST"])
def ask() -> Any:
    """The form posts; ``GET /ask?query=...&top_k=...`` asks too, so a question and its settings
    can be linked, bookmarked and asked again from the questions page."""
    knowledge = services().knowledge
    answer, error = None, None
    form = request.form if request.method == "POST" else request.args
    knowledge.runtime.ensure_schema()
    community = _community()
    if request.method == "POST" or "query" in request.args:
        try:
            req = RetrievalRequest(**_asked(form), community=community)
        except ValidationError as exc:
            error = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
        else:  # a keeper's test question: answered as the agent's, not recorded as a resident's
            answer = knowledge.ask(req, caller=caller(), record=False)
    settings = knowledge.runtime.settings
    permalink = link("pages.ask", **{k: [v for v in form.getlist(k) if v] for k in ASK_FIELDS if any(form.getlist(k))})
    return render_template(
        "pages/ask.html",
        answer=answer,
        error=error,
        form=form,
        document_types=DOCUMENT_TYPES,
        scale=status_scale(answer, settings),
        reranker=knowledge.retriever.reranker is not None,
        permalink=permalink if answer else None,
    ), 422 if error else 200


# The retrieval testing form's fields, as a link to a question carries them.
ASK_FIELDS = (
    "query",
    "document_types",
    "binding_only",
    "include_superseded",
    "rerank",
    "token_budget",
    "top_k",
    "min_relevance",
    "vector_weight",
    "fts_weight",
)
_CHECKED = ("on", "true", "1")


def _asked(form) -> dict[str, Any]:
    """The request fields a form or link gives; left empty, a setting keeps its default (pydantic
    checks the rest and names the field)."""
    fields: dict[str, Any] = {
        "query": form.get("query", ""),
        "document_types": form.getlist("document_types") or None,
        "binding_only": form.get("binding_only") in _CHECKED,
        "include_superseded": form.get("include_superseded") in _CHECKED,
        "rerank": {"on": True, "off": False}.get(form.get("rerank", "")),
    }
    for name in ("token_budget", "top_k", "min_relevance"):
        if form.get(name, "").strip():
            fields[name] = form[name].strip()
    vector, fts = form.get("vector_weight", "").strip(), form.get("fts_weight", "").strip()
    if vector or fts:  # one given: the other leg gets the rest
        fields["weights"] = {"vector": vector or _rest(fts), "fts": fts or _rest(vector)}
    return fields


def _rest(weight: str) -> str:
    try:
        return str(round(1 - float(weight), 6))
    except ValueError:
        return weight  # named as invalid by the model


@dataclass(frozen=True)
class StatusScale:
    """The scale the answer's status was decided on, as the page draws it.

    Calibrated: the calibrated score (0 = the knowledge base's floor, 1 = its top) against the
    cuts on it, and those cuts translated to relevance (the chunk bars' scale: the best final
    score is the best relevance). Uncalibrated: the best relevance against the fixed cuts. When a
    rerank service's score set the status (``rerank``), the same on the service's score: its
    calibrated scale, or its best score against the fixed ``RERANK_*`` cuts.
    """

    calibrated: bool
    score: float | None  # the number the cuts act on
    cuts: tuple[float, float]  # no_results below the first, success from the second
    relevance_cuts: tuple[float, float]  # the same cuts on the relevance (chunk bars') scale
    floor: float | None = None
    top: float | None = None
    rerank: bool = False  # decided on the rerank service's score, not the first-stage relevance


def status_scale(answer: RetrievalResponse | None, settings) -> StatusScale | None:
    if answer is None:
        return None
    confidence = answer.confidence or {}
    rerank = confidence.get("decided_on") == "rerank"
    if confidence.get("calibrated") and confidence.get("floor") is not None and confidence.get("top") is not None:
        floor, top = confidence["floor"], confidence["top"]
        cuts = (settings.status.no_results_at, settings.status.success_at)
        translated = (round(floor + cuts[0] * (top - floor), 4), round(floor + cuts[1] * (top - floor), 4))
        return StatusScale(True, confidence.get("score"), cuts, translated, floor, top, rerank)
    if rerank:
        fixed = (settings.reranking.rerank_no_results_score, settings.reranking.rerank_success_score)
        return StatusScale(False, confidence.get("rerank"), fixed, fixed, rerank=True)
    fixed = (settings.status.no_results_below, settings.status.low_confidence_below)
    return StatusScale(False, confidence.get("relevance"), fixed, fixed)


# -- questions asked ---------------------------------------------------------------------------

STATUSES = ("success", "low_confidence", "no_results")


@pages.get("/questions")
def questions() -> str:
    status = request.args.get("status") or None
    if status is not None and status not in STATUSES:
        abort(400, f"status: one of {', '.join(STATUSES)}")
    unhelpful = request.args.get("votes") == "unhelpful"  # the answers the chat voted unhelpful
    runtime = services().runtime
    runtime.ensure_schema()
    community = _community()
    with runtime.database(community).connect() as conn:
        recent = conn.execute(
            sqlfiles.query("recent_questions"),
            {"status": status, "limit": 100, "community": community, "unhelpful": unhelpful},
        ).fetchall()
        mix = conn.execute(sqlfiles.query("status_mix"), {"community": community}).fetchall()
    return render_template(
        "pages/questions.html", recent=recent, mix=mix, status=status, statuses=STATUSES, unhelpful=unhelpful
    )


confirmation_pages.add_routes(pages, _community)  # the keeper's confirmed answers (confirmation_pages.py)
