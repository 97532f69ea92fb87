"""Which communities (associations) the knowledge base holds (``sql/030_communities.sql``),
which one a request means when it names none, one removed whole, and the large ones' pages read
into the server's cache."""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass

import psycopg

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


def delete(db: Database, community: str) -> dict[str, int]:
    """Remove everything kept of ``community`` (``sql/functions/arc_delete_community.sql``) under
    the write lock every ingest and delete takes, with no statement timeout (a large community's
    postings take longer than a search's budget to delete): what was removed, by kind. Raises
    :class:`UnknownCommunity` when nothing is kept under that name."""
    with db.connect() as conn, conn.transaction():
        db.lock_writes(conn)
        conn.execute("set local statement_timeout = 0")
        try:
            rows = conn.execute("select kind, removed from arc_delete_community(%s)", (community,)).fetchall()
        except psycopg.errors.InvalidParameterValue:
            raise UnknownCommunity(f"community: nothing is kept under {community!r} in this knowledge base") from None
    return {kind: int(removed) for kind, removed in rows}


@dataclass(frozen=True)
class Warmed:
    """A community whose full-text pages were read into shared buffers, and their estimated count."""

    community: str
    chunks: int
    pages: int


def warm(db: Database) -> list[Warmed]:
    """Read the large communities' full-text pages into the server's shared buffers, largest
    first, within a quarter of them (``sql/functions/arc_warm_communities.sql``), with no statement
    timeout: a search's budget is shorter than reading a large community. Nothing, when another
    process is warming meanwhile."""
    with db.connect() as conn, conn.transaction():
        conn.execute("set local statement_timeout = 0")
        rows = conn.execute("select community, chunks, pages from arc_warm_communities()").fetchall()
    return [Warmed(str(c), int(n), int(p)) for c, n, p in rows]
