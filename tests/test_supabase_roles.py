"""Supabase's roles against the schema: a database set up the way Supabase sets up a project
(roles anon, authenticated, service_role with BYPASSRLS; pgvector in schema ``extensions``;
search_path "$user", public, extensions; default privileges granting everything on public to the
three roles), the SQL loaded by a non-superuser owner. anon and authenticated can do nothing;
service_role, which the worker's SUPABASE_KEY is, can search."""

from __future__ import annotations

import psycopg
import pytest

from worker.serve.app import create_app
from worker.store.database import Database
from worker.ingest.ingestor import Ingestor, ingest_sample_corpus
from worker.runtime import Runtime
from tests.helpers import make_settings, query_log_written
from tests.helpers import SETUP_ROLES, with_user

TABLES = ("knowledge_chunks", "bm25_corpus", "bm25_terms", "bm25_postings", "query_log", "knowledge_base_state",
          "schema_migrations")


def test_targets_are_what_supabase_runs(supabase_like):
    with psycopg.connect(supabase_like["url"]) as conn:
        version = conn.execute("show server_version_num").fetchone()[0]
        vector = conn.execute("select extversion, n.nspname from pg_extension e "
                              "join pg_namespace n on n.oid = e.extnamespace where extname = 'vector'").fetchone()
    assert vector[1] == "extensions"
    if supabase_like["target"] == "pg15":
        assert version.startswith("15") and vector[0] == "0.8.0"


def _supabase_project(database_factory, prefix: str) -> tuple[str, str]:
    """A new database set up as Supabase sets up a project: (superuser URL, owner URL)."""
    url = database_factory(prefix)
    name = url.split("/")[3].split("?")[0]
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(SETUP_ROLES)
        conn.execute("create schema if not exists extensions")
        conn.execute("create extension if not exists vector with schema extensions")
        conn.execute("grant usage on schema extensions to anon, authenticated, service_role, arc_owner")
        conn.execute(f'alter database "{name}" set search_path = "$user", public, extensions')
        conn.execute("grant usage, create on schema public to arc_owner")
        conn.execute("grant usage on schema public to anon, authenticated, service_role")
        for kind in ("tables", "functions", "sequences"):
            conn.execute(f"alter default privileges for role arc_owner in schema public "
                         f"grant all on {kind} to anon, authenticated, service_role")
    return url, with_user(url, "arc_owner")


@pytest.fixture(scope="module")
def supabase_like(database_factory, embedder, tmp_path_factory):
    url, owner_url = _supabase_project(database_factory, "supa")
    db = Database(owner_url)
    db.migrate(embedder.dim)
    ingest_sample_corpus(Ingestor(db, embedder))
    yield {"url": url, "owner_url": owner_url, "db": db, "tmp": tmp_path_factory.mktemp("supa"),
           "target": database_factory.target}
    db.close()


def as_role(url: str, role: str, sql: str):
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"set role {role}")
        return conn.execute(sql).fetchall()


def test_every_table_has_row_level_security(supabase_like):
    with psycopg.connect(supabase_like["url"]) as conn:
        rows = dict(conn.execute("select relname, relrowsecurity from pg_class where relname = any(%s)",
                                 (list(TABLES),)).fetchall())
    assert rows == {t: True for t in TABLES}


@pytest.mark.parametrize("role", ["anon", "authenticated"])
@pytest.mark.parametrize("sql", [
    "select count(*) from knowledge_chunks", "select * from query_log", "delete from knowledge_chunks",
    "truncate knowledge_chunks", "insert into bm25_terms values ('x', 1)", "update bm25_corpus set k1 = 5",
    "select * from hybrid_search('fence height')", "select * from chunk_neighbours(1, 1)",
    "select knowledge_base_version()", "select * from retrieval_source_mix", "select * from bm25_postings",
    "select bm25_postings_rebuild()",
])
def test_anon_and_authenticated_can_do_nothing(supabase_like, role, sql):
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        as_role(supabase_like["url"], role, sql)


def test_anon_and_authenticated_may_execute_none_of_our_functions(supabase_like):
    # Supabase's default privileges give every new function to anon: each one must be taken back.
    with psycopg.connect(supabase_like["url"]) as conn:
        granted = conn.execute(
            "select p.oid::regprocedure::text, r from pg_proc p, unnest(array['anon', 'authenticated']) r "
            "where p.proowner = 'arc_owner'::regrole and has_function_privilege(r, p.oid, 'execute')").fetchall()
        owned = conn.execute("select count(*) from pg_proc where proowner = 'arc_owner'::regrole").fetchone()[0]
    assert owned > 20 and granted == []


def test_service_role_searches(supabase_like):
    url = supabase_like["url"]
    assert as_role(url, "service_role", "select count(*) from knowledge_chunks")[0][0] > 0
    rows = as_role(url, "service_role", "select document_id from hybrid_search('maximum fence height')")
    assert rows and as_role(url, "service_role", "select knowledge_base_version()")[0][0] >= 1


def test_every_function_has_a_fixed_search_path(supabase_like):
    with psycopg.connect(supabase_like["url"]) as conn:
        rows = conn.execute("select p.proname, p.proconfig from pg_proc p "
                            "where p.pronamespace = 'public'::regnamespace and p.prokind = 'f' "
                            "and p.proowner = 'arc_owner'::regrole").fetchall()
    assert rows
    mutable = [name for name, config in rows if not any(c.startswith("search_path=") for c in config or [])]
    assert not mutable, mutable


def test_the_worker_answers_as_the_owner(supabase_like, embedder):
    settings = make_settings(supabase_like["tmp"], supabase_like["owner_url"])
    client = create_app(runtime=Runtime(settings, supabase_like["db"], embedder)).test_client()
    answer = client.post("/webhook/arc-retrieval", json={"query": "What is the maximum fence height?"}).get_json()
    assert answer["status"] == "success" and "fence" in answer["context"].lower()
    # the query log is written off the answer's path: its row is in once the writer has flushed
    assert query_log_written(client)
    with psycopg.connect(supabase_like["url"]) as conn:
        assert conn.execute("select count(*) from query_log").fetchone()[0] >= 1


def test_a_large_communitys_vector_table_is_shared_with_no_one(database_factory, embedder):
    """The vector table and index a community past the size gets at a load's commit are made by
    the loader at run time, where Supabase's default privileges would give them to anon: they
    come with row level security and with the service role's rights alone."""
    url, owner_url = _supabase_project(database_factory, "supavectors")
    name = url.split("/")[3].split("?")[0]
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'alter database "{name}" set arc.community_index_min_chunks = 1')
    db = Database(owner_url)
    db.migrate(embedder.dim)
    ingestor = Ingestor(db, embedder)
    ingest_sample_corpus(ingestor, community="cedar-hollow")
    ingest_sample_corpus(ingestor, community="cedar-ridge")
    db.close()
    with psycopg.connect(url) as conn:
        rows = conn.execute("select relname, relrowsecurity from pg_class "
                            "where relname like 'arc\\_vectors\\_%' order by 1").fetchall()
    assert rows == [("arc_vectors_cedar-hollow", True), ("arc_vectors_cedar-ridge", True)]
    for role in ("anon", "authenticated"):
        for sql in ('select count(*) from "arc_vectors_cedar-hollow"', 'delete from "arc_vectors_cedar-ridge"',
                    'truncate "arc_vectors_cedar-hollow"'):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                as_role(url, role, sql)
    assert as_role(url, "service_role", 'select count(*) from "arc_vectors_cedar-hollow"')[0][0] > 0
