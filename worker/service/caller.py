"""Who is asking: what every door's gate (worker/serve/gate.py) turns a request into, and what the
knowledge-base service checks each read and write against.

A caller reaches every community, or only those of its token (``ARC_COMMUNITY_TOKENS``), and
reads only unless it may write. The service asks :meth:`Caller.reach` before it reads or changes
a community, so a door that forgot to check cannot hand out another community's documents.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import CommunityForbidden, CommunityRequired, WriteForbidden

READ_ONLY = "this community token reads only: ingesting and deleting need one marked write@ in ARC_COMMUNITY_TOKENS"


@dataclass(frozen=True)
class Caller:
    """``who``: what its requests count against (a token's hash, an address, ``local``);
    ``communities``: the communities it reaches (None: every one); ``write``: it may ingest and
    delete."""

    who: str
    communities: tuple[str, ...] | None = None
    write: bool = True

    def reach(self, requested: str | None) -> str | None:
        """The community this caller may use for ``requested``: what it named, if reached (else
        403, an unknown community alike, so none is told apart); unnamed, its one community (a
        caller of several must name one), or None for a caller of every community."""
        if self.communities is None:
            return requested
        if requested is None:
            if len(self.communities) == 1:
                return self.communities[0]
            raise CommunityRequired(f"community: required, this token serves {len(self.communities)} communities")
        if requested not in self.communities:
            raise CommunityForbidden("community: this token is not allowed that community")
        return requested

    def writes(self, requested: str | None) -> str | None:
        """As :meth:`reach`, for an ingest or a deletion: 403 for a caller that reads only."""
        self.may_write()
        return self.reach(requested)

    def may_write(self) -> None:
        """403 for a caller that reads only."""
        if not self.write:
            raise WriteForbidden(READ_ONLY)

    def may_delete_community(self) -> None:
        """403 unless this caller writes and reaches every community: removing a whole community
        is for the keeper of every community, not one community's token's."""
        self.may_write()
        if self.communities is not None:
            raise CommunityForbidden("community: only the keeper of every community may delete one")


# The one user of the command line and of MCP over stdio: the whole knowledge base is theirs.
LOCAL = Caller("local")
