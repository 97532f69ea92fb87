"""Which communities (associations) the knowledge base holds (``sql/030_communities.sql``), and
which one a request means when it names none."""

from __future__ import annotations

import re
from collections.abc import Collection

from ..errors import CommunityRequired, UnknownCommunity
from ..models import COMMUNITY_PATTERN, DEFAULT_COMMUNITY
from . import sqlfiles
from .database import Database


def list_communities(db: Database) -> dict[str, int]:
    """Each community holding chunks, with its chunk count."""
    with db.connect() as conn:
        return dict(conn.execute(sqlfiles.query("communities")).fetchall())


def resolve(requested: str | None, known: Collection[str]) -> str:
    """The community a read is for: the one named, which must hold documents; or, unnamed, the
    knowledge base's only one. With several, naming none is an error, never a mixed answer."""
    if requested is not None:
        if requested not in known:
            raise UnknownCommunity(f"community: no community {requested!r} in this knowledge base")
        return requested
    if len(known) > 1:
        raise CommunityRequired(
            f"community: required, this knowledge base holds {len(known)} communities ({', '.join(sorted(known)[:10])})"
        )
    return next(iter(known), DEFAULT_COMMUNITY)


def resolve_for_write(requested: str | None, known: Collection[str]) -> str:
    """The community a load goes to: the one named (new or not); unnamed, the only one there is
    (or ``default`` in an empty knowledge base)."""
    if requested is not None:
        if not re.fullmatch(COMMUNITY_PATTERN, requested):
            raise UnknownCommunity(
                f"community: lowercase letters, digits, - and _ only (at most 63), got {requested[:80]!r}"
            )
        return requested
    return resolve(None, known)
