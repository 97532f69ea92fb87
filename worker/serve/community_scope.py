"""Tokens limited to communities (``ARC_COMMUNITY_TOKENS``): which communities the request's
token may reach, set by the guard, and the check every route makes on the community it is about
to read or change (403, and nothing of that community, for another one)."""

from __future__ import annotations

from flask import g

from ..errors import CommunityForbidden, CommunityRequired

ALLOWED = "allowed_communities"  # on flask.g: None (every community) or a tuple of names


def scoped_token(presented: str | None, community_tokens: dict[str, tuple[str, ...]]) -> tuple[str, ...] | None:
    """The communities a presented community token grants, or None when it is not one."""
    from .security import token_matches

    if not presented:
        return None
    found = None
    for token, communities in community_tokens.items():  # every one compared: no timing by position
        if token_matches(token, presented):
            found = communities
    return found


def checked(requested: str | None) -> str | None:
    """The community the request may use: what it named, if its token reaches it; unnamed, the
    token's one community (a token for several must name one)."""
    allowed: tuple[str, ...] | None = g.get(ALLOWED)
    if allowed is None:
        return requested
    if requested is None:
        if len(allowed) == 1:
            return allowed[0]
        raise CommunityRequired(f"community: required, this token serves {len(allowed)} communities")
    if requested not in allowed:
        raise CommunityForbidden("community: this token is not allowed that community")
    return requested
