"""A community that leaves the knowledge base (an association leaving a management company's
portfolio) is deleted whole: its documents, everything kept about it and its own schema objects
(sql/functions/arc_delete_community.sql), in one transaction, on both Postgres versions; the
other communities answer as before, and the name can be loaded again."""

from __future__ import annotations

import shlex

import psycopg
import pytest
from click.testing import CliRunner
from psycopg import sql

from tests.helpers import make_settings, query_log_written, shell_blocks, two_indexed_communities
from worker.cli import main
from worker.errors import CommunityForbidden, UnknownCommunity
from worker.ingest.ingestor import Ingestor, ingest_sample_corpus
from worker.runtime import Runtime
from worker.serve.app import create_app
from worker.service.caller import Caller
from worker.store import communities
from worker.store.database import Database

SEARCH = (
    "select id, round(fused_score::numeric, 9) from hybrid_search(query_text => %(q)s, "
    "query_embedding => %(e)s::vector, match_count => 20, community => %(c)s)"
)
QUESTIONS = ("can I build a fence", "how many board members", "paint colour approval")


def _vector(embedder, q: str) -> str:
    return "[" + ",".join(f"{x:.7g}" for x in embedder.embed_query(q)) + "]"


def _answers(conn, embedder, community: str) -> dict[str, list]:
    return {q: conn.execute(SEARCH, {"q": q, "e": _vector(embedder, q), "c": community}).fetchall() for q in QUESTIONS}


def _keep_about(conn, community: str) -> None:
    """What the service keeps about a community besides its documents: a confirmation, a vote, a
    question asked, a status calibration and a language scale."""
    conn.execute(
        "insert into answer_confirmations (community, query, answer, embedding, embedding_model) "
        "values (%s, 'is there a pool', 'none', '{0.1,0.2}', 'm')",
        (community,),
    )
    conn.execute(
        "insert into answer_feedback (request_id, community, helpful) values ('r-' || %s, %s, false)",
        (community, community),
    )
    conn.execute(
        "insert into query_log (request_id, query, status, community) values ('r-' || %s, 'fence?', 'success', %s)",
        (community, community),
    )
    conn.execute(
        "insert into status_calibrations (community, embedding_model, kb_version) values (%s, 'm', 1) "
        "on conflict do nothing",
        (community,),
    )
    conn.execute(
        "insert into status_language_scales (community, embedding_model, language, kb_version, floor, "
        "match, near_miss, language_drop, pairs) values (%s, 'm', 'es', 1, 0.1, 0.8, 0.5, 0.1, 10)",
        (community,),
    )


def _rows_naming(conn, community: str) -> dict[str, int]:
    """Every table with a community column, and how many of its rows name ``community`` (a table
    added later is checked as well), bar the two counters the delete keeps on purpose."""
    tables = [
        r[0]
        for r in conn.execute(
            "select c.table_name from information_schema.columns c join information_schema.tables t "
            "on t.table_schema = c.table_schema and t.table_name = c.table_name "
            "where c.table_schema = current_schema() and c.column_name = 'community' and t.table_type = 'BASE TABLE' "
            "and c.table_name not in ('knowledge_base_state', 'bm25_corpus') order by 1"
        )
    ]
    assert {"knowledge_chunks", "bm25_postings", "bm25_terms", "answer_confirmations", "query_log"} <= set(tables)
    return {
        t: conn.execute(
            sql.SQL("select count(*) from {} where community = %s").format(sql.Identifier(t)), (community,)
        ).fetchone()[0]
        for t in tables
    }


def _objects_of(conn, community: str) -> list[str]:
    """The schema objects named after ``community`` (arc_community_object_name: its vector table,
    primary key, HNSW index, leg function)."""
    return [
        r[0]
        for r in conn.execute(
            "select relname from pg_class where relname like '%%\\_' || %(c)s "
            "union all select proname from pg_proc where proname like '%%\\_' || %(c)s order by 1",
            {"c": community},
        )
    ]


def test_a_deleted_community_leaves_nothing_and_the_others_answer_as_before(database_factory, embedder):
    url, db, ingestor = two_indexed_communities(database_factory, embedder, "delcommunity")
    with psycopg.connect(url, autocommit=True) as conn:
        for community in ("cedar-hollow", "cedar-ridge"):
            _keep_about(conn, community)
        hollow = _answers(conn, embedder, "cedar-hollow")
        kept_hollow = _rows_naming(conn, "cedar-hollow")
        assert len(_objects_of(conn, "cedar-ridge")) == 4, _objects_of(conn, "cedar-ridge")
        version = conn.execute("select version from knowledge_base_state where community = 'cedar-ridge'").fetchone()[0]

    removed = communities.delete(db, "cedar-ridge")
    assert removed == {
        "documents": 6,
        "chunks": 39,
        "confirmations": 1,
        "votes": 1,
        "questions asked": 1,
        "calibrations": 2,
        "objects": 3,
    }

    with psycopg.connect(url, autocommit=True) as conn:
        assert set(_rows_naming(conn, "cedar-ridge").values()) == {0}
        assert _objects_of(conn, "cedar-ridge") == []
        assert conn.execute("select n_docs from bm25_corpus where community = 'cedar-ridge'").fetchone() == (0,)
        assert "cedar-ridge" not in communities.list_communities(db)
        # the other community keeps every row and answers exactly as before
        assert _rows_naming(conn, "cedar-hollow") == kept_hollow
        assert _answers(conn, embedder, "cedar-hollow") == hollow
        with pytest.raises(psycopg.errors.InvalidParameterValue):
            conn.execute(SEARCH, {"q": "fence", "e": _vector(embedder, "fence"), "c": "cedar-ridge"})

    with pytest.raises(UnknownCommunity):
        communities.delete(db, "cedar-ridge")

    # the name loads again, with its own index again, under a later version than any it had
    ingest_sample_corpus(ingestor, community="cedar-ridge")
    with psycopg.connect(url, autocommit=True) as conn:
        assert len(_objects_of(conn, "cedar-ridge")) == 4
        assert all(_answers(conn, embedder, "cedar-ridge").values())
        again = conn.execute("select version from knowledge_base_state where community = 'cedar-ridge'").fetchone()[0]
    assert again > version


def test_only_the_keeper_of_every_community_deletes_one():
    with pytest.raises(CommunityForbidden):
        Caller("token", communities=("cedar-ridge",), write=True).may_delete_community()
    Caller("local").may_delete_community()


def _readme_commands() -> list[list[str]]:
    """The README's community commands (the block this file runs), as arguments of the CLI."""
    block = next(b for b in shell_blocks() if b.marker and "test_community_delete.py" in b.marker)
    return [shlex.split(c, comments=True)[1:] for c in block.commands]


def test_the_readme_commands_list_and_delete_a_community(make_database, embedder, tmp_path, monkeypatch):
    url = make_database("delcli")
    monkeypatch.setenv("DATABASE_URL", url)
    monkeypatch.setenv("ARC_DATA_DIR", str(tmp_path))
    runner = CliRunner()
    for community in ("cedar-hollow", "heronwood"):
        loaded = runner.invoke(main, ["ingest", "--sample", "--community", community])
        assert loaded.exit_code == 0, loaded.output
    listing, deleting = _readme_commands()
    assert listing == ["communities", "list"] and deleting == ["communities", "delete", "heronwood", "--yes"]

    listed = runner.invoke(main, listing)
    assert listed.exit_code == 0 and "cedar-hollow\t39\nheronwood\t39\n" in listed.output, listed.output

    asked = runner.invoke(main, deleting[:-1], input="n\n")  # without --yes it asks, and "n" keeps it
    assert asked.exit_code != 0 and "Aborted" in asked.output
    assert "heronwood" in runner.invoke(main, listing).output

    deleted = runner.invoke(main, deleting)
    assert deleted.exit_code == 0, deleted.output
    assert "deleted community heronwood: 6 documents, 39 chunks" in deleted.output
    listed = runner.invoke(main, listing)
    assert "heronwood" not in listed.output and "cedar-hollow\t39" in listed.output

    again = runner.invoke(main, deleting)
    assert again.exit_code == 1
    assert again.output.strip().splitlines()[-1] == "Error: nothing is kept under 'heronwood' in this knowledge base"


ASK_TOKEN, ADMIN_TOKEN = "ask-ask-ask-ask-ask-ask-1", "admin-admin-admin-admin-1"
RIDGE_WRITER = "ridge-writer-secret-00001"


def test_over_http_the_keeper_of_every_community_deletes_one(make_database, embedder, tmp_path):
    url = make_database("delhttp")
    db = Database(url)
    db.migrate(embedder.dim)
    ingestor = Ingestor(db, embedder)
    for community in ("cedar-hollow", "cedar-ridge"):
        ingest_sample_corpus(ingestor, community=community)
    settings = make_settings(
        tmp_path,
        url,
        api_token=ASK_TOKEN,
        ingest_token=ADMIN_TOKEN,
        community_tokens=f"write@cedar-ridge:{RIDGE_WRITER}",
    )
    client = create_app(runtime=Runtime(settings, db, embedder)).test_client()
    admin, ridge, ask = ({"X-ARC-Token": t} for t in (ADMIN_TOKEN, RIDGE_WRITER, ASK_TOKEN))
    asked = client.post(
        "/webhook/arc-retrieval", json={"query": "fence height", "community": "cedar-ridge"}, headers=ask
    )
    assert asked.status_code == 200 and query_log_written(client)

    listed = client.get("/webhook/arc-communities", headers=admin)
    assert listed.status_code == 200
    assert listed.get_json()["communities"] == [
        {"community": "cedar-hollow", "chunks": 39},
        {"community": "cedar-ridge", "chunks": 39},
    ]
    assert [
        c["community"] for c in client.get("/webhook/arc-communities", headers=ridge).get_json()["communities"]
    ] == ["cedar-ridge"]
    # neither the agents' token nor a community's own writing token deletes a community
    assert client.delete("/webhook/arc-communities/cedar-ridge", headers=ask).status_code == 403
    refused = client.delete("/webhook/arc-communities/cedar-ridge", headers=ridge)
    assert refused.status_code == 403, refused.get_json()
    assert refused.get_json()["field"] == "community" and "every community" in refused.get_json()["message"]
    bad = client.delete("/webhook/arc-communities/Cedar%20Ridge", headers=admin)
    assert bad.status_code == 422 and bad.get_json()["field"] == "community"
    assert "cedar-ridge" in communities.list_communities(db)

    deleted = client.delete("/webhook/arc-communities/cedar-ridge", headers=admin)
    assert deleted.status_code == 200, deleted.get_json()
    body = deleted.get_json()
    assert body["status"] == "deleted" and body["community"] == "cedar-ridge"
    assert body["removed"]["chunks"] == 39 and body["removed"]["questions asked"] == 1
    with psycopg.connect(url) as conn:
        assert set(_rows_naming(conn, "cedar-ridge").values()) == {0}

    gone = client.post(
        "/webhook/arc-retrieval", json={"query": "fence height", "community": "cedar-ridge"}, headers=ask
    )
    assert gone.status_code == 404 and gone.get_json()["field"] == "community"
    again = client.delete("/webhook/arc-communities/cedar-ridge", headers=admin)
    assert again.status_code == 404 and again.get_json()["field"] == "community"
    assert (
        client.post(
            "/webhook/arc-retrieval", json={"query": "fence height", "community": "cedar-hollow"}, headers=ask
        ).status_code
        == 200
    )
    assert query_log_written(client)
    db.close()
