"""The doors share one knowledge-base service (worker/service/knowledge.py): the same question
through the webhook, Dify's /retrieval, the MCP tool, the keeper's retrieval test and the
command line reaches ``KnowledgeService.ask`` once each and gets the same status; the resident's
doors (webhook, Dify, MCP) leave one query-log row each, and the metrics count them, while the
keeper's and the developer's test questions are answered without a record."""

from __future__ import annotations

import json

import anyio
import psycopg
import pytest
from click.testing import CliRunner
from mcp import Client

from worker.cli import main
from worker.runtime import Runtime
from worker.serve.app import RETRIEVAL_ROUTE, create_app
from worker.serve.mcp_server import SEARCH_TOOL, McpFace, build_server
from worker.service.caller import LOCAL
from worker.service.knowledge import KnowledgeService

from tests.helpers import csrf

TOKEN = "service-doors-token-0123456789abcdef"
QUESTION = "How tall can a backyard fence be?"


@pytest.fixture()
def spied(monkeypatch):
    """Every call of ``KnowledgeService.ask``, in every service of this process: (the door's
    request id, whether it is recorded, the status)."""
    calls: list[tuple[str | None, bool, str]] = []
    real = KnowledgeService.ask

    def ask(self, request, *, caller, request_id=None, record=True):
        answer = real(self, request, caller=caller, request_id=request_id, record=record)
        calls.append((request_id, record, answer.status))
        return answer

    monkeypatch.setattr(KnowledgeService, "ask", ask)
    return calls


def _query_log(db_url: str) -> list[tuple[str, str]]:
    with psycopg.connect(db_url) as conn:
        return conn.execute("select request_id, status from query_log order by id").fetchall()


def test_every_door_asks_through_the_one_service(sample_runtime, spied, tmp_path, monkeypatch):
    settings = sample_runtime.settings.replace(**{"api_token": TOKEN, "ingest_token": TOKEN,
                                                          "rate_limit": 0.0})
    knowledge = KnowledgeService(Runtime(settings, sample_runtime.db, sample_runtime.embedder))
    app = create_app(service=knowledge)
    app.config["TESTING"] = True
    client = app.test_client()
    face = McpFace.build(knowledge.runtime, knowledge=knowledge)
    assert app.extensions["arc"].knowledge is knowledge and face.knowledge is knowledge
    before = len(_query_log(sample_runtime.db.url))

    webhook = client.post(RETRIEVAL_ROUTE, json={"query": QUESTION},
                          headers={settings.auth.auth_header: TOKEN, "X-Request-ID": "door-webhook"})
    assert webhook.status_code == 200, webhook.get_json()
    status = webhook.get_json()["status"]

    dify = client.post("/retrieval", json={"knowledge_id": "all", "query": QUESTION,
                                           "retrieval_setting": {"top_k": 8, "score_threshold": 0.0}},
                       headers={"Authorization": f"Bearer {TOKEN}", "X-Request-ID": "door-dify"})
    assert dify.status_code == 200 and dify.get_json()["records"], dify.get_json()

    async def over_mcp():
        async with Client(build_server(face)) as mcp:
            return await mcp.call_tool(SEARCH_TOOL, {"query": QUESTION})

    tool = anyio.run(over_mcp)
    assert not tool.is_error and tool.structured_content["status"] == status

    login = client.get("/login").get_data(as_text=True)
    assert client.post("/login", data={"token": TOKEN, "csrf_token": csrf(login)}).status_code == 302
    page = client.get("/ask").get_data(as_text=True)
    tested = client.post("/ask", data={"query": QUESTION, "csrf_token": csrf(page)})
    assert tested.status_code == 200 and status in tested.get_data(as_text=True)

    monkeypatch.setenv("DATABASE_URL", sample_runtime.db.url)
    monkeypatch.setenv("ARC_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    command = CliRunner().invoke(main, ["ask", QUESTION])
    assert command.exit_code == 0, command.output
    assert json.loads(command.output[command.output.index("{\n"):])["status"] == status  # after the log lines

    mcp_id = tool.structured_content["request_id"]
    assert spied == [("door-webhook", True, status), ("door-dify", True, status), (mcp_id, True, status),
                     (None, False, status), (None, False, status)]
    # one row per resident's question, none for the keeper's or the developer's test
    assert knowledge.query_log.flush()
    assert _query_log(sample_runtime.db.url)[before:] == [("door-webhook", status), ("door-dify", status),
                                                          (mcp_id, status)]
    metrics = client.get("/metrics").get_data(as_text=True)
    assert f'arc_answers_total{{status="{status}"}} 3.0' in metrics


def test_a_write_through_any_door_tells_the_retriever(sample_runtime):
    """Ingest and delete invalidate the one retriever's caches (knowledge_base_changed) through
    the service."""
    knowledge = KnowledgeService(sample_runtime)
    told: list[str] = []
    knowledge.retriever.knowledge_base_changed = lambda: told.append("changed")
    client = create_app(service=knowledge).test_client()
    text = "# Kite rules\n\nKites may fly over the common green on Sundays only."
    stored = client.post("/webhook/arc-ingest", json={"text": text, "document_type": "other",
                                                       "document_id": "kites"})
    assert stored.status_code == 200, stored.get_json()
    assert told == ["changed"]
    deleted = client.delete("/webhook/arc-documents/kites")
    assert deleted.status_code == 200 and deleted.get_json()["deleted_chunks"] >= 1
    assert told == ["changed", "changed"]

    # Listing builds no retriever; a write told to a service without one builds it, since the
    # changed community's status calibration is measured and stored for every door to read.
    listing_only = KnowledgeService(sample_runtime)
    assert listing_only.list_documents(listing_only.community(None, caller=LOCAL), caller=LOCAL)
    assert listing_only.shard(None).built_retriever is None
