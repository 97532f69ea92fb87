"""The community node package (integrations/n8n, `n8n-nodes-arc-retrieval`) in a real n8n.

Builds and packs the package with n8n's node CLI (scripts/build-n8n-node.sh, which also runs
the CLI's community-node lint, and n8n's community package scan on the packed tarball),
installs the tarball as the README says (where n8n's Settings > Community nodes puts packages),
then drives the node's workflows (workflows/*-node.json) through n8n 2.40.7 and 1.123: a PDF
ingested from a webhook's file, a question answered, the documents listed and one deleted, the
AI Agent calling the node as its tool, the credential test, and the worker's 401, 422 and 429
arriving as node errors that say what to do.
"""

from __future__ import annotations

import json
import os
import subprocess
import tarfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests

from tests.helpers import (
    CHAT_PASSWORD,
    CHAT_USER,
    INGEST_TOKEN,
    N8N_TOKEN,
    ROOT,
    WORKER_DATA,
    WORKER_TOKEN,
    WORKFLOWS,
    http_workflows,
    running_n8n,
    shell_blocks,
)
from tests.helpers import answers_from_the_worker as _answers_from_the_worker
from tests.helpers import logged as log_rows

pytestmark = pytest.mark.n8n

PACKAGE = ROOT / "integrations" / "n8n"
NODE_WORKFLOWS = sorted(WORKFLOWS.glob("*-node.json"))
NODE_CHAT = json.loads((WORKFLOWS / "arc-chat-agent-node.json").read_text())
NODE_CHAT_WEBHOOK_ID = NODE_CHAT["nodes"][0]["webhookId"]
WRONG_TOKEN = "not-the-worker-token-0123456789"


def readme_install_block() -> list[str]:
    """The README's commands that install the packed package into ~/.n8n/nodes."""
    blocks = [b for b in shell_blocks() if b.marker == "tests/test_n8n_node.py runs these"]
    assert len(blocks) == 1, "the README's n8n node section has one block, marked for this test"
    return blocks[0].commands


@pytest.fixture(scope="module")
def node_package() -> Path:
    """Built, linted and packed as the README says (its first command)."""
    build = readme_install_block()[0]
    assert build == "scripts/build-n8n-node.sh --lint", build
    out = subprocess.run(["bash", "-c", build], cwd=ROOT, capture_output=True, text=True, timeout=1200,
                         check=False)
    assert out.returncode == 0, f"the package build failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    tarball = Path(out.stdout.strip().splitlines()[-1])
    assert tarball.is_file(), out.stdout
    return tarball


def install_as_the_readme_says(home: Path) -> None:
    """The README's install commands, with ~ the n8n user folder's home."""
    for command in readme_install_block()[1:]:
        done = subprocess.run(["bash", "-c", command], cwd=ROOT, capture_output=True, text=True, timeout=120,
                              env={**os.environ, "HOME": str(home)}, check=False)
        assert done.returncode == 0, f"{command}\n{done.stderr}"


def credential(cid: str, name: str, base: str, token: str, access: str) -> dict:
    return {"id": cid, "name": name, "type": "arcRetrievalApi",
            "data": {"baseUrl": base, "token": token, "access": access}}


def variant(path: Path, folder: Path, *, wid: str, route: str, webhook_id: str, **changes) -> Path:
    """A test-only copy of an exported workflow: its own id, webhook and node settings."""
    workflow = json.loads(path.read_text())
    workflow.update(id=wid, name=f"{workflow['name']} {wid}")
    hook = workflow["nodes"][0]
    hook["webhookId"], hook["parameters"]["path"] = webhook_id, route
    node = workflow["nodes"][1]
    for key, value in changes.items():
        node[key] = value if not isinstance(value, dict) else {**node.get(key, {}), **value}
    out = folder / f"{wid}.json"
    out.write_text(json.dumps(workflow))
    return out


def confirm_variant(folder: Path) -> Path:
    """The documents workflow with its node on Confirm, under the keeper's credential, posted to:
    the question, and a chunk id or ``"answer": "none"``, from the request's body."""
    path = variant(WORKFLOWS / "arc-documents-node.json", folder, wid="arcNodeConfirm01", route="arc-node-confirm",
                   webhook_id="7a2d3b21-9c5f-4d66-8b4f-3e9f2c8b1bf3",
                   parameters={"operation": "confirm", "confirmQuery": "={{ $json.body.query }}",
                               "answer": "={{ $json.body.answer || 'passage' }}",
                               "chunkId": "={{ $json.body.chunk_id || 0 }}",
                               "community": "={{ $json.body.community || '' }}"})
    workflow = json.loads(path.read_text())
    workflow["nodes"][0]["parameters"]["httpMethod"] = "POST"
    path.write_text(json.dumps(workflow))
    return path


@pytest.fixture(scope="module")
def n8n(n8n_home, worker, chat_model, node_package, tmp_path_factory):
    folder = tmp_path_factory.mktemp("n8n-user")
    install_as_the_readme_says(folder)  # N8N_USER_FOLDER=folder: n8n reads folder/.n8n
    retrieval = WORKFLOWS / "arc-retrieval-node.json"
    variants = [
        variant(retrieval, folder, wid="arcNodeWrongTok1", route="arc-node-wrong-token",
                webhook_id="7a2d3b21-9c5f-4d66-8b4f-3e9f2c8b1bf1",
                credentials={"arcRetrievalApi": {"id": "arcNodeWrongTok1", "name": "ARC Wrong Token"}}),
        variant(retrieval, folder, wid="arcNodeNoRetry01", route="arc-node-no-retries",
                webhook_id="7a2d3b21-9c5f-4d66-8b4f-3e9f2c8b1bf2",
                parameters={"options": {"retries": 0}}),
        confirm_variant(folder),
        variant(WORKFLOWS / "arc-documents-node.json", folder, wid="arcNodeCommunit1", route="arc-node-communities",
                webhook_id="7a2d3b21-9c5f-4d66-8b4f-3e9f2c8b1bf4", parameters={"operation": "listCommunities"}),
    ]
    credentials = (
        credential("arcNodeQuestions1", "ARC Questions", worker, WORKER_TOKEN, "questions"),
        credential("arcNodeDocuments1", "ARC Documents", worker, INGEST_TOKEN, "documents"),
        credential("arcNodeWrongTok1", "ARC Wrong Token", worker, WRONG_TOKEN, "questions"),
    )
    with running_n8n(n8n_home, folder, chat_model, {"ARC_WORKER_URL": worker},
                     ready=_answers_from_the_worker,
                     workflows=[*http_workflows(), *NODE_WORKFLOWS, *variants],
                     more_credentials=credentials) as instance:
        instance["version"] = n8n_home.version
        yield instance


def call(n8n: dict, route: str, **kwargs) -> requests.Response:
    method = kwargs.pop("method", "POST")
    return requests.request(method, f"{n8n['base']}/webhook/{route}", headers={"X-ARC-Token": N8N_TOKEN},
                            timeout=180, **kwargs)


def test_the_package_is_what_n8n_installs(node_package):
    with tarfile.open(node_package) as packed:
        names = set(packed.getnames())
        manifest = json.load(packed.extractfile("package/package.json"))
    assert manifest["name"] == "n8n-nodes-arc-retrieval"
    assert "n8n-community-node-package" in manifest["keywords"]
    assert not manifest.get("dependencies"), "community nodes carry no runtime dependencies"
    for built in manifest["n8n"]["nodes"] + manifest["n8n"]["credentials"]:
        assert f"package/{built}" in names, built
    # no sources, no declarations (the community scan reads a .d.ts under credentials/ as a
    # misnamed credential file), nothing installed
    assert not any("node_modules" in n or n.endswith(".ts") for n in names), sorted(names)


def test_the_node_workflows_import_and_activate(n8n):
    for path in NODE_WORKFLOWS:
        wid = json.loads(path.read_text())["id"]
        assert wid in n8n["active"], (path.name, n8n["active"])


def test_a_pdf_from_a_webhook_is_ingested_then_asked_listed_and_deleted(n8n):
    from tests.helpers import make_pdf

    rule = "9.1 Beehives are allowed in back yards, at most two hives per lot."
    pdf = make_pdf([["ARTICLE 9 BEEKEEPING", rule]])
    r = call(n8n, "arc-node-ingest", files={"file": ("beekeeping-rules.pdf", pdf, "application/pdf")},
             data={"document_type": "ccr", "name": "Beekeeping Rules", "is_binding": "true"})
    assert r.status_code == 200, r.text
    ingested = r.json()
    assert ingested["status"] == "ingested" and ingested["document_id"] == "beekeeping-rules", ingested
    assert ingested["document_name"] == "Beekeeping Rules" and ingested["chunks"] == 1

    r = call(n8n, "arc-node-retrieval", json={"query": "How many beehives can I keep?", "top_k": 3})
    assert r.status_code == 200, r.text
    answer = r.json()
    # the agent's reading: the status, the message, the context and its sources, nothing else
    assert set(answer) == {"status", "message", "context", "sources", "community", "request_id"}, answer
    assert answer["status"] in ("success", "low_confidence"), answer
    assert "[SOURCE 1]" in answer["context"] and "two hives" in answer["context"]
    first = answer["sources"][0]
    assert first["source"] == 1 and first["document_id"] == "beekeeping-rules", answer["sources"]
    assert first["document_name"] == "Beekeeping Rules" and first["binding"] is True
    assert len(answer["sources"]) <= 3

    r = call(n8n, "arc-node-documents", method="GET")
    assert r.status_code == 200, r.text
    listed = {d["document_id"]: d for d in r.json()}
    assert listed["beekeeping-rules"]["chunks"] == 1 and listed["beekeeping-rules"]["document_type"] == "ccr"

    r = call(n8n, "arc-node-ingest", json={"delete_document_id": "beekeeping-rules"})
    assert r.status_code == 200 and r.json()["deleted_chunks"] == 1, r.text
    r = call(n8n, "arc-node-ingest", json={"delete_document_id": "beekeeping-rules"})
    assert r.status_code == 404, r.text
    assert "404 not_found (field: document_id)" in r.json()["error"], r.json()


def test_a_superseding_upload_names_what_it_replaces(n8n):
    old = b"# Trash Rules\n\n## Bins\n\nTrash bins go out on Monday evenings.\n"
    new = b"# Trash Rules 2025\n\n## Bins\n\nTrash bins go out on Tuesday evenings.\n"
    uploads = (("trash-2019.md", old, {}), ("trash-2025.md", new, {"supersedes": "trash-2019"}))
    for name, text, extra in uploads:
        r = call(n8n, "arc-node-ingest", files={"file": (name, text, "text/markdown")},
                 data={"document_type": "design_guidelines", **extra})
        assert r.status_code == 200, r.text
    try:
        r = call(n8n, "arc-node-retrieval", json={"query": "Which evening do trash bins go out?"})
        sources = r.json()["sources"]
        assert sources[0]["document_id"] == "trash-2025", sources
        assert any(s["document_id"] == "trash-2019" and s["superseded_by"] == "trash-2025" for s in sources) \
            or all(s["document_id"] != "trash-2019" for s in sources), sources
    finally:  # gone again, so the run on the other n8n version starts from the same documents
        for doc in ("trash-2025", "trash-2019"):
            call(n8n, "arc-node-ingest", json={"delete_document_id": doc})


def test_dated_uploads_answer_as_of_a_date_through_the_node(n8n):
    old = b"# Bin Rules\n\n## Bins\n\nRecycling bins go out on Wednesday mornings.\n"
    new = b"# Bin Rules 2024\n\n## Bins\n\nRecycling bins go out on Thursday mornings.\n"
    uploads = (("bins-2010.md", old, {"effective_date": "2010-01-01"}),
               ("bins-2024.md", new, {"effective_date": "2024-01-01", "supersedes": "bins-2010"}))
    for name, text, extra in uploads:
        r = call(n8n, "arc-node-ingest", files={"file": (name, text, "text/markdown")},
                 data={"document_type": "design_guidelines", **extra})
        assert r.status_code == 200, r.text
    try:
        r = call(n8n, "arc-node-retrieval", json={"query": "Which morning do recycling bins go out?",
                                                  "as_of": "2015-06-30"})
        assert r.status_code == 200, r.text
        assert "Wednesday" in r.json()["context"] and "Thursday" not in r.json()["context"], r.json()
        first = r.json()["sources"][0]
        assert first["effective_date"] == "2010-01-01" and first["replaced"]["effective_date"] == "2024-01-01"
        bad = call(n8n, "arc-node-retrieval", json={"query": "Which morning?", "as_of": "2015-31-12"})
        assert bad.status_code == 422 and "(field: as_of)" in bad.json()["error"], bad.text
    finally:
        for doc in ("bins-2024", "bins-2010"):
            call(n8n, "arc-node-ingest", json={"delete_document_id": doc})


def test_the_node_confirms_an_answer_with_the_keepers_credential(n8n, worker):
    keeper = {"X-ARC-Token": INGEST_TOKEN}
    shown = requests.get(f"{worker}/webhook/arc-documents/ccrs", headers=keeper, timeout=30).json()
    fence = next(c for c in shown["chunks"] if "fence" in c["content"].lower())
    made = []
    try:
        r = call(n8n, "arc-node-confirm", json={"query": "How tall may my backyard fence be?", "chunk_id": fence["id"]})
        assert r.status_code == 200, r.text
        passage = r.json()[0] if isinstance(r.json(), list) else r.json()
        made.append(passage["id"])
        assert passage["answer"] == "passage" and passage["chunk_id"] == fence["id"] and passage["state"] == "confirmed"
        r = call(n8n, "arc-node-confirm", json={"query": "Can I keep goats on my lot?", "answer": "none"})
        assert r.status_code == 200, r.text
        none = r.json()[0] if isinstance(r.json(), list) else r.json()
        made.append(none["id"])
        assert none["answer"] == "none" and none["state"] == "confirmed"
        listed = requests.get(f"{worker}/webhook/arc-confirm", headers=keeper, timeout=30).json()["confirmations"]
        assert {c["id"] for c in listed} >= set(made)
        # a chunk no community holds: the worker's 404, a node error naming the field
        r = call(n8n, "arc-node-confirm", json={"query": "What about sheds?", "chunk_id": 987654321})
        assert r.status_code == 404 and "(field: chunk_id)" in r.json()["error"], r.text
    finally:
        for confirmation in made:
            requests.delete(f"{worker}/webhook/arc-confirm/{confirmation}", headers=keeper, timeout=30)


def test_the_node_lists_the_communities_with_the_keepers_credential(n8n, worker):
    keeper = {"X-ARC-Token": INGEST_TOKEN}
    for _ in range(10):  # the worker here allows 2 requests a second per token (ARC_RATE_LIMIT)
        shown = requests.get(f"{worker}/webhook/arc-communities", headers=keeper, timeout=30)
        if shown.status_code != 429:
            break
        time.sleep(float(shown.headers.get("Retry-After", "1")))
    assert shown.status_code == 200, shown.text
    expected = shown.json()["communities"]
    assert expected and all(c["chunks"] > 0 for c in expected)
    r = call(n8n, "arc-node-communities", method="GET")  # the node waits out a 429 itself
    assert r.status_code == 200, r.text
    listed = r.json() if isinstance(r.json(), list) else [r.json()]  # one item: n8n may answer it bare
    assert listed == expected


def test_a_422_from_the_worker_is_a_node_error_naming_the_field(n8n):
    r = call(n8n, "arc-node-retrieval", json={"query": "fence " * 400})
    assert r.status_code == 422, r.text
    body = r.json()
    assert body["http_code"] == 422
    assert body["error"].startswith("ARC Retrieval worker: 422 invalid_input (field: query): query:"), body
    assert "Correct the field" in body["description"]


def test_a_wrong_token_is_a_node_error_saying_which_token(n8n):
    r = call(n8n, "arc-node-wrong-token", json={"query": "How tall can a fence be?"})
    assert r.status_code == 401, r.text
    body = r.json()
    assert body["error"].startswith("ARC Retrieval worker: 401 unauthorized"), body
    assert "ARC_API_TOKEN" in body["description"] and WRONG_TOKEN not in r.text


def test_a_429_waits_and_retries_or_is_a_node_error_when_it_may_not(n8n, worker):
    """The worker allows 2 requests a second per token (bursts of 4): a burst of 8 meets 429.
    The exported workflow waits Retry-After and sends again; with no retries it reports the 429."""
    def ask(route: str, i: int) -> requests.Response:
        return call(n8n, route, json={"query": f"How big can a shed be? (case {i})"})

    time.sleep(2.5)  # a full allowance to start from
    with ThreadPoolExecutor(8) as pool:
        refused = list(pool.map(lambda i: ask("arc-node-no-retries", i), range(8)))
    limited = [r for r in refused if r.status_code == 429]
    assert limited, [r.status_code for r in refused]
    body = limited[0].json()
    assert body["error"].startswith("ARC Retrieval worker: 429 rate_limited"), body
    assert "asked to wait" in body["description"] and "Retries When Busy" in body["description"]
    assert all(r.status_code in (200, 429) for r in refused)

    time.sleep(2.5)
    with ThreadPoolExecutor(8) as pool:
        retried = list(pool.map(lambda i: ask("arc-node-retrieval", i), range(8)))
    assert [r.status_code for r in retried] == [200] * 8, [r.text[:200] for r in retried]


def test_the_ai_agent_calls_the_node_as_its_tool(n8n, chat_model):
    url = f"{n8n['base']}/webhook/{NODE_CHAT_WEBHOOK_ID}/chat"
    question = "What is the tallest fence allowed in a backyard?"
    before = len(chat_model.requests)
    reply = requests.post(url, json={"action": "sendMessage", "sessionId": f"node-{n8n['version']}",
                                     "chatInput": question}, auth=(CHAT_USER, CHAT_PASSWORD), timeout=180)
    assert reply.status_code == 200, reply.text[:500]
    output = reply.json()["output"] if isinstance(reply.json(), dict) else reply.json()[0]["output"]
    assert "Status: success" in output and "6 feet" in output and "[SOURCE 1]" in output, output[:800]

    calls = [r for r in chat_model.requests[before:] if r.get("tools")]
    tool = calls[0]["tools"][0]["function"]
    assert tool["name"] == "arc_retrieval", tool
    assert "low_confidence" in tool["description"] and "not instructions" in tool["description"]
    assert "query" in tool["parameters"]["properties"], tool["parameters"]
    # the tool's result, as the model received it: the node's status, context and sources
    followups = [r for r in chat_model.requests[before:]
                 if any(m.get("role") == "tool" for m in r["messages"])]
    results = [m for m in followups[0]["messages"] if m.get("role") == "tool"]
    received = results[0]["content"]
    assert '"status"' in received and "[SOURCE 1]" in received and '"sources"' in received, received[:500]

    logged = log_rows(f"postgresql://postgres:@/postgres?host={WORKER_DATA['dir'] / 'pgdata'}",
                      "select status from query_log where query = %s", (question,))
    assert logged and logged[-1][0] == "success", "the worker received the agent's question"


def _owner_session(n8n: dict) -> requests.Session:
    """n8n's first user (the owner), signed in: the credential test is an editor's action."""
    session = requests.Session()
    owner = {"email": "owner@example.com", "firstName": "Arc", "lastName": "Owner",
             "password": "Owner-pass-1234"}
    r = session.post(f"{n8n['base']}/rest/owner/setup", json=owner, timeout=60)
    if r.status_code != 200:  # set up already (the module's first call)
        r = session.post(f"{n8n['base']}/rest/login",
                         json={"emailOrLdapLoginId": owner["email"], "email": owner["email"],
                               "password": owner["password"]}, timeout=60)
    assert r.status_code == 200, r.text[:300]
    return session


@pytest.mark.parametrize("token,access,ok", [
    (WORKER_TOKEN, "questions", True),
    (INGEST_TOKEN, "documents", True),
    (WRONG_TOKEN, "questions", False),
    (WORKER_TOKEN, "documents", False),
])
def test_the_credential_test_asks_the_worker(n8n, worker, token, access, ok):
    session = _owner_session(n8n)
    body = {"credentials": {"id": "arcNodeQuestions1", "name": "ARC Questions", "type": "arcRetrievalApi",
                            "data": {"baseUrl": worker + "/", "token": token, "access": access}}}
    r = session.post(f"{n8n['base']}/rest/credentials/test", json=body, timeout=60)
    assert r.status_code == 200, r.text[:300]
    result = r.json().get("data", r.json())
    assert (result["status"] == "OK") is ok, result
    if not ok:
        assert "refused this token" in result["message"], result


def test_the_readme_installs_the_package_where_n8n_looks(node_package, tmp_path):
    install_as_the_readme_says(tmp_path)
    installed = tmp_path / ".n8n" / "nodes" / "node_modules" / "n8n-nodes-arc-retrieval"
    manifest = json.loads((installed / "package.json").read_text())
    assert manifest["name"] == "n8n-nodes-arc-retrieval"
    assert (installed / manifest["n8n"]["nodes"][0]).is_file()


def test_the_exported_node_workflows_use_the_node_and_its_credential():
    for path in NODE_WORKFLOWS:
        workflow = json.loads(path.read_text())
        ours = [n for n in workflow["nodes"] if n["type"].startswith("n8n-nodes-arc-retrieval.")]
        assert ours, path.name
        for node in ours:
            assert set(node["credentials"]) == {"arcRetrievalApi"}, (path.name, node["name"])
        # the worker's URL and token live in the credential, not in the workflow
        assert "ARC_WORKER_URL" not in path.read_text() and "httpRequest" not in path.read_text()
