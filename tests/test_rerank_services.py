"""Rerank services (worker/retrieve/rerank_services.py) against local stand-ins speaking each
service's wire shape (tests/rerank_standins.py): the request each gets, the order and the scores
its reply gives, the status it sets, and every failure ending in a warning and the first-stage
order, through the reranker itself, the webhook, Dify's API, the MCP server and the keeper's page."""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from tests.helpers import make_settings
from tests.rerank_standins import TEI_MAX_CLIENT_BATCH_SIZE, RerankStandin
from worker.config import ConfigError, Settings
from worker.retrieve.rerank_services import SHAPES, ScoreScale, ServiceReranker, retry_after
from worker.runtime import Runtime
from worker.serve.app import create_app
from worker.serve.mcp_server import SEARCH_TOOL
from worker.service.build import build_reranker
from tests.helpers import ranked_chunk as chunk

ROOT = Path(__file__).resolve().parent.parent
SERVICES = ["cohere", "jina", "voyage", "tei", "infinity"]
KEY = "rr-secret-key-0123456789"
MODELS = {"cohere": "rerank-v3.5", "jina": "jina-reranker-v2-base-multilingual", "voyage": "rerank-2.5",
          "tei": None, "infinity": "mixedbread-ai/mxbai-rerank-xsmall-v1"}
FENCE = "What is the maximum fence height in the backyard?"
FENCE_SECTIONS = ("4.2 Fencing", "Section 4 Fences and Walls")


def by_number(scores: dict[int, float]):
    """A scorer giving passage "passage number N" the score scores[N] (0 for the others)."""
    return lambda question, passages: [scores.get(int(p.rsplit(" ", 1)[1]), 0.0) for p in passages]


def fence_judge(high: float = 0.92, low: float = 0.02):
    """A cross-encoder that finds the fence rules relevant, and nothing else."""
    return lambda question, passages: [high if any(s in p.split("\n", 1)[0] for s in FENCE_SECTIONS) else low
                                       for p in passages]


@pytest.fixture(scope="module", params=SERVICES)
def standin(request):
    service = request.param
    with RerankStandin(service, api_key=KEY, model=MODELS[service]) as server:
        yield server


def reranker_for(standin: RerankStandin, **kwargs) -> ServiceReranker:
    kwargs.setdefault("timeout", 2.0)
    return ServiceReranker(standin.service, standin.url, api_key=KEY, model=MODELS[standin.service],
                           cache_ttl=0.001, **kwargs)


# -- the reranker against each stand-in --------------------------------------------------------

def test_each_service_gets_its_own_shape_and_its_scores_order_the_chunks(standin):
    standin.reset(scorer=by_number({1: 0.30, 2: 0.60, 3: 0.70, 4: 0.95, 5: 0.95}))
    candidates = [chunk(1), chunk(2, doc_type="design_guidelines", binding=True),
                  chunk(3, doc_type="ccr", binding=True),
                  chunk(4, doc_type="design_guidelines", binding=True, superseded="new"), chunk(5)]
    reranker = reranker_for(standin)
    outcome = reranker.rerank("fence height?", candidates, top_k=5)
    assert outcome.reranked and not outcome.warnings
    assert [c.id for c in outcome.chunks] == [5, 3, 2, 4, 1]
    adjusted = {c.id: c.adjusted_score for c in outcome.chunks}
    assert adjusted[2] == pytest.approx(0.6 * 1.1 * 1.05)
    assert adjusted[4] == pytest.approx(0.95 * 1.1 * 1.05 * 0.5)
    assert {c.id: c.rerank_score for c in outcome.chunks}[4] == 0.95
    assert all(c.final_score == c.adjusted_score for c in outcome.chunks)

    [call] = standin.calls
    shape = SHAPES[standin.service]
    assert call.path == shape.path and call.headers["Authorization"] == f"Bearer {KEY}"
    body = call.body
    assert body["query"] == "fence height?"
    assert len(body[shape.documents]) == 5 and body[shape.documents][0].startswith("Doc 1 > S1\n")
    assert body.get("model") == MODELS[standin.service]
    if shape.limit:
        assert body[shape.limit] == 5
    expected = {"cohere": {"model", "query", "documents", "top_n"},
                "jina": {"model", "query", "documents", "top_n", "return_documents"},
                "voyage": {"model", "query", "documents", "top_k", "truncation"},
                "tei": {"query", "texts", "raw_scores", "truncate"},
                "infinity": {"model", "query", "documents", "top_n", "raw_scores"}}[standin.service]
    assert set(body) == expected
    assert outcome.usage["rerank_requests"] == 1
    reranker.close()


FAILURES = [("http401", "refused the key (HTTP 401)"),
            ("http429", "rate-limiting (HTTP 429); not asked again for 30 s"),
            ("http500", "answered HTTP 500"), ("http503", "answered HTTP 503"),
            ("not_json", "reply is not JSON"), ("wrong_shape", "of scores"),
            ("fewer", "of the 6 passages sent"), ("bad_index", "not a passage's index and score")]


@pytest.mark.parametrize("mode,reason", FAILURES)
def test_every_failure_keeps_the_first_stage_order_with_a_clear_warning(standin, mode, reason):
    standin.reset(mode=mode, scorer=by_number({6: 0.9}))
    candidates = [chunk(i) for i in range(1, 7)]
    reranker = reranker_for(standin)
    outcome = reranker.rerank("q", candidates, top_k=5)
    assert not outcome.reranked
    assert [c.id for c in outcome.chunks] == [1, 2, 3, 4, 5, 6]
    assert all(c.rerank_score is None for c in outcome.chunks)
    [warning] = outcome.warnings
    name = SHAPES[standin.service].name
    assert warning.startswith(f"reranker skipped: {name}") and reason in warning, warning
    assert warning.endswith("results keep the first-stage order")
    assert KEY not in warning
    reranker.close()


def test_after_a_429_with_retry_after_the_service_is_left_alone_until_then(standin):
    standin.reset(mode="http429", retry_after="2")
    reranker = reranker_for(standin)
    first = reranker.rerank("q", [chunk(1), chunk(2)], top_k=2)
    second = reranker.rerank("another question", [chunk(1), chunk(2)], top_k=2)
    assert "not asked again for 2 s" in first.warnings[0] and "not asked again" in second.warnings[0]
    assert len(standin.calls) == 1, "the second question did not wait out Retry-After"
    standin.reset(scorer=by_number({2: 0.8}))
    reranker._paused_until = 0.0  # as 2 s later
    assert reranker.rerank("q", [chunk(1), chunk(2)], top_k=2).reranked
    reranker.close()


def test_a_slow_service_is_given_up_on_at_the_timeout(standin):
    standin.reset(delay=3.0)
    reranker = reranker_for(standin, timeout=0.8)
    start = time.monotonic()
    outcome = reranker.rerank("q", [chunk(i) for i in range(1, 5)], top_k=4)
    assert time.monotonic() - start < 0.8 + 0.5
    assert not outcome.reranked
    assert f"no reply from {SHAPES[standin.service].name} within 0.8 s" in outcome.warnings[0]
    assert [c.id for c in outcome.chunks] == [1, 2, 3, 4]
    reranker.close()


def test_a_service_that_is_not_there(standin):
    reranker = ServiceReranker(standin.service, "http://127.0.0.1:9", api_key=KEY, model="m", timeout=2.0)
    outcome = reranker.rerank("q", [chunk(1), chunk(2)], top_k=2)
    assert not outcome.reranked and "could not be reached (ConnectError)" in outcome.warnings[0]
    reranker.close()


def test_a_repeated_question_is_answered_from_the_cache(standin):
    standin.reset(scorer=by_number({2: 0.8}))
    reranker = ServiceReranker(standin.service, standin.url, api_key=KEY, model=MODELS[standin.service])
    for _ in range(3):
        outcome = reranker.rerank("q", [chunk(1), chunk(2)], top_k=2)
        assert [c.id for c in outcome.chunks] == [2, 1]
    assert len(standin.calls) == 1 and outcome.usage.get("cache_hit") == 1
    reranker.close()


def test_raw_logits_go_through_a_sigmoid():
    with RerankStandin("tei", api_key=None) as tei:
        tei.reset(scorer=by_number({1: -4.0, 2: 2.0}), raw_is_logit=True)
        reranker = ServiceReranker("tei", tei.url, timeout=2.0, scale=ScoreScale("logit"))
        outcome = reranker.rerank("q", [chunk(1), chunk(2)], top_k=2)
        assert tei.calls[0].body["raw_scores"] is True and "Authorization" not in tei.calls[0].headers
        scores = {c.id: c.rerank_score for c in outcome.chunks}
        assert scores[2] == pytest.approx(1 / (1 + math.exp(-2.0)), abs=1e-6)
        assert scores[1] == pytest.approx(1 / (1 + math.exp(4.0)), abs=1e-6)
        # The same server read as probabilities: TEI sigmoids its scores unless asked for raw ones.
        plain = ServiceReranker("tei", tei.url, timeout=2.0).rerank("q", [chunk(1), chunk(2)], top_k=2)
        assert tei.calls[-1].body["raw_scores"] is False
        assert {c.id: c.rerank_score for c in plain.chunks} == pytest.approx(scores)


def test_logits_read_as_probabilities_say_so():
    with RerankStandin("infinity", api_key=None) as infinity:
        infinity.reset(scorer=by_number({1: -3.0, 2: 4.5}))
        reranker = ServiceReranker("infinity", infinity.url, timeout=2.0)
        outcome = reranker.rerank("q", [chunk(1), chunk(2)], top_k=2)
        assert outcome.reranked and "RERANK_SCORE=logit" in outcome.warnings[0]
        assert "model" not in infinity.calls[0].body  # Infinity's model is optional and none was set


def test_tei_gets_at_most_its_default_batch_and_the_rest_follow_the_scored():
    with RerankStandin("tei", api_key=None) as tei:
        tei.reset(scorer=lambda q, passages: [0.01] * len(passages))
        candidates = [chunk(i) for i in range(1, 41)]
        outcome = ServiceReranker("tei", tei.url, timeout=2.0).rerank("q", candidates, top_k=8)
        assert outcome.reranked and len(tei.calls[0].body["texts"]) == TEI_MAX_CLIENT_BATCH_SIZE
        assert [c.id for c in outcome.chunks][TEI_MAX_CLIENT_BATCH_SIZE:] == list(range(33, 41))


def test_the_status_reads_the_best_score_demoted_but_not_boosted():
    scale = ScoreScale(success_at=0.5, no_results_below=0.05)
    reranker = ServiceReranker("tei", "http://127.0.0.1:9", scale=scale)
    binding = chunk(1, doc_type="design_guidelines", binding=True)
    binding.rerank_score = 0.47  # adjusted 0.54, but the passage itself is no surer for being binding
    assert reranker.verdict([binding]).status == "low_confidence"
    superseded = chunk(2, superseded="new")
    superseded.rerank_score = 0.9  # x0.5: no longer the rule
    assert reranker.verdict([superseded]).status == "low_confidence"
    plain = chunk(3)
    plain.rerank_score = 0.03
    assert reranker.verdict([plain]).status == "no_results"
    plain.rerank_score = 0.7
    assert reranker.verdict([plain, binding]).status == "success" and reranker.verdict([plain]).score == 0.7
    assert reranker.verdict([chunk(4)]) is None
    reranker.close()


def test_retry_after_reads_seconds_and_dates_and_is_capped():
    assert retry_after("7") == 7 and retry_after(None) is None and retry_after("soon") is None
    assert retry_after("99999") == 300
    from email.utils import formatdate

    assert 8 <= retry_after(formatdate(time.time() + 10, usegmt=True)) <= 10


# -- settings ----------------------------------------------------------------------------------

def test_settings_name_what_a_service_needs(tmp_path):
    with pytest.raises(ConfigError, match="RERANKER=cohere needs RERANK_API_KEY"):
        Settings.from_env({"RERANKER": "cohere"})
    with pytest.raises(ConfigError, match="RERANKER=tei needs RERANK_BASE_URL"):
        Settings.from_env({"RERANKER": "tei"})
    with pytest.raises(ConfigError, match="RERANK_BASE_URL"):
        Settings.from_env({"RERANKER": "tei", "RERANK_BASE_URL": "localhost:8080"})
    with pytest.raises(ConfigError, match="RERANK_SCORE"):
        Settings.from_env({"RERANKER": "tei", "RERANK_BASE_URL": "http://127.0.0.1:8080",
                           "RERANK_SCORE": "odds"})
    with pytest.raises(ConfigError, match="RERANK_NO_RESULTS_SCORE <= RERANK_SUCCESS_SCORE"):
        Settings.from_env({"RERANK_SUCCESS_SCORE": "0.2", "RERANK_NO_RESULTS_SCORE": "0.3"})
    with pytest.raises(ConfigError) as refused:
        Settings.from_env({"RERANKER": "cohere", "RERANK_API_KEY": KEY, "RERANK_TIMEOUT": "0"})
    assert "RERANK_TIMEOUT" in str(refused.value) and KEY not in str(refused.value)
    hosted = Settings.from_env({"RERANKER": "voyage", "RERANK_API_KEY": KEY})
    assert hosted.reranking.rerank_base_url.startswith("https://")
    assert hosted.reranking.rerank_model == "rerank-2.5"
    local = Settings.from_env({"RERANKER": "infinity", "RERANK_BASE_URL": "http://127.0.0.1:7997/",
                               "RERANK_SCORE": "logit", "RERANK_TIMEOUT": "3"})
    built = build_reranker(local)
    assert isinstance(built, ServiceReranker) and built.url == "http://127.0.0.1:7997/rerank"
    assert built.timeout == 3 and built.scale.kind == "logit" and built.model is None
    built.close()


# -- through the webhook, Dify's API and the keeper's page -------------------------------------

@pytest.fixture(scope="module")
def service_app(standin, sample_runtime, tmp_path_factory):
    settings = make_settings(tmp_path_factory.mktemp("rr"), sample_runtime.db.url, reranker=standin.service,
                             rerank_base_url=standin.url, rerank_api_key=KEY,
                             rerank_model=MODELS[standin.service], rerank_timeout=2.0,
                             status_calibration=False, api_token=TOKEN, ingest_token=TOKEN)
    app = create_app(runtime=Runtime(settings, sample_runtime.db, sample_runtime.embedder))
    yield app
    app.extensions["arc"].knowledge.retriever.reranker.close()


TOKEN = "rr-webhook-token-0123456789abcdef"


def ask(app, **body):
    response = app.test_client().post("/webhook/arc-retrieval", json={"query": FENCE, **body},
                                      headers={"X-ARC-Token": TOKEN})
    assert response.status_code == 200, response.get_json()
    return response.get_json()


def test_the_webhook_answer_is_ordered_scored_and_judged_by_the_service(standin, service_app):
    standin.reset(scorer=fence_judge())
    answer = ask(service_app)
    assert answer["reranked"] is True and not answer["warnings"]
    first = answer["chunks"][0]
    assert any(s in first["section_path"] for s in FENCE_SECTIONS) and first["rerank_score"] == 0.92
    assert first["source"] == 1 and answer["status"] == "success"
    assert answer["confidence"]["decided_on"] == "rerank" and answer["confidence"]["rerank"] == 0.92
    others = [c for c in answer["chunks"] if not any(s in c["section_path"] for s in FENCE_SECTIONS)]
    # (neighbours pulled in to complete a passage are not scored against the question)
    assert 0.02 in {c["rerank_score"] for c in others} <= {0.02, None}
    assert answer["usage"]["rerank_requests"] == 1 and "rerank" in answer["timings_ms"]
    [call] = standin.calls
    assert call.headers["Authorization"] == f"Bearer {KEY}"
    assert call.body.get("model") == MODELS[standin.service]
    # the over-retrieved candidates, in one request
    assert len(call.body[SHAPES[standin.service].documents]) >= 10


@pytest.mark.parametrize("high,low,status", [(0.3, 0.01, "low_confidence"), (0.02, 0.01, "no_results")])
def test_candidates_the_service_scores_low_are_not_success(standin, service_app, high, low, status):
    plain = ask(service_app, rerank=False)
    assert plain["status"] == "success"  # on the first-stage relevance
    standin.reset(scorer=fence_judge(high, low))
    service_app.extensions["arc"].knowledge.retriever.reranker._cache.clear()
    answer = ask(service_app)
    assert answer["reranked"] is True and answer["status"] == status
    assert answer["message"] and answer["confidence"]["decided_on"] == "rerank"
    if status == "no_results":
        assert answer["context"] == ""


@pytest.mark.parametrize("mode,reason", [("http401", "refused the key"),
                                         ("http429", "rate-limiting (HTTP 429)"),
                                         ("http503", "answered HTTP 503"), ("not_json", "reply is not JSON"),
                                         ("fewer", "passages sent")])
def test_a_failing_service_leaves_the_webhook_the_first_stage_answer(standin, service_app, mode, reason):
    question = f"{FENCE} ({mode})"
    plain = ask(service_app, query=question, rerank=False)
    standin.reset(mode=mode, retry_after="1")
    answer = ask(service_app, query=question)
    assert answer["reranked"] is False and answer["confidence"]["decided_on"] == "relevance"
    assert [c["id"] for c in answer["chunks"]] == [c["id"] for c in plain["chunks"]]
    assert all(c["rerank_score"] is None for c in answer["chunks"])
    assert any(w.startswith("reranker skipped") and reason in w for w in answer["warnings"])
    assert answer["status"] == plain["status"]
    service_app.extensions["arc"].knowledge.retriever.reranker._paused_until = 0.0


def test_a_slow_service_still_answers_within_the_timeout(standin, service_app):
    standin.reset(delay=4.0)
    start = time.monotonic()
    answer = ask(service_app, query=FENCE + " slow")
    assert time.monotonic() - start < 2.0 + 1.5
    assert answer["reranked"] is False and any("within 2 s" in w for w in answer["warnings"])
    assert answer["chunks"] and answer["context"]


def test_dify_records_carry_the_service_scores(standin, service_app):
    standin.reset(scorer=fence_judge())
    body = {"knowledge_id": "all", "query": FENCE + " dify",
            "retrieval_setting": {"top_k": 3, "score_threshold": 0.0}}
    response = service_app.test_client().post("/retrieval", headers={"Authorization": f"Bearer {TOKEN}"},
                                              json=body)
    assert response.status_code == 200
    records = response.get_json()["records"]
    assert any(s in records[0]["title"] for s in FENCE_SECTIONS)
    assert records[0]["metadata"]["rerank_score"] == 0.92 and records[0]["score"] >= 0.92
    assert [r["score"] for r in records] == sorted((r["score"] for r in records), reverse=True)
    assert standin.calls and standin.calls[0].headers["Authorization"] == f"Bearer {KEY}"


def test_the_retrieval_testing_page_shows_the_service_score(standin, service_app):
    from tests.helpers import ask_on_page

    standin.reset(scorer=fence_judge())
    text = ask_on_page(service_app.test_client(), TOKEN, FENCE + " page")
    assert 'title="rerank score 0.920"' in text and 'title="rerank score 0.020"' in text
    assert '<span id="rerank-best">0.92</span>' in text
    assert "the rerank service's score set the status" in text
    # calibration off: the best rerank score against the fixed RERANK_* cuts, not the relevance's
    assert "Rerank score uncalibrated, decided on the fixed cuts: best rerank score" in text
    assert "RERANK_SUCCESS_SCORE" in text
    assert "Uncalibrated, decided on the fixed cuts: best relevance" not in text


# -- through the MCP server (stdio, its own process, configured from the environment) ----------

@pytest.mark.parametrize("service", ["cohere", "tei"])
def test_mcp_search_is_reranked_by_the_service(service, sample_runtime, tmp_path):
    from tests.helpers import server_env

    with RerankStandin(service, api_key=KEY, model=MODELS[service]) as server:
        server.reset(scorer=fence_judge())
        env = server_env(sample_runtime.db.url, tmp_path, RERANKER=service, RERANK_BASE_URL=server.url,
                         RERANK_API_KEY=KEY, RERANK_TIMEOUT="3", ARC_STATUS_CALIBRATION="false",
                         **({"RERANK_MODEL": MODELS[service]} if MODELS[service] else {}))
        params = StdioServerParameters(command=sys.executable, args=["-m", "worker.cli", "mcp"], env=env,
                                       cwd=str(ROOT))

        async def go():
            async with Client(params) as client:
                good = await client.call_tool(SEARCH_TOOL, {"query": FENCE})
                server.reset(mode="http503")
                failed = await client.call_tool(SEARCH_TOOL, {"query": FENCE + " again"})
                return good, failed

        good, failed = anyio.run(go)
        data = good.structured_content
        assert data["status"] == "success" and data["chunks"][0]["rerank_score"] == 0.92
        assert any(s in data["chunks"][0]["section_path"] for s in FENCE_SECTIONS)
        assert not data["warnings"]
        assert failed.structured_content["chunks"][0]["rerank_score"] is None
        warnings = failed.structured_content["warnings"]
        assert any(f"{SHAPES[service].name} answered HTTP 503" in w for w in warnings)
        assert server.calls and server.calls[0].headers["Authorization"] == f"Bearer {KEY}"
