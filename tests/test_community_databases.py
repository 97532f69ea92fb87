"""A portfolio split over two Postgres servers (``ARC_COMMUNITY_DATABASES``), for real: two
embedded servers, the worker started the way ``arc-retrieval serve`` starts it (``open_runtime``:
both migrated), documents ingested through the ingest webhook, questions asked through the
retrieval webhook.

Shown: each community's documents, questions and query-log rows are in its own server only; each
answer comes from its own server (the other one stopped, the answer still given); the documents
API, the keeper's pages and the listings follow the mapping; a bad setting stops the start with
one line naming it and never a password; a community held by both servers is refused."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tests.helpers import KEEPER_TOKEN, database_url, make_settings, query_log_written, sign_in
from worker.config import ConfigError, Settings
from worker.errors import CommunityConflict
from worker.ingest.ingestor import Ingestor
from worker.ingest.readers import parse_markdown
from worker.models import DocumentFields
from worker.runtime import Runtime, open_runtime
from worker.serve.app import create_app
from worker.store.database import Database
from worker.store.embedded import EmbeddedPostgres

HOLLOW = "# Hollow hammocks\n\nHammocks strung between two trees must come down between November and March."
RIDGE = "# Ridge kayaks\n\nKayaks may be kept on the dock racks from April through October only."
HEADERS = {"X-ARC-Token": KEEPER_TOKEN}


class Server:
    """An embedded Postgres of the test's own, which it may stop and start again."""

    def __init__(self, folder: Path):
        self.embedded = EmbeddedPostgres(folder)
        self.url = self.embedded.start()

    def new_database(self) -> str:
        name = f"split_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'create database "{name}"')
        return database_url(self.url, name)

    def stop(self) -> None:
        self.embedded.stop()

    def start(self) -> None:
        assert self.embedded.start() == self.url


@pytest.fixture(scope="module")
def servers(pg_server, tmp_path_factory) -> Iterator[tuple[Server, Server]]:
    """Two servers of the module's own (``pg_server`` starts the session's first, and so the
    settings of every embedded server)."""
    first = Server(tmp_path_factory.mktemp("first"))
    second = Server(tmp_path_factory.mktemp("second"))
    yield first, second
    first.stop()
    second.stop()


@pytest.fixture(scope="module")
def split(servers, embedder, tmp_path_factory) -> Iterator[tuple[Runtime, str, str]]:
    """The worker's runtime: ``hollow`` (and every community not listed) in the first server's
    database, ``ridge`` in the second's; with the two URLs."""
    first, second = servers
    default, other = first.new_database(), second.new_database()
    settings = make_settings(
        tmp_path_factory.mktemp("data"),
        default,
        community_databases=f"ridge={other}",
        api_token=KEEPER_TOKEN,
        ingest_token=KEEPER_TOKEN,
        search_cache_seconds=0,
    )
    runtime = open_runtime(settings)
    assert runtime.schema_ready
    yield runtime, default, other
    runtime.close()


@pytest.fixture(scope="module")
def client(split):
    app = create_app(runtime=split[0])
    app.config["TESTING"] = True
    client = app.test_client()
    for community, text, document_id in (("hollow", HOLLOW, "hollow-rules"), ("ridge", RIDGE, "ridge-rules")):
        stored = client.post(
            "/webhook/arc-ingest",
            headers=HEADERS,
            json={"text": text, "document_type": "other", "document_id": document_id, "community": community},
        )
        assert stored.status_code == 200, stored.get_json()
        assert stored.get_json()["community"] == community
    return client


def rows(url: str, sql: str, *params) -> list[tuple]:
    with psycopg.connect(url) as conn:
        return conn.execute(sql, params).fetchall()


def ask(client, query: str, community: str | None):
    body = {"query": query, **({"community": community} if community else {})}
    return client.post("/webhook/arc-retrieval", headers=HEADERS, json=body)


def test_each_community_is_stored_in_its_own_database(client, split):
    _, default, other = split
    chunks = "select community, document_id from knowledge_chunks group by 1, 2 order by 1"
    assert rows(default, chunks) == [("hollow", "hollow-rules")]
    assert rows(other, chunks) == [("ridge", "ridge-rules")]
    migrations = "select count(*) from schema_migrations"
    assert rows(default, migrations) == rows(other, migrations)  # both migrated at start


def test_each_question_is_answered_and_logged_by_its_community_s_database(client, split):
    _runtime, default, other = split
    for community, query, words, elsewhere in (
        ("hollow", "When must hammocks come down?", "Hammocks strung", "Kayaks"),
        ("ridge", "When can kayaks be kept on the dock?", "Kayaks may be kept", "Hammocks"),
    ):
        response = ask(client, query, community)
        assert response.status_code == 200, response.get_json()
        answer = response.get_json()
        assert answer["community"] == community
        assert words in answer["chunks"][0]["content"]
        assert all(elsewhere not in chunk["content"] for chunk in answer["chunks"])
        assert elsewhere not in answer["context"]
    # the other community's question, asked in this one, finds nothing of the other's documents
    crossed = ask(client, "When must hammocks come down?", "ridge").get_json()
    assert all("Hammocks" not in chunk["content"] for chunk in crossed["chunks"])

    client.application.extensions["arc"].knowledge.flush_query_logs()
    logged = "select community, count(*) from query_log group by 1 order by 1"
    assert rows(default, logged) == [("hollow", 1)]
    assert rows(other, logged) == [("ridge", 2)]


def test_a_question_names_its_community_when_the_databases_hold_several(client):
    response = ask(client, "When must hammocks come down?", None)
    assert response.status_code == 400
    error = response.get_json()
    assert error["field"] == "community" and "2 communities" in error["message"]


def test_the_documents_api_follows_the_mapping(client, split):
    for community, document_id, other_id in (
        ("ridge", "ridge-rules", "hollow-rules"),
        ("hollow", "hollow-rules", "ridge-rules"),
    ):
        listed = client.get(f"/webhook/arc-documents?community={community}", headers=HEADERS)
        assert listed.status_code == 200, listed.get_json()
        assert [d["document_id"] for d in listed.get_json()["documents"]] == [document_id]
        shown = client.get(f"/webhook/arc-documents/{document_id}?community={community}", headers=HEADERS)
        assert shown.status_code == 200 and shown.get_json()["chunks"]
        assert (
            client.get(f"/webhook/arc-documents/{other_id}?community={community}", headers=HEADERS).status_code == 404
        )
    unnamed = client.get("/webhook/arc-documents", headers=HEADERS)
    assert unnamed.status_code == 400 and "2 communities" in unnamed.get_json()["message"]

    # a delete goes to the community's database, and only there
    _, _default, other = split
    stored = client.post(
        "/webhook/arc-ingest",
        headers=HEADERS,
        json={
            "text": "# Ridge boats\n\nBoats need a dock permit.",
            "document_type": "other",
            "document_id": "ridge-boats",
            "community": "ridge",
        },
    )
    assert stored.status_code == 200
    assert rows(other, "select count(*) from knowledge_chunks where document_id = 'ridge-boats'")[0][0] >= 1
    deleted = client.delete("/webhook/arc-documents/ridge-boats?community=ridge", headers=HEADERS)
    assert deleted.status_code == 200, deleted.get_json()
    assert rows(other, "select count(*) from knowledge_chunks where document_id = 'ridge-boats'") == [(0,)]


def test_the_keeper_s_pages_follow_the_mapping(client):
    sign_in(client)
    chooser = client.get("/documents").get_data(as_text=True)
    assert "hollow" in chooser and "ridge" in chooser  # every database's communities
    ridge = client.get("/documents?community=ridge").get_data(as_text=True)
    assert "Ridge kayaks" in ridge and "Hollow hammocks" not in ridge
    hollow = client.get("/documents?community=hollow").get_data(as_text=True)
    assert "Hollow hammocks" in hollow and "Ridge kayaks" not in hollow
    # each community's questions from its own database's query log
    assert ask(client, "When can kayaks be kept on the dock?", "ridge").status_code == 200
    client.application.extensions["arc"].knowledge.flush_query_logs()
    assert "kayaks be kept on the dock" in client.get("/questions?community=ridge").get_data(as_text=True)
    assert "kayaks" not in client.get("/questions?community=hollow").get_data(as_text=True)


def test_confirmations_and_votes_go_to_the_community_s_database(client, split):
    _, default, other = split
    kayaks = rows(other, "select id from knowledge_chunks where document_id = 'ridge-rules' order by id limit 1")[0][0]
    made = client.post(
        "/webhook/arc-confirm",
        headers=HEADERS,
        json={"community": "ridge", "query": "Where do kayaks go in summer?", "chunk_id": kayaks},
    )
    assert made.status_code == 201, made.get_json()
    confirmed = "select community, document_id from answer_confirmations"
    assert rows(other, confirmed) == [("ridge", "ridge-rules")] and rows(default, confirmed) == []
    # the confirmation steers the next question of its community, read from its database
    answer = ask(client, "Where do kayaks go in summer?", "ridge").get_json()
    assert answer["confirmed"] is not None and answer["chunks"][0]["id"] == kayaks
    # each database numbers its own: an id held by one database's community is deleted there
    assert client.delete(f"/webhook/arc-confirm/{made.get_json()['id']}", headers=HEADERS).status_code == 200
    assert rows(other, confirmed) == []

    asked = client.post(
        "/webhook/arc-retrieval",
        headers={**HEADERS, "X-Request-ID": "split-vote-1"},
        json={"query": "When can kayaks be kept on the dock?", "community": "ridge"},
    )
    assert asked.status_code == 200
    voted = client.post("/webhook/arc-feedback", headers=HEADERS, json={"request_id": "split-vote-1", "helpful": True})
    assert voted.status_code == 201, voted.get_json()
    assert voted.get_json()["community"] == "ridge"
    votes = "select community, helpful from answer_feedback"
    assert rows(other, votes) == [("ridge", True)] and rows(default, votes) == []


def test_the_command_line_follows_the_mapping(split, tmp_path, monkeypatch):
    from click.testing import CliRunner

    from worker.cli import main

    _runtime, default, other = split
    monkeypatch.setenv("DATABASE_URL", default)
    monkeypatch.setenv("ARC_COMMUNITY_DATABASES", f"ridge={other}")
    monkeypatch.setenv("ARC_DATA_DIR", str(tmp_path))
    runner = CliRunner()
    init = runner.invoke(main, ["db", "init"])
    assert init.exit_code == 0, init.output
    assert "migrations applied in the default database" in init.output
    assert "migrations applied in the database at" in init.output
    assert "postgres:@" not in init.output  # databases named by host, port and name only
    (tmp_path / "canoes.md").write_text("# Ridge canoes\n\nCanoes are stored upside down on the upper rack.\n")
    loaded = runner.invoke(
        main, ["ingest", str(tmp_path / "canoes.md"), "--document-type", "other", "--community", "ridge"]
    )
    assert loaded.exit_code == 0, loaded.output
    assert rows(other, "select count(*) from knowledge_chunks where document_id = 'canoes'")[0][0] >= 1
    assert rows(default, "select count(*) from knowledge_chunks where document_id = 'canoes'") == [(0,)]
    listed = runner.invoke(main, ["documents", "list", "--community", "ridge"])
    assert listed.exit_code == 0 and "canoes" in listed.output and "hollow-rules" not in listed.output
    deleted = runner.invoke(main, ["documents", "delete", "canoes", "--community", "ridge"])
    assert deleted.exit_code == 0, deleted.output
    assert rows(other, "select count(*) from knowledge_chunks where document_id = 'canoes'") == [(0,)]


def test_each_server_answers_its_communities_with_the_other_stopped(client, servers):
    """The proof that nothing of one database is read for another's question: with a server
    stopped, the other server's community is still answered, and the stopped one's is a 503."""
    first, second = servers
    hollow = ("When must hammocks come down?", "hollow", "Hammocks strung")
    ridge = ("When can kayaks be kept on the dock?", "ridge", "Kayaks may be kept")
    for stopped, (question, community, passage), (lost_question, lost_community, _) in (
        (second, hollow, ridge),
        (first, ridge, hollow),
    ):
        stopped.stop()
        try:
            answered = ask(client, question, community)
            assert answered.status_code == 200, answered.get_json()
            assert passage in answered.get_json()["chunks"][0]["content"]
            assert ask(client, lost_question, lost_community).status_code == 503
        finally:
            stopped.start()


def test_a_bad_mapping_stops_the_start_with_one_line_and_no_password():
    secret = "pa55-w0rd-never-shown"
    for value, said in (
        (f"ridge postgresql://arc:{secret}@db2:5432/arc", "entries are COMMUNITY"),
        (f"ridge=mysql://arc:{secret}@db2/arc", "entries are COMMUNITY"),
        (f"Ridge=postgresql://arc:{secret}@db2:5432/arc", "'Ridge': a community is lowercase"),
        (f"ridge=postgresql://arc:{secret}@db2:port/arc", "the database of ridge: not a Postgres connection"),
        (f"ridge=postgresql://arc:{secret}@db2/arc?sslmode=maybe", "sslmode='maybe' is not one of"),
        (f"ridge=postgresql://arc:{secret}@db2/a;ridge,oak=postgresql://arc:{secret}@db3/b", "'ridge' is listed twice"),
    ):
        with pytest.raises(ConfigError) as refused:
            Settings.from_env({"DATABASE_URL": "postgresql://arc@db1/arc", "ARC_COMMUNITY_DATABASES": value})
        message = str(refused.value)
        assert message.startswith("invalid configuration: ARC_COMMUNITY_DATABASES: ") and said in message, message
        assert secret not in message and "\n" not in message
    mapped = Settings.from_env(
        {"ARC_COMMUNITY_DATABASES": f"ridge,oak=postgresql://arc:{secret}@db2/a\nelm=postgresql://arc:{secret}@db3/b"}
    )
    assert mapped.database.community_databases == {
        "ridge": f"postgresql://arc:{secret}@db2/a",
        "oak": f"postgresql://arc:{secret}@db2/a",
        "elm": f"postgresql://arc:{secret}@db3/b",
    }
    with pytest.raises(ConfigError, match="ARC_COMMUNITY_DATABASES work with the Postgres backend"):
        Settings.from_env(
            {
                "DATABASE_URL": "postgresql://arc@db1/arc",
                "SUPABASE_URL": "https://x.supabase.co",
                "SUPABASE_KEY": "sb_secret_x",
                "ARC_COMMUNITY_DATABASES": "ridge=postgresql://db2/a",
            }
        )


def test_a_community_held_by_both_databases_is_refused(servers, embedder, tmp_path):
    """A mapping changed after a load (``oak`` sent to the second server, still in the first):
    the start refuses, and so do the community's documents calls and loads and every listing of
    the whole knowledge base, naming both databases; another community is served as before."""
    first, second = servers
    default, other = first.new_database(), second.new_database()
    for url in (default, other):
        db = Database(url)
        db.migrate(embedder.dim)
        ingestor = Ingestor(db, embedder)
        ingestor.write(
            [
                ingestor.prepare_text(
                    parse_markdown(HOLLOW),
                    DocumentFields(document_id="oak-rules", name="Oak rules", document_type="other"),
                )
            ],
            community="oak",
        )
        if url == default:
            ingestor.write(
                [
                    ingestor.prepare_text(
                        parse_markdown(RIDGE),
                        DocumentFields(document_id="elm-rules", name="Elm rules", document_type="other"),
                    )
                ],
                community="elm",
            )
        db.close()
    settings = make_settings(
        tmp_path, default, community_databases=f"oak={other}", api_token=KEEPER_TOKEN, ingest_token=KEEPER_TOKEN
    )
    with pytest.raises(CommunityConflict) as refused:
        open_runtime(settings)
    message = str(refused.value)
    assert "'oak' is held by the default database" in message and "ARC_COMMUNITY_DATABASES" in message
    assert message.count("/split_") == 3  # both databases named (by host, port and name), the mapped one again

    runtime = open_runtime(settings, migrate=False)  # a worker that started before the second load
    try:
        client = create_app(runtime=runtime).test_client()
        listed = client.get("/webhook/arc-documents?community=oak", headers=HEADERS)
        assert listed.status_code == 409, listed.get_json()
        assert listed.get_json()["error"] == "community_conflict" and "'oak'" in listed.get_json()["message"]
        loaded = client.post(
            "/webhook/arc-ingest",
            headers=HEADERS,
            json={"text": RIDGE, "document_type": "other", "document_id": "oak-more", "community": "oak"},
        )
        assert loaded.status_code == 409, loaded.get_json()
        assert rows(other, "select count(*) from knowledge_chunks where document_id = 'oak-more'") == [(0,)]
        # the whole knowledge base's listing is refused; another community is served as before
        assert client.get("/webhook/arc-documents", headers=HEADERS).status_code == 409
        elm = client.get("/webhook/arc-documents?community=elm", headers=HEADERS)
        assert elm.status_code == 200 and [d["document_id"] for d in elm.get_json()["documents"]] == ["elm-rules"]
    finally:
        runtime.close()


def test_a_community_is_deleted_in_the_database_that_holds_it(client, split):
    """`DELETE /webhook/arc-communities/<community>` in a split knowledge base: the community goes
    from its database, the other database is not touched, and the listing across both follows."""
    _, default, other = split
    assert ask(client, "When can kayaks be kept on the dock?", "ridge").status_code == 200
    assert query_log_written(client)  # the question is in ridge's database before the delete
    assert rows(other, "select count(*) from query_log where community = 'ridge'")[0][0] >= 1
    count = "select count(*) from knowledge_chunks where community = %s"
    hollow_before = rows(default, count, "hollow")
    listed = client.get("/webhook/arc-communities", headers=HEADERS).get_json()["communities"]
    assert {c["community"] for c in listed} == {"hollow", "ridge"}

    deleted = client.delete("/webhook/arc-communities/ridge", headers=HEADERS)
    assert deleted.status_code == 200, deleted.get_json()
    assert deleted.get_json()["removed"]["chunks"] >= 1
    assert rows(other, count, "ridge") == [(0,)]
    assert rows(other, "select count(*) from query_log where community = 'ridge'") == [(0,)]
    assert rows(default, count, "hollow") == hollow_before
    listed = client.get("/webhook/arc-communities", headers=HEADERS).get_json()["communities"]
    assert [c["community"] for c in listed] == ["hollow"]
    assert ask(client, "When can kayaks be kept on the dock?", "ridge").status_code == 404

    # loaded again, it goes back to its database
    stored = client.post(
        "/webhook/arc-ingest",
        headers=HEADERS,
        json={"text": RIDGE, "document_type": "other", "document_id": "ridge-rules", "community": "ridge"},
    )
    assert stored.status_code == 200, stored.get_json()
    assert rows(other, count, "ridge")[0][0] >= 1
