"""The communities over HTTP, for the keeper (ingest token): ``GET /webhook/arc-communities``
lists those the token reaches, ``DELETE /webhook/arc-communities/<community>`` deletes one whole
(the keeper of every community only)."""

from __future__ import annotations

import re
from typing import Any

from flask import Blueprint, g, jsonify

from ..models import COMMUNITY_PATTERN, CommunityDeleted, CommunityList, CommunitySummary
from .gate import Access, door
from .guards import caller
from .responses import error as _error
from .services import services

COMMUNITIES_ROUTE = "/webhook/arc-communities"

communities = Blueprint("communities", __name__, url_prefix=COMMUNITIES_ROUTE)

READ = Access("admin", scoped=True)
# a community token passes the gate and gets the service's 403 saying why (a whole community is
# for the keeper of every community to delete), as the agents' token does here
DELETE = Access("admin", scoped=True, write=True, agents_forbidden=True)


@communities.get("")
@door(READ)
def list_communities() -> Any:
    known = services().knowledge.reached_communities(caller=caller())
    found = [CommunitySummary(community=name, chunks=chunks) for name, chunks in sorted(known.items())]
    return jsonify(CommunityList(communities=found, request_id=g.request_id).model_dump(mode="json"))


@communities.delete("/<community>")
@door(DELETE)
def delete_community(community: str) -> Any:
    if not re.match(COMMUNITY_PATTERN, community):
        return _error(
            422, "invalid_input", "community: lowercase letters, digits, - and _ only (at most 63)", "community"
        )
    removed = services().knowledge.delete_community(community, caller=caller())  # unknown: 404 naming it
    return jsonify(
        CommunityDeleted(status="deleted", community=community, removed=removed, request_id=g.request_id).model_dump(
            mode="json"
        )
    )
