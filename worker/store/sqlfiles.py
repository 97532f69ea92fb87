"""The SQL files under ``sql/``, in the order they are applied, and the named queries the worker runs.

Three kinds of file, applied in this order by ``arc-retrieval db init`` (:meth:`Database.migrate`)
and by the Supabase paste (:func:`all_migrations_sql`, the same files as one script):

1. ``sql/extensions.sql``: the extensions (pgvector), whose types the functions and tables use.
2. ``sql/functions/<name>.sql``: each function's current definition, one file per function name
   (its overloads together), ``arc_service_role_only`` first (every other file calls it), then by
   name. Applied with ``check_function_bodies = off``, as pg_dump restores, so a body may name a
   table, column or function that a later file makes: a body is checked when it is called.
3. ``sql/NNN_name.sql``: the numbered migrations: tables, columns, indexes, constraints, views,
   triggers, rights on them and data changes; never a function. A migration may create a
   trigger on, or call, any function (they are all defined by then, in their current form).

1 and 2 are applied again whenever their text changes (the checksum recorded in
``schema_migrations`` differs); a numbered file is applied once. So a database made by any earlier
release reaches what a fresh install gets. Files are plain SQL an admin could paste; they are written
for 1536-dim embeddings and :func:`render` rewrites that one type for other models.

To change a function: edit ``sql/functions/<name>.sql`` (it ends with its rights:
``select arc_service_role_only('function', 'name(argument types)')``). If its arguments change,
keep a ``drop function if exists name(old argument types);`` at the top of the file (Postgres
keeps the old signature as another function otherwise); if only its result columns change, drop the
current signature there too (CREATE OR REPLACE cannot change a result type). A new function is a new
file. A function no file defines any more (or a trigger function that no trigger runs) is dropped by
a numbered migration, after whatever used it is gone. To change a table: add the next
``sql/NNN_name.sql``; it must be safe to run again over the schema it leaves (``if not exists``, guards).
``sql/functions/README.md`` says the same for someone folding a migration into this layout.

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
FUNCTIONS = "functions"
# Called by every other function file (its rights), so defined before them.
FIRST_FUNCTIONS = ("arc_service_role_only",)


def sql_dir() -> Path:
    # Installed wheel: worker/sql (force-included). Source checkout: the repository's sql/.
    package = Path(__file__).resolve().parent.parent
    for candidate in (package / "sql", package.parent / "sql"):
        if (candidate / "queries.sql").is_file():
            return candidate
    raise FileNotFoundError("the sql/ folder is missing from this installation")


@dataclass(frozen=True)
class Migration:
    """One file of ``sql/``: ``extensions``, ``functions/<name>`` or ``NNN_name`` (its record in
    ``schema_migrations``). ``repeatable``: applied again whenever its text changes."""

    name: str
    text: str
    repeatable: bool = False

    def render(self, dim: int) -> str:
        return render(self.text, dim)

    def checksum(self, dim: int) -> str:
        return hashlib.sha256(self.render(dim).encode()).hexdigest()[:16]


def render(text: str, dim: int) -> str:
    return text.replace(_DIM_TYPE, f"vector({int(dim)})")


def _function_order(path: Path) -> tuple[bool, str]:
    return (path.stem not in FIRST_FUNCTIONS, path.stem)


@cache
def migrations() -> tuple[Migration, ...]:
    """Every file of ``sql/`` that makes the schema, in the order it is applied (module docstring)."""
    root = sql_dir()
    functions = sorted((root / FUNCTIONS).glob("*.sql"), key=_function_order)
    numbered = sorted(p for p in root.glob("*.sql") if re.match(r"\d{3}_", p.name))
    return (
        Migration("extensions", (root / "extensions.sql").read_text(), repeatable=True),
        *(Migration(f"{FUNCTIONS}/{p.stem}", p.read_text(), repeatable=True) for p in functions),
        *(Migration(p.stem, p.read_text()) for p in numbered),
    )


PASTE_HEADER = """\
-- arc-retrieval: the knowledge base's schema for {dim}-dim embeddings (`arc-retrieval db sql --dim {dim}`).
-- Paste all of it into Supabase's SQL Editor and run it; the editor runs it as one transaction.
-- Running it again changes nothing: each file below is applied only if this database has not
-- recorded it in schema_migrations (the record `arc-retrieval db init` keeps, so the worker finds
-- nothing left to apply); the extensions and each function's file are applied again when their
-- text changed. Order: the extensions, the functions (sql/functions/), the tables (sql/NNN_*.sql).
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
    return (
        f"-- ===== {migration.name}.sql =====\n"
        f"do {_BLOCK_QUOTE}\nbegin\n"
        f"  if exists (select 1 from schema_migrations where {applied}) then\n    return;\n  end if;\n"
        f"  execute {_TEXT_QUOTE}\n{text}\n{_TEXT_QUOTE};\n"
        f"  insert into schema_migrations (name, checksum) values ('{migration.name}', '{checksum}')\n"
        f"    on conflict (name) do update set checksum = excluded.checksum, applied_at = now();\n"
        f"  raise notice 'arc-retrieval: applied {migration.name}';\n"
        f"end\n{_BLOCK_QUOTE};\n"
    )


def all_migrations_sql(dim: int) -> str:
    """What ``arc-retrieval db sql`` prints: one self-contained script for Supabase's SQL editor.

    It makes the migrations table, takes the lock ``db init`` takes, and applies each pending
    migration and records it with the checksum ``db init`` would, so after a paste the worker
    applies nothing, and a second paste applies nothing either.
    """
    parts = [
        PASTE_HEADER.format(dim=int(dim)),
        query("function_bodies_unchecked") + ";\n",
        query("create_migrations_table") + ";\n",
        query("lock_migrations") + ";\n",
    ]
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
