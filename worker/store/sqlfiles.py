"""The SQL files under ``sql/``: numbered migrations, and named queries the worker runs.

Migrations (``NNN_name.sql``) are plain files an admin can paste into Supabase unchanged; they are
written for 1536-dim embeddings and :func:`render` rewrites that one type for other models.
A migration is applied once, except files marked ``-- arc: repeatable`` (function definitions and
their rights, such as ``hybrid_search``): those are applied again whenever their text changes, so
an improved function reaches databases made by an earlier release.
``queries.sql`` holds the worker's own statements as ``-- name: ...`` blocks (aiosql style).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

DEFAULT_DIM = 1536
_DIM_TYPE = f"vector({DEFAULT_DIM})"
REPEATABLE_MARK = "-- arc: repeatable"


def sql_dir() -> Path:
    # Installed wheel: worker/sql (force-included). Source checkout: the repository's sql/.
    package = Path(__file__).resolve().parent.parent
    for candidate in (package / "sql", package.parent / "sql"):
        if (candidate / "queries.sql").is_file():
            return candidate
    raise FileNotFoundError("the sql/ folder is missing from this installation")


@dataclass(frozen=True)
class Migration:
    name: str
    text: str

    @property
    def repeatable(self) -> bool:
        return REPEATABLE_MARK in self.text

    def render(self, dim: int) -> str:
        return render(self.text, dim)

    def checksum(self, dim: int) -> str:
        return hashlib.sha256(self.render(dim).encode()).hexdigest()[:16]


def render(text: str, dim: int) -> str:
    return text.replace(_DIM_TYPE, f"vector({int(dim)})")


@cache
def migrations() -> tuple[Migration, ...]:
    files = sorted(p for p in sql_dir().glob("*.sql") if re.match(r"\d{3}_", p.name))
    return tuple(Migration(p.stem, p.read_text()) for p in files)


def all_migrations_sql(dim: int) -> str:
    """Every migration in order, as one script (what ``arc-retrieval db sql`` prints)."""
    parts = [f"-- ===== {m.name}.sql =====\n{m.render(dim).strip()}\n" for m in migrations()]
    return "\n".join(parts)


@cache
def _queries() -> dict[str, str]:
    text = (sql_dir() / "queries.sql").read_text()
    found: dict[str, str] = {}
    for block in re.split(r"^-- name: ", text, flags=re.M)[1:]:
        name, _, body = block.partition("\n")
        found[name.strip()] = body.strip()
    return found


def query(name: str) -> str:
    """The named statement from ``sql/queries.sql``."""
    try:
        return _queries()[name]
    except KeyError:
        raise KeyError(f"no query named {name!r} in sql/queries.sql") from None
