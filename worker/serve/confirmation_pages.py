"""The keeper's confirmations on the pages: confirm from an answer on Retrieval testing ("this
passage answers it", "not in the documents"), and the list of a community's confirmations with
their state, a stale one beside today's best passage, each removable. The routes join the pages'
blueprint (its sign-in and form checks) through :func:`add_routes`."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from flask import Blueprint, redirect, render_template, request, url_for
from werkzeug.exceptions import BadRequest

from ..errors import ArcError
from ..service.confirmations import ConfirmRequest
from .confirmations import confirmation_service
from .guards import caller
from .services import services

# What the notice box may say after a confirmation's change: a key and an id, never free text.
NOTICES = {"confirmed": "Confirmed #{id}", "removed": "Removed #{id}"}

# ``chosen``: the pages' own reading of ?community= (kept in flask.g for their links), given by add_routes.
Chosen = Callable[[], str]


def _notice() -> str | None:
    """The notice a ``?notice=KEY&id=N`` asks for; None for anything else."""
    template, number = NOTICES.get(request.args.get("notice", "")), request.args.get("id", "")
    return template.format(id=number) if template is not None and number.isdigit() else None


def confirmations_page(chosen: Chosen) -> str:
    community = chosen()
    service = confirmation_service()
    found = service.list(community, caller())
    cut = service.success_cut(found, community, caller())
    return render_template(
        "pages/confirmations.html", confirmations=found, cut=cut, community=community, message=_notice()
    )


def confirm(chosen: Chosen) -> Any:
    community = chosen()
    chunk = request.form.get("chunk_id") or None
    try:
        made = confirmation_service().confirm(
            ConfirmRequest(
                community=community,
                query=request.form.get("query", ""),
                chunk_id=int(chunk) if chunk else None,
                answer=None if chunk else "none",
            ),
            caller(),
        )
    except (ValueError, ArcError) as exc:
        raise BadRequest(f"not confirmed: {str(exc).splitlines()[0]}") from None
    services().metrics.confirmations.labels(made.answer).inc()
    return redirect(url_for("pages.confirmations", community=community, notice="confirmed", id=made.id))


def delete(confirmation_id: int) -> Any:
    community = confirmation_service().delete(confirmation_id, caller())
    return redirect(url_for("pages.confirmations", community=community, notice="removed", id=confirmation_id))


def add_routes(pages: Blueprint, chosen: Chosen) -> None:
    pages.add_url_rule("/confirmations", "confirmations", partial(confirmations_page, chosen), methods=["GET"])
    pages.add_url_rule("/confirmations", "confirm", partial(confirm, chosen), methods=["POST"])
    pages.add_url_rule("/confirmations/<int:confirmation_id>/delete", "delete_confirmation", delete, methods=["POST"])
