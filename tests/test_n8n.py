"""The exported workflows in a real n8n: import, activate, call through n8n's webhooks.

Runs with ``make test-n8n`` (also part of ``.ci/run``): installs the pinned n8n into a cache
folder outside the repository if absent (scripts/install-n8n.sh), starts the worker under
gunicorn on the embedded database and n8n on loopback ports, and stops both at the end.
"""

from __future__ import annotations

import json
import time

import pytest
import requests

from tests.helpers import (
    CHAT_PASSWORD,
    CHAT_USER,
    CHAT_WEBHOOK_ID,
    MCP_CHAT_WEBHOOK_ID,
    N8N_TOKEN,
    WORKER_DATA,
    make_pdf,
    running_n8n,
    wait_for,
)
from tests.helpers import answers_from_the_worker as _answers_from_the_worker
from tests.helpers import logged as log_rows

pytestmark = pytest.mark.n8n


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

    def refused() -> float:
        metrics = requests.get(f"{worker}/metrics", timeout=10).text
        return sum(float(line.rsplit(" ", 1)[1]) for line in metrics.splitlines()
                   if line.startswith("arc_requests_total") and 'status="429"' in line and "arc-retrieval" in line)

    # A busy machine can stagger n8n's executions enough for the allowance to refill between
    # them: a burst is sent again (at most three times) until the worker has refused some.
    for burst in range(3):
        time.sleep(2.5)  # a full allowance (4) to start from
        with ThreadPoolExecutor(7) as pool:
            responses = list(pool.map(ask, range(7 * burst, 7 * burst + 7)))
        assert [r.status_code for r in responses] == [200] * 7, [r.text[:200] for r in responses]
        assert all(r.json()["status"] in ("success", "low_confidence") for r in responses)
        if refused() >= 1:
            break
    assert refused() >= 1, "the worker did refuse some, and n8n retried them"


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

    url_db = f"postgresql://postgres:@/postgres?host={WORKER_DATA['dir'] / 'pgdata'}"
    logged = log_rows(url_db, "select status from query_log where query = %s", (question,))
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

    url_db = f"postgresql://postgres:@/postgres?host={WORKER_DATA['dir'] / 'pgdata'}"
    logged = log_rows(url_db, "select status, request_id from query_log where query = %s", (question,))
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
