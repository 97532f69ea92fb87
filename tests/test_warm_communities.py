"""A serving process reads the large communities' full-text pages into the server's cache at its
start (sql/functions/arc_warm_communities.sql): largest first, within a share of shared buffers,
one caller at a time, on both Postgres versions."""

from __future__ import annotations

import re
from pathlib import Path

import psycopg
import pytest

from tests.helpers import make_settings, two_indexed_communities
from worker.runtime import Runtime
from worker.service.knowledge import KnowledgeService
from worker.store import communities
from worker.store.database import Database

WARM = "select community, chunks, pages from arc_warm_communities({})"


def _two_communities(database_factory, embedder) -> tuple[str, Database]:
    """Two large communities of the sample corpus, analysed as autovacuum would."""
    url, db, _ = two_indexed_communities(database_factory, embedder, "warm")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("analyze knowledge_chunks")
        conn.execute("analyze bm25_postings")
    return url, db


def _heap_pages(conn, community: str) -> int:
    return conn.execute(
        "select count(distinct (ctid::text::point)[0]) from knowledge_chunks where community = %s", (community,)
    ).fetchone()[0]


def test_the_large_communities_pages_are_read_largest_first_within_the_share(database_factory, embedder):
    url, db = _two_communities(database_factory, embedder)
    with psycopg.connect(url) as conn:
        sizes = dict(conn.execute("select community, n_docs from bm25_corpus where n_docs > 0").fetchall())
        largest_first = sorted(sizes, key=lambda c: (-sizes[c], c))
        # in one transaction, so the blocks it asked the buffer manager for can be counted
        warmed = conn.execute(WARM.format("")).fetchall()
        heap = conn.execute("select pg_stat_get_xact_blocks_fetched('knowledge_chunks'::regclass)").fetchone()[0]
        postings = conn.execute(
            "select pg_stat_get_xact_blocks_fetched('bm25_postings_community_impact'::regclass)"
        ).fetchone()[0]
        assert [(c, n) for c, n, _ in warmed] == [(c, sizes[c]) for c in largest_first]
        assert all(pages > 0 for _, _, pages in warmed)
        # every heap page holding either community's rows was read, not only the btree on community
        assert heap >= _heap_pages(conn, "cedar-ridge") + _heap_pages(conn, "cedar-hollow") - 1
        assert postings > 0
        conn.rollback()

        # a community under the size is passed over, and so is everything past the share
        conn.execute("set arc.community_index_min_chunks = %s" % (max(sizes.values()) + 1))
        assert conn.execute(WARM.format("")).fetchall() == []
        conn.rollback()
        # the share holds the first community's pages and not the second's
        first = warmed[0][2]
        share = conn.execute(
            "select (%s + 0.5) / setting::double precision from pg_settings where name = 'shared_buffers'", (first,)
        ).fetchone()[0]
        assert [c for c, _, _ in conn.execute(WARM.format(share)).fetchall()] == largest_first[:1]
        conn.rollback()
        assert conn.execute(WARM.format("0.000001")).fetchall() == []
        conn.rollback()
        for share in ("0", "1.5"):
            with pytest.raises(psycopg.errors.InvalidParameterValue, match="share"):
                conn.execute(WARM.format(share))
            conn.rollback()

    # another caller meanwhile (several worker processes start together) returns at once
    with psycopg.connect(url) as first, psycopg.connect(url) as second:
        assert first.execute(WARM.format("")).fetchall()
        assert second.execute(WARM.format("")).fetchall() == []
        first.rollback()
        assert second.execute(WARM.format("")).fetchall()

    assert [w.community for w in communities.warm(db)] == largest_first

    # the statement the README gives for a restart of Postgres alone, exactly as written there
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    statement = re.search(r"`(select \* from arc_warm_communities\(\);)`", readme).group(1)
    with psycopg.connect(url, autocommit=True) as conn:
        assert [r[0] for r in conn.execute(statement).fetchall()] == largest_first


def test_a_serving_process_warms_at_its_start(database_factory, embedder, tmp_path, caplog):
    url, db = _two_communities(database_factory, embedder)
    runtime = Runtime(make_settings(tmp_path, url), db, embedder)
    service = KnowledgeService(runtime)
    try:
        with caplog.at_level("INFO", logger="arc.service"):
            service.prepare_calibrations()
            assert service.warming is not None
            service.warming.join(timeout=60)
        warmed = [r for r in caplog.records if r.getMessage() == "communities warmed"]
        assert [r.communities for r in warmed] == [["cedar-hollow", "cedar-ridge"]]
        assert warmed[0].pages > 0
    finally:
        service.close()
        runtime.close()
