"""The keeper's confirmed answers over HTTP (``POST``/``GET /webhook/arc-confirm``,
``DELETE /webhook/arc-confirm/<id>``: the keeper's token or a ``write@`` community token) and
the chat's votes (``POST /webhook/arc-feedback``: the agents' token). docs/confirmations.md."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, current_app, jsonify, request
from pydantic import ValidationError

from ..models import unwrap
from ..service.confirmations import (
    ConfirmationDeleted,
    ConfirmationList,
    ConfirmationService,
    ConfirmRequest,
    FeedbackRequest,
)
from .gate import Access, door
from .guards import caller
from .responses import validation_error
from .services import services
from .webhooks import json_body

CONFIRM_ROUTE = "/webhook/arc-confirm"
FEEDBACK_ROUTE = "/webhook/arc-feedback"
SERVICE = "arc.confirmations"  # the app's ConfirmationService, in app.extensions

confirmations = Blueprint("confirmations", __name__)

# The keeper's token or a community token (write@ to change); the agents' token is told it may not.
KEEPER_READS = Access("admin", scoped=True, agents_forbidden=True)
KEEPER_WRITES = Access("admin", scoped=True, write=True, agents_forbidden=True)
AGENTS = Access("api", scoped=True)


def confirmation_service() -> ConfirmationService:
    found = current_app.extensions.get(SERVICE)
    if found is None:
        found = current_app.extensions[SERVICE] = ConfirmationService(services().knowledge)
    return found


@confirmations.post(CONFIRM_ROUTE)
@door(KEEPER_WRITES)
def confirm() -> Any:
    try:
        req = ConfirmRequest.model_validate(unwrap(json_body()))
    except ValidationError as exc:
        return validation_error(exc)
    made = confirmation_service().confirm(req, caller())
    services().metrics.confirmations.labels(made.answer).inc()
    return jsonify(made.model_dump(mode="json")), 201


@confirmations.get(CONFIRM_ROUTE)
@door(KEEPER_READS)
def listed() -> Any:
    community = request.args.get("community") or None
    found = confirmation_service().list(community, caller())
    listed = ConfirmationList(community=found[0].community if found else community, confirmations=found)
    return jsonify(listed.model_dump(mode="json"))


@confirmations.delete(CONFIRM_ROUTE + "/<int:confirmation_id>")
@door(KEEPER_WRITES)
def delete(confirmation_id: int) -> Any:
    community = confirmation_service().delete(confirmation_id, caller())
    return jsonify(ConfirmationDeleted(deleted=confirmation_id, community=community).model_dump(mode="json"))


@confirmations.post(FEEDBACK_ROUTE)
@door(AGENTS)
def feedback() -> Any:
    try:
        req = FeedbackRequest.model_validate(unwrap(json_body()))
    except ValidationError as exc:
        return validation_error(exc)
    recorded = confirmation_service().vote(req, caller())
    services().metrics.feedback.labels("helpful" if recorded.helpful else "unhelpful").inc()
    return jsonify(recorded.model_dump(mode="json")), 201
