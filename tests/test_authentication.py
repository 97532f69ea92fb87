"""One authentication for every door (worker/serve/security.py ``authenticate``): the webhook's
guard, Dify's ``POST /retrieval`` and the MCP server over HTTP compare the token first and apply
the failed-auth brake (ARC_AUTH_FAILURES_PER_MINUTE) to failures only, so a stranger hammering
wrong tokens from the rightful caller's address (a NAT, a proxy, n8n's own host) never locks it
out; every failure is logged, never with what was sent, and counted in ``arc_auth_failures``.

Real servers over real HTTP on the sample corpus: ``arc-retrieval serve`` (gunicorn, one process,
so the brake's per-process state is the one every request meets) and ``arc-retrieval mcp --http``
with the SDK's own client. The tests run in file order: the lock-outs come last, since they use
up the brake of 127.0.0.1."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import pytest
import requests

from tests.helpers import FENCE, http_client, server_env
from tests.helpers import free_port, stop_process as stop, wait_for
from worker.serve.mcp_server import SEARCH_TOOL

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "auth-right-token-0123456789abcdef"
OPS_TOKEN = "auth-ops-token-0123456789abcdef01"
COMMUNITY_TOKEN = "auth-community-token-0123456789ab"
WRONG = "stranger-guess-0123456789abcdefgh"
FAILURES_PER_MINUTE = 5
HAMMER = 20
DIFY_BODY = {"knowledge_id": "all", "query": FENCE, "retrieval_setting": {"top_k": 3, "score_threshold": 0.0}}


def _env(sample_runtime, tmp: Path) -> dict[str, str]:
    return server_env(sample_runtime.db.url, tmp, ARC_API_TOKEN=TOKEN, ARC_OPS_TOKEN=OPS_TOKEN,
                      ARC_COMMUNITY_TOKENS=f"default:{COMMUNITY_TOKEN}", ARC_RATE_LIMIT="0",
                      ARC_AUTH_FAILURES_PER_MINUTE=str(FAILURES_PER_MINUTE), WEB_CONCURRENCY="1")


@contextmanager
def _serve(args: list[str], env: dict[str, str], log_path: Path, ready) -> Iterator[None]:
    log = open(log_path, "w")
    process = subprocess.Popen([sys.executable, "-m", "worker.cli", *args], env=env, stdout=log,
                               stderr=subprocess.STDOUT, start_new_session=True, cwd=ROOT)
    try:
        wait_for(ready, 120, " ".join(args))
        yield
    finally:
        stop(process)
        log.close()


@pytest.fixture(scope="module")
def webhook_server(sample_runtime, tmp_path_factory) -> Iterator[tuple[str, Path]]:
    tmp = tmp_path_factory.mktemp("auth-webhook")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with _serve(["serve", "--port", str(port)], _env(sample_runtime, tmp), tmp / "worker.log",
                lambda: requests.get(f"{url}/readyz", timeout=2).status_code == 200):
        yield url, tmp / "worker.log"


@pytest.fixture(scope="module")
def mcp_server(sample_runtime, tmp_path_factory) -> Iterator[tuple[str, Path]]:
    tmp = tmp_path_factory.mktemp("auth-mcp")
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with _serve(["mcp", "--http", "--port", str(port)], _env(sample_runtime, tmp), tmp / "mcp.log",
                lambda: requests.get(f"http://127.0.0.1:{port}/healthz", timeout=2).ok):
        yield url, tmp / "mcp.log"


def failure_lines(log_path: Path) -> list[dict]:
    lines = [json.loads(line) for line in log_path.read_text().splitlines() if line.startswith("{")]
    return [line for line in lines if line.get("msg") == "authentication failed"]


def test_a_community_token_opens_only_the_routes_that_check_communities(webhook_server):
    """README: a community token reads through the retrieval webhook and the documents API (and
    writes there only when marked write@, tests/test_doors_security.py); the operator's /metrics
    and /openapi.json (ARC_OPS_TOKEN set) stay closed to it."""
    url, _ = webhook_server
    community = {"X-ARC-Token": COMMUNITY_TOKEN}
    assert requests.post(f"{url}/webhook/arc-retrieval", json={"query": FENCE}, headers=community,
                         timeout=60).status_code == 200
    for path in ("/metrics", "/openapi.json"):
        r = requests.get(url + path, headers=community, timeout=10)
        assert r.status_code == 401, (path, r.status_code)
        assert requests.get(url + path, headers={"X-ARC-Token": OPS_TOKEN}, timeout=10).status_code == 200


def test_dify_answers_the_right_key_while_a_stranger_hammers_wrong_ones(webhook_server):
    url, log_path = webhook_server
    before = len(failure_lines(log_path))
    codes = [requests.post(f"{url}/retrieval", json=DIFY_BODY, headers={"Authorization": f"Bearer {WRONG}"},
                           timeout=10).status_code for _ in range(HAMMER)]
    assert set(codes) <= {403, 429} and 429 in codes, codes  # wrong keys are still slowed down
    r = requests.post(f"{url}/retrieval", json=DIFY_BODY, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60)
    assert r.status_code == 200, r.text  # same address, right key: answered
    assert r.json()["records"]

    metrics = requests.get(f"{url}/metrics", headers={"X-ARC-Token": OPS_TOKEN}, timeout=10).text
    assert f'arc_auth_failures_total{{reason="wrong",route="/retrieval"}} {HAMMER}.0' in metrics
    failures = failure_lines(log_path)[before:]
    assert len(failures) == HAMMER and {f["route"] for f in failures} == {"/retrieval"}
    assert WRONG not in log_path.read_text()


def test_mcp_answers_the_right_token_while_a_stranger_hammers_wrong_ones(mcp_server):
    url, log_path = mcp_server
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    accept = {"Accept": "application/json, text/event-stream"}
    codes = [requests.post(url, json=init, headers={**accept, "Authorization": f"Bearer {WRONG}"},
                           timeout=10).status_code for _ in range(HAMMER)]
    assert set(codes) <= {401, 429} and 429 in codes, codes

    async def go():
        async with http_client(url, {"Authorization": f"Bearer {TOKEN}"}) as client:
            return await client.call_tool(SEARCH_TOOL, {"query": FENCE})

    result = anyio.run(go)  # same address, right token, through the SDK's own client: answered
    assert not result.is_error, result.content
    assert result.structured_content["status"] == "success"
    failures = failure_lines(log_path)
    assert len(failures) == HAMMER and {f["route"] for f in failures} == {"/mcp"}
    assert WRONG not in log_path.read_text()
