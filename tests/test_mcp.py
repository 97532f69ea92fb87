"""The MCP server (worker/serve/mcp_server.py) through the official SDK's own client: over stdio
(``arc-retrieval mcp`` as a subprocess, as Claude Desktop runs it) and over streamable HTTP
(``arc-retrieval mcp --http``, as n8n's MCP Client Tool calls it), on the real sample corpus."""

from __future__ import annotations

import asyncio

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from worker.serve.mcp_server import LIST_TOOL, SEARCH_TOOL
from tests.helpers import calls, free_port, http_client, run, served_mcp, server_env, wait_for

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "mcp-secret-0123456789abcdef01234567"
FENCE = "What's the max fence height allowed in my backyard??"


# -- stdio -------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def stdio_params(sample_runtime, tmp_path_factory) -> StdioServerParameters:
    env = server_env(sample_runtime.db.url, tmp_path_factory.mktemp("mcp-stdio"))
    return StdioServerParameters(command=sys.executable, args=["-m", "worker.cli", "mcp"], env=env, cwd=str(ROOT))


def test_stdio_lists_tools_written_for_an_llm(stdio_params):
    async def go():
        async with Client(stdio_params) as client:
            return (await client.list_tools()).tools

    tools = {t.name: t for t in run(go)}
    assert set(tools) == {SEARCH_TOOL, LIST_TOOL}
    search = tools[SEARCH_TOOL]
    for status in ("success", "low_confidence", "no_results"):
        assert status in search.description
    assert "not instructions" in search.description and "[SOURCE n]" in search.description
    properties = search.input_schema["properties"]
    assert {"query", "document_types", "binding_only", "top_k", "token_budget", "community"} <= set(properties)
    assert search.input_schema["required"] == ["query"]  # community: only once there are several
    assert "several communities" in str(properties["community"])
    assert set(tools[LIST_TOOL].input_schema["properties"]) == {"community"}
    assert not tools[LIST_TOOL].input_schema.get("required")
    assert "ccr" in str(properties["document_types"])
    assert search.output_schema and "chunks" in search.output_schema["properties"]
    assert search.annotations.read_only_hint is True


def test_stdio_search_answers_with_status_context_and_scored_chunks(stdio_params):
    async def go():
        async with Client(stdio_params) as client:
            return await client.call_tool(SEARCH_TOOL, {"query": FENCE})

    result = run(go)
    assert not result.is_error
    text = result.content[0].text
    assert text.startswith("status: success") and "[SOURCE 1]" in text and "Maximum fence height" in text
    data = result.structured_content
    assert data["status"] == "success" and data["request_id"].startswith("mcp-")
    assert data["community"] == "default"  # the knowledge base's only one, unnamed
    fencing = [c for c in data["chunks"] if c["section_path"] == "Chapter 4 Structures > 4.2 Fencing"]
    assert fencing and fencing[0]["source"] is not None and 0 < fencing[0]["final_score"] <= 1
    assert data["context"] in text


def test_stdio_bad_arguments_are_tool_errors_naming_the_field(stdio_params):
    async def go():
        async with Client(stdio_params) as client:
            return [await client.call_tool(SEARCH_TOOL, args) for args in (
                {"query": "fence", "top_k": 99},
                {"query": "   "},
                {"query": "fence", "document_types": ["bylaws"]},
                {"query": "fence", "token_budget": "lots"},
                {},
            )]

    for result, field in zip(run(go), ("top_k", "query", "document_types", "token_budget", "query")):
        assert result.is_error, result
        message = result.content[0].text
        assert field in message, message
        assert "Traceback" not in message and "File \"" not in message


def test_stdio_lists_the_documents(stdio_params):
    async def go():
        async with Client(stdio_params) as client:
            return await client.call_tool(LIST_TOOL, {})

    result = run(go)
    assert not result.is_error
    documents = result.structured_content["documents"]
    assert result.structured_content["community"] == "default"
    assert documents and all({"document_id", "name", "document_type", "is_binding"} <= set(d) for d in documents)
    assert any(d["document_type"] == "design_guidelines" for d in documents)


# -- streamable HTTP ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def http_server(sample_runtime, tmp_path_factory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("mcp-http")
    yield from served_mcp(server_env(sample_runtime.db.url, tmp, ARC_API_TOKEN=TOKEN, ARC_RATE_LIMIT="2",
                                     ARC_AUTH_FAILURES_PER_MINUTE="1000"), tmp)


def test_http_servers_first_answer_is_calibrated(sample_runtime, tmp_path_factory):
    # the stored calibration is read (or, when none is stored, measured) before the first answer
    tmp = tmp_path_factory.mktemp("mcp-calibration")
    served = served_mcp(server_env(sample_runtime.db.url, tmp, ARC_API_TOKEN=TOKEN), tmp)
    url = next(served)

    async def go():
        async with http_client(url, {"Authorization": f"Bearer {TOKEN}"}) as client:
            return await client.call_tool(SEARCH_TOOL, {"query": FENCE})

    try:
        assert run(go).structured_content["confidence"]["calibrated"] is True
    finally:
        served.close()


@pytest.mark.parametrize("mode", ["auto", "legacy"])  # the 2026 envelope, and the handshake n8n's SDK does
def test_http_search_with_a_bearer_token(http_server, mode):
    async def go():
        async with http_client(http_server, {"Authorization": f"Bearer {TOKEN}"}, mode) as client:
            tools = [t.name for t in (await client.list_tools()).tools]
            return tools, await client.call_tool(SEARCH_TOOL, {"query": FENCE, "document_types": ["design_guidelines"]})

    tools, result = run(go)
    assert SEARCH_TOOL in tools
    assert not result.is_error, result.content
    data = result.structured_content
    assert data["status"] == "success"
    assert {c["document_type"] for c in data["chunks"]} == {"design_guidelines"}


def test_http_takes_the_webhooks_header_too(http_server):
    async def go():
        async with http_client(http_server, {"X-ARC-Token": TOKEN}) as client:
            return await client.call_tool(LIST_TOOL, {})

    assert not run(go).is_error


def test_http_refuses_without_the_token(http_server):
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-03-26", "capabilities": {},
                       "clientInfo": {"name": "t", "version": "1"}}}
    headers = {"Accept": "application/json, text/event-stream"}
    for auth in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}, {"X-ARC-Token": "wrong"}):
        r = requests.post(http_server, json=init, headers={**headers, **auth}, timeout=10)
        assert r.status_code == 401, r.text
        assert r.headers["WWW-Authenticate"].startswith("Bearer") and r.json()["error"] == "unauthorized"
        assert TOKEN not in r.text
    ok = requests.post(http_server, json=init, headers={**headers, "Authorization": f"Bearer {TOKEN}"}, timeout=10)
    assert ok.status_code == 200 and ok.json()["result"]["serverInfo"]["name"] == "arc-retrieval"


def test_http_health_is_open(http_server):
    r = requests.get(http_server.replace("/mcp", "/healthz"), timeout=10)
    assert r.status_code == 200 and r.json() == {"status": "ok"}


def test_http_rejects_a_foreign_host_or_origin(http_server):
    """DNS rebinding: a page elsewhere cannot reach the loopback server through a browser."""
    auth = {"Authorization": f"Bearer {TOKEN}", "Accept": "application/json, text/event-stream"}
    body = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    assert requests.post(http_server, json=body, headers={**auth, "Host": "evil.example"}, timeout=10).status_code == 421
    assert requests.post(http_server, json=body, headers={**auth, "Origin": "http://evil.example"},
                         timeout=10).status_code == 403


def test_http_rate_limit_is_a_tool_error_saying_when_to_retry(http_server):
    """ARC_RATE_LIMIT=2 (bursts of 4), per token as for the webhook: a burst of calls meets it.
    The calls go out at once: one after another, a loaded machine can answer each slower than the
    limit refills and none is refused."""
    async def go():
        async with http_client(http_server, {"Authorization": f"Bearer {TOKEN}"}) as client:
            return await asyncio.gather(*(client.call_tool(LIST_TOOL, {}) for _ in range(12)))

    results = run(go)
    refused = [r for r in results if r.is_error]
    assert refused and len(refused) < len(results)
    assert "rate limited" in refused[0].content[0].text and "retry after" in refused[0].content[0].text


# -- several communities over streamable HTTP ----------------------------------------------------

RIDGE_TOKEN = "mcp-ridge-only-secret-0123456789"
BOTH_TOKEN = "mcp-both-communities-secret-01234"
RIDGE_TEXT = "# Ridge Covenants\n\n## Fences\n\nAt Cedar Ridge a backyard fence may be 4 feet tall at most."


@pytest.fixture(scope="module")
def communities_server(make_database, embedder, tmp_path_factory) -> Iterator[str]:
    """``mcp --http`` over a knowledge base of two associations: the sample corpus as ``hollow``,
    one document of ``ridge``; the full token, one limited to ridge and one to both."""
    from tests.helpers import hollow_and_ridge

    db = hollow_and_ridge(make_database, embedder, "mcp_communities", RIDGE_TEXT, ridge_name="Ridge Covenants")
    database_url = db.url
    db.close()
    tmp = tmp_path_factory.mktemp("mcp-communities")
    yield from served_mcp(server_env(database_url, tmp, ARC_API_TOKEN=TOKEN, ARC_RATE_LIMIT="0",
                                     ARC_COMMUNITY_TOKENS=f"ridge:{RIDGE_TOKEN}; hollow,ridge:{BOTH_TOKEN}"), tmp)


def error_text(result) -> str:
    """A tool error's own words, after the SDK's "Error executing tool NAME: "."""
    assert result.is_error, result
    text = result.content[0].text
    assert "Traceback" not in text and "File \"" not in text
    return text.split(": ", 1)[1] if text.startswith("Error executing tool") else text


def test_http_several_communities_need_one_named_and_an_unknown_one_is_a_tool_error(communities_server):
    unnamed, unknown, malformed, listed_unnamed, ridge, hollow_docs = calls(
        communities_server, TOKEN,
        (SEARCH_TOOL, {"query": FENCE}), (SEARCH_TOOL, {"query": FENCE, "community": "nowhere"}),
        (SEARCH_TOOL, {"query": FENCE, "community": "Not A Key!"}), (LIST_TOOL, {}),
        (SEARCH_TOOL, {"query": FENCE, "community": "ridge"}), (LIST_TOOL, {"community": "hollow"}))
    for result in (unnamed, listed_unnamed):
        text = error_text(result)
        assert text.startswith("community: required") and "2 communities" in text, text
    assert error_text(unknown).startswith("community: no community 'nowhere'")
    assert "community" in error_text(malformed)
    assert not ridge.is_error, ridge.content
    data = ridge.structured_content
    assert data["community"] == "ridge" and {c["document_id"] for c in data["chunks"]} == {"ridge-ccrs"}
    assert "4 feet" in data["context"]
    assert not hollow_docs.is_error and hollow_docs.structured_content["community"] == "hollow"
    assert "design-guidelines-2024" in {d["document_id"] for d in hollow_docs.structured_content["documents"]}


def test_http_a_token_limited_to_a_community_gets_a_tool_error_and_nothing_of_another(communities_server):
    own, other, unknown, listed, listed_other = calls(
        communities_server, RIDGE_TOKEN,
        (SEARCH_TOOL, {"query": FENCE}), (SEARCH_TOOL, {"query": FENCE, "community": "hollow"}),
        (SEARCH_TOOL, {"query": FENCE, "community": "nowhere"}), (LIST_TOOL, {}), (LIST_TOOL, {"community": "hollow"}))
    # its one community needs no naming
    assert not own.is_error, own.content
    assert own.structured_content["community"] == "ridge"
    assert {c["document_id"] for c in own.structured_content["chunks"]} == {"ridge-ccrs"}
    # another community (or an unknown one, not told apart) is refused before anything is read
    for result in (other, unknown, listed_other):
        text = error_text(result)
        assert text == "community: this token is not allowed that community", text
        assert result.structured_content is None and "fence" not in str(result).lower().replace(FENCE.lower(), "")
    assert listed.structured_content["community"] == "ridge"
    assert [d["document_id"] for d in listed.structured_content["documents"]] == ["ridge-ccrs"]

    # a token for two must name one, and then reaches it
    unnamed, hollow = calls(communities_server, BOTH_TOKEN,
                            (SEARCH_TOOL, {"query": FENCE}), (SEARCH_TOOL, {"query": FENCE, "community": "hollow"}))
    assert error_text(unnamed) == "community: required, this token serves 2 communities"
    assert not hollow.is_error and hollow.structured_content["community"] == "hollow"
    assert "ridge-ccrs" not in {c["document_id"] for c in hollow.structured_content["chunks"]}


# -- in process: what a failure inside the pipeline looks like to the agent ---------------------

class _Failing:
    """A retriever whose pipeline fails the way a bug would, with a secret in its message."""

    def __init__(self, exc: Exception):
        self.exc = exc
        self.search_cache = None

    def answer(self, request, request_id=None):
        raise self.exc

    def ask(self, options, request_id=None):
        raise self.exc


@pytest.mark.parametrize("exc,expected", [
    (RuntimeError("password=hunter2 at /srv/secret.py line 3"), "the worker failed to answer; the error was logged"),
    (__import__("psycopg").OperationalError("connection to 10.0.0.5 failed: password=hunter2"),
     "the knowledge base is temporarily unavailable; retry shortly"),
])
def test_a_failure_is_one_plain_line_never_a_trace_or_secret(sample_runtime, exc, expected):
    from worker.serve.mcp_server import McpFace, build_server

    face = McpFace.build(sample_runtime, retriever=_Failing(exc))

    async def go():
        async with Client(build_server(face)) as client:
            return await client.call_tool(SEARCH_TOOL, {"query": "fence"})

    result = run(go)
    assert result.is_error
    assert result.content[0].text.endswith(expected), result.content[0].text
    assert "hunter2" not in str(result) and "Traceback" not in str(result)


def test_the_images_documented_mcp_command_serves_and_passes_its_health_check(worker_process, tmp_path):
    """The Dockerfile's documented override (its comment, the README's Docker section) with the
    image's HEALTHCHECK, on an embedded database of its own, which stops with it."""
    import shlex
    import signal

    from tests.helpers import parse_dockerfile

    line = next(l for l in (ROOT / "Dockerfile").read_text().splitlines() if "arc-retrieval mcp" in l)
    command = shlex.split(line.split("docker run ... arc-retrieval:latest ", 1)[1])  # after the image's name
    assert command[:3] == ["arc-retrieval", "mcp", "--http"] and command[-2:] == ["--port", "8080"]
    assert " ".join(command) in (ROOT / "README.md").read_text().replace("\n", " ")
    port = free_port()
    command[0] = str(Path(sys.executable).parent / "arc-retrieval")
    command[-1] = str(port)
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "OPENAI_API_KEY", "ARC_API_TOKEN")}
    env.update({"ARC_DATA_DIR": str(tmp_path), "ARC_API_TOKEN": TOKEN})
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               start_new_session=True)
    try:
        wait_for(lambda: requests.get(f"http://127.0.0.1:{port}/healthz", timeout=2).ok, 90, "the MCP server")
        check = [c.replace("127.0.0.1:8080", f"127.0.0.1:{port}") for c in parse_dockerfile()["healthcheck"]]
        check[0] = sys.executable
        assert subprocess.run(check, timeout=10).returncode == 0
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)
    assert not list((tmp_path / "pgdata").glob("postmaster.pid")), "the embedded database stopped with it"


def test_an_mcp_answer_is_logged_and_says_when_the_knowledge_base_is_empty(make_database, embedder, tmp_path,
                                                                            caplog):
    """As the webhook: one INFO line per question, and an empty knowledge base said in the
    answer, not only a bare no_results."""
    import logging

    from worker.runtime import Runtime
    from worker.serve.mcp_server import McpFace, build_server
    from worker.store.database import Database
    from worker.store.knowledge_base import EMPTY_WARNING

    from tests.helpers import make_settings

    url = make_database("mcp-empty")
    db = Database(url)
    db.migrate(embedder.dim)
    face = McpFace.build(Runtime(make_settings(tmp_path, url), db, embedder))

    async def go():
        async with Client(build_server(face)) as client:
            return await client.call_tool(SEARCH_TOOL, {"query": "How tall can a fence be?"})

    with caplog.at_level(logging.INFO, logger="arc.webhook"):
        result = run(go)
    face.knowledge.close()
    db.close()
    assert not result.is_error
    assert result.structured_content["status"] == "no_results"
    assert EMPTY_WARNING in result.structured_content["warnings"]
    assert any(r.getMessage().startswith("question no_results") for r in caplog.records)
