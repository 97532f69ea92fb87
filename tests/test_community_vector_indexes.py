"""Each community of a knowledge base of several past a size has an HNSW index of its own, on a
vector table of its own that follows its chunks (sql/033, 094, 096), and hybrid_search's vector leg
reads it: a community that is a small share of one global index is pgvector's weak spot
(benchmarks/scale/communities/). A smaller community among several is read exactly, with no schema
object of its own. A knowledge base of one community has the global index alone, one of several
drops it, and a community's answers do not change when others arrive."""

from __future__ import annotations

import threading
import time

import psycopg
import pytest
from psycopg import sql

from worker.ingest.ingestor import Ingestor, ingest_sample_corpus
from worker.store.database import Database
from worker.store.knowledge_base import delete_document

from tests.helpers import big_document

QUESTIONS = ("can I build a fence", "pergola height limit", "how many board members", "paint colour approval")
SEARCH = ("select id, fts_rank, round(vector_score::numeric, 9), round(fused_score::numeric, 9) "
          "from hybrid_search(query_text => %(q)s, query_embedding => %(e)s::vector, match_count => 20, "
          "community => %(c)s, document_types => %(t)s)")
TYPES = (None, ["design_guidelines"])


def _vector(embedder, q: str) -> str:
    return "[" + ",".join(f"{x:.7g}" for x in embedder.embed_query(q)) + "]"


def _answers(conn, embedder, community: str) -> dict:
    return {(q, str(t)): conn.execute(SEARCH, {"q": q, "e": _vector(embedder, q), "c": community, "t": t}).fetchall()
            for q in QUESTIONS for t in TYPES}


def _own_indexes(conn) -> dict[str, str]:
    """index name -> its table, for the HNSW indexes other than knowledge_chunks' global one."""
    return dict(conn.execute(
        "select c.relname, i.indrelid::regclass::text from pg_index i "
        "join pg_class c on c.oid = i.indexrelid join pg_am a on a.oid = c.relam "
        "where a.amname = 'hnsw' and c.relname <> 'knowledge_chunks_embedding_hnsw'").fetchall())


def _own(*communities: str) -> dict[str, str]:
    """What _own_indexes reads when these communities have their index and table."""
    return {f"arc_hnsw_{c}": f'"arc_vectors_{c}"' for c in communities}


def _index_communities_from(url: str, chunks: int) -> None:
    """Set the database's size past which a community gets its own index (new sessions read it)."""
    with psycopg.connect(url, autocommit=True) as conn:
        name = conn.execute("select current_database()").fetchone()[0]
        conn.execute(sql.SQL("alter database {} set arc.community_index_min_chunks = {}").format(
            sql.Identifier(name), sql.Literal(str(chunks))))


def _legs(conn) -> list[str]:
    return [r[0] for r in conn.execute("select proname from pg_proc where proname like 'arc_vector_leg_%' order by 1")]


def _one_community(database_factory, embedder, prefix: str, *, indexed: bool = False) -> tuple[str, Database, Ingestor]:
    """A database holding the sample corpus as community "cedar-hollow"; ``indexed``: every
    community of several gets an index of its own (else the sample corpus is under the size)."""
    url = database_factory(prefix)
    if indexed:
        _index_communities_from(url, 1)
    db = Database(url)
    db.migrate(embedder.dim)
    ingestor = Ingestor(db, embedder)
    ingest_sample_corpus(ingestor, community="cedar-hollow")
    return url, db, ingestor


def _two_communities(database_factory, embedder, prefix: str, *, indexed: bool) -> tuple[str, Database]:
    """A database holding the sample corpus as two communities, each with an index of its own
    (``indexed``) or read exactly (the sample corpus is under the default size)."""
    url, db, ingestor = _one_community(database_factory, embedder, prefix, indexed=indexed)
    ingest_sample_corpus(ingestor, community="cedar-ridge")
    return url, db


def _has_global_index(conn) -> bool:
    return conn.execute("select to_regclass('knowledge_chunks_embedding_hnsw') is not null").fetchone()[0]


def _scans(conn, index: str) -> int:
    conn.execute("select pg_stat_clear_snapshot()")
    return conn.execute("select coalesce(sum(idx_scan), 0) from pg_stat_user_indexes where indexrelname = %s",
                        (index,)).fetchone()[0]


def test_each_community_of_several_is_searched_through_an_index_of_its_own(database_factory, embedder):
    url, db, ingestor = _one_community(database_factory, embedder, "ownindex", indexed=True)
    with psycopg.connect(url, autocommit=True) as conn:
        assert _own_indexes(conn) == {}  # one community: the global index is its index
        before = _answers(conn, embedder, "cedar-hollow")
    assert all(before.values())

    # a second community's load commits with an index for each of the two
    ingest_sample_corpus(ingestor, community="cedar-ridge")
    with psycopg.connect(url, autocommit=True) as conn:
        assert _own_indexes(conn) == _own("cedar-hollow", "cedar-ridge")
        scans = _scans(conn, "arc_hnsw_cedar-hollow")
        assert not _has_global_index(conn)  # no search reads it now, so it is dropped
        # the same answers, now read from the community's own graph (filtered by type too)
        assert _answers(conn, embedder, "cedar-hollow") == before
        conn.execute("select pg_stat_force_next_flush()")
        deadline = time.monotonic() + 10
        while _scans(conn, "arc_hnsw_cedar-hollow") == scans and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _scans(conn, "arc_hnsw_cedar-hollow") >= scans + len(QUESTIONS) * len(TYPES)
        ridge = _answers(conn, embedder, "cedar-ridge")
        ids = {r[0] for rows in ridge.values() for r in rows}
        assert {r[0] for r in conn.execute("select distinct community from knowledge_chunks where id = any(%s)",
                                           (list(ids),))} == {"cedar-ridge"}
        # a community without its index (dropped, or its build failed) is read exactly
        conn.execute('drop index "arc_hnsw_cedar-hollow"')
        assert _answers(conn, embedder, "cedar-hollow") == before
        assert conn.execute("select * from arc_community_vector_indexes()").fetchall() == [("cedar-hollow",)]
        assert conn.execute("select * from arc_community_vector_indexes()").fetchall() == []
    db.close()


def test_an_own_index_holds_half_precision_and_one_made_before_is_read_as_it_is(database_factory, embedder):
    """A community's own index is on embedding::halfvec(n) (half the size) and its
    leg reads it in that order, returning the full-precision distance; an index of the embedding
    as stored (made before, or by hand) keeps its leg ordered by the stored embedding."""
    url, db = _two_communities(database_factory, embedder, "halfindex", indexed=True)
    statement = "select arc_community_vector_leg_statement('cedar-hollow')"
    index = "select pg_get_indexdef('\"arc_hnsw_cedar-hollow\"'::regclass)"
    with psycopg.connect(url, autocommit=True) as conn:
        assert f"((embedding)::halfvec({embedder.dim})) halfvec_cosine_ops" in conn.execute(index).fetchone()[0]
        assert f"order by v.embedding::halfvec({embedder.dim}) <=>" in conn.execute(statement).fetchone()[0]
        half = _answers(conn, embedder, "cedar-hollow")
        for q in QUESTIONS:  # the vector leg finds the exact nearest chunks on a corpus this small
            asked = {"q": q, "e": _vector(embedder, q), "c": "cedar-hollow", "t": None}
            assert ([r[0] for r in conn.execute(VECTOR_LEG, asked)]
                    == [r[0] for r in conn.execute(EXACT, asked)])
        conn.execute('drop index "arc_hnsw_cedar-hollow"')
        conn.execute('create index "arc_hnsw_cedar-hollow" on "arc_vectors_cedar-hollow" using hnsw '
                     "(embedding vector_cosine_ops) with (m = 16, ef_construction = 64)")
        conn.execute("select arc_community_vector_leg('cedar-hollow')")
        assert "order by v.embedding <=> $1" in conn.execute(statement).fetchone()[0]
        assert _answers(conn, embedder, "cedar-hollow") == half
    db.close()


def test_a_long_community_name_gets_an_index_name_postgres_keeps(database_factory, embedder):
    url = database_factory("ownindexname")
    Database(url).migrate(embedder.dim)
    with psycopg.connect(url, autocommit=True) as conn:
        long_names = ["a" * 63, "a" * 62 + "b", "b" * 41, "with-hyphens_and_underscores"]
        names = [conn.execute("select arc_community_vector_index_name(%s)", (c,)).fetchone()[0] for c in long_names]
    assert all(len(n) <= 63 for n in names) and len(set(names)) == len(names)
    assert names[2] == "arc_hnsw_" + "b" * 41


# bm25_query_terms as the SQL function it was before it became PL/pgSQL (to keep its plan)
TERMS_AS_SQL = """
  select q.lexeme, bm25_lexeme_index(q.lexeme), 1, coalesce(t.df, 0),
         ln(1 + (c.n_docs - coalesce(t.df, 0) + 0.5) / (coalesce(t.df, 0) + 0.5))::double precision
  from unnest(to_tsvector('english'::regconfig, coalesce(%(q)s, ''))) as q
  join bm25_corpus c on c.community = %(c)s
  left join bm25_terms t on t.community = c.community and t.lexeme = q.lexeme"""
MANY = QUESTIONS + ("", "the", "garage door colour", "quorum for the annual meeting", "roof shingles replacement",
                    "satellite dish", "can I keep chickens", "tree removal permit", "who enforces the rules",
                    "what is the fine for a late assessment")
EVERY_COLUMN = ("select * from hybrid_search(query_text => %(q)s, query_embedding => %(e)s::vector, match_count => %(n)s, "
                "community => %(c)s, document_types => %(t)s, binding_only => %(b)s)")


def test_the_vector_leg_kept_planned_answers_as_the_one_planned_each_call(database_factory, embedder):
    """033 makes each community's vector leg a function of its own so that its plan is kept for
    the session (031 planned it on every call): the same rows, every column, exactly; without
    that function (an index made by hand) 031 plans the same statement on every call, as before."""
    url, db = _two_communities(database_factory, embedder, "ownleg", indexed=True)
    leg = '"arc_vector_leg_cedar-hollow"(vector, text[], boolean, boolean, integer)'
    asked = [{"q": q, "e": _vector(embedder, q or "fence"), "n": n, "c": "cedar-hollow", "t": t, "b": b}
             for q in MANY for t in TYPES for n, b in ((40, False), (5, True))]
    with psycopg.connect(url, autocommit=True) as conn:
        assert conn.execute(f"select to_regprocedure('{leg}') is not null").fetchone()[0]
        kept = [conn.execute(EVERY_COLUMN, a).fetchall() for a in asked]
        conn.execute(f"drop function {leg}")
        planned_each_call = [conn.execute(EVERY_COLUMN, a).fetchall() for a in asked]
        assert kept == planned_each_call and sum(map(len, kept)) > 0
        # made again, quietly, by the call that makes missing indexes (033 runs it when applied)
        assert conn.execute("select * from arc_community_vector_indexes()").fetchall() == []
        assert conn.execute(f"select to_regprocedure('{leg}') is not null").fetchone()[0]
        assert [conn.execute(EVERY_COLUMN, a).fetchall() for a in asked] == kept
        # the query terms, in PL/pgSQL: the very rows of the SQL they were (that SQL has no order:
        # its join's plan may list them in another, so both are compared sorted)
        for q in MANY:
            for c in ("cedar-hollow", "cedar-ridge"):
                assert (sorted(conn.execute("select * from bm25_query_terms(%(q)s, %(c)s)", {"q": q, "c": c}).fetchall())
                        == sorted(conn.execute(TERMS_AS_SQL, {"q": q, "c": c}).fetchall()))
    db.close()


EXACT = ("select c.id from knowledge_chunks c where c.community = %(c)s and c.superseded_by is null "
         "and (%(t)s::text[] is null or c.document_type = any (%(t)s::text[])) "
         "order by c.embedding <=> %(e)s::vector, c.id limit 20")
VECTOR_LEG = ("select id from hybrid_search(query_text => %(q)s, query_embedding => %(e)s::vector, match_count => 20, "
              "community => %(c)s, document_types => %(t)s, vector_weight => 1, fts_weight => 0) "
              "where vector_score is not null order by vector_score desc, id")


def test_a_small_community_among_several_is_read_exactly_with_no_object_of_its_own(database_factory, embedder):
    """Below the size a community has no index or function of its own and its vector leg is exact,
    never the global index filtered; the load that brings it past the size makes its index."""
    url, db, ingestor = _one_community(database_factory, embedder, "smallexact")
    with psycopg.connect(url, autocommit=True) as conn:
        size = conn.execute("select n_docs from bm25_corpus where community = 'cedar-hollow'").fetchone()[0]
    db.close()
    _index_communities_from(url, size + 1)
    db = Database(url)
    ingestor = Ingestor(db, embedder)
    ingest_sample_corpus(ingestor, community="cedar-ridge")
    with psycopg.connect(url, autocommit=True) as conn:
        assert _own_indexes(conn) == {} and _legs(conn) == [] and not _has_global_index(conn)
        for q in QUESTIONS:
            for t in TYPES:
                asked = {"q": q, "e": _vector(embedder, q), "c": "cedar-hollow", "t": t}
                exact = [r[0] for r in conn.execute(EXACT, asked)]
                assert exact and [r[0] for r in conn.execute(VECTOR_LEG, asked)] == exact

    # one more document brings cedar-ridge past the size: its load commits with its index alone
    ingestor.write([big_document("pets", 3)], community="cedar-ridge")
    with psycopg.connect(url, autocommit=True) as conn:
        assert _own_indexes(conn) == _own("cedar-ridge")
        assert _legs(conn) == ["arc_vector_leg_cedar-ridge"]
    db.close()


def test_an_index_per_community_database_upgrades_to_indexes_past_the_size(database_factory, embedder):
    """A database where every community has its own index (033) keeps its documents and answers
    and loses the small communities' indexes and legs when 094 is applied."""
    url, db = _two_communities(database_factory, embedder, "upgradesize", indexed=True)
    db.close()
    with psycopg.connect(url, autocommit=True) as conn:
        assert len(_own_indexes(conn)) == 2 and len(_legs(conn)) == 2
        before = {c: _answers(conn, embedder, c) for c in ("cedar-hollow", "cedar-ridge")}
        chunks = conn.execute("select count(*) from knowledge_chunks").fetchone()[0]
        conn.execute("delete from schema_migrations where name = '094_community_index_size'")
        name = conn.execute("select current_database()").fetchone()[0]
        conn.execute(sql.SQL("alter database {} reset arc.community_index_min_chunks").format(sql.Identifier(name)))
    db = Database(url)
    db.migrate(embedder.dim)
    db.close()
    with psycopg.connect(url, autocommit=True) as conn:
        assert _own_indexes(conn) == {} and _legs(conn) == []
        assert conn.execute("select count(*) from knowledge_chunks").fetchone()[0] == chunks
        assert {c: _answers(conn, embedder, c) for c in ("cedar-hollow", "cedar-ridge")} == before


def test_no_statement_of_a_small_communitys_search_is_jit_compiled(database_factory, embedder):
    """hybrid_search runs with sequential scans off; a statement only a sequential scan can answer
    costs a disabled scan's estimate, which PostgreSQL 15 (JIT on by default) compiles for about
    40 ms on every call. None of the statements that answer a small community among several does."""
    url, db = _two_communities(database_factory, embedder, "nojit", indexed=False)
    db.close()
    plans: list[str] = []
    with psycopg.connect(url, autocommit=True) as conn:
        if not conn.execute("select pg_jit_available()").fetchone()[0]:
            pytest.skip("this server has no JIT")
        conn.add_notice_handler(lambda notice: plans.append(notice.message_primary or ""))
        conn.execute("load 'auto_explain'")
        conn.execute("set auto_explain.log_min_duration = 0")
        conn.execute("set auto_explain.log_nested_statements = on")
        conn.execute("set client_min_messages = log")
        conn.execute("set jit_above_cost = 100000")  # PostgreSQL's default, whatever the server's
        rows = conn.execute(SEARCH, {"q": QUESTIONS[0], "e": _vector(embedder, QUESTIONS[0]), "c": "cedar-hollow",
                                     "t": None}).fetchall()
    assert rows and len(plans) > 5
    assert not [p for p in plans if "JIT:" in p]


def test_the_global_index_goes_with_a_second_community_and_returns_for_one_grown_past_the_size(
    database_factory, embedder
):
    """No search of a knowledge base of several reads the global index once every community past
    the size has its own, so it is dropped; the one community left is read exactly, and gets the
    global index again when it grows past the size."""
    url, db, ingestor = _one_community(database_factory, embedder, "globalindex")
    with psycopg.connect(url, autocommit=True) as conn:
        assert _has_global_index(conn)  # one community: the global index is its index
        alone = _answers(conn, embedder, "cedar-hollow")
    ingest_sample_corpus(ingestor, community="cedar-ridge")
    with psycopg.connect(url, autocommit=True) as conn:
        assert not _has_global_index(conn) and _own_indexes(conn) == {}
        assert _answers(conn, embedder, "cedar-hollow") == alone
        for document_id in [r[0] for r in conn.execute(
                "select distinct document_id from knowledge_chunks where community = 'cedar-ridge'")]:
            delete_document(db, document_id, community="cedar-ridge")
        assert conn.execute("select count(*) from bm25_corpus where n_docs > 0").fetchone()[0] == 1
        # the one left, small, without the global index: read exactly, the knowledge base's one community
        for q in QUESTIONS:
            asked = {"q": q, "e": _vector(embedder, q), "c": None, "t": None}
            exact = [r[0] for r in conn.execute(EXACT.replace("c.community = %(c)s", "true"), asked)]
            assert exact and [r[0] for r in conn.execute(VECTOR_LEG, asked)] == exact
        size = conn.execute("select n_docs from bm25_corpus where community = 'cedar-hollow'").fetchone()[0]
    db.close()
    _index_communities_from(url, size + 1)
    db = Database(url)
    Ingestor(db, embedder).write([big_document("pets", 3)], community="cedar-hollow")
    with psycopg.connect(url, autocommit=True) as conn:
        assert _has_global_index(conn) and _own_indexes(conn) == {}
    db.close()


def test_a_database_of_several_communities_drops_its_global_index_when_upgraded(database_factory, embedder):
    """A database of several communities from before keeps every document and answer; its
    global index, which no search reads, is dropped (095)."""
    url, db = _two_communities(database_factory, embedder, "upgradeglobal", indexed=False)
    db.close()
    with psycopg.connect(url, autocommit=True) as conn:
        before = {c: _answers(conn, embedder, c) for c in ("cedar-hollow", "cedar-ridge")}
        chunks = conn.execute("select count(*) from knowledge_chunks").fetchone()[0]
        conn.execute("create index knowledge_chunks_embedding_hnsw on knowledge_chunks "
                     "using hnsw (embedding vector_cosine_ops) with (m = 16, ef_construction = 64)")
        conn.execute("delete from schema_migrations where name = '095_global_index_for_one_community'")
    db = Database(url)
    assert "095_global_index_for_one_community" in db.migrate(embedder.dim)
    db.close()
    with psycopg.connect(url, autocommit=True) as conn:
        assert not _has_global_index(conn)
        assert conn.execute("select count(*) from knowledge_chunks").fetchone()[0] == chunks
        assert {c: _answers(conn, embedder, c) for c in ("cedar-hollow", "cedar-ridge")} == before


def _table_rows(conn, community: str) -> list[tuple]:
    return conn.execute(sql.SQL("select id, document_type, is_binding, superseded_by, embedding::text "
                                "from {} order by id").format(sql.Identifier(f"arc_vectors_{community}"))).fetchall()


def _chunk_rows(conn, community: str) -> list[tuple]:
    return conn.execute("select id, document_type, is_binding, superseded_by, embedding::text from knowledge_chunks "
                        "where community = %s order by id", (community,)).fetchall()


def _copy_of_a_chunk(community: str, document_id: str) -> str:
    """An insert of one more chunk of the community (a copy of one of its chunks, as another document)."""
    return ("insert into knowledge_chunks (document_id, document_name, document_type, section_path, chunk_index, "
            "content, token_count, embedding, community) "
            f"select '{document_id}', document_name, document_type, section_path, 0, content, token_count, embedding, "
            f"community from knowledge_chunks where community = '{community}' order by id limit 1")


def _leg_matches_exact(conn, embedder, community: str) -> None:
    found = 0
    for q in QUESTIONS:
        for t in TYPES:
            asked = {"q": q, "e": _vector(embedder, q), "c": community, "t": t}
            exact = [r[0] for r in conn.execute(EXACT, asked)]
            # the first ten: the copied pets document's chunks tie further down
            assert [r[0] for r in conn.execute(VECTOR_LEG, asked)][:10] == exact[:10]
            found += len(exact)
    assert found


def test_a_communitys_vector_table_follows_its_chunks(database_factory, embedder):
    """A large community's index is on a table of its own, which holds exactly its chunks' leg
    columns through every insert, update and delete of knowledge_chunks (and a truncate), and an
    update of other columns (BM25's bookkeeping) leaves its rows untouched."""
    url, db, ingestor = _one_community(database_factory, embedder, "vectortable", indexed=True)
    ingest_sample_corpus(ingestor, community="cedar-ridge")
    with psycopg.connect(url, autocommit=True) as conn:
        # knowledge_chunks itself keeps no vector index: no per-community index slows its plans
        assert conn.execute("select count(*) from pg_index i join pg_class c on c.oid = i.indexrelid "
                            "join pg_am a on a.oid = c.relam where i.indrelid = 'knowledge_chunks'::regclass "
                            "and a.amname = 'hnsw'").fetchone()[0] == 0
        for c in ("cedar-hollow", "cedar-ridge"):
            assert _table_rows(conn, c) == _chunk_rows(conn, c) != []
        # an insert (the ingest path)
        ingestor.write([big_document("pets", 3)], community="cedar-hollow")
        assert _table_rows(conn, "cedar-hollow") == _chunk_rows(conn, "cedar-hollow")
        # updates of the leg's columns: superseded, binding, type, embedding
        document = conn.execute("select document_id from knowledge_chunks where community = 'cedar-hollow' "
                                "and document_type = 'design_guidelines' limit 1").fetchone()[0]
        conn.execute("update knowledge_chunks set superseded_by = 'newer' where document_id = %s", (document,))
        conn.execute("update knowledge_chunks set is_binding = not is_binding, document_type = 'other' "
                     "where id = (select min(id) from knowledge_chunks where community = 'cedar-hollow')")
        conn.execute("update knowledge_chunks set embedding = (select embedding from knowledge_chunks "
                     "where community = 'cedar-ridge' order by id desc limit 1) "
                     "where id = (select max(id) from knowledge_chunks where community = 'cedar-hollow')")
        assert _table_rows(conn, "cedar-hollow") == _chunk_rows(conn, "cedar-hollow")
        _leg_matches_exact(conn, embedder, "cedar-hollow")  # the superseded document is not a candidate
        # an update of other columns rewrites no row of the table
        versions = conn.execute('select id, xmin::text from "arc_vectors_cedar-hollow" order by id').fetchall()
        conn.execute("update knowledge_chunks set metadata = metadata || '{\"seen\": true}' "
                     "where community = 'cedar-hollow'")
        assert conn.execute('select id, xmin::text from "arc_vectors_cedar-hollow" order by id').fetchall() == versions
        # a chunk moved to the other community leaves the one table for the other
        conn.execute("update knowledge_chunks set community = 'cedar-ridge', document_id = 'moved' "
                     "where id = (select max(id) from knowledge_chunks where community = 'cedar-hollow')")
        for c in ("cedar-hollow", "cedar-ridge"):
            assert _table_rows(conn, c) == _chunk_rows(conn, c)
        # a delete (the documents API's path)
        delete_document(db, document, community="cedar-hollow")
        assert _table_rows(conn, "cedar-hollow") == _chunk_rows(conn, "cedar-hollow")
        _leg_matches_exact(conn, embedder, "cedar-hollow")
        _leg_matches_exact(conn, embedder, "cedar-ridge")
        conn.execute("truncate knowledge_chunks cascade")
        assert _table_rows(conn, "cedar-hollow") == _table_rows(conn, "cedar-ridge") == []
    db.close()


def test_no_chunk_is_left_out_of_a_vector_table_built_while_another_load_writes(database_factory, embedder):
    """A build of a community's table waits for the loads of that community under way, and a load
    that writes while the table is being made waits for it and then writes into it; another
    community's loads go on meanwhile."""
    url, db = _two_communities(database_factory, embedder, "vectorrace", indexed=True)
    db.close()
    rebuild = "select arc_community_vector_index('cedar-hollow')"
    without = 'drop table "arc_vectors_cedar-hollow"'  # as before the community's first build
    with psycopg.connect(url) as first, psycopg.connect(url) as second:
        # a load under way, then a build: the build waits for its commit and copies its row
        second.execute(without)
        second.commit()
        first.execute(_copy_of_a_chunk("cedar-hollow", "under-way"))
        build = threading.Thread(target=lambda: (second.execute(rebuild), second.commit()))
        build.start()
        build.join(1.0)
        assert build.is_alive()  # waiting for the load's commit
        first.commit()
        build.join(30)
        # a build under way, then a load: the load waits for the table and writes into it
        second.execute(without)
        second.execute(rebuild)
        load = threading.Thread(target=lambda: (first.execute(_copy_of_a_chunk("cedar-hollow", "while-made")),
                                                first.commit()))
        load.start()
        load.join(1.0)
        assert load.is_alive()  # waiting for the build's commit
        # another community's writes do not wait for it (an index on knowledge_chunks held them all)
        with psycopg.connect(url, autocommit=True) as third:
            third.execute("set lock_timeout = '2s'")
            third.execute(_copy_of_a_chunk("cedar-ridge", "meanwhile"))
        second.commit()
        load.join(30)
    with psycopg.connect(url, autocommit=True) as conn:
        rows = _chunk_rows(conn, "cedar-hollow")
        assert _table_rows(conn, "cedar-hollow") == rows
        assert conn.execute("select count(*) from knowledge_chunks where document_id in ('under-way', 'while-made')"
                            ).fetchone()[0] == 2


LEGACY_LEG = """select c.id, c.embedding <=> $1 as distance from knowledge_chunks c
  where c.community = %L and ($2 is null or (c.document_type || '') = any ($2)) and (not $3 or c.is_binding)
    and ($4 or c.superseded_by is null) order by c.embedding::halfvec(%s) <=> $1::halfvec(%s) limit $5"""


def test_partial_indexes_upgrade_to_vector_tables(database_factory, embedder):
    """A database whose large communities have partial indexes on knowledge_chunks (094) gets a
    table and an index of its own for each and loses the partial ones (096), keeping every
    document and answer."""
    url, db = _two_communities(database_factory, embedder, "upgradetables", indexed=True)
    db.close()
    communities = ("cedar-hollow", "cedar-ridge")
    with psycopg.connect(url, autocommit=True) as conn:
        before = {c: _answers(conn, embedder, c) for c in communities}
        chunks = conn.execute("select count(*) from knowledge_chunks").fetchone()[0]
        for c in communities:  # back to 094's layout: a partial index and a leg reading knowledge_chunks
            conn.execute(sql.SQL("drop table {}").format(sql.Identifier(f"arc_vectors_{c}")))
            conn.execute(sql.SQL("create index {} on knowledge_chunks using hnsw ((embedding::halfvec({})) "
                                 "halfvec_cosine_ops) where community = {}").format(
                sql.Identifier(f"knowledge_chunks_hnsw_{c}"), sql.Literal(embedder.dim), sql.Literal(c)))
            statement = conn.execute("select format(%s::text, %s::text, %s::int, %s::int)",
                                     (LEGACY_LEG, c, embedder.dim, embedder.dim)).fetchone()[0]
            conn.execute(sql.SQL("create or replace function {}(query_embedding vector, document_types text[], "
                                 "binding_only boolean, include_superseded boolean, match_count integer) "
                                 "returns table (id bigint, distance double precision) language plpgsql stable "
                                 "as {}").format(sql.Identifier(f"arc_vector_leg_{c}"),
                                                 sql.Literal(f"begin return query {statement}; end")))
        conn.execute("delete from schema_migrations where name = '096_community_vector_tables'")
    db = Database(url)
    assert "096_community_vector_tables" in db.migrate(embedder.dim)
    db.close()
    with psycopg.connect(url, autocommit=True) as conn:
        assert _own_indexes(conn) == _own(*communities)
        assert conn.execute("select count(*) from knowledge_chunks").fetchone()[0] == chunks
        for c in communities:
            assert _table_rows(conn, c) == _chunk_rows(conn, c)
            leg = conn.execute(sql.SQL("select prosrc from pg_proc where proname = {}").format(
                sql.Literal(f"arc_vector_leg_{c}"))).fetchone()[0]
            assert f'"arc_vectors_{c}"' in leg
        assert {c: _answers(conn, embedder, c) for c in communities} == before


def test_a_write_of_thousands_of_communities_holds_a_bounded_number_of_locks(database_factory, embedder):
    """Each community written shares its vector-table lock for the transaction; the communities
    share 256 of them, so a statement writing thousands cannot run out of Postgres's lock slots."""
    url = database_factory("vectorlocks")
    Database(url).migrate(embedder.dim)
    with psycopg.connect(url) as conn:
        conn.execute("select arc_community_vectors_lock('c' || g, false) from generate_series(1, 3000) g")
        held = conn.execute("select count(*) from pg_locks where locktype = 'advisory' "
                            "and pid = pg_backend_pid()").fetchone()[0]
        assert 200 < held <= 256
        conn.rollback()


def test_a_failed_build_lets_the_load_commit_and_the_community_is_read_exactly(database_factory, embedder):
    """A vector table that cannot be made at a load's commit (here a view on one left from before
    keeps it from being dropped) is a warning: the load commits, the other community still gets
    its own, and this one is read exactly until the build can run."""
    url, db, ingestor = _one_community(database_factory, embedder, "failedbuild", indexed=True)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute('create table "arc_vectors_cedar-ridge" as select id, document_type, is_binding, superseded_by, '
                     "embedding from knowledge_chunks where false")
        conn.execute('create view blocker as select * from "arc_vectors_cedar-ridge"')
    ingest_sample_corpus(ingestor, community="cedar-ridge")
    with psycopg.connect(url, autocommit=True) as conn:
        assert conn.execute("select n_docs from bm25_corpus where community = 'cedar-ridge'").fetchone()[0] > 0
        assert _own_indexes(conn) == _own("cedar-hollow")
        _leg_matches_exact(conn, embedder, "cedar-ridge")
        conn.execute("drop view blocker")
        assert conn.execute("select * from arc_community_vector_indexes()").fetchall() == [("cedar-ridge",)]
        assert _table_rows(conn, "cedar-ridge") == _chunk_rows(conn, "cedar-ridge")
    db.close()


def test_a_build_and_a_load_of_two_communities_never_deadlock(database_factory, embedder):
    """A build of several communities' tables and a load writing several communities take the
    communities' locks in one order (their slot's, not their names'), so neither waits on the
    other in a cycle: the load that holds one community and then writes the other goes through."""
    url, db, ingestor = _one_community(database_factory, embedder, "vectororder", indexed=True)
    with psycopg.connect(url, autocommit=True) as conn:
        slot = lambda c: conn.execute("select arc_community_vectors_slot(%s)", (c,)).fetchone()[0]  # noqa: E731
        # a second community whose name sorts one way and whose slot the other
        other = next(c for c in (f"aspen-{i}" for i in range(100)) if slot(c) > slot("cedar-hollow"))
        first, second = "cedar-hollow", other  # first by slot, second by name
    ingest_sample_corpus(ingestor, community=other)
    db.close()
    with psycopg.connect(url, autocommit=True) as conn:
        for c in (first, second):
            conn.execute(sql.SQL("drop table {}").format(sql.Identifier(f"arc_vectors_{c}")))
    with psycopg.connect(url) as load, psycopg.connect(url) as build:
        load.execute("set lock_timeout = '20s'")
        load.execute(_copy_of_a_chunk(first, "held"))  # holds the first community's lock
        built: list = []
        worker = threading.Thread(target=lambda: (built.extend(build.execute(
            "select * from arc_community_vector_indexes()").fetchall()), build.commit()))
        worker.start()
        worker.join(1.0)
        load.execute(_copy_of_a_chunk(second, "then"))  # no deadlock: the build waits on the first
        load.commit()
        worker.join(30)
    assert sorted(built) == sorted([(first,), (second,)])
    with psycopg.connect(url, autocommit=True) as conn:
        for c in (first, second):
            assert _table_rows(conn, c) == _chunk_rows(conn, c)
