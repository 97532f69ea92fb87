"""Dify's External Knowledge API (``POST /retrieval``, worker/serve/dify.py) through the real Flask
app over the sample corpus, checked against the request and response examples Dify publishes
("External Knowledge API": request syntax, response syntax, error codes)."""

from __future__ import annotations

import pytest

from worker.runtime import Runtime
from worker.serve.app import create_app

TOKEN = "dify-api-key-0123456789abcdef0123"
FENCE = "What is the maximum fence height in my backyard?"

# Dify's published request, as Dify sends it (only the query and knowledge id are ours below).
DIFY_REQUEST = {"knowledge_id": "your-knowledge-id", "query": "your question",
                "retrieval_setting": {"top_k": 2, "score_threshold": 0.5}}
# Dify's published response: every record has these keys, of these types.
DIFY_RESPONSE = {"records": [{"metadata": {"path": "s3://dify/knowledge.txt", "description": "dify knowledge document"},
                              "score": 0.98, "title": "knowledge.txt",
                              "content": "This is the document for external knowledge."}]}


@pytest.fixture(scope="module")
def dify_client(sample_runtime):
    settings = sample_runtime.settings.replace(**{"api_token": TOKEN, "rate_limit": 0.0})
    app = create_app(runtime=Runtime(settings, sample_runtime.db, sample_runtime.embedder))
    return app.test_client()


def post(client, body, auth: str | None = f"Bearer {TOKEN}"):
    headers = {"Authorization": auth} if auth is not None else {}
    return client.post("/retrieval", json=body, headers=headers)


def test_the_published_request_shape_gets_the_published_response_shape(dify_client):
    r = post(dify_client, {**DIFY_REQUEST, "knowledge_id": "all", "query": FENCE})
    assert r.status_code == 200, r.get_json()
    body = r.get_json()
    assert set(body) == set(DIFY_RESPONSE)
    records = body["records"]
    assert 1 <= len(records) <= 2
    example = DIFY_RESPONSE["records"][0]
    for record in records:
        assert set(record) == set(example)
        for key, value in example.items():
            assert isinstance(record[key], type(value)), key
        assert 0.5 <= record["score"] <= 1
        assert None not in record["metadata"].values()  # Dify's pipeline fails on a null metadata value
    assert [r["score"] for r in records] == sorted((r["score"] for r in records), reverse=True)
    assert "6 feet" in records[0]["content"] or "six feet" in records[0]["content"].lower()
    assert records[0]["title"].endswith("4.2 Fencing")


def test_score_is_the_workers_final_score(dify_client):
    webhook = dify_client.post("/webhook/arc-retrieval", json={"query": FENCE},
                               headers={"X-ARC-Token": TOKEN}).get_json()
    records = post(dify_client, {"knowledge_id": "all", "query": FENCE,
                                 "retrieval_setting": {"top_k": 3, "score_threshold": 0.0}}).get_json()["records"]
    assert [r["score"] for r in records] == [round(c["final_score"], 4) for c in webhook["chunks"][:3]]
    assert [r["content"] for r in records] == [c["content"] for c in webhook["chunks"][:3]]


def test_score_threshold_and_top_k_are_obeyed(dify_client):
    def records(top_k, threshold):
        return post(dify_client, {"knowledge_id": "all", "query": FENCE,
                                  "retrieval_setting": {"top_k": top_k, "score_threshold": threshold}}
                    ).get_json()["records"]

    everything = records(10, 0.0)
    assert len(everything) == 10
    cut = (everything[0]["score"] + everything[-1]["score"]) / 2
    kept = records(10, cut)
    assert kept and len(kept) < 10 and all(r["score"] >= cut for r in kept)
    assert records(10, 1.0) == [] or all(r["score"] == 1.0 for r in records(10, 1.0))
    assert len(records(50, 0.0)) == 20  # the webhook's own ceiling


def test_a_document_type_is_a_knowledge_id(dify_client):
    records = post(dify_client, {"knowledge_id": "ccr", "query": FENCE,
                                 "retrieval_setting": {"top_k": 5, "score_threshold": 0.0}}).get_json()["records"]
    assert records and {r["metadata"]["document_type"] for r in records} == {"ccr"}


def test_metadata_condition_filters_records(dify_client):
    def records(condition):
        return post(dify_client, {"knowledge_id": "all", "query": FENCE, "metadata_condition": condition,
                                  "retrieval_setting": {"top_k": 5, "score_threshold": 0.0}}).get_json()["records"]

    # the older page's shape: name as a list of names
    only = records({"logical_operator": "and", "conditions": [
        {"name": ["document_type"], "comparison_operator": "is", "value": "design_guidelines"}]})
    assert only and {r["metadata"]["document_type"] for r in only} == {"design_guidelines"}
    # the newer page's shape: one name; "or" of two conditions
    either = records({"logical_operator": "or", "conditions": [
        {"name": "document_type", "comparison_operator": "is", "value": "ccr"},
        {"name": "section_path", "comparison_operator": "contains", "value": "fenc"}]})
    assert either and all(r["metadata"]["document_type"] == "ccr" or "fenc" in r["metadata"]["section_path"].lower()
                          for r in either)
    assert records({"conditions": [{"name": "document_type", "comparison_operator": "in",
                                    "value": ["nothing"]}]}) == []


def test_an_unknown_knowledge_id_is_error_2001(dify_client):
    r = post(dify_client, DIFY_REQUEST)  # Dify's example id, which this worker does not have
    assert r.status_code == 404
    assert r.get_json()["error_code"] == 2001 and "does not exist" in r.get_json()["error_msg"]


@pytest.mark.parametrize("auth,code", [
    (None, 1001), ("", 1001), (TOKEN, 1001), ("Basic " + TOKEN, 1001), ("Bearer ", 1001),
    ("Bearer wrong-key", 1002), (f"Bearer {TOKEN}x", 1002),
])
def test_authorization_errors_are_difys(dify_client, auth, code):
    r = post(dify_client, {**DIFY_REQUEST, "knowledge_id": "all"}, auth=auth)
    assert r.status_code == 403
    body = r.get_json()
    assert body["error_code"] == code and set(body) == {"error_code", "error_msg"}
    assert TOKEN not in body["error_msg"]


@pytest.mark.parametrize("body,field", [
    ({"knowledge_id": "all", "query": "fence"}, "retrieval_setting"),
    ({"knowledge_id": "all", "query": "  ", "retrieval_setting": {"top_k": 2, "score_threshold": 0.5}}, "query"),
    ({"knowledge_id": "all", "query": "fence", "retrieval_setting": {"top_k": 0, "score_threshold": 0.5}},
     "retrieval_setting.top_k"),
    ({"knowledge_id": "all", "query": "fence", "retrieval_setting": {"top_k": 2, "score_threshold": 2}},
     "retrieval_setting.score_threshold"),
    ({"knowledge_id": "all", "query": "fence", "retrieval_setting": {"top_k": 2, "score_threshold": 0.5},
      "metadata_condition": {"conditions": [{"name": "x", "comparison_operator": "like"}]}},
     "metadata_condition.conditions.0.comparison_operator"),
])
def test_invalid_requests_name_the_field(dify_client, body, field):
    r = post(dify_client, body)
    assert r.status_code == 422
    assert r.get_json()["error_msg"].startswith(field + ":"), r.get_json()


def test_a_body_that_is_not_json_is_refused_cleanly(dify_client):
    auth = {"Authorization": f"Bearer {TOKEN}"}
    r = dify_client.post("/retrieval", data="knowledge_id=all", headers=auth)  # a form's type
    assert r.status_code == 415 and r.get_json() == {
        "error_code": 415, "error_msg": "send a JSON object (Content-Type: application/json)"}
    for data, message in (("{not json", "not valid JSON"), ("[1, 2]", "must be a JSON object")):
        r = dify_client.post("/retrieval", data=data, content_type="application/json", headers=auth)
        assert r.status_code == 400 and r.get_json()["error_code"] == 400 and message in r.get_json()["error_msg"]


@pytest.mark.parametrize("depth", [200, 50_000])  # past ARC_MAX_NESTING (100); past the decoder's own stack
def test_a_deeply_nested_body_is_a_400_in_difys_shape(dify_client, depth):
    body = ('{"knowledge_id": "all", "query": "fence", "retrieval_setting": {"top_k": 2, "score_threshold": 0.5}, '
            '"extra": ' + "[" * depth + "]" * depth + "}")
    r = dify_client.post("/retrieval", data=body, content_type="application/json",
                         headers={"Authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 400, r.get_data(as_text=True)[:300]
    error = r.get_json()
    assert set(error) == {"error_code", "error_msg"} and error["error_code"] == 400
    assert "nests JSON over 100 levels" in error["error_msg"]


# -- several communities ------------------------------------------------------------------------

RIDGE_KEY = "dify-ridge-only-key-0123456789ab"
BOTH_KEY = "dify-both-communities-key-012345"


@pytest.fixture(scope="module")
def communities_client(make_database, embedder, tmp_path_factory):
    """Two associations in one knowledge base: the sample corpus as ``hollow``, one CC&R of ``ridge``."""
    from tests.helpers import make_settings
    from tests.helpers import hollow_and_ridge

    db = hollow_and_ridge(make_database, embedder, "dify_communities",
                          "# Ridge\n\n## Fences\n\nAt Cedar Ridge a backyard fence may be 4 feet tall at most.")
    url = db.url
    settings = make_settings(tmp_path_factory.mktemp("dify-communities"), url, api_token=TOKEN,
                             community_tokens=f"ridge:{RIDGE_KEY}; hollow,ridge:{BOTH_KEY}")
    yield create_app(runtime=Runtime(settings, db, embedder)).test_client()
    db.close()


def ask(client, knowledge_id: str, key: str = TOKEN):
    return post(client, {"knowledge_id": knowledge_id, "query": FENCE,
                         "retrieval_setting": {"top_k": 5, "score_threshold": 0.0}}, auth=f"Bearer {key}")


def test_a_knowledge_id_names_the_community(communities_client):
    for knowledge_id in ("ridge", "ridge/all", "ridge/ccr"):
        r = ask(communities_client, knowledge_id)
        assert r.status_code == 200, r.get_json()
        assert {rec["metadata"]["document_id"] for rec in r.get_json()["records"]} == {"ridge-ccrs"}
    guidelines = ask(communities_client, "hollow/design_guidelines").get_json()["records"]
    assert guidelines and {rec["metadata"]["document_type"] for rec in guidelines} == {"design_guidelines"}
    assert "ridge-ccrs" not in {rec["metadata"]["document_id"] for rec in ask(communities_client, "hollow").get_json()["records"]}

    # several communities and none named: Dify's field is the one to fix
    r = ask(communities_client, "all")
    assert r.status_code == 400 and set(r.get_json()) == {"error_code", "error_msg"}
    assert r.get_json()["error_msg"].startswith("knowledge_id:") and "hollow, ridge" in r.get_json()["error_msg"]
    for unknown in ("nowhere", "nowhere/all", "ridge/bylaws", "Ridge", "a/b/c"):
        r = ask(communities_client, unknown)
        assert r.status_code == 404 and r.get_json()["error_code"] == 2001, (unknown, r.get_json())


def test_a_key_limited_to_a_community_reaches_only_it(communities_client):
    for knowledge_id in ("all", "ccr", "ridge", "ridge/ccr"):  # its one community needs no naming
        r = ask(communities_client, knowledge_id, RIDGE_KEY)
        assert r.status_code == 200, (knowledge_id, r.get_json())
        assert {rec["metadata"]["document_id"] for rec in r.get_json()["records"]} == {"ridge-ccrs"}
    # another community, or an unknown one (not told apart): refused, and nothing of it
    for knowledge_id in ("hollow", "hollow/design_guidelines", "nowhere"):
        r = ask(communities_client, knowledge_id, RIDGE_KEY)
        assert r.status_code == 403 and r.get_json()["error_code"] == 1002, (knowledge_id, r.get_json())
        assert "records" not in r.get_json() and "fence" not in r.get_data(as_text=True).lower()
    # a key for two must name one
    assert ask(communities_client, "all", BOTH_KEY).status_code == 400
    assert ask(communities_client, "hollow", BOTH_KEY).status_code == 200
    assert ask(communities_client, "all", "dify-guess-guess-guess-guess-000").get_json()["error_code"] == 1002
