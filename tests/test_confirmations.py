"""Confirmed answers over real HTTP (Flask), real Postgres and the real local model (the calls the
README's "Confirmed answers" shows): the keeper confirms, a later question like it gets the
confirmed passage as [SOURCE 1], a different question on the same subject does not, and the
agents' token may vote but not confirm."""

from __future__ import annotations

import html
import json
import re

import psycopg
import pytest

from tests.helpers import make_settings, query_log_written
from worker.ingest.ingestor import Ingestor, ingest_sample_corpus
from worker.runtime import Runtime
from worker.serve.app import create_app
from worker.store.database import Database

ADMIN_TOKEN = "admin-token-0123456789abcdef"
ASK_TOKEN = "ask-token-0123456789abcdefgh"
WRITER_TOKEN = "writer-token-0123456789abcdef"
READER_TOKEN = "reader-token-0123456789abcdef"
ADMIN = {"X-ARC-Token": ADMIN_TOKEN}
ASK = {"X-ARC-Token": ASK_TOKEN}
ROUTE = "/webhook/arc-confirm"
FENCE_HEIGHT = "Rear Yard and side yard fences may not exceed 6 feet in height"


@pytest.fixture(scope="module")
def keeper(make_database, embedder, tmp_path_factory):
    url = make_database("confirm")
    db = Database(url)
    db.migrate(embedder.dim)
    ingest_sample_corpus(Ingestor(db, embedder))
    settings = make_settings(
        tmp_path_factory.mktemp("confirm"),
        url,
        api_token=ASK_TOKEN,
        ingest_token=ADMIN_TOKEN,
        community_tokens=f"write@default:{WRITER_TOKEN}; default:{READER_TOKEN}",
    )
    app = create_app(runtime=Runtime(settings, db, embedder))
    yield app.test_client(), db
    db.close()


def chunk_with(db: Database, text: str) -> int:
    with psycopg.connect(db.url) as conn:
        return conn.execute(
            "select id from knowledge_chunks where content like %s order by id limit 1", (f"%{text}%",)
        ).fetchone()[0]


def ask(client, query: str) -> dict:
    response = client.post("/webhook/arc-retrieval", headers=ASK, json={"query": query})
    assert response.status_code == 200
    return response.get_json()


def source_1(answer: dict) -> dict | None:
    return next((c for c in answer["chunks"] if c["source"] == 1), None)


def test_the_keeper_confirms_lists_and_deletes_and_the_agents_token_may_not(keeper):
    client, db = keeper
    fence = chunk_with(db, FENCE_HEIGHT)
    made = client.post(ROUTE, headers=ADMIN, json={"query": "How tall can my backyard fence be?", "chunk_id": fence})
    assert made.status_code == 201, made.get_json()
    body = made.get_json()
    assert body["state"] == "confirmed" and body["chunk_id"] == fence and body["answer"] == "passage"
    assert isinstance(body["id"], int) and body["community"] == "default"

    none = client.post(ROUTE, headers=ADMIN, json={"query": "Can I keep chickens?", "answer": "none"})
    assert none.status_code == 201 and none.get_json()["answer"] == "none" and none.get_json()["chunk_id"] is None

    listed = client.get(ROUTE + "?community=default", headers=ADMIN).get_json()["confirmations"]
    assert {c["id"] for c in listed} >= {body["id"], none.get_json()["id"]}

    # the agents' token and a read-only community token: 403; a write@ community token confirms
    assert client.post(ROUTE, headers=ASK, json={"query": "x", "answer": "none"}).status_code == 403
    assert client.get(ROUTE, headers=ASK).status_code == 403
    reader = {"X-ARC-Token": READER_TOKEN}
    assert client.post(ROUTE, headers=reader, json={"query": "x", "answer": "none"}).status_code == 403
    assert client.delete(f"{ROUTE}/{body['id']}", headers=reader).status_code == 403
    writer = {"X-ARC-Token": WRITER_TOKEN}
    by_writer = client.post(ROUTE, headers=writer, json={"query": "Is a pool allowed?", "answer": "none"})
    assert by_writer.status_code == 201
    assert client.post(ROUTE, json={"query": "x", "answer": "none"}).status_code == 401

    # bad input names its field
    for bad, field in (
        ({"query": "x"}, "body"),
        ({"query": "x", "chunk_id": fence, "answer": "none"}, "body"),
        ({"query": "", "answer": "none"}, "query"),
        ({"query": "x", "chunk_id": "seven"}, "chunk_id"),
        ({"query": "x", "answer": "maybe"}, "answer"),
        ({"query": "fence\u0000", "answer": "none"}, "query"),  # no Postgres text holds a NUL
    ):
        refused = client.post(ROUTE, headers=ADMIN, json=bad)
        assert refused.status_code == 422 and refused.get_json()["field"] == field, (bad, refused.get_json())
    unknown = client.post(ROUTE, headers=ADMIN, json={"query": "x", "chunk_id": 10_000_000})
    assert unknown.status_code == 404 and unknown.get_json()["field"] == "chunk_id"

    assert client.delete(f"{ROUTE}/{by_writer.get_json()['id']}", headers=writer).status_code == 200
    assert client.delete(f"{ROUTE}/{none.get_json()['id']}", headers=ADMIN).status_code == 200
    gone = client.delete(f"{ROUTE}/{none.get_json()['id']}", headers=ADMIN)
    assert gone.status_code == 404 and gone.get_json()["field"] == "id"
    client.delete(f"{ROUTE}/{body['id']}", headers=ADMIN)


def test_a_rewording_gets_the_confirmed_passage_and_a_different_question_does_not(keeper):
    client, db = keeper
    fence = chunk_with(db, FENCE_HEIGHT)
    original = "What's the max fence height allowed in my backyard??"
    made = client.post(ROUTE, headers=ADMIN, json={"query": original, "chunk_id": fence}).get_json()
    try:
        answer = ask(client, "how tall can a fence in my backyard be")
        assert answer["confirmed"] is not None, answer["confidence"]
        assert answer["confirmed"]["id"] == made["id"] and answer["confirmed"]["query"] == original
        assert 0 < answer["confirmed"]["similarity"] <= 1
        assert answer["status"] == "success" and answer["confidence"]["decided_on"] == "confirmed"
        assert source_1(answer)["id"] == fence and "\n[SOURCE 1]" in answer["context"].split("\n---\n")[0]
        assert FENCE_HEIGHT in answer["context"].split("[SOURCE 2]")[0]
        assert answer["sources"] > 1  # the rest of the context is retrieval's, as without a confirmation

        # same subject, another question: no confirmation taken
        other = ask(client, "what fence materials are allowed?")
        assert other["confirmed"] is None and other["confidence"]["decided_on"] == "relevance"
        unrelated = ask(client, "Can I paint my front door red?")
        assert unrelated["confirmed"] is None
    finally:
        client.delete(f"{ROUTE}/{made['id']}", headers=ADMIN)
    after = ask(client, "how tall can a fence in my backyard be")
    assert after["confirmed"] is None


def test_a_question_like_a_confirmed_none_gets_no_results_with_the_keeper_s_word(keeper):
    client, _ = keeper
    made = client.post(
        ROUTE, headers=ADMIN, json={"query": "Are chickens allowed in backyards?", "answer": "none"}
    ).get_json()
    try:
        answer = ask(client, "Are chickens allowed in backyards?")
        assert answer["status"] == "no_results" and answer["confirmed"]["id"] == made["id"]
        assert "keeper" in answer["message"] and answer["context"] == ""
        assert answer["confidence"]["decided_on"] == "confirmed"
    finally:
        client.delete(f"{ROUTE}/{made['id']}", headers=ADMIN)


def test_votes_from_the_chat_are_recorded_and_counted_and_bad_ones_named(keeper):
    client, _ = keeper
    asked = client.post(
        "/webhook/arc-retrieval", headers={**ASK, "X-Request-ID": "vote-me-1"}, json={"query": "Can I build a shed?"}
    )
    assert asked.status_code == 200
    route = "/webhook/arc-feedback"
    voted = client.post(route, headers=ASK, json={"request_id": "vote-me-1", "helpful": False, "source": 1})
    assert voted.status_code == 201, voted.get_json()
    assert voted.get_json()["helpful"] is False and voted.get_json()["community"] == "default"
    unknown = client.post(route, headers=ASK, json={"request_id": "never-asked", "helpful": True})
    assert unknown.status_code == 404 and unknown.get_json()["field"] == "request_id"
    for bad, field in (
        ({"request_id": "vote-me-1"}, "helpful"),
        ({"request_id": "vote-me-1", "helpful": True, "source": 0}, "source"),
        ({"request_id": "", "helpful": True}, "request_id"),
    ):
        refused = client.post(route, headers=ASK, json=bad)
        assert refused.status_code == 422 and refused.get_json()["field"] == field
    assert client.post(route, json={"request_id": "vote-me-1", "helpful": True}).status_code == 401
    metrics = client.get("/metrics").get_data(as_text=True)
    assert 'arc_feedback_total{verdict="unhelpful"} 1.0' in metrics
    # a vote is never a confirmation
    assert client.get(ROUTE, headers=ADMIN).get_json()["confirmations"] == []

    # Questions asked shows the votes, and lists only the answers voted unhelpful when asked to
    client.post("/webhook/arc-retrieval", headers={**ASK, "X-Request-ID": "liked-1"}, json={"query": "Solar panels?"})
    client.post(route, headers=ASK, json={"request_id": "liked-1", "helpful": True})
    assert query_log_written(client), "written off the answer's path"
    page = client.get("/login").get_data(as_text=True)
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)
    assert client.post("/login", data={"token": ADMIN_TOKEN, "csrf_token": csrf}).status_code == 302
    unhelpful = client.get("/questions?votes=unhelpful").get_data(as_text=True)
    assert "Can I build a shed?" in unhelpful and "Solar panels?" not in unhelpful
    assert "<td>0 / 1</td>" in unhelpful
    everything = client.get("/questions").get_data(as_text=True)
    assert "Solar panels?" in everything and "<td>1 / 0</td>" in everything
    client.get("/logout")


def test_the_command_line_replays_exports_and_imports_the_keeper_s_questions(keeper, monkeypatch, tmp_path):
    from click.testing import CliRunner

    from worker.cli import main

    client, db = keeper
    monkeypatch.setenv("DATABASE_URL", db.url)
    monkeypatch.setenv("ARC_DATA_DIR", str(tmp_path))
    fence = chunk_with(db, FENCE_HEIGHT)
    client.post(
        ROUTE, headers=ADMIN, json={"query": "What's the max fence height allowed in my backyard??", "chunk_id": fence}
    )
    client.post(ROUTE, headers=ADMIN, json={"query": "Can I keep chickens?", "answer": "none"})

    runner = CliRunner()
    replayed = runner.invoke(main, ["eval", "--confirmed", "--community", "default"])
    assert replayed.exit_code == 0, replayed.output
    assert "2 confirmed questions asked as if unconfirmed" in replayed.output
    assert "| evidence | SOURCE 1 | status right |" in replayed.output

    exported = runner.invoke(main, ["confirmations", "export", "--community", "default"])
    assert exported.exit_code == 0, exported.output
    rows = [json.loads(line) for line in exported.output.splitlines() if line.startswith("{")]
    assert {r["kind"] for r in rows} == {"answerable", "unanswerable"}
    passage = next(r for r in rows if r["kind"] == "answerable")
    assert passage["gold_document"] == "design-guidelines-2024" and passage["evidence"]

    before = {c["query"]: c for c in client.get(ROUTE, headers=ADMIN).get_json()["confirmations"]}
    for c in before.values():
        client.delete(f"{ROUTE}/{c['id']}", headers=ADMIN)
    (tmp_path / "questions.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    imported = runner.invoke(main, ["confirmations", "import", str(tmp_path / "questions.jsonl")])
    assert imported.exit_code == 0 and "confirmed 2 of 2" in imported.output, imported.output
    after = {c["query"]: c for c in client.get(ROUTE, headers=ADMIN).get_json()["confirmations"]}
    assert {q: (c["answer"], c["chunk_id"]) for q, c in after.items()} == {
        q: (c["answer"], c["chunk_id"]) for q, c in before.items()
    }
    for c in after.values():
        client.delete(f"{ROUTE}/{c['id']}", headers=ADMIN)


def test_the_keeper_confirms_from_an_answer_on_the_pages_and_sees_the_list(keeper):
    client, db = keeper
    page = client.get("/login").get_data(as_text=True)
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)
    assert client.post("/login", data={"token": ADMIN_TOKEN, "csrf_token": csrf}).status_code == 302
    asked = client.get("/ask?query=How+tall+can+my+backyard+fence+be").get_data(as_text=True)
    assert "this passage answers it" in asked and "not in the documents" in asked
    fence = chunk_with(db, FENCE_HEIGHT)
    assert f'name="chunk_id" value="{fence}"' in asked
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', asked).group(1)  # a sign-in starts a new one
    done = client.post(
        "/confirmations",
        data={"csrf_token": csrf, "query": "How tall can my backyard fence be", "chunk_id": str(fence)},
    )
    assert done.status_code == 302 and "/confirmations" in done.headers["Location"]
    listed = client.get("/confirmations").get_data(as_text=True)
    assert "How tall can my backyard fence be" in listed and "confirmed" in listed
    made = client.get(ROUTE, headers=ADMIN).get_json()["confirmations"]
    assert [(c["query"], c["chunk_id"]) for c in made] == [("How tall can my backyard fence be", fence)]
    assert client.post(f"/confirmations/{made[0]['id']}/delete", data={"csrf_token": csrf}).status_code == 302
    assert client.get(ROUTE, headers=ADMIN).get_json()["confirmations"] == []
    client.get("/logout")


def _csrf(page: str) -> str:
    return re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)


def test_only_the_keeper_signed_in_confirms_on_the_pages_and_only_from_its_own_site(keeper):
    """The pages' confirm form takes the keeper's session and its CSRF token: the agents' token and
    a read-only community token do not open the pages, a form posted from another site's page is
    refused, and none of them leaves a confirmation."""
    client, db = keeper
    fence = chunk_with(db, FENCE_HEIGHT)
    form = {"query": "How tall may a fence be?", "chunk_id": str(fence)}
    for token in (ASK_TOKEN, READER_TOKEN):
        page = client.get("/login").get_data(as_text=True)
        refused = client.post("/login", data={"token": token, "csrf_token": _csrf(page)})
        assert refused.status_code == 401 and "not the admin token" in refused.get_data(as_text=True)
        # a header token is no session: the form is refused before anything is confirmed
        posted = client.post("/confirmations", headers={"X-ARC-Token": token}, data={**form, "csrf_token": "x"})
        assert posted.status_code == 400, posted.status_code
    assert client.get(ROUTE, headers=ADMIN).get_json()["confirmations"] == []

    page = client.get("/login").get_data(as_text=True)
    assert client.post("/login", data={"token": ADMIN_TOKEN, "csrf_token": _csrf(page)}).status_code == 302
    csrf = _csrf(client.get("/confirmations").get_data(as_text=True))
    foreign = client.post(
        "/confirmations", headers={"Origin": "https://elsewhere.example"}, data={**form, "csrf_token": csrf}
    )
    assert foreign.status_code == 403 and "Origin" in foreign.get_data(as_text=True)
    assert client.post("/confirmations", data=form).status_code == 400  # no CSRF token
    assert client.get(ROUTE, headers=ADMIN).get_json()["confirmations"] == []
    client.post("/logout", data={"csrf_token": csrf})


def test_retrieval_testing_leads_to_a_document_with_the_question_carried(keeper):
    """When no passage of the answer is the right one, Retrieval testing links to the documents with
    the question, and each passage of a document's page offers it for confirming."""
    client, _ = keeper
    page = client.get("/login").get_data(as_text=True)
    assert client.post("/login", data={"token": ADMIN_TOKEN, "csrf_token": _csrf(page)}).status_code == 302
    question = "Where may I park a boat trailer?"
    asked = client.get("/ask", query_string={"query": question}).get_data(as_text=True)
    found = re.search(r'<a class="choose" id="choose-passage" href="([^"]+)"', asked)
    assert found, asked[-3000:]
    documents = client.get(html.unescape(found.group(1))).get_data(as_text=True)
    assert question in html.unescape(documents)
    opened = re.search(r'href="(/documents/[^"?]+\?[^"]*query=[^"]+)"', documents)
    assert opened, documents[-3000:]
    document = html.unescape(client.get(html.unescape(opened.group(1))).get_data(as_text=True))
    assert document.count(f'name="query" value="{question}"') >= 1
    assert document.count('class="choose"') == document.count(f'name="query" value="{question}"')
    client.post("/logout", data={"csrf_token": _csrf(asked)})
