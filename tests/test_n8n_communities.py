"""The workflows with several communities in one worker: the retrieval tool passes a caller's
`community`, or its own setting (ARC_COMMUNITY) when the caller names none; the chat workflow
passes the chat's metadata. Real n8n (both majors), a real worker process."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import requests

from tests.helpers import (
    CHAT_PASSWORD,
    CHAT_USER,
    CHAT_WEBHOOK_ID,
    INGEST_TOKEN,
    N8N_TOKEN,
    ROOT,
    WORKER_TOKEN,
    free_port,
    running_n8n,
    wait_for,
)
from tests.helpers import answers_from_the_worker as _answers_from_the_worker
from tests.helpers import logged as log_rows
from tests.helpers import stop_process as stop


@pytest.fixture(scope="module")
def two_community_worker(tmp_path_factory):
    port = free_port()
    data = tmp_path_factory.mktemp("worker-data")
    env = {**os.environ, "ARC_DATA_DIR": str(data), "ARC_API_TOKEN": WORKER_TOKEN,
           "ARC_INGEST_TOKEN": INGEST_TOKEN, "WEB_CONCURRENCY": "1"}
    for var in ("DATABASE_URL", "OPENAI_API_KEY", "SUPABASE_URL"):
        env.pop(var, None)
    log = open(data / "worker.log", "w")
    process = subprocess.Popen([sys.executable, "-m", "worker.cli", "serve", "--port", str(port), "--load-sample"],
                               env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=ROOT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: requests.get(f"{url}/readyz", timeout=2).status_code == 200, 120, "the worker")
        added = requests.post(f"{url}/webhook/arc-ingest", headers={"X-ARC-Token": INGEST_TOKEN}, timeout=120,
                              json={"community": "ridge", "document_type": "ccr", "document_id": "ridge-ccrs",
                                    "text": "# Ridge CC&Rs\n\n## Fences\n\nAt Cedar Ridge fences may be 4 feet."})
        assert added.status_code == 200 and added.json()["community"] == "ridge", added.text
        yield url, data
    finally:
        stop(process)
        log.close()


@pytest.fixture(scope="module")
def n8n_ridge(n8n_home, two_community_worker, chat_model, tmp_path_factory):
    url, _ = two_community_worker
    with running_n8n(n8n_home, tmp_path_factory.mktemp("n8n-user"), chat_model,
                     {"ARC_WORKER_URL": url, "ARC_COMMUNITY": "ridge"}, ready=_answers_from_the_worker) as instance:
        yield instance


def _ask(n8n, body: dict) -> requests.Response:
    return requests.post(f"{n8n['base']}/webhook/arc-retrieval", headers={"X-ARC-Token": N8N_TOKEN},
                         json=body, timeout=120)


def test_the_retrieval_tool_passes_the_callers_community_or_its_setting(n8n_ridge, two_community_worker):
    url, _ = two_community_worker
    # the worker itself refuses a request without its community, naming the field
    direct = requests.post(f"{url}/webhook/arc-retrieval", headers={"X-ARC-Token": WORKER_TOKEN},
                           json={"query": "fence height"}, timeout=60)
    assert direct.status_code == 400 and direct.json()["field"] == "community"

    by_setting = _ask(n8n_ridge, {"query": "fence height"})
    assert by_setting.status_code == 200 and by_setting.json()["community"] == "ridge", by_setting.text[:300]
    assert {c["document_id"] for c in by_setting.json()["chunks"]} == {"ridge-ccrs"}

    named = _ask(n8n_ridge, {"query": "fence height", "community": "default"})
    assert named.status_code == 200 and named.json()["community"] == "default"
    assert "ridge-ccrs" not in {c["document_id"] for c in named.json()["chunks"]}

    unknown = _ask(n8n_ridge, {"query": "fence height", "community": "nowhere"})
    assert unknown.status_code == 404 and unknown.json()["field"] == "community"


def test_the_chat_workflow_passes_the_chats_metadata(n8n_ridge, two_community_worker):
    _, data = two_community_worker
    question = "What is the maximum fence height in my backyard?"
    message = {"action": "sendMessage", "sessionId": "resident-2", "chatInput": question,
               "metadata": {"community": "default"}}
    reply = requests.post(f"{n8n_ridge['base']}/webhook/{CHAT_WEBHOOK_ID}/chat", json=message,
                          auth=(CHAT_USER, CHAT_PASSWORD), timeout=180)
    assert reply.status_code == 200, reply.text[:500]
    logged = log_rows(f"postgresql://postgres:@/postgres?host={data / 'pgdata'}",
                      "select community from query_log where query = %s", (question,))
    # The worker serves both n8n versions' runs: the question is logged once per run, each time
    # under the chat's community.
    assert logged and set(logged) == {("default",)}
