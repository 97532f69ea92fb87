"""Schema, migrations, ingestion and the hybrid SQL function, against a real embedded Postgres."""

from __future__ import annotations

import re

import numpy as np
import psycopg
import pytest

from worker.store import sqlfiles
from worker.ingest.chunking import chunk_blocks
from worker.config import ConfigError, Settings
from worker.document_types import DOCUMENT_TYPES
from worker.store.database import Database
from worker.errors import SchemaMismatch
from worker.ingest.ingestor import Ingestor, ingest_sample_corpus
from worker.ingest.readers import parse_markdown, parse_text
from worker.store.postgres_search import PostgresBackend
from worker.store.search import SearchParams


@pytest.fixture(scope="module")
def kb(make_database, embedder):
    url = make_database("kb")
    db = Database(url)
    db.migrate(embedder.dim)
    report = ingest_sample_corpus(Ingestor(db, embedder))
    yield db, report
    db.close()


def rows(db: Database, sql: str, params=None):
    with db.connect() as conn:
        return conn.execute(sql, params).fetchall()


def test_migrations_apply_twice_and_files_are_idempotent(make_database):
    db = Database(make_database("mig"))
    first = db.migrate(384)
    assert first == [m.name for m in sqlfiles.migrations()]
    assert db.migrate(384) == []
    # An admin pasting the printed SQL again (Supabase SQL editor) must not fail either.
    with db.connect() as conn:
        conn.execute(sqlfiles.all_migrations_sql(384))
        conn.execute(sqlfiles.all_migrations_sql(384))
        conn.commit()
    assert db.embedding_dim() == 384


def test_changed_function_files_reach_an_existing_database(make_database):
    db = Database(make_database("mig-repeat"))
    db.migrate(384)
    # A database made by an earlier release: older function text, older checksums everywhere.
    with db.connect() as conn:
        earlier = next(m for m in sqlfiles.migrations() if m.name == "functions/chunk_neighbours")
        conn.execute(earlier.render(384).replace("where c.id = chunk_id", "where c.id = chunk_id and false"))
        conn.execute("update schema_migrations set checksum = 'earlier'")
        conn.commit()
    reapplied = db.migrate(384)
    # the extensions and every function file again; a numbered file never
    assert reapplied == [m.name for m in sqlfiles.migrations() if m.repeatable]
    assert "functions/hybrid_search" in reapplied and not any(name[0].isdigit() for name in reapplied)
    with db.connect() as conn:
        source = conn.execute("select prosrc from pg_proc where proname = 'chunk_neighbours'").fetchone()[0]
    assert "and false" not in source
    assert db.migrate(384) == []


def test_the_functions_are_applied_before_the_tables_and_each_has_one_file():
    names = [m.name for m in sqlfiles.migrations()]
    numbered = [n for n in names if n[:3].isdigit()]
    functions = [n for n in names if n.startswith("functions/")]
    assert names == ["extensions", *functions, *numbered]
    assert functions[0] == "functions/arc_service_role_only" and functions[1:] == sorted(functions[1:])
    assert numbered == sorted(numbered)
    for m in sqlfiles.migrations():
        defined = set(re.findall(r"^create (?:or replace )?function (\w+)\(", m.text, flags=re.M | re.I))
        if m.name.startswith("functions/"):
            # one function name per file, named after it, with its rights
            assert defined == {m.name.removeprefix("functions/")}, m.name
            assert re.search(r"^select arc_service_role_only\('function',\s", m.text, flags=re.M), m.name
        else:
            # a function defined in a numbered file would be applied once, and then shadowed
            assert not defined, f"{m.name}.sql defines {defined}: move it to sql/functions/"


def test_every_function_body_holds_against_the_finished_schema(make_database):
    # The files are applied with check_function_bodies off (functions before tables): here each
    # is checked, in a transaction rolled back, against the schema all the files make.
    db = Database(make_database("mig-bodies"))
    db.migrate(384)
    with db.connect() as conn:
        conn.execute("set check_function_bodies = on")
        for m in sqlfiles.migrations():
            if m.name.startswith("functions/"):
                with conn.transaction(force_rollback=True):
                    conn.execute(m.render(384))


def test_the_unread_fts_index_is_gone_fresh_and_after_an_upgrade(make_database):
    # Nothing reads `fts @@` since the full-text leg reads the postings (012); the GIN index only
    # slowed every insert and held memory (338 MB at 1M chunks).
    db = Database(make_database("mig-gin"))
    db.migrate(384)
    gin = "select count(*) from pg_indexes where indexname = 'knowledge_chunks_fts_gin'"
    assert rows(db, gin) == [(0,)]
    with db.connect() as conn:  # a database made before 013
        conn.execute("create index knowledge_chunks_fts_gin on knowledge_chunks using gin (fts)")
        conn.execute("delete from schema_migrations where name = '013_drop_fts_gin'")
        conn.commit()
    assert db.migrate(384) == ["013_drop_fts_gin"]
    assert rows(db, gin) == [(0,)]


def test_the_table_accepts_exactly_the_document_types_the_worker_knows(kb):
    db, _ = kb
    (check,) = rows(db, "select pg_get_constraintdef(oid) from pg_constraint"
                        " where conrelid = 'knowledge_chunks'::regclass and contype = 'c'"
                        " and pg_get_constraintdef(oid) like '%document_type%'")
    assert set(re.findall(r"'([a-z_]+)'", check[0])) == set(DOCUMENT_TYPES)


def test_db_sql_renders_the_dimension():
    assert "vector(1536)" in sqlfiles.all_migrations_sql(1536)
    text = sqlfiles.all_migrations_sql(384)
    assert "vector(384)" in text and "vector(1536)" not in text


def test_sample_ingest_keeps_hierarchy_pages_and_order(kb):
    db, report = kb
    assert report.documents == 6
    chunks = rows(db, "select chunk_index, section_path, page_number, content, is_binding, superseded_by "
                      "from knowledge_chunks where document_id = 'design-guidelines-2024' order by chunk_index")
    assert [c[0] for c in chunks] == list(range(len(chunks)))
    fencing = [c for c in chunks if c[1] == "Chapter 4 Structures > 4.2 Fencing"]
    assert fencing and fencing[0][2] == 4
    assert "Maximum fence height" in fencing[0][3]
    assert all(c[4] for c in chunks) and all(c[5] is None for c in chunks)
    # Reading order: setbacks (page 3) come before fencing (page 4) before paint (page 6).
    sections = [c[1] for c in chunks]
    assert sections.index("Chapter 3 Site Planning > 3.1 Setbacks") < sections.index(
        "Chapter 4 Structures > 4.2 Fencing") < sections.index(
        "Chapter 5 Exterior Colours and Materials > 5.1 Paint Colours")
    old = rows(db, "select distinct superseded_by from knowledge_chunks where document_id = 'design-guidelines-2019'")
    assert old == [("design-guidelines-2024",)]
    letters = rows(db, "select bool_or(is_binding) from knowledge_chunks where document_type = 'response_letter'")
    assert letters == [(False,)]


def test_reingest_replaces_without_duplicates(kb, embedder):
    db, _ = kb
    before = rows(db, "select count(*), count(distinct (document_id, chunk_index)) from knowledge_chunks")[0]
    ingest_sample_corpus(Ingestor(db, embedder))
    after = rows(db, "select count(*), count(distinct (document_id, chunk_index)) from knowledge_chunks")[0]
    assert before == after and after[0] == after[1]
    # supersession survives the superseded document being re-ingested
    assert rows(db, "select count(*) from knowledge_chunks where superseded_by = 'design-guidelines-2024'")[0][0] > 0


def test_long_sections_split_at_items_and_keep_their_heading():
    text = "# Guide\n\n## 4.2 Fencing\n\n" + "\n\n".join(
        f"({letter}) " + "Fences of this kind follow this rule in every yard and lot. " * 6
        for letter in "ABCDEF") + "\n\n(F) Raceway-supported enclosures are treated as fences."
    parsed = parse_markdown(text)
    chunks = chunk_blocks(parsed.blocks, lambda s: len(s.split()), max_tokens=120)
    assert len(chunks) > 2
    assert all(c.section_path == "4.2 Fencing" for c in chunks)
    assert all(len(c.embedding_text().split()) <= 120 for c in chunks)
    assert all(c.content.startswith("(") for c in chunks)  # split between items, not inside
    assert any("Raceway-supported" in c.content for c in chunks)


def test_text_reader_finds_numbered_headings_and_pages():
    parsed = parse_text("ARTICLE VII USE RESTRICTIONS\n7.1 Fences\nNo fence shall exceed 6 feet.\f"
                        "7.2 Sheds\nOne shed per lot.")
    assert [(b.section, b.page) for b in parsed.blocks] == [
        (("ARTICLE VII USE RESTRICTIONS", "7.1 Fences"), 1),
        (("ARTICLE VII USE RESTRICTIONS", "7.2 Sheds"), 2)]


def test_natural_question_gets_full_text_hits(kb):
    db, _ = kb
    backend = PostgresBackend(db)
    results = backend.search(SearchParams(query_text="What is the maximum fence height allowed?", embedding=None))
    assert results, "an OR-semantics full-text leg must match a natural question"
    assert all(r.fts_rank is not None and r.vector_rank is None for r in results)
    assert "fence" in results[0].content.lower()


def test_full_text_leg_reads_at_most_its_scan_limit_whatever_the_filter(kb):
    """Filters narrow the rows the full-text leg read; they never make it read further."""
    db, _ = kb
    sql = ("select id, document_type from hybrid_search(%s, null, 1000, 0.4, 0.6, 'weighted', 60, %s::text[],"
           " include_superseded => true, fts_scan_limit => %s)")
    question = "What does the committee require for fences, roofs, paint colours and landscaping?"
    everything = rows(db, sql, (question, None, 100000))
    first = rows(db, sql, (question, None, 8))
    # its rarest words select only as many chunks as it may read (test_bm25: which ones)
    assert 0 < len(first) <= 8 < len(everything)
    narrower = False
    for doc_type in {t for _, t in everything}:
        filtered = rows(db, sql, (question, [doc_type], 8))
        assert {i for i, _ in filtered} == {i for i, t in first if t == doc_type}
        narrower |= sum(t == doc_type for _, t in everything) > len(filtered)
    assert narrower, "the question must match more rows of some type than the first 8 hold"


def test_filtered_vector_leg_still_fills_its_candidates(make_database):
    """1 in 50 rows passes the filter; plain HNSW (ef_search 40) would return about one."""
    # No statement timeout for the load: 3,000 HNSW inserts in one COPY took 3.6 s of a 5 s
    # budget on a busy 2-core machine, and the load is not what this test is about.
    db = Database(make_database("filt"), statement_timeout_ms=0)
    db.migrate(8)
    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(3000, 8)).astype(np.float32)
    with db.connect() as conn:
        with conn.cursor().copy("copy knowledge_chunks (document_id, document_name, document_type, chunk_index,"
                                " content, token_count, embedding) from stdin") as copy:
            for i, v in enumerate(vectors):
                copy.write_row((f"d{i}", f"doc {i}", "ccr" if i % 50 == 0 else "other", 0,
                                f"chunk {i} text", 3, v))
        conn.commit()
    backend = PostgresBackend(db)
    results = backend.search(SearchParams(query_text="", embedding=rng.normal(size=8).astype(np.float32),
                                          match_count=40, document_types=("ccr",)))
    assert len(results) == 40
    assert all(r.document_type == "ccr" and r.vector_rank is not None for r in results)
    db.close()


def test_dimension_mismatch_is_a_clear_startup_error(kb):
    db, _ = kb
    with pytest.raises(SchemaMismatch, match=r"1536-dim vectors but knowledge_chunks.embedding is vector\(384\)"):
        db.check_dimension("text-embedding-3-large", 1536)


def test_invalid_configuration_fails_with_one_line():
    with pytest.raises(ConfigError) as err:
        Settings.from_env({"EMBEDDING_PROVIDER": "local", "EMBEDDING_DIM": "1536"})
    assert "\n" not in str(err.value) and "384" in str(err.value)
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        Settings.from_env({"EMBEDDING_PROVIDER": "openai"})
    with pytest.raises(ConfigError, match="SUPABASE_KEY"):
        Settings.from_env({"SUPABASE_URL": "https://x.supabase.co"})
    settings = Settings.from_env({"OPENAI_API_KEY": "sk-test"})
    embedding = settings.embedding
    assert (embedding.embedding_provider, embedding.embedding_model, embedding.embedding_dim) == (
        "openai", "text-embedding-3-large", 1536)


def test_neighbours_function(kb):
    db, _ = kb
    with db.connect() as conn:
        chunk_id = conn.execute("select id from knowledge_chunks where document_id = 'ccrs' and chunk_index = 3"
                                ).fetchone()[0]
    found = PostgresBackend(db).neighbours(chunk_id, 1)
    assert [(c.document_id, c.chunk_index) for c in found] == [("ccrs", 2), ("ccrs", 3), ("ccrs", 4)]


def test_monitoring_view_reads_the_query_log(kb):
    db, _ = kb
    with db.connect() as conn:
        conn.execute("insert into query_log (query, status, candidate_count, both_legs_count, vector_only_count,"
                     " fts_only_count, timings_ms) values ('q', 'success', 10, 5, 3, 2, '{\"total\": 12}')")
        conn.commit()
        row = conn.execute("select both_legs_share, vector_only_share, fts_only_share, avg_total_ms "
                           "from retrieval_source_mix").fetchone()
    assert [float(x) for x in row] == [0.5, 0.3, 0.2, 12.0]


def test_statement_timeout_cancels_a_slow_query(kb):
    db, _ = kb
    slow = Database(db.url, statement_timeout_ms=200)
    with pytest.raises(psycopg.errors.QueryCanceled):
        with slow.connect() as conn:
            conn.execute("select pg_sleep(2)")


@pytest.mark.parametrize("argument, value", [("match_count", 0), ("fts_scan_limit", 0), ("fts_rescore", 0),
                                             ("fusion", "borda")])
def test_hybrid_search_names_the_argument_it_refuses(kb, argument, value):
    db, _ = kb
    with db.connect() as conn, pytest.raises(psycopg.errors.InvalidParameterValue, match=argument):
        conn.execute(f"select * from hybrid_search(query_text => 'fence', {argument} => %s)", (value,))
