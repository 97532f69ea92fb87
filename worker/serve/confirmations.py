"""The keeper's confirmed answers over HTTP (``POST``/``GET /webhook/arc-confirm``,
``DELETE /webhook/arc-confirm/<id>``: the keeper's token or a ``write@`` community token) and
the chat's votes (``POST /webhook/arc-feedback``: the agents' token). docs/confirmations.md."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flask import Blueprint, current_app, g, jsonify, request
from pydantic import ValidationError

from ..models import unwrap
from ..service.confirmations import (
    ConfirmationDeleted,
    ConfirmationList,
    ConfirmationService,
    ConfirmRequest,
    FeedbackRequest,
)
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
    listed = ConfirmationList(community=found[0].community if found else community, confirmations=found)
    return jsonify(listed.model_dump(mode="json"))


@confirmations.delete(CONFIRM_ROUTE + "/<int:confirmation_id>")
def delete(confirmation_id: int) -> Any:
    community = confirmation_service().delete(confirmation_id, g.get(ALLOWED))
    return jsonify(ConfirmationDeleted(deleted=confirmation_id, community=community).model_dump(mode="json"))


@confirmations.post(FEEDBACK_ROUTE)
def feedback() -> Any:
    try:
        req = FeedbackRequest.model_validate(unwrap(json_body()))
    except ValidationError as exc:
        return validation_error(exc)
    recorded = confirmation_service().vote(req, g.get(ALLOWED))
    services().metrics.feedback.labels("helpful" if recorded.helpful else "unhelpful").inc()
    return jsonify(recorded.model_dump(mode="json")), 201


Responses = Callable[[str, str], dict[str, Any]]
Errors = Callable[[str], dict[str, Any]]


def openapi_paths(ok: Responses, error: Errors) -> dict[str, Any]:
    """These routes in the OpenAPI document (worker/serve/openapi.py)."""

    def body(model: str) -> dict[str, Any]:
        return {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{model}"}}},
        }

    common = {
        "401": error("Missing or wrong token"),
        "429": error("Rate limited; see Retry-After"),
        "503": error("Database unavailable; see Retry-After"),
    }
    keeper = {**common, "403": error("The agents' token or a read-only community token; or another community")}
    return {
        CONFIRM_ROUTE: {
            "post": {
                "operationId": "confirmAnswer",
                "summary": "Confirm the passage that answers a question, or that the documents do not (keeper's token)",
                "requestBody": body("ConfirmRequest"),
                "responses": {
                    "201": ok("The confirmation", "Confirmation"),
                    "422": error("A field is invalid"),
                    **keeper,
                },
            },
            "get": {
                "operationId": "listConfirmations",
                "summary": "A community's confirmations with their state (keeper's token)",
                "responses": {"200": ok("The confirmations", "ConfirmationList"), **keeper},
            },
        },
        CONFIRM_ROUTE + "/{confirmation_id}": {
            "parameters": [{"name": "confirmation_id", "in": "path", "required": True, "schema": {"type": "integer"}}],
            "delete": {
                "operationId": "deleteConfirmation",
                "summary": "Remove a confirmation (keeper's token)",
                "responses": {
                    "200": ok("Deleted", "ConfirmationDeleted"),
                    "404": error("No such confirmation"),
                    **keeper,
                },
            },
        },
        FEEDBACK_ROUTE: {
            "post": {
                "operationId": "answerFeedback",
                "summary": "A vote from the chat on an answer, by its X-Request-ID (agents' token)",
                "requestBody": body("FeedbackRequest"),
                "responses": {
                    "201": ok("The vote", "Recorded"),
                    "404": error("No answer logged under request_id"),
                    "422": error("A field is invalid"),
                    **common,
                },
            }
        },
    }
