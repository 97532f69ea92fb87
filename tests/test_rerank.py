"""The LLM reranker through the real ``openai`` client against the local protocol stand-in."""

from __future__ import annotations

import re
import string
import time

import openai
import pytest

from tests.openai_standin import OpenAIStandin
from worker.serve.app import create_app
from worker.models import ChunkResult
from worker.retrieve.pipeline import Retriever
from worker.retrieve.authority import Adjustments
from worker.retrieve.rerank import LLMReranker
from worker.retrieve.rerank_prompt import CANDIDATE_TEMPLATE, USER_PROMPT_TEMPLATE, parse_scores
from worker.runtime import Runtime
from worker.store.postgres_search import PostgresBackend


@pytest.fixture(scope="module")
def standin():
    with OpenAIStandin() as server:
        yield server


@pytest.fixture()
def llm(standin):
    standin.reset()
    client = openai.OpenAI(api_key=standin.api_key, base_url=standin.base_url, max_retries=0)
    return LLMReranker(client, "gpt-4o", timeout=2.0, cache_ttl=0.001)


def chunk(i: int, *, doc_type="other", binding=False, superseded=None, content="text") -> ChunkResult:
    return ChunkResult(id=i, document_id=f"d{i}", document_name=f"Doc {i}", document_type=doc_type,
                       section_path=f"S{i}", page_number=1, chunk_index=0, is_binding=binding,
                       superseded_by=superseded, content=content, token_count=3, fused_score=1 - i / 100)


def scripted(scores: dict[int, float]):
    return lambda question, candidates: {c["id"]: scores.get(int(c["id"]), 0.0) for c in candidates}


def test_good_reply_reorders_and_applies_every_adjustment(llm, standin):
    candidates = [chunk(1), chunk(2, doc_type="design_guidelines", binding=True),
                  chunk(3, doc_type="ccr", binding=True), chunk(4, doc_type="design_guidelines", binding=True,
                                                                superseded="new"), chunk(5)]
    standin.reset(scorer=scripted({1: 0.3, 2: 0.6, 3: 0.7, 4: 0.95, 5: 0.95}))
    outcome = llm.rerank("fence height?", candidates, top_k=5)
    assert outcome.reranked and not outcome.warnings
    adjusted = {c.id: c.adjusted_score for c in outcome.chunks}
    assert adjusted[1] == pytest.approx(0.3)
    assert adjusted[2] == pytest.approx(0.6 * 1.1 * 1.05)
    assert adjusted[3] == pytest.approx(0.7 * 1.1)
    assert adjusted[4] == pytest.approx(0.95 * 1.1 * 1.05 * 0.5)
    assert adjusted[5] == pytest.approx(0.95)
    assert [c.id for c in outcome.chunks] == [5, 3, 2, 4, 1]
    assert all(c.rerank_reasoning for c in outcome.chunks)
    assert outcome.usage["llm_requests"] == 1 and outcome.usage["prompt_tokens"] > 0
    request = standin.requests[-1].body
    assert request["temperature"] == 0 and request["model"] == "gpt-4o"
    assert request["response_format"]["type"] == "json_schema"


def test_adjustments_cap_at_one_and_are_configurable():
    adj = Adjustments(binding=1.2, superseded=0.25, document_type={"ccr": 1.5})
    assert adj.apply(chunk(1, doc_type="ccr", binding=True), 0.9) == 1.0
    assert adj.apply(chunk(1, doc_type="ccr", binding=True, superseded="x"), 0.5) == pytest.approx(0.225)


@pytest.mark.parametrize("mode", ["fenced", "prose", "truncated"])
def test_replies_wrapped_or_cut_are_repaired(llm, standin, mode):
    candidates = [chunk(i) for i in range(1, 9)]
    standin.reset(mode=mode, scorer=scripted({i: i / 10 for i in range(1, 9)}))
    outcome = llm.rerank("q", candidates, top_k=8)
    assert outcome.reranked
    scored = [c for c in outcome.chunks if c.rerank_score is not None]
    assert scored and [c.rerank_score for c in scored] == sorted((c.rerank_score for c in scored), reverse=True)
    if mode == "truncated":  # the cut-off tail keeps first-stage order below the scored ones
        unscored = [c.id for c in outcome.chunks if c.rerank_score is None]
        assert unscored and unscored == sorted(unscored)


@pytest.mark.parametrize("mode,reason", [("broken", "could not be parsed"), ("empty", "could not be parsed"),
                                         ("http500", "HTTP 500"), ("http429", "HTTP 429")])
def test_failures_fall_back_to_first_stage_order_with_a_warning(llm, standin, mode, reason):
    candidates = [chunk(i) for i in range(1, 6)]
    standin.reset(mode=mode)
    outcome = llm.rerank("q", candidates, top_k=5)
    assert not outcome.reranked
    assert [c.id for c in outcome.chunks] == [1, 2, 3, 4, 5]
    assert len(outcome.warnings) == 1 and "reranker skipped" in outcome.warnings[0] and reason in outcome.warnings[0]


def test_unknown_duplicate_missing_and_out_of_range_scores():
    text = json_reply([("1", 0.4), ("1", 0.9), ("99", 1.0), ("2", "0.7"), ("3", 7), ("4", -2), ("x", 0.5)])
    scores = parse_scores(text, {1, 2, 3, 4, 5})
    assert {k: v.value for k, v in scores.items()} == {1: 0.4, 2: 0.7, 3: 1.0, 4: 0.0}


def test_unknown_ids_are_dropped_and_missing_keep_their_order(llm, standin):
    candidates = [chunk(i) for i in range(1, 6)]
    standin.reset(scorer=scripted({4: 0.9, 2: 0.8}), extra_items=[{"chunk_id": "777", "relevance_score": 1.0}],
                  score_format=str)
    outcome = llm.rerank("q", candidates, top_k=5)
    # the scorer gives 0.0 to 1, 3, 5 explicitly; drop them to model "missing"
    assert 777 not in [c.id for c in outcome.chunks]
    assert [c.id for c in outcome.chunks][:2] == [4, 2]


def test_timeout_is_honoured(llm, standin):
    standin.reset(delay=5.0)
    start = time.monotonic()
    outcome = llm.rerank("q", [chunk(i) for i in range(1, 4)], top_k=3)
    elapsed = time.monotonic() - start
    assert elapsed < 2.0 + 0.7
    assert not outcome.reranked and "2 s" in outcome.warnings[0]


def test_batches_above_twenty_run_concurrently(llm, standin):
    standin.reset(delay=0.6)
    llm.max_candidates = 60
    start = time.monotonic()
    outcome = llm.rerank("q", [chunk(i) for i in range(1, 46)], top_k=8)
    elapsed = time.monotonic() - start
    chats = [r for r in standin.requests if r.path.endswith("/chat/completions")]
    assert len(chats) == 3 and outcome.reranked
    assert max(len(CANDIDATE_PATTERN.findall(r.body["messages"][-1]["content"])) for r in chats) <= 20
    assert elapsed < 1.5, "three 0.6 s batches in sequence would take 1.8 s"
    assert max(r.start for r in chats) < min(r.end for r in chats), "the batches overlapped"


CANDIDATE_PATTERN = re.compile(r'<candidate id="')


def test_server_without_structured_outputs_gets_json_mode(llm, standin):
    standin.reset(reject_json_schema=True, scorer=scripted({1: 0.2, 2: 0.9}))
    outcome = llm.rerank("q", [chunk(1), chunk(2)], top_k=2)
    assert outcome.reranked and [c.id for c in outcome.chunks] == [2, 1]
    formats = [r.body.get("response_format", {}).get("type") for r in standin.requests]
    assert formats == ["json_schema", "json_object"]


def test_guard_keeps_strong_first_stage_hits(llm, standin):
    candidates = [chunk(i) for i in range(1, 13)]
    for c in candidates:  # chunk 1 is the one strong first-stage hit
        c.relevance = c.final_score = 0.7 if c.id == 1 else 0.45
    standin.reset(scorer=scripted({1: 0.0, **{i: 0.5 + i / 100 for i in range(2, 13)}}))
    outcome = llm.rerank("q", candidates, top_k=5)
    by_id = {c.id: c for c in outcome.chunks}
    assert by_id[1].rerank_score == 0.0 and by_id[1].final_score == pytest.approx(0.7)
    assert [c.id for c in outcome.chunks][:3] == [1, 12, 11]
    scores = [c.final_score for c in outcome.chunks]
    assert scores == sorted(scores, reverse=True), "the list is ordered by the score it reports"


def test_guard_reaches_the_response(standin, sample_runtime):
    """The LLM scores the fence rule 0; as the first-stage winner it still leads the answer."""
    question = "What is the maximum fence height in the backyard?"
    plain = create_app(runtime=sample_runtime).test_client().post(
        "/webhook/arc-retrieval", json={"query": question, "rerank": False}).get_json()
    winner = plain["chunks"][0]
    assert winner["relevance"] >= 0.5 and "fence" in winner["content"].lower()

    standin.reset(scorer=lambda q, candidates: {c["id"]: 0.0 if int(c["id"]) == winner["id"] else 0.3
                                                for c in candidates})
    client = openai.OpenAI(api_key=standin.api_key, base_url=standin.base_url, max_retries=0)
    retriever = Retriever(embedder=sample_runtime.embedder, backend=PostgresBackend(sample_runtime.db),
                          reranker=LLMReranker(client, "gpt-4o", timeout=5, guard_min=0.5))
    app = create_app(runtime=sample_runtime, retriever=retriever)
    answer = app.test_client().post("/webhook/arc-retrieval", json={"query": question, "rerank": True}).get_json()
    assert answer["reranked"] is True
    first = answer["chunks"][0]
    assert first["id"] == winner["id"] and first["rerank_score"] == 0.0
    assert first["final_score"] == winner["relevance"] == pytest.approx(answer["best_score"], abs=1e-4)
    assert first["source"] == 1 and winner["content"][:60] in answer["context"].split("[SOURCE 2]")[0]
    assert answer["status"] == "success"


def test_prompt_template_variables():
    fields = {f for _, f, _, _ in string.Formatter().parse(USER_PROMPT_TEMPLATE) if f}
    assert fields == {"question", "candidates"}
    fields = {f for _, f, _, _ in string.Formatter().parse(CANDIDATE_TEMPLATE) if f}
    assert fields == {"id", "document_name", "document_type", "section", "content"}


def test_long_content_is_trimmed_in_the_prompt(llm):
    long = chunk(1, content="fence " * 3000)
    prompt = llm.prompt("q", [long])
    assert len(prompt.split()) < 1000


def test_superseded_guideline_drops_below_its_binding_successor(standin, sample_runtime):
    """Same raw LLM score for the 2019 and 2024 fence rules: the 0.5x supersession factor decides."""
    fence_sections = {"Section 4 Fences and Walls", "Chapter 4 Structures > 4.2 Fencing"}

    def judge(question, candidates):
        return {c["id"]: 0.9 if c["section"] in fence_sections else 0.1 for c in candidates}

    standin.reset(scorer=judge)
    client = openai.OpenAI(api_key=standin.api_key, base_url=standin.base_url, max_retries=0)
    retriever = Retriever(embedder=sample_runtime.embedder, backend=PostgresBackend(sample_runtime.db),
                          reranker=LLMReranker(client, "gpt-4o", timeout=5))
    app = create_app(runtime=Runtime(sample_runtime.settings, sample_runtime.db, sample_runtime.embedder),
                     retriever=retriever)
    answer = app.test_client().post("/webhook/arc-retrieval", json={
        "query": "What is the maximum fence height?", "include_superseded": True, "rerank": True}).get_json()
    assert answer["reranked"] is True
    order = [c["document_id"] for c in answer["chunks"] if c["section_path"] in fence_sections]
    assert order.index("design-guidelines-2024") < order.index("design-guidelines-2019")
    old = next(c for c in answer["chunks"] if c["document_id"] == "design-guidelines-2019"
               and c["section_path"] in fence_sections)
    new = next(c for c in answer["chunks"] if c["document_id"] == "design-guidelines-2024"
               and c["section_path"] in fence_sections)
    assert old["rerank_score"] == new["rerank_score"] == 0.9
    assert old["adjusted_score"] == pytest.approx(0.9 * 1.1 * 1.05 * 0.5)
    assert new["adjusted_score"] == 1.0
    assert answer["usage"]["llm_requests"] >= 1 and "rerank" in answer["timings_ms"]
    assert answer["status"] == "success"


def json_reply(pairs):
    import json

    return "```json\n" + json.dumps({"scores": [{"chunk_id": i, "relevance_score": s, "reasoning": "r"}
                                                for i, s in pairs]}) + "\n```"
