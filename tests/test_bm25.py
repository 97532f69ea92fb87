"""BM25 inside Postgres: statistics stay exact through insert, re-ingest, update and delete, and the
scores equal a plain-Python Okapi BM25 over the same lexemes."""

from __future__ import annotations

import math

import pytest

from worker.store import bm25
from worker.store.database import Database
from worker.ingest.ingestor import Ingestor, ingest_sample_corpus
from worker.store.postgres_search import PostgresBackend
from worker.store.search import SearchParams
from tests.helpers import assert_statistics_exact


@pytest.fixture(scope="module")
def bm25_db(database_factory, embedder):
    db = Database(database_factory("bm25"))
    db.migrate(embedder.dim)
    yield db
    db.close()


def test_statistics_through_ingest_reingest_update_delete(bm25_db, embedder):
    db = bm25_db
    ingest_sample_corpus(Ingestor(db, embedder))
    assert_statistics_exact(db)
    ingest_sample_corpus(Ingestor(db, embedder))  # re-ingest: delete + insert per document
    assert_statistics_exact(db)
    with db.connect() as conn:
        conn.execute("update knowledge_chunks set content = content || ' pergola pergola' where document_id = 'ccrs'")
        conn.execute("update knowledge_chunks set superseded_by = 'x' where document_id = 'application-form'")
        conn.commit()
    assert_statistics_exact(db)
    with db.connect() as conn:
        conn.execute("delete from knowledge_chunks where document_id = 'design-guidelines-2024'")
        conn.commit()
    assert_statistics_exact(db)
    with db.connect() as conn:
        assert conn.execute("select df from bm25_terms where lexeme = 'pergola'").fetchone()[0] == 8
        conn.execute("truncate knowledge_chunks")
        conn.commit()
        assert conn.execute("select count(*) from bm25_terms").fetchone()[0] == 0
    assert_statistics_exact(db)


def test_scores_match_a_reference_okapi_bm25(bm25_db, embedder):
    db = bm25_db
    ingest_sample_corpus(Ingestor(db, embedder))
    assert bm25.refresh(db, seconds=None, force=True).stale == 0
    with db.connect() as conn:
        k1, b, avgdl = conn.execute("select k1, b, avgdl_indexed from bm25_corpus").fetchone()
        rows = conn.execute("select c.id, t.lexeme, coalesce(array_length(t.positions, 1), 1) "
                            "from knowledge_chunks c, unnest(c.fts) t").fetchall()
        query_lexemes = [r[0] for r in conn.execute(
            "select lexeme from unnest(to_tsvector('english', 'maximum fence height rear yard')) ")]
    tf: dict[int, dict[str, int]] = {}
    for chunk_id, lexeme, count in rows:
        tf.setdefault(chunk_id, {})[lexeme] = count
    n = len(tf)
    df = {lex: sum(1 for d in tf.values() if lex in d) for lex in query_lexemes}

    def score(doc: dict[str, int]) -> float:
        dl = sum(doc.values())
        total = 0.0
        for lex in query_lexemes:
            if lex in doc and df[lex]:
                idf = math.log(1 + (n - df[lex] + 0.5) / (df[lex] + 0.5))
                f = doc[lex]
                total += idf * f * (k1 + 1) / (f + k1 * (1 - b + b * dl / avgdl))
        return total

    expected = sorted(((score(d), cid) for cid, d in tf.items() if score(d) > 0), reverse=True)[:10]
    results = PostgresBackend(db).search(SearchParams(query_text="maximum fence height rear yard", embedding=None,
                                                      match_count=10, include_superseded=True))
    assert [r.id for r in results] == [cid for _, cid in expected]
    for r, (s, _) in zip(results, expected):
        assert r.bm25_score == pytest.approx(s, rel=1e-5)
    assert_statistics_exact(db)


def test_past_its_read_limit_the_full_text_leg_reads_the_rarest_words_chunks(database_factory, embedder):
    # 300 chunks about fences, then the one that also names a pergola. Asked about a pergola fence
    # with room to read 100 chunks, the leg used to read the first 100 in the heap and never see
    # the newest chunk, the best match.
    db = Database(database_factory("bm25_limit"))
    db.migrate(embedder.dim)
    with db.connect() as conn:
        conn.execute("""
            insert into knowledge_chunks (document_id, document_name, document_type, chunk_index, content, token_count)
            select 'fences', 'Fences', 'other', i, 'Fence rule ' || i || ': a fence needs approval.', 8
            from generate_series(0, 299) i""")
        conn.execute("""
            insert into knowledge_chunks (document_id, document_name, document_type, chunk_index, content, token_count)
            values ('pergolas', 'Pergolas', 'other', 0, 'A pergola may stand beside a fence up to 10 feet high.', 12)""")
        conn.commit()
        found = conn.execute(
            "select document_id from hybrid_search(query_text => 'pergola fence', match_count => 5, "
            "vector_weight => 0, fts_weight => 1, fts_scan_limit => 100) order by fts_rank").fetchall()
    db.close()
    assert found and found[0][0] == "pergolas"


def test_common_words_alone_still_find_the_best_match_however_new(database_factory, embedder):
    # Every chunk says "fence"; the newest says little else, so it is the best BM25 match. Reading
    # 50 chunks in heap order (the leg before impact-ordered postings) never reached it.
    db = Database(database_factory("bm25_common"))
    db.migrate(embedder.dim)
    with db.connect() as conn:
        conn.execute("""
            insert into knowledge_chunks (document_id, document_name, document_type, chunk_index, content, token_count)
            select 'rules', 'Rules', 'other', i,
                   'Rule ' || i || ': a fence along the rear lot line needs written approval from the committee.', 16
            from generate_series(0, 299) i""")
        conn.execute("""
            insert into knowledge_chunks (document_id, document_name, document_type, chunk_index, content, token_count)
            values ('fences', 'Fences', 'other', 0, 'Fence. Fence height.', 4)""")
        conn.commit()
        found = conn.execute(
            "select document_id, fts_rank from hybrid_search(query_text => 'fence', match_count => 5, "
            "vector_weight => 0, fts_weight => 1, fts_scan_limit => 50) order by fts_rank").fetchall()
    db.close()
    assert found[0] == ("fences", 1)


def assert_postings_exact(conn, per_lexeme: int) -> None:
    """Each lexeme keeps exactly its postings at or above its floor (all of them without one), no
    more than ``per_lexeme`` above it, with the weight its chunk was written with."""
    k1, b, avgdl = conn.execute("select k1, b, avgdl_indexed from bm25_corpus").fetchone()
    every = {}
    for chunk, lexeme, tf, dl in conn.execute(
            "select c.id, t.lexeme, coalesce(array_length(t.positions, 1), 1), c.fts_length "
            "from knowledge_chunks c, unnest(c.fts) t"):
        every[(chunk, lexeme)] = tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))
    floors = dict(conn.execute("select lexeme, floor from bm25_terms").fetchall())
    counts = dict(conn.execute("select lexeme, kept from bm25_terms").fetchall())
    kept = {(c, t): w for c, t, w in conn.execute("select chunk_id, lexeme, weight from bm25_postings")}
    expected = {key for key, w in every.items() if floors[key[1]] is None or w >= floors[key[1]] - 1e-6}
    assert set(kept) == expected
    for key, w in kept.items():
        assert w == pytest.approx(every[key], rel=1e-6)
    for lexeme, floor in floors.items():
        mine = [w for (_, t), w in kept.items() if t == lexeme]
        assert counts[lexeme] == len(mine)
        assert sum(w > floor + 1e-6 for w in mine) < per_lexeme if floor is not None else len(mine) <= per_lexeme


def test_postings_keep_each_lexemes_best_chunks_through_every_change(database_factory, embedder):
    import random
    words = ["fence", "roof", "paint", "shed", "pool", "tree", "deck", "gate"]
    pick = random.Random(5)

    def text() -> str:
        return " ".join(pick.choice(words) for _ in range(pick.randint(1, 12)))

    db = Database(database_factory("bm25_postings"))
    db.migrate(embedder.dim)
    with db.connect() as conn:
        conn.execute("update bm25_corpus set avgdl_indexed = 6, postings_per_lexeme = 4")
        insert = ("insert into knowledge_chunks (document_id, document_name, document_type, chunk_index, content,"
                  " token_count) values (%s, %s, 'other', %s, %s, 1)")
        for batch in range(4):  # several statements: lists fill, then floors rise
            with conn.cursor() as cur:
                cur.executemany(insert, [(f"d{batch}", "D", i, text()) for i in range(15)])
            assert_postings_exact(conn, 4)
        conn.execute("delete from knowledge_chunks where document_id = 'd1'")
        assert_postings_exact(conn, 4)
        for cid, in conn.execute("select id from knowledge_chunks where document_id = 'd2'").fetchall():
            conn.execute("update knowledge_chunks set content = %s where id = %s", (text(), cid))
        conn.execute("update knowledge_chunks set superseded_by = 'd3' where document_id = 'd0'")
        assert_postings_exact(conn, 4)
        assert conn.execute("select bm25_postings_rebuild()").fetchone()[0] > 0
        assert_postings_exact(conn, 4)
        conn.execute("truncate knowledge_chunks")
        assert conn.execute("select count(*) from bm25_postings").fetchone()[0] == 0
        conn.commit()
    db.close()


def test_the_leg_stops_scoring_only_when_no_chunk_read_can_still_win(database_factory, embedder):
    # The leg scores candidates best partial score first and stops once no bound left can reach
    # its match_count-th score. A bound that is too low (a cut list's last weight or a whole list's
    # floor forgotten) stops it early and loses a better chunk; exact BM25 over every chunk read
    # says so, whether each list is read whole or only its best three.
    import random
    words = ["fence", "roof", "paint", "shed", "pool", "tree", "deck", "gate"]
    pick = random.Random(9)
    db = Database(database_factory("bm25_bounds"))
    db.migrate(embedder.dim)
    with db.connect() as conn:
        conn.execute("update bm25_corpus set avgdl_indexed = 60, postings_per_lexeme = 6")
        with conn.cursor() as cur:  # padded to distinct lengths, so no two weights tie
            cur.executemany(
                "insert into knowledge_chunks (document_id, document_name, document_type, chunk_index, content,"
                " token_count) values (%s, 'D', %s, %s, %s, 1)",
                [(f"d{i // 50}", pick.choice(["ccr", "other"]), i % 50,
                  " ".join(pick.choice(words[: pick.randint(2, 8)]) for _ in range(pick.randint(1, 14)))
                  + " lorem" * i)
                 for i in range(240)])
        conn.commit()
        k1, b, avgdl = conn.execute("select k1, b, avgdl_indexed from bm25_corpus").fetchone()
        weight = {(c, t): tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl)) for c, t, tf, dl in conn.execute(
            "select c.id, t.lexeme, coalesce(array_length(t.positions, 1), 1), c.fts_length "
            "from knowledge_chunks c, unnest(c.fts) t")}
        kind = dict(conn.execute("select id, document_type from knowledge_chunks").fetchall())
        lists = {}
        for c, t in conn.execute("select chunk_id, lexeme from bm25_postings order by weight desc"):
            lists.setdefault(t, []).append(c)
        assert len(weight) > sum(map(len, lists.values())) and min(map(len, lists.values())) > 3  # lists are cut
        for trial in range(120):
            query = " ".join(pick.sample(words, pick.randint(1, 4)))
            types = pick.choice([None, ["ccr"]])
            idf = dict(conn.execute("select lexeme, idf from bm25_query_terms(%s, 'default')", (query,)).fetchall())
            per_word = pick.choice([None, 3])
            read = {c for t in idf for c in lists[t][:per_word] if types is None or kind[c] in types}
            exact = sorted((sum(idf[t] * weight.get((c, t), 0) for t in idf) for c in read), reverse=True)[:5]
            found = conn.execute(
                "select bm25_score from hybrid_search(query_text => %s, match_count => 5, vector_weight => 0,"
                " fts_weight => 1, document_types => %s, fts_scan_limit => %s) order by fts_rank",
                (query, types, 3 * len(idf) if per_word else 5000)).fetchall()
            assert [s for s, in found] == pytest.approx(exact, rel=1e-5), (trial, query, types, per_word)
    db.close()
