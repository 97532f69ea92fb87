"""The retrieval webhook through the real Flask app, real embedded Postgres and the real local
embedding model, over the sample corpus."""

from __future__ import annotations

import re
import socket

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.citation_reader import read_compact, read_full
from worker.serve.app import create_app
from worker.embeddings import CachedEmbedder, OpenAIEmbedder
from worker.models import IngestFields
from worker.retrieve.pipeline import Retriever
from worker.runtime import Runtime
from worker.store.postgres_search import PostgresBackend
from worker.tokens import default_counter
from tests.helpers import ask_webhook as ask, query_log_written

ROUTE = "/webhook/arc-retrieval"


def test_seed_question_normalises_and_finds_the_fence_rule(client):
    answer = ask(client, query="What's the max fence height allowed in my backyard??")
    assert answer["query"]["normalized"] == "What is the max fence height allowed in my backyard?"
    assert answer["query"]["original"] == "What's the max fence height allowed in my backyard??"
    assert {"fence", "height", "backyard"} <= {k.lower() for k in answer["query"]["keywords"]}
    assert answer["status"] == "success"
    sections = [c["section_path"] for c in answer["chunks"] if c["source"]]
    assert "Chapter 4 Structures > 4.2 Fencing" in sections
    assert "[SOURCE 1]" in answer["context"] and "Maximum fence height" in answer["context"]
    first = answer["chunks"][0]
    for key in ("vector_score", "fts_score", "fused_score", "relevance", "vector_rank", "fts_rank",
                "rerank_score", "adjusted_score"):
        assert key in first
    assert set(answer["timings_ms"]) >= {"preprocess", "embed", "search", "rerank", "context", "total"}


def test_paint_question_is_steered_to_design_guidelines_by_phrasing(client):
    answer = ask(client, query="According to the guidelines, which paint colours can I use?")
    assert answer["query"]["steered_to"] == ["design_guidelines"]
    assert answer["query"]["document_types"] is None and answer["query"]["filter_source"] == "none"
    assert "Paint Colours" in answer["chunks"][0]["section_path"]
    assert {c["document_type"] for c in answer["chunks"]} != {"design_guidelines"}, "steering hides nothing"
    # an explicit filter is a hard one, and wins over phrasing
    explicit = ask(client, query="According to the guidelines, which paint colours can I use?",
                   document_types=["ccr"])
    assert explicit["query"]["filter_source"] == "request" and explicit["query"]["steered_to"] is None
    assert all(c["document_type"] == "ccr" for c in explicit["chunks"])


@pytest.mark.parametrize("query", ["best pizza in Naples", "How do I bake sourdough bread?",
                                   "Who won the 1998 football world cup?"])
def test_unrelated_questions_do_not_come_back_success(client, query):
    answer = ask(client, query=query)
    assert answer["status"] in ("no_results", "low_confidence")
    assert answer["message"]
    if answer["status"] == "no_results":
        assert answer["context"] == "" and answer["sources"] == 0


@pytest.mark.parametrize("query,section", [
    ("Can I put solar panels on my roof?", "Solar"),
    ("How far from the rear property line must a shed be?", "Setbacks"),
    ("How big can a shed be?", "4.1 Sheds"),
])
def test_topic_questions_find_their_sections(client, query, section):
    answer = ask(client, query=query)
    assert answer["status"] == "success"
    assert any(section in c["section_path"] for c in answer["chunks"][:3])


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_embedding_failure_degrades_to_full_text_with_a_warning(sample_runtime):
    # A real OpenAI client pointed at a port nothing listens on: the provider is "down".
    settings = sample_runtime.settings.replace(**{
        "openai_api_key": "sk-test", "openai_base_url": f"http://127.0.0.1:{_closed_port()}/v1",
        "embedding_provider": "openai", "embedding_model": "text-embedding-3-large", "embedding_dim": 384,
        "embedding_timeout": 2.0})
    failing = CachedEmbedder(OpenAIEmbedder(settings))
    retriever = Retriever(embedder=failing, backend=PostgresBackend(sample_runtime.db), reranker=None,
                          embedding_timeout=2.0)
    app = create_app(runtime=Runtime(settings, sample_runtime.db, failing), retriever=retriever)
    answer = ask(app.test_client(), query="What is the maximum fence height?")
    assert any(w.startswith("degraded:") for w in answer["warnings"])
    assert answer["chunks"] and all(c["vector_score"] is None and c["fts_rank"] is not None for c in answer["chunks"])
    assert "fence" in answer["chunks"][0]["content"].lower()
    assert answer["timings_ms"]["embed"] < 2500


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(budget=st.integers(min_value=50, max_value=2500), min_relevance=st.sampled_from([0.0, 0.3, 0.5]))
def test_token_budget_is_never_exceeded(client, budget, min_relevance):
    answer = ask(client, query="What are the rules for fences, sheds and setbacks?", token_budget=budget,
                 min_relevance=min_relevance, top_k=20)
    counted = default_counter().count(answer["context"]) if answer["context"] else 0
    assert counted == answer["context_tokens"] <= budget
    assert answer["sources"] == answer["context"].count("[SOURCE ")


def test_context_groups_sources_by_document_most_trusted_first(client):
    answer = ask(client, query="What are the rules for fences, sheds and setbacks?", min_relevance=0.0, top_k=8)
    in_context = sorted((c for c in answer["chunks"] if c["source"]), key=lambda c: (c["source"], c["chunk_index"]))
    assert len(in_context) >= 3
    seen: list[str] = []
    for chunk in in_context:
        if not seen or seen[-1] != chunk["document_id"]:
            assert chunk["document_id"] not in seen, "a document's chunks must be contiguous"
            seen.append(chunk["document_id"])
    best_of = {}
    for chunk in in_context:
        best_of[chunk["document_id"]] = max(best_of.get(chunk["document_id"], 0), chunk["final_score"])
    assert [best_of[d] for d in seen] == sorted(best_of.values(), reverse=True), "documents by their best chunk"
    assert in_context[0]["final_score"] == max(c["final_score"] for c in in_context), "SOURCE 1 is the best"
    for a, b in zip(in_context, in_context[1:]):
        if a["source"] == b["source"]:  # one passage: adjacent chunks of one section, in reading order
            assert a["document_id"] == b["document_id"] and a["chunk_index"] + 1 == b["chunk_index"]
    assert "\n---\n" in answer["context"]


def test_each_source_names_its_passage_compactly_or_in_labelled_lines(client):
    """The compact headers carry the facts of the full ones (document, section, page, binding) in
    fewer tokens, each document's once for its run of passages; ``"citations": "full"`` gives the
    labelled lines."""
    question = "What are the rules for fences, sheds and setbacks?"
    compact = ask(client, query=question, min_relevance=0.0, top_k=8)
    full = ask(client, query=question, min_relevance=0.0, top_k=8, citations="full")
    assert [c["id"] for c in compact["chunks"]] == [c["id"] for c in full["chunks"]]
    assert compact["sources"] == full["sources"] > 1
    assert compact["context_tokens"] < full["context_tokens"]
    facts = read_compact(compact["context"])
    assert facts == read_full(full["context"]), compact["context"]
    first_of = {}
    for chunk in sorted((c for c in compact["chunks"] if c["source"]), key=lambda c: c["chunk_index"]):
        first_of.setdefault(chunk["source"], chunk)
    for n, chunk in first_of.items():
        assert (facts[n].document, facts[n].section, facts[n].binding) == (
            chunk["document_name"], chunk["section_path"] or None, chunk["is_binding"])
        if chunk["page_number"] is not None:
            assert facts[n].pages and facts[n].pages[0] == chunk["page_number"], facts[n]
    assert compact["context"].count("[DOCUMENT] ") == len({c["document_id"] for c in compact["chunks"]})
    assert "Document: " not in compact["context"]
    blocks = full["context"].split("\n---\n")
    assert all(b.startswith("[SOURCE ") and "\nDocument: " in b and "\nBinding: " in b and "\nContent:\n" in b
               for b in blocks), full["context"]


def test_n8n_wrapped_bodies(client):
    wrapped = ask(client, headers={"host": "n8n"}, params={}, query={"x": "1"},
                  body={"query": "What is the maximum fence height?", "top_k": 3})
    assert wrapped["query"]["original"] == "What is the maximum fence height?"
    assert len(wrapped["chunks"]) <= 3
    chat = ask(client, chatInput="Can I install solar panels?", sessionId="abc", action="sendMessage")
    assert chat["query"]["original"] == "Can I install solar panels?"
    chat_in_body = ask(client, body={"chatInput": "Can I install solar panels?", "sessionId": "abc"})
    assert chat_in_body["query"]["original"] == "Can I install solar panels?"


@pytest.mark.parametrize("body,field", [
    ({}, "query"),
    ({"query": "   "}, "query"),
    ({"query": "x" * 2001}, "query"),
    ({"query": "fence", "top_k": 21}, "top_k"),
    ({"query": "fence", "top_k": "many"}, "top_k"),
    ({"query": "fence", "document_types": ["memo"]}, "document_types.0"),
    ({"query": "fence", "weights": {"vector": 0, "fts": 0}}, "weights"),
    ({"query": "fence", "weights": {"vector": 0, "fts": 5e-324}}, "weights.fts"),  # once a 500 (SQL underflow)
    ({"query": "fence", "fusion": "max"}, "fusion"),
    ({"query": "fence", "citations": "short"}, "citations"),
    ({"query": "fence", "tok_k": 3}, "tok_k"),
    ({"query": "a\x00b"}, "query"),
])
def test_bad_input_is_a_422_naming_the_field(client, body, field):
    response = client.post(ROUTE, json=body)
    assert response.status_code == 422
    error = response.get_json()
    assert error["error"] == "invalid_input" and error["field"] == field and field in error["message"]


def test_malformed_requests(client):
    assert client.post(ROUTE, data="{not json", content_type="application/json").status_code == 400
    assert client.post(ROUTE, data="query=fence", content_type="text/plain").status_code == 415
    assert client.post(ROUTE, json=["fence"]).status_code == 400
    big = client.post(ROUTE, data='{"query": "' + "x" * 2_000_000 + '"}', content_type="application/json")
    assert big.status_code == 413 and big.get_json()["field"] == "body"
    assert client.get(ROUTE).status_code == 405
    assert client.get("/nope").get_json()["error"] == "not_found"


def test_health_ready_openapi_and_request_id(client):
    assert client.get("/healthz").get_json() == {"status": "ok"}
    ready = client.get("/readyz")
    assert ready.status_code == 200 and ready.get_json()["database"] is True
    spec = client.get("/openapi.json").get_json()
    assert spec["openapi"].startswith("3.")
    assert "RetrievalRequest" in spec["components"]["schemas"]
    response = client.post(ROUTE, json={"query": "fence height"}, headers={"X-Request-ID": "n8n-exec-42"})
    assert response.headers["X-Request-ID"] == "n8n-exec-42"
    assert response.get_json()["request_id"] == "n8n-exec-42"


def test_every_route_the_app_serves_is_in_its_openapi_document(app, client):
    documented = client.get("/openapi.json").get_json()["paths"]
    for rule in app.url_map.iter_rules():
        if rule.endpoint == "static" or rule.endpoint.startswith("pages."):
            continue  # the keeper's HTML pages are for people; the README lists their routes
        path = re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", rule.rule)
        assert path in documented, f"{rule.rule} is served but not documented"
        for method in rule.methods - {"HEAD", "OPTIONS"}:
            assert method.lower() in documented[path], f"{method} {rule.rule} is served but not documented"
    # a form upload takes every field the JSON body describes a document with
    form = documented["/webhook/arc-ingest"]["post"]["requestBody"]["content"]["multipart/form-data"]["schema"]
    assert set(IngestFields.model_fields) | {"file", "format"} == set(form["properties"])


def test_answers_are_logged_for_monitoring(client, sample_runtime):
    ask(client, query="Where is lot coverage mentioned?")
    assert query_log_written(client), "written off the answer's path"
    with sample_runtime.db.connect() as conn:
        row = conn.execute("select query_type, status, candidate_count from query_log "
                           "where query = 'Where is lot coverage mentioned?' order by id desc limit 1").fetchone()
    assert row[0] == "location" and row[1] in ("success", "low_confidence") and row[2] > 0
