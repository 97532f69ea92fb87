"""The keeper's confirmed answers over HTTP (``POST``/``GET /webhook/arc-confirm``,
``DELETE /webhook/arc-confirm/<id>``: the keeper's token or a ``write@`` community token) and
the chat's votes (``POST /webhook/arc-feedback``: the agents' token). docs/confirmations.md."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, current_app, g, jsonify, request
from pydantic import ValidationError

from ..models import unwrap
from ..service.confirmations import ConfirmationService, ConfirmRequest, FeedbackRequest
from . import community_scope
from .community_scope import ALLOWED
from .responses import validation_error
from .services import services
from .webhooks import json_body

CONFIRM_ROUTE = "/webhook/arc-confirm"
FEEDBACK_ROUTE = "/webhook/arc-feedback"
SERVICE = "arc.confirmations"  # the app's ConfirmationService, in app.extensions

confirmations = Blueprint("confirmations", __name__)


def confirmation_service() -> ConfirmationService:
    found = current_app.extensions.get(SERVICE)
    if found is None:
        found = current_app.extensions[SERVICE] = ConfirmationService(services().knowledge)
    return found


@confirmations.post(CONFIRM_ROUTE)
def confirm() -> Any:
    try:
        req = ConfirmRequest.model_validate(unwrap(json_body()))
    except ValidationError as exc:
        return validation_error(exc)
    made = confirmation_service().confirm(req, community_scope.checked(req.community))
    services().metrics.confirmations.labels(made.answer).inc()
    return jsonify(made.model_dump(mode="json")), 201


@confirmations.get(CONFIRM_ROUTE)
def listed() -> Any:
    community = community_scope.checked(request.args.get("community") or None)
    found = confirmation_service().list(community)
    return jsonify(
        {
            "community": found[0].community if found else community,
            "confirmations": [c.model_dump(mode="json") for c in found],
        }
    )


@confirmations.delete(CONFIRM_ROUTE + "/<int:confirmation_id>")
def delete(confirmation_id: int) -> Any:
    community = confirmation_service().delete(confirmation_id, g.get(ALLOWED))
    return jsonify({"deleted": confirmation_id, "community": community})


@confirmations.post(FEEDBACK_ROUTE)
def feedback() -> Any:
    try:
        req = FeedbackRequest.model_validate(unwrap(json_body()))
    except ValidationError as exc:
        return validation_error(exc)
    recorded = confirmation_service().vote(req, g.get(ALLOWED))
    services().metrics.feedback.labels("helpful" if recorded.helpful else "unhelpful").inc()
    return jsonify(recorded.model_dump(mode="json")), 201
