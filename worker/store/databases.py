"""The databases a knowledge base is split over, and which one holds a community.

A portfolio too large for one Postgres keeps some communities in other databases
(``ARC_COMMUNITY_DATABASES``: community -> connection string); every other community lives in the
default database (``DATABASE_URL``, or the embedded Postgres). Each community's questions,
documents, ingests, confirmations and query-log rows go to its own database alone, so nothing
held by one database can reach an answer about another's community. There is one
:class:`Database` per distinct connection string, and its pool opens on first use: a worker
that is asked only about some communities connects only to their databases.

A community found in a database the mapping does not send it to (held by two databases, or
left behind when the mapping changed) is refused with :class:`CommunityConflict`, never answered
from one of them at random.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from psycopg.conninfo import conninfo_to_dict

from ..errors import CommunityConflict
from . import communities
from .database import Database


class Databases:
    """The default database and the communities ``ARC_COMMUNITY_DATABASES`` sends elsewhere."""

    def __init__(self, default: Database, routes: Mapping[str, Database] | None = None):
        self.default = default
        self._routes = dict(routes or {})

    @classmethod
    def mapped(cls, default: Database, urls: Mapping[str, str], make: Callable[[str], Database]) -> Databases:
        """``urls`` (community -> connection string) with one :class:`Database` per distinct
        string, made by ``make``; a string equal to the default's is the default database."""
        by_url = {default.url: default}
        routes = {}
        for community, url in urls.items():
            if url not in by_url:
                by_url[url] = make(url)
            routes[community] = by_url[url]
        return cls(default, routes)

    def of(self, community: str) -> Database:
        """The database that holds ``community``."""
        return self._routes.get(community, self.default)

    def all(self) -> list[Database]:
        """Every database: the default first, then the others in the mapping's order."""
        found = [self.default]
        for db in self._routes.values():
            if all(db is not other for other in found):
                found.append(db)
        return found

    @property
    def split(self) -> bool:
        """More than one database holds the knowledge base."""
        return len(self.all()) > 1

    def name(self, db: Database) -> str:
        """How messages name a database: ``host:port/db``, never its password."""
        parts = conninfo_to_dict(db.url)
        where = f"{parts.get('host') or 'localhost'}:{parts.get('port') or 5432}/{parts.get('dbname') or ''}"
        return f"the default database ({where})" if db is self.default else f"the database at {where}"

    def communities(self, checked: str | None = None) -> dict[str, int]:
        """Each community holding chunks in any database, with its chunk count (in the database
        that holds it). A community found where the mapping does not send it raises
        :class:`CommunityConflict`: any such community, or only ``checked`` when one is named
        (a call about one community is refused for its own conflict, not another's)."""
        if not self.split:
            return communities.list_communities(self.default)
        held: dict[str, int] = {}
        found_in: dict[str, list[Database]] = {}
        for db in self.all():
            for community, chunks in communities.list_communities(db).items():
                found_in.setdefault(community, []).append(db)
                if db is self.of(community):
                    held[community] = chunks
        for community, places in found_in.items():
            if places != [self.of(community)] and checked in (None, community):
                raise CommunityConflict(self._conflict(community, places))
        return held

    def _conflict(self, community: str, places: list[Database]) -> str:
        home = self.of(community)
        where = " and ".join(self.name(db) for db in places)
        return (
            f"community: {community!r} is held by {where}, but ARC_COMMUNITY_DATABASES sends it to "
            f"{self.name(home)}; a community lives in one database: delete it from the other one "
            f"(or change the mapping) before it is answered"
        )

    def close(self, timeout: float = 5.0) -> None:
        for db in self.all():
            db.close(timeout)
