"""Tokens limited to communities (``ARC_COMMUNITY_TOKENS``): which communities the request's
token may reach, set by the guard, and the check every route makes on the community it is about
to read or change (403, and nothing of that community, for another one)."""

from __future__ import annotations

from flask import g

from ..errors import CommunityForbidden, CommunityRequired

ALLOWED = "allowed_communities"  # on flask.g: None (every community) or a tuple of names


def checked(requested: str | None) -> str | None:
    """The community the request may use, by the communities its token reaches (set by the guard)."""
    return within(g.get(ALLOWED), requested)


def within(allowed: tuple[str, ...] | None, requested: str | None) -> str | None:
    """The community a caller whose token reaches ``allowed`` (None: every one) may use: what it
    named, if reached (else 403, an unknown community alike, so none is told apart); unnamed, the
    token's one community (a token for several must name one)."""
    if allowed is None:
        return requested
    if requested is None:
        if len(allowed) == 1:
            return allowed[0]
        raise CommunityRequired(f"community: required, this token serves {len(allowed)} communities")
    if requested not in allowed:
        raise CommunityForbidden("community: this token is not allowed that community")
    return requested
