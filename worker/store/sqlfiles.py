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


PASTE_HEADER = """\
-- arc-retrieval: the knowledge base's schema for {dim}-dim embeddings (`arc-retrieval db sql --dim {dim}`).
-- Paste all of it into Supabase's SQL Editor and run it; the editor runs it as one transaction.
-- Running it again changes nothing: each migration below is applied only if this database has
-- not recorded it in schema_migrations (the record `arc-retrieval db init` keeps, so the worker
-- finds nothing left to apply); a file marked repeatable is applied again when its text changed.
"""
# The paste wraps each file in a DO block that EXECUTEs it: plain SQL (the SQL editor has no
# psql \if) that can skip what is applied. The files' own dollar quotes must not close these.
_BLOCK_QUOTE, _TEXT_QUOTE = "$arc_migration$", "$arc_sql$"


def _paste_block(migration: Migration, dim: int) -> str:
    text = migration.render(dim).strip()
    if _BLOCK_QUOTE in text or _TEXT_QUOTE in text:
        raise ValueError(f"{migration.name}.sql uses a dollar quote the paste reserves")
    checksum = migration.checksum(dim)
    applied = f"name = '{migration.name}'" + (f" and checksum = '{checksum}'" if migration.repeatable else "")
    return (f"-- ===== {migration.name}.sql =====\n"
            f"do {_BLOCK_QUOTE}\nbegin\n"
            f"  if exists (select 1 from schema_migrations where {applied}) then\n    return;\n  end if;\n"
            f"  execute {_TEXT_QUOTE}\n{text}\n{_TEXT_QUOTE};\n"
            f"  insert into schema_migrations (name, checksum) values ('{migration.name}', '{checksum}')\n"
            f"    on conflict (name) do update set checksum = excluded.checksum, applied_at = now();\n"
            f"  raise notice 'arc-retrieval: applied {migration.name}';\n"
            f"end\n{_BLOCK_QUOTE};\n")


def all_migrations_sql(dim: int) -> str:
    """What ``arc-retrieval db sql`` prints: one self-contained script for Supabase's SQL editor.

    It makes the migrations table, takes the lock ``db init`` takes, and applies each pending
    migration and records it with the checksum ``db init`` would, so after a paste the worker
    applies nothing, and a second paste applies nothing either.
    """
    # Pasted into a database an older paste upgraded, a repeatable early file's SQL functions may
    # name columns a later file changed (030 keys bm25_corpus by community): the later file
    # defines them again, so their bodies are checked when called, as pg_dump does.
    parts = [PASTE_HEADER.format(dim=int(dim)), "set check_function_bodies = off;\n",
             query("create_migrations_table") + ";\n",
             query("lock_migrations") + ";\n"]
    parts += [_paste_block(m, dim) for m in migrations()]
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
