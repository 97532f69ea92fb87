"""``min_relevance`` is the hard minimum the README promises and ``top_k`` the most chunks an
answer lists: through the real app, Postgres and embedding model, over the sample corpus."""

from __future__ import annotations

import pytest

from tests.helpers import ask_webhook as ask

QUESTIONS = ["What is the maximum fence height?", "What are the rules for fences, sheds and setbacks?",
             "Can I park a boat in my driveway?"]


@pytest.mark.parametrize("query", QUESTIONS)
def test_no_chunk_below_the_minimum_reaches_the_context_or_the_list(client, query):
    scores = sorted({c["final_score"] for c in ask(client, query=query, min_relevance=0.0, top_k=20)["chunks"]},
                    reverse=True)
    assert len(scores) >= 3
    minimum = round((scores[0] + scores[1]) / 2, 4)  # only the best chunk qualifies
    answer = ask(client, query=query, min_relevance=minimum)
    assert answer["chunks"] and all(c["final_score"] >= minimum for c in answer["chunks"]), answer["chunks"]
    assert answer["sources"] == 1 and " …" not in answer["context"]
    assert all(c["source"] == 1 for c in answer["chunks"]), "no neighbour scoring below the minimum"


@pytest.mark.parametrize("query", QUESTIONS)
def test_a_minimum_no_chunk_reaches_means_no_results(client, query):
    best = ask(client, query=query)["best_score"]
    answer = ask(client, query=query, min_relevance=min(round(best + 0.01, 4), 1.0))
    assert answer["status"] == "no_results" and answer["context"] == "" and answer["chunks"] == []
    assert any("min_relevance" in w for w in answer["warnings"]), answer["warnings"]


@pytest.mark.parametrize("top_k", [1, 2, 3, 5, 8])
@pytest.mark.parametrize("query", QUESTIONS)
def test_never_more_chunks_than_top_k(client, query, top_k):
    for body in ({}, {"min_relevance": 0.0}):
        answer = ask(client, query=query, top_k=top_k, **body)
        assert len(answer["chunks"]) <= top_k, (top_k, [c["source"] for c in answer["chunks"]])
        listed = {c["source"] for c in answer["chunks"] if c["source"]}
        assert listed <= set(range(1, answer["sources"] + 1)) and 1 in listed, "SOURCE 1's chunk is listed"


@pytest.mark.parametrize("query", QUESTIONS)
def test_with_room_every_source_of_the_context_is_listed(client, query):
    answer = ask(client, query=query, top_k=20)
    assert {c["source"] for c in answer["chunks"] if c["source"]} == set(range(1, answer["sources"] + 1))


def test_the_openapi_description_gives_the_readme_default(client):
    described = client.get("/openapi.json").get_json()
    text = str(described)
    from worker.config import Context

    default = Context.model_fields["min_context_chunks"].default
    assert "first five" not in text and f"ARC_MIN_CONTEXT_CHUNKS ({default})" in text
