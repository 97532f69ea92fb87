"""The Supabase admin's path, exactly as the README tells it: `arc-retrieval db sql --dim N` is
pasted into Supabase's SQL editor, which runs the paste in one transaction as the project's
owner (not a superuser). Here the printed text goes unchanged through
`psql --single-transaction -v ON_ERROR_STOP=1` as a non-superuser owner on Supabase's combination
(PostgreSQL 15 + pgvector 0.8.0, Supabase's roles and default privileges), then the worker's own
commands ingest and answer against it, and the catalogs say what each role may do.

`tests/data/db_sql_d80a21c_1536.sql` is what `arc-retrieval db sql` printed at the previous
release (commit d80a21c), kept verbatim: pasting it and then this release's paste must give the
same schema as a fresh install. `tests/data/db_sql_f6af6a4_1536.sql` is what it printed before the
functions moved to sql/functions/ (numbered files 000 to 034, some of them function definitions
applied again when changed): upgrading from it must give a fresh install too."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from tests.helpers import PG15_BIN, database_url as _database_url
from tests.helpers import SETUP_ROLES, with_user
from worker.store.database import Database

ARC = str(Path(sys.executable).parent / "arc-retrieval")
PREVIOUS_RELEASE = Path(__file__).parent / "data" / "db_sql_d80a21c_1536.sql"
PREVIOUS_LAYOUT = Path(__file__).parent / "data" / "db_sql_f6af6a4_1536.sql"
MIGRATIONS_TABLE = """create table if not exists schema_migrations (
  name        text primary key,
  checksum    text not null,
  applied_at  timestamptz not null default now()
)"""


def supabase_project(server: str, prefix: str, *, vector: bool = True, expose_new: bool = True) -> tuple[str, str]:
    """A new database set up the way Supabase sets up a project; (superuser URL, owner URL).
    ``vector``: pgvector enabled beforehand (Database > Extensions), since only a superuser can
    create it here (Supabase lets its `postgres` role, which is none, create it). ``expose_new``:
    Supabase's default privileges, which a project can turn off in its Data API settings."""
    name = f"{prefix}_{os.urandom(5).hex()}"
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'create database "{name}"')
    url = _database_url(server, name)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(SETUP_ROLES)
        conn.execute("create schema if not exists extensions")
        if vector:
            conn.execute("create extension if not exists vector with schema extensions")
        conn.execute("grant usage on schema extensions to anon, authenticated, service_role, arc_owner")
        conn.execute(f'alter database "{name}" set search_path = "$user", public, extensions')
        conn.execute("grant usage, create on schema public to arc_owner")
        conn.execute("grant usage on schema public to anon, authenticated, service_role")
        for kind in ("tables", "functions", "sequences") if expose_new else ():
            conn.execute(f"alter default privileges for role arc_owner in schema public "
                         f"grant all on {kind} to anon, authenticated, service_role")
    return url, with_user(url, "arc_owner")


def cli_env(tmp: Path, database_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ARC_", "EMBEDDING_", "OPENAI_", "AZURE_", "LLM_", "SUPABASE_", "RERANKER"))}
    return {**env, "DATABASE_URL": database_url, "ARC_DATA_DIR": str(tmp), "ARC_LOG_LEVEL": "WARNING"}


def arc(tmp: Path, database_url: str, *args: str) -> str:
    done = subprocess.run([ARC, *args], env=cli_env(tmp, database_url), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def printed_sql(dim: int) -> str:
    done = subprocess.run([ARC, "db", "sql", "--dim", str(dim)], capture_output=True, text=True, timeout=120,
                          env={k: v for k, v in os.environ.items() if k != "DATABASE_URL"})
    assert done.returncode == 0, done.stderr
    return done.stdout


def paste(tmp: Path, url: str, text: str) -> subprocess.CompletedProcess:
    """What Supabase's SQL editor does with a paste: the whole text in one transaction."""
    script = tmp / f"paste-{hashlib.sha256(text.encode()).hexdigest()[:8]}.sql"
    script.write_text(text)
    return subprocess.run([str(PG15_BIN / "psql"), "--no-psqlrc", "--single-transaction", "-v", "ON_ERROR_STOP=1",
                           "-q", "-d", url, "-f", str(script)], capture_output=True, text=True, timeout=300)


def pasted(tmp: Path, url: str, text: str) -> None:
    done = paste(tmp, url, text)
    assert done.returncode == 0, done.stderr[-3000:]


# Everything the schema consists of, by name, for the objects the owner made: relations and their
# columns, constraints, indexes, triggers, functions (definition, settings, rights), views,
# policies, row level security, the rights on each, and which migrations are recorded.
SNAPSHOT = {
    "relations": """
        select c.relname, c.relkind, c.relrowsecurity, c.relforcerowsecurity,
               (select array_agg(format('%s:%s:%s', coalesce(g.rolname, 'PUBLIC'), a.privilege_type, a.is_grantable)
                                 order by 1) from aclexplode(c.relacl) a left join pg_roles g on g.oid = a.grantee)
        from pg_class c where c.relowner = 'arc_owner'::regrole and c.relnamespace = 'public'::regnamespace
          and c.relkind <> 'i' order by 1""",
    "columns": """
        select c.relname, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull, a.attidentity,
               a.attgenerated, pg_get_expr(d.adbin, d.adrelid), a.attacl::text
        from pg_attribute a join pg_class c on c.oid = a.attrelid
        left join pg_attrdef d on d.adrelid = a.attrelid and d.adnum = a.attnum
        where c.relowner = 'arc_owner'::regrole and c.relnamespace = 'public'::regnamespace
          and a.attnum > 0 and not a.attisdropped order by 1, 2""",
    "constraints": """
        select conrelid::regclass::text, conname, pg_get_constraintdef(oid) from pg_constraint
        where connamespace = 'public'::regnamespace order by 1, 2""",
    "indexes": "select indexname, indexdef from pg_indexes where schemaname = 'public' order by 1",
    "triggers": """
        select tgname, pg_get_triggerdef(t.oid) from pg_trigger t join pg_class c on c.oid = t.tgrelid
        where c.relowner = 'arc_owner'::regrole and not t.tgisinternal order by 1""",
    "functions": """
        select p.oid::regprocedure::text, md5(pg_get_functiondef(p.oid)), p.proconfig, p.prosecdef,
               (select array_agg(format('%s:%s', coalesce(g.rolname, 'PUBLIC'), a.privilege_type) order by 1)
                from aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
                left join pg_roles g on g.oid = a.grantee)
        from pg_proc p where p.proowner = 'arc_owner'::regrole order by 1""",
    "views": "select viewname, definition from pg_views where schemaname = 'public' order by 1",
    "policies": "select tablename, policyname, cmd, roles::text, qual, with_check from pg_policies order by 1, 2",
    "extensions": "select extname, extnamespace::regnamespace::text from pg_extension order by 1",
    "migrations": "select name, checksum from schema_migrations order by 1",
    "bm25_corpus": "select to_jsonb(c) - 'updated_at' from bm25_corpus c",
}


def snapshot(url: str) -> dict[str, list]:
    with psycopg.connect(url) as conn:
        return {name: conn.execute(sql).fetchall() for name, sql in SNAPSHOT.items()}


def changed(before: dict, after: dict) -> dict:
    return {k: (sorted(set(map(repr, before[k])) - set(map(repr, after[k]))),
                sorted(set(map(repr, after[k])) - set(map(repr, before[k]))))
            for k in before if before[k] != after[k]}


@pytest.fixture(scope="module")
def server(pg15_server) -> str:
    return pg15_server


@pytest.fixture(scope="module")
def fresh(server, tmp_path_factory) -> dict:
    """This release's paste on a fresh project, for 384 dims (the local model)."""
    tmp = tmp_path_factory.mktemp("paste")
    url, owner = supabase_project(server, "fresh")
    text = printed_sql(384)
    pasted(tmp, owner, text)
    return {"url": url, "owner": owner, "tmp": tmp, "text": text, "snapshot": snapshot(url)}


@pytest.mark.parametrize("dim", [384, 1536])
def test_the_paste_loads_as_the_owner_and_a_second_paste_changes_nothing(server, tmp_path, dim):
    url, owner = supabase_project(server, f"twice{dim}")
    text = printed_sql(dim)
    pasted(tmp_path, owner, text)
    first = snapshot(url)
    assert f"embedding vector({dim})" in {f"{c[1]} {c[2]}" for c in first["columns"]
                                                     if c[0] == "knowledge_chunks"}
    pasted(tmp_path, owner, text)
    assert changed(first, snapshot(url)) == {}
    # The paste recorded what it applied, as `db init` records it: nothing is left to apply.
    assert Database(owner).migrate(dim) == []
    assert changed(first, snapshot(url)) == {}


def test_the_paste_enables_pgvector_in_schema_extensions(server, tmp_path):
    # A new project, pgvector not enabled: the paste enables it where Supabase keeps extensions.
    url, _ = supabase_project(server, "novector", vector=False)
    pasted(tmp_path, url, printed_sql(384))
    with psycopg.connect(url) as conn:
        assert conn.execute("select extnamespace::regnamespace::text from pg_extension "
                            "where extname = 'vector'").fetchone() == ("extensions",)
        assert conn.execute("select count(*) from hybrid_search('fence')").fetchone() == (0,)


def test_service_role_searches_when_the_project_does_not_expose_new_objects(server, tmp_path):
    url, owner = supabase_project(server, "unexposed", expose_new=False)
    pasted(tmp_path, owner, printed_sql(384))
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("set role service_role")
        assert conn.execute("select count(*) from hybrid_search('fence')").fetchone() == (0,)
        assert conn.execute("select knowledge_base_version()").fetchone()[0] >= 0
        assert conn.execute("select count(*) from retrieval_source_mix").fetchone() == (0,)


def test_db_init_after_the_paste_reports_nothing_pending(fresh):
    out = arc(fresh["tmp"], fresh["owner"], "db", "init")
    assert out.splitlines()[0] == "migrations applied: none (up to date)"


def test_the_paste_is_what_db_init_builds(server, fresh):
    url, owner = supabase_project(server, "init")
    assert Database(owner).migrate(384)
    assert changed(fresh["snapshot"], snapshot(url)) == {}


def test_the_previous_release_paste_failed_in_one_transaction(server, tmp_path):
    # Why this release's paste is different: the previous one needed a table only `db init` made.
    url, owner = supabase_project(server, "prevfail")
    done = paste(tmp_path, owner, PREVIOUS_RELEASE.read_text().replace("vector(1536)", "vector(384)"))
    assert done.returncode != 0 and 'relation "schema_migrations" does not exist' in done.stderr
    with psycopg.connect(url) as conn:
        assert conn.execute("select to_regclass('knowledge_chunks')").fetchone()[0] is None


def test_previous_release_paste_then_this_one_is_a_fresh_install(server, fresh, tmp_path):
    # An admin who got the previous paste through made schema_migrations by hand (the only way it
    # loaded): everything was there, nothing was recorded.
    url, owner = supabase_project(server, "upgrade")
    pasted(tmp_path, owner, MIGRATIONS_TABLE + ";\n" + PREVIOUS_RELEASE.read_text().replace("vector(1536)", "vector(384)"))
    pasted(tmp_path, owner, fresh["text"])
    assert changed(fresh["snapshot"], snapshot(url)) == {}


def test_previous_release_db_init_then_this_paste_is_a_fresh_install(server, fresh, tmp_path):
    # A database the previous release's `db init` made: each of its files applied and recorded.
    url, owner = supabase_project(server, "upgrade_init")
    previous = PREVIOUS_RELEASE.read_text().replace("vector(1536)", "vector(384)")
    files = re.split(r"^-- ===== (\d{3}_\w+)\.sql =====\n", previous, flags=re.M)[1:]
    with psycopg.connect(owner) as conn:
        conn.execute(MIGRATIONS_TABLE)
        for name, text in zip(files[::2], files[1::2]):
            conn.execute(text)
            conn.execute("insert into schema_migrations (name, checksum) values (%s, %s)",
                         (name, hashlib.sha256(text.encode()).hexdigest()[:16]))
    pasted(tmp_path, owner, fresh["text"])
    after = snapshot(url)
    # A file applied once keeps the checksum its release recorded; only the names must agree.
    assert [m[0] for m in after.pop("migrations")] == [m[0] for m in fresh["snapshot"]["migrations"]]
    assert changed({k: v for k, v in fresh["snapshot"].items() if k != "migrations"}, after) == {}


def test_previous_layout_paste_then_this_one_is_a_fresh_install(server, fresh, tmp_path):
    # The paste that applied 000 to 034 and recorded them, as `db init` did then.
    url, owner = supabase_project(server, "layout_paste")
    pasted(tmp_path, owner, PREVIOUS_LAYOUT.read_text().replace("vector(1536)", "vector(384)"))
    pasted(tmp_path, owner, fresh["text"])
    after = snapshot(url)
    # A numbered file applied once keeps the checksum its release recorded; the names agree.
    assert [m[0] for m in after.pop("migrations")] == [m[0] for m in fresh["snapshot"]["migrations"]]
    assert changed({k: v for k, v in fresh["snapshot"].items() if k != "migrations"}, after) == {}


def test_previous_layout_then_db_init_is_a_fresh_install_that_answers(server, fresh, tmp_path):
    url, owner = supabase_project(server, "layout_init")
    pasted(tmp_path, owner, PREVIOUS_LAYOUT.read_text().replace("vector(1536)", "vector(384)"))
    applied = Database(owner).migrate(384)
    assert "functions/hybrid_search" in applied and "041_functions_in_their_own_files" in applied
    assert not any(name[:3].isdigit() and name < "035" for name in applied)
    after = snapshot(url)
    assert [m[0] for m in after.pop("migrations")] == [m[0] for m in fresh["snapshot"]["migrations"]]
    assert changed({k: v for k, v in fresh["snapshot"].items() if k != "migrations"}, after) == {}
    assert arc(tmp_path, owner, "ingest", "--sample").startswith("ingested 6 document(s)")
    answer = json.loads(arc(tmp_path, owner, "ask", "What is the maximum fence height in my backyard?"))
    assert answer["status"] == "success" and "fence" in answer["context"].lower()


def test_the_pasted_database_ingests_answers_and_keeps_the_roles_apart(fresh):
    tmp, owner, url = fresh["tmp"], fresh["owner"], fresh["url"]
    assert arc(tmp, owner, "ingest", "--sample").startswith("ingested 6 document(s)")
    answer = json.loads(arc(tmp, owner, "ask", "What is the maximum fence height in my backyard?"))
    assert answer["status"] == "success" and "fence" in answer["context"].lower()
    for role in ("anon", "authenticated"):
        for sql in ("select count(*) from knowledge_chunks", "select * from hybrid_search('fence height')",
                    "select * from query_log", "select * from retrieval_source_mix"):
            with psycopg.connect(url, autocommit=True) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(f"set role {role}")
                conn.execute(sql)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("set role service_role")
        found = conn.execute("select document_id from hybrid_search('maximum fence height')").fetchall()
        assert found and conn.execute("select count(*) from retrieval_source_mix").fetchone()[0] >= 0


@pytest.mark.parametrize("role", ["anon", "authenticated"])
def test_browser_roles_cannot_lock_the_monitoring_view(fresh, role):
    # LOCK on a view locks the tables beneath it: query_log, which every answer writes to.
    with psycopg.connect(fresh["url"]) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute(f"set local role {role}")
        conn.execute("lock table retrieval_source_mix in access exclusive mode")


def test_browser_roles_hold_no_right_on_any_object_of_the_knowledge_base(fresh):
    with psycopg.connect(fresh["url"]) as conn:
        held = conn.execute("""
            with objects as (
              select format('%s %s', c.relkind, c.relname) as object, c.relacl as acl
                from pg_class c where c.relowner = 'arc_owner'::regrole
              union all
              select format('column %s.%s', c.relname, a.attname), a.attacl
                from pg_attribute a join pg_class c on c.oid = a.attrelid
               where c.relowner = 'arc_owner'::regrole and a.attacl is not null
              union all
              select format('function %s', p.oid::regprocedure), coalesce(p.proacl, acldefault('f', p.proowner))
                from pg_proc p where p.proowner = 'arc_owner'::regrole
            )
            select o.object, coalesce(g.rolname, 'PUBLIC'), a.privilege_type
              from objects o, aclexplode(o.acl) a left join pg_roles g on g.oid = a.grantee
             where a.grantee = 0 or g.rolname in ('anon', 'authenticated')
             order by 1, 2, 3""").fetchall()
        kinds = {row[0] for row in conn.execute(
            "select relkind::text from pg_class where relowner = 'arc_owner'::regrole").fetchall()}
    assert kinds >= {"r", "v", "S", "i"}  # tables, the view, sequences: all of them looked at
    assert held == []
