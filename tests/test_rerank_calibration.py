"""A rerank service's score scale is calibrated on the knowledge base, with the status calibration
(worker/retrieve/calibration.py, rerank_services.py, sql/042): the status follows the service's
measured scale, not the fixed RERANK_* cuts, the scale is stored and read by another process, a
change of service or model is another calibration, and a service failing while it is measured
leaves the fixed cuts with a warning until it is measured again.

Each service is a local stand-in speaking its wire shape (tests/rerank_standins.py); its scores
are the word-overlap scorer's, shifted onto a scale of their own, as another model's would be."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import psycopg
import pytest

from tests.helpers import make_settings
from tests.rerank_standins import RerankStandin, overlap_scorer
from worker.retrieve import service_scale
from worker.retrieve.rerank import RerankFailed
from worker.retrieve.service_scale import NOT_SEPARATED, SERVICE_REQUESTS_AT_ONCE
from worker.retrieve.status.confidence import Calibration, off_domain_questions
from worker.retrieve.rerank_services import ScoreScale, ServiceReranker, ServiceScale
from worker.runtime import Runtime
from worker.serve.app import create_app
from worker.serve.webhooks import RETRIEVAL_ROUTE

from tests.helpers import RERANK_KEY as KEY
from tests.helpers import RERANK_MODEL as MODEL
from tests.helpers import ROOT, ask_on_page, service_app
from tests.helpers import ranked_chunk as chunk

ANSWERED = "What is the maximum fence height in the backyard?"
UNRELATED = "How do I bake sourdough bread?"


def shifted(low: float, span: float):
    """The overlap scorer on another scale: ``low`` for a passage sharing no word, ``low + span``
    for one holding every word of the question."""
    return lambda question, passages: [round(low + span * s, 4) for s in overlap_scorer(question, passages)]


LOW = shifted(0.01, 0.3)  # a model whose scores run low: a passage quoted back scores 0.31
HIGH = shifted(0.6, 0.4)  # one whose scores run high: an unrelated question scores 0.6


def retriever_of(app):
    return app.extensions["arc"].knowledge.retriever


def ask(app, query: str) -> dict:
    response = app.test_client().post(RETRIEVAL_ROUTE, json={"query": query})
    assert response.status_code == 200, response.get_json()
    return response.get_json()


def stored_rows(url: str, key_part: str) -> list[dict]:
    with psycopg.connect(url, row_factory=psycopg.rows.dict_row) as conn:
        return conn.execute("select * from status_calibrations where embedding_model like %s "
                            "order by embedding_model", (f"%{key_part}%",)).fetchall()


@pytest.fixture()
def cohere():
    with RerankStandin("cohere", api_key=KEY, model=MODEL) as server:
        yield server


# -- the status follows the service's measured scale ---------------------------------------------

@pytest.mark.parametrize("service", ["cohere", "tei"])
def test_scores_that_run_low_still_answer_a_plain_question(service, sample_runtime, tmp_path):
    with RerankStandin(service, api_key=KEY, model=MODEL if service != "tei" else None) as server:
        server.reset(scorer=LOW)
        fixed = service_app(sample_runtime, server, tmp_path, rerank_calibration=False)
        calibrated = service_app(sample_runtime, server, tmp_path)
        try:
            on_fixed = ask(fixed, ANSWERED)
            server.reset(scorer=LOW)
            answer = ask(calibrated, ANSWERED)
        finally:
            retriever_of(fixed).close()
            retriever_of(calibrated).close()
    # the fixed cut (0.5) hedges every answer of a model whose best passages score 0.3 ...
    assert on_fixed["reranked"] and on_fixed["confidence"]["decided_on"] == "rerank"
    assert on_fixed["status"] == "low_confidence" and on_fixed["confidence"]["calibrated"] is False
    # ... its scale measured on the knowledge base answers it
    confidence = answer["confidence"]
    assert answer["reranked"] and confidence["decided_on"] == "rerank"
    assert answer["status"] == "success", confidence
    assert confidence["calibrated"] is True and confidence["score"] >= 0.5
    assert confidence["floor"] < confidence["near_miss"] < confidence["match"] <= 0.31
    assert confidence["rerank"] < 0.5
    # the first-stage confidence stays beside it, on its own scale
    first = confidence["first_stage"]
    assert first["calibrated"] is True and first["floor"] != confidence["floor"]
    assert confidence["relevance"] == first["relevance"]
    # one calibration request per text: the off-domain questions and the sentences asked back
    calls = len(server.calls)
    assert len(off_domain_questions()) + 5 <= calls - 1 <= len(off_domain_questions()) + 120


def test_scores_that_run_high_do_not_make_an_unrelated_question_success(sample_runtime, tmp_path, cohere):
    cohere.reset(scorer=HIGH)
    fixed = service_app(sample_runtime, cohere, tmp_path, rerank_calibration=False)
    calibrated = service_app(sample_runtime, cohere, tmp_path)
    try:
        assert ask(fixed, UNRELATED)["status"] == "success"  # 0.6 clears the fixed 0.5
        unrelated, answered = ask(calibrated, UNRELATED), ask(calibrated, ANSWERED)
    finally:
        retriever_of(fixed).close()
        retriever_of(calibrated).close()
    assert unrelated["confidence"]["decided_on"] == "rerank" and unrelated["confidence"]["calibrated"] is True
    assert unrelated["status"] == "no_results" and unrelated["context"] == ""
    assert unrelated["confidence"]["floor"] >= 0.6
    assert answered["status"] == "success" and answered["confidence"]["calibrated"] is True


def test_the_retrieval_testing_page_draws_the_services_calibrated_scale(sample_runtime, tmp_path, cohere):
    cohere.reset(scorer=LOW)
    token_value = "rr-calibration-token-0123456789abcdef"
    app = service_app(sample_runtime, cohere, tmp_path, api_token=token_value, ingest_token=token_value)
    try:
        text = ask_on_page(app.test_client(), token_value, ANSWERED)
    finally:
        retriever_of(app).close()
    assert "calibrated scale of the rerank\n  service's score" in text
    assert 'title="calibrated cut 0.5"' in text and "In rerank score, as the chunk bars below" in text
    assert "Uncalibrated" not in text and "status-success" in text


# -- stored, read by another process, keyed by the service ---------------------------------------

def test_the_services_scale_is_stored_and_another_process_reads_it(sample_runtime, tmp_path, cohere):
    cohere.reset(scorer=LOW)
    app = service_app(sample_runtime, cohere, tmp_path)
    try:
        retriever_of(app).calibrate_now("default")  # as an ingest does
        asked = ask(app, ANSWERED)
    finally:
        retriever_of(app).close()
    [row] = stored_rows(sample_runtime.db.url, cohere.url.split("//")[1])
    key = f"{sample_runtime.embedder.model} + rerank cohere {MODEL} probability"
    assert row["embedding_model"].startswith(key)
    assert row["rerank_failure"] is None
    assert row["rerank_floor"] < row["rerank_near_miss"] < row["rerank_match"]
    assert row["floor"] < row["match"] and row["kb_version"] is not None

    cohere.reset(scorer=LOW)
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "SUPABASE_URL", "LLM_API_KEY")}
    env.update({"DATABASE_URL": sample_runtime.db.url, "ARC_DATA_DIR": str(tmp_path), "RERANKER": "cohere",
                "RERANK_BASE_URL": cohere.url, "RERANK_API_KEY": KEY, "RERANK_MODEL": MODEL,
                "PYTHONPATH": str(ROOT)})
    done = subprocess.run([sys.executable, "-m", "worker.cli", "ask", ANSWERED], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    other, _ = json.JSONDecoder().raw_decode(done.stdout, done.stdout.index('{\n  "status"'))
    assert len(cohere.calls) == 1, "the second process measured again instead of reading the stored scale"
    assert other["status"] == asked["status"] == "success"
    same = ("score", "calibrated", "floor", "match", "near_miss", "top", "kb_version", "decided_on")
    assert {k: other["confidence"][k] for k in same} == {k: asked["confidence"][k] for k in same}


def test_another_service_or_model_is_another_calibration(sample_runtime, tmp_path, cohere):
    cohere.reset(scorer=LOW)
    first = service_app(sample_runtime, cohere, tmp_path)
    with RerankStandin("jina", api_key=KEY) as jina:
        jina.reset(scorer=HIGH)
        settings = make_settings(tmp_path, sample_runtime.db.url, reranker="jina", rerank_base_url=jina.url,
                                 rerank_api_key=KEY, rerank_model="jina-reranker-v2-base-multilingual")
        second = create_app(runtime=Runtime(settings, sample_runtime.db, sample_runtime.embedder))
        try:
            low = retriever_of(first).calibrate_now("default")
            assert low is not None
            high_answer = ask(second, ANSWERED)
            assert len(jina.calls) > len(off_domain_questions())  # measured its own scale
            low_answer = ask(first, ANSWERED)
        finally:
            retriever_of(first).close()
            retriever_of(second).close()
    assert low_answer["confidence"]["floor"] < 0.31 <= 0.6 <= high_answer["confidence"]["floor"]
    [cohere_row] = stored_rows(sample_runtime.db.url, cohere.url.split("//")[1])
    [jina_row] = stored_rows(sample_runtime.db.url, jina.url.split("//")[1])
    assert "rerank jina jina-reranker-v2-base-multilingual" in jina_row["embedding_model"]
    assert cohere_row["rerank_floor"] < 0.31 <= 0.6 <= jina_row["rerank_floor"]
    # the same service with another model, or its score read another way, is another scale again
    base = dict(api_key=KEY, model=MODEL)
    identities = {ServiceReranker("cohere", cohere.url, **base).identity,
                  ServiceReranker("cohere", cohere.url, api_key=KEY, model="rerank-v4.0-pro").identity,
                  ServiceReranker("tei", cohere.url).identity,
                  ServiceReranker("tei", cohere.url, scale=ScoreScale("logit")).identity}
    assert len(identities) == 4
    secret = ServiceReranker("tei", "http://user:pa55word@127.0.0.1:9/").identity
    assert "pa55word" not in secret and "user" not in secret and "127.0.0.1:9/rerank" in secret


# -- a service failing while it is measured ------------------------------------------------------

def test_a_service_down_while_calibrating_leaves_the_fixed_cuts_with_a_warning_then_is_measured(
        sample_runtime, tmp_path, cohere):
    app = service_app(sample_runtime, cohere, tmp_path)
    retriever = retriever_of(app)
    try:
        cohere.reset(mode="http503")
        measured = retriever.calibrate_now("default")
        # the first-stage scale is stored all the same, and the service was given up on at once
        assert measured is not None and measured.floor < measured.match
        assert len(cohere.calls) <= 2 * SERVICE_REQUESTS_AT_ONCE
        [row] = stored_rows(sample_runtime.db.url, cohere.url.split("//")[1])
        assert row["rerank_floor"] is None and row["floor"] is not None
        assert row["rerank_failure"] == "Cohere answered HTTP 503 while calibrating"

        cohere.reset(scorer=LOW)  # up again: the question is reranked, on the fixed cuts
        answer = ask(app, ANSWERED)
        assert answer["reranked"] and answer["confidence"]["decided_on"] == "rerank"
        assert answer["status"] == "low_confidence" and answer["confidence"]["calibrated"] is False
        assert answer["confidence"]["first_stage"]["calibrated"] is True
        [warning] = [w for w in answer["warnings"] if w.startswith("rerank score uncalibrated")]
        assert "Cohere answered HTTP 503 while calibrating" in warning
        assert "RERANK_SUCCESS_SCORE 0.5" in warning
        assert len(cohere.calls) == 1  # not measured again before its time

        retriever.calibrator.service_retry_seconds = 0.0  # as ten minutes later
        ask(app, ANSWERED + " again")  # answers on what is stored, and measures again behind it
        retriever.calibrator.wait(timeout=120)
        [row] = stored_rows(sample_runtime.db.url, cohere.url.split("//")[1])
        assert row["rerank_failure"] is None and row["rerank_floor"] is not None
        answer = ask(app, ANSWERED)
        assert answer["status"] == "success" and answer["confidence"]["calibrated"] is True
        assert not [w for w in answer["warnings"] if w.startswith("rerank score uncalibrated")]
    finally:
        retriever.close()


def test_no_calibration_request_starts_after_the_service_first_fails():
    # The first text's request is the slowest to fail: the others fail at once, and none of the
    # texts still queued is sent while the first is pending, however the threads are scheduled.
    class Failing:
        service = "stand-in"

        def __init__(self):
            self.calls = 0
            self.lock = threading.Lock()

        def judged(self, text, candidates):
            with self.lock:
                self.calls += 1
            if text == "text 0":
                time.sleep(0.3)
            raise RerankFailed("Cohere answered HTTP 503")

    failing = Failing()
    texts = [service_scale.Asked(f"text {n}", [chunk(1)]) for n in range(40)]
    scale = service_scale.measure(failing, texts[:10], texts[10:], 1, 0.5, threading.Event())
    assert scale.calibration is None and scale.failure == "Cohere answered HTTP 503 while calibrating"
    assert failing.calls <= SERVICE_REQUESTS_AT_ONCE


def test_a_service_that_cannot_tell_the_documents_apart_is_not_measured_again(sample_runtime, tmp_path, cohere):
    # Every passage scores the same: no scale, for a reason that holds until the documents change,
    # so the ~160 requests of a measurement are not spent again every retry interval.
    app = service_app(sample_runtime, cohere, tmp_path)
    retriever = retriever_of(app)
    try:
        cohere.reset(scorer=lambda question, passages: [0.3 for _ in passages])
        retriever.calibrate_now("default")
        [row] = stored_rows(sample_runtime.db.url, cohere.url.split("//")[1])
        assert row["rerank_failure"] == NOT_SEPARATED and row["rerank_floor"] is None
        retriever.calibrator.service_retry_seconds = 0.0  # as ten minutes later
        cohere.reset(scorer=LOW)
        answer = ask(app, ANSWERED)
        retriever.calibrator.wait(timeout=120)
        assert len(cohere.calls) == 1  # the question's own request, no new measurement
        assert any(NOT_SEPARATED in w for w in answer["warnings"])
    finally:
        retriever.close()


def test_a_knowledge_base_too_small_reads_the_fixed_cuts_and_says_why(make_database, embedder, tmp_path,
                                                                       cohere):
    from worker.ingest.ingestor import Ingestor
    from worker.ingest.readers import parse_markdown
    from worker.models import DocumentFields
    from worker.store.database import Database

    db = Database(make_database("rrsmall"))
    db.migrate(embedder.dim)
    ingestor = Ingestor(db, embedder)
    parsed = parse_markdown("# Fences\n\nFences may be four feet tall.\n")
    ingestor.write([ingestor.prepare_text(parsed,
                                          DocumentFields(document_id="fences", document_type="design_guidelines"))])
    cohere.reset(scorer=LOW)
    app = service_app(Runtime(make_settings(tmp_path, db.url), db, embedder), cohere, tmp_path)
    try:
        answer = ask(app, "How tall may a fence be?")
    finally:
        retriever_of(app).close()
        db.close()
    assert answer["confidence"]["decided_on"] == "rerank" and answer["confidence"]["calibrated"] is False
    assert any("rerank score uncalibrated: the knowledge base is too small" in w for w in answer["warnings"])
    assert len(cohere.calls) == 1  # nothing to measure: no calibration request


def test_the_verdict_cuts_the_calibrated_scale_where_the_confidence_is_cut():
    reranker = ServiceReranker("tei", "http://127.0.0.1:9")
    scale = ServiceScale(Calibration(version=3, floor=0.02, match=0.3, questions=100))
    best = chunk(1)
    for score, status in ((0.02 + 0.19 * 0.28, "no_results"), (0.02 + 0.3 * 0.28, "low_confidence"),
                          (0.02 + 0.5 * 0.28, "success")):
        best.rerank_score = score
        verdict = reranker.verdict([best], scale)
        assert verdict.status == status and verdict.confidence.calibrated and not verdict.warning
    assert reranker.verdict([best]).status == "low_confidence"  # 0.16 on the fixed cuts
    reranker.close()
