"""Every door gives the same status and confidence for the same question: the webhook, the CLI and
the MCP tool all read the status calibration stored with the knowledge base (sql/036), and a
write through the CLI stores the new one before it returns."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import psycopg
import pytest
from click.testing import CliRunner
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from worker.cli import main
from worker.ingest.ingestor import Ingestor, ingest_sample_corpus
from worker.runtime import Runtime
from worker.serve.mcp_server import SEARCH_TOOL
from worker.serve.webhooks import RETRIEVAL_ROUTE
from worker.store.database import Database

from tests.helpers import make_settings

ROOT = Path(__file__).resolve().parent.parent
QUESTION = "How much is the fine for an unapproved fence?"
SAME = ("score", "relevance", "calibrated", "floor", "match", "near_miss", "top", "kb_version")


@pytest.fixture()
def sample_url(make_database, embedder, request) -> str:
    """A sample knowledge base loaded by a writer that measured nothing: no calibration stored."""
    url = make_database("doors_" + request.node.name[-20:].strip("_"))
    db = Database(url)
    db.migrate(embedder.dim)
    ingest_sample_corpus(Ingestor(db, embedder))
    db.close()
    return url


def webhook_answer(url: str, embedder, tmp_path: Path, query: str = QUESTION) -> dict:
    from worker.serve.app import create_app

    db = Database(url)
    try:
        app = create_app(runtime=Runtime(make_settings(tmp_path, url), db, embedder))
        return app.test_client().post(RETRIEVAL_ROUTE, json={"query": query}).get_json()
    finally:
        db.close()


def cli(url: str, tmp_path: Path, monkeypatch, *args: str) -> str:
    monkeypatch.setenv("DATABASE_URL", url)
    monkeypatch.setenv("ARC_DATA_DIR", str(tmp_path))
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def test_the_cli_gives_the_webhooks_status_and_confidence(sample_url, embedder, tmp_path, monkeypatch):
    output = cli(sample_url, tmp_path, monkeypatch, "ask", QUESTION)
    # stderr (JSON log lines) shares the runner's output: decode the answer where it starts
    asked, _ = json.JSONDecoder().raw_decode(output, output.index('{\n  "status"'))
    webhook = webhook_answer(sample_url, embedder, tmp_path)
    assert asked["confidence"]["calibrated"] is True
    assert asked["status"] == webhook["status"]
    assert {k: asked["confidence"][k] for k in SAME} == {k: webhook["confidence"][k] for k in SAME}


def test_an_ingest_from_the_cli_stores_the_new_calibration(sample_url, embedder, tmp_path, monkeypatch):
    webhook_answer(sample_url, embedder, tmp_path)  # measured and stored at the sample's version
    rules = tmp_path / "pool.md"
    rules.write_text("# Pool rules\n\nThe pool opens at seven in the morning and closes at nine at night. "
                     "Children under twelve must be accompanied by an adult at all times.\n")
    cli(sample_url, tmp_path, monkeypatch, "ingest", str(rules), "--document-type", "other")
    with psycopg.connect(sample_url) as conn:
        stored, now = conn.execute("select kb_version, knowledge_base_version('default') "
                                   "from status_calibrations").fetchone()
    assert stored == now  # measured before the command returned
    assert webhook_answer(sample_url, embedder, tmp_path)["confidence"]["kb_version"] == now


def test_the_mcp_tool_gives_the_webhooks_status_and_confidence(sample_url, embedder, tmp_path):
    import os

    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENAI_API_KEY", "SUPABASE_URL", "LLM_API_KEY", "ARC_API_TOKEN")}
    env.update({"DATABASE_URL": sample_url, "ARC_DATA_DIR": str(tmp_path), "ARC_SEARCH_CACHE_SECONDS": "0"})
    params = StdioServerParameters(command=sys.executable, args=["-m", "worker.cli", "mcp"], env=env,
                                   cwd=str(ROOT))

    async def go():
        async with Client(params) as client:
            return await client.call_tool(SEARCH_TOOL, {"query": QUESTION})

    tool = anyio.run(go).structured_content  # the process's very first question
    webhook = webhook_answer(sample_url, embedder, tmp_path)
    assert tool["confidence"]["calibrated"] is True
    assert tool["status"] == webhook["status"]
    assert {k: tool["confidence"][k] for k in SAME} == {k: webhook["confidence"][k] for k in SAME}
