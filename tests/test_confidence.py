"""The status is calibrated on each knowledge base, so it carries over to another score scale.

A fixed threshold on the best relevance (the behaviour before worker/confidence.py) reads a model
whose similarities run lower as "unsure" about everything. Here the same sample corpus is asked
through a query embedder whose cosine similarities sit on a compressed scale (the query vector
mixed with a direction unrelated to any passage, as a model with lower similarities would give):
the fixed thresholds demote a plainly answered question, the calibration does not.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from worker.embeddings import CachedEmbedder
from worker.models import RetrievalRequest
from worker.retrieve.status.confidence import (Calibration, FixedThresholds, StatusCuts, decide, off_domain_questions,
                                        pseudo_questions)
from worker.retrieve.pipeline import Retriever
from worker.store.postgres_search import PostgresBackend
from worker.serve.webhooks import RETRIEVAL_ROUTE

ANSWERED = "What is the maximum fence height?"
UNRELATED = "How do I bake sourdough bread?"


class CompressedScale:
    """A query embedder whose cosine similarities to every passage are ``share`` of the real ones
    (plus a little noise): what a model with a lower similarity scale gives."""

    def __init__(self, inner: CachedEmbedder, share: float = 0.55):
        self.inner, self.share = inner, share
        # another model's scale: its calibration is stored under its own name
        self.model, self.dim, self.max_tokens = f"{inner.model}-compressed-{share}", inner.dim, inner.max_tokens
        rng = np.random.default_rng(5)
        self.away = rng.standard_normal(inner.dim).astype(np.float32)
        self.away /= np.linalg.norm(self.away)

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def _squash(self, vectors: np.ndarray) -> np.ndarray:
        mixed = self.share * vectors + np.sqrt(1 - self.share ** 2) * self.away
        return (mixed / np.linalg.norm(mixed, axis=-1, keepdims=True)).astype(np.float32)

    def embed(self, texts: list[str]) -> np.ndarray:
        return self._squash(self.inner.embed(texts))

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        return self._squash(self.inner.embed_queries(texts))

    def embed_query(self, text: str, *, timeout: float | None = None) -> np.ndarray:
        return self._squash(self.inner.embed([text])[0])


def retriever(runtime, embedder, *, calibrate: bool) -> Retriever:
    return Retriever(embedder=embedder, backend=PostgresBackend(runtime.db), reranker=None, calibrate=calibrate)


def test_decide_reads_the_calibrated_scale_not_the_raw_score():
    cuts, fixed = StatusCuts(success_at=0.5, no_results_below=0.2), FixedThresholds(0.3, 0.5)
    minilm = Calibration(version=1, floor=0.13, match=0.75, questions=100)
    lower = Calibration(version=1, floor=0.05, match=0.40, questions=100)   # another model's scale
    # The same place between floor and match gives the same status on either scale ...
    for calibration in (minilm, lower):
        at = calibration.floor + 0.7 * (calibration.match - calibration.floor)
        assert decide(at, calibration, cuts, fixed).status == "success"
        near_floor = calibration.floor + 0.1 * (calibration.match - calibration.floor)
        assert decide(near_floor, calibration, cuts, fixed).status == "no_results"
    # ... where a fixed threshold calls a strong match on the lower scale unsure.
    assert decide(0.3, None, cuts, fixed).status == "low_confidence"
    assert decide(0.3, lower, cuts, fixed).status == "success"
    assert decide(None, lower, cuts, fixed).status == "no_results"


def test_a_knowledge_base_of_distinct_passages_needs_less_than_its_quoted_level():
    """Where the knowledge base's own sentences score low on every passage but their own (the near
    miss), a question reaching 0.8 of the way from the floor to that level is answered; where
    passages repeat each other (a near miss close to the match) the match decides, as before."""
    cuts, fixed = StatusCuts(success_at=0.5, no_results_below=0.2), FixedThresholds(0.3, 0.5)
    distinct = Calibration(version=1, floor=0.09, match=0.80, questions=100, near_miss=0.48)
    answered = 0.09 + 0.85 * (0.48 - 0.09)   # 0.42: under the match's midpoint (0.445)
    assert decide(answered, distinct, cuts, fixed).status == "success"
    assert decide(answered, replace(distinct, near_miss=None), cuts, fixed).status == "low_confidence"
    assert decide(answered, replace(distinct, reach=0), cuts, fixed).status == "low_confidence"  # turned off
    unanswered = 0.09 + 0.7 * (0.48 - 0.09)
    assert decide(unanswered, distinct, cuts, fixed).status == "low_confidence"
    # a near miss no better than an unrelated question (a few unrelated passages) cannot call
    # everything success: the top stays at least 0.6 of the way to the match
    unrelated = Calibration(version=1, floor=0.09, match=0.80, questions=100, near_miss=0.08)
    assert unrelated.top == pytest.approx(0.09 + 0.6 * 0.71)
    assert decide(0.2, unrelated, cuts, fixed).status != "success"
    repeating = Calibration(version=1, floor=0.13, match=0.77, questions=100, near_miss=0.57)
    assert repeating.top == repeating.match
    assert decide(0.44, repeating, cuts, fixed).status == "low_confidence"


def test_the_near_miss_leaves_out_the_passage_a_sentence_comes_from(sample_runtime, embedder):
    calibrated = retriever(sample_runtime, embedder, calibrate=True)
    sentence = "Fences in rear yards may not exceed six feet in height."
    quoted = next(q for q in pseudo_questions(calibrated.backend.calibration_chunks(80)) if len(q) > 40)
    quoted_best, sentence_best = calibrated._best_relevances([quoted, sentence])
    for best in (quoted_best, sentence_best):
        assert 0 < best.elsewhere <= best.relevance
    assert quoted_best.elsewhere < quoted_best.relevance  # its own passage is the best, and left out
    calibration = calibrated.calibrate_now()
    assert calibration.floor < calibration.near_miss < calibration.match
    answer = calibrated.answer(RetrievalRequest(query=ANSWERED))
    assert answer.confidence["near_miss"] == pytest.approx(calibration.near_miss, abs=1e-4)


def test_pseudo_questions_are_sentences_of_the_knowledge_base_and_reproducible():
    chunks = ["Fences may not exceed six feet in height in any rear yard. Front fences are not allowed.",
              "Short.", "The board meets monthly; minutes are kept by the secretary of the association."]
    first, again = pseudo_questions(chunks, 10), pseudo_questions(chunks, 10)
    assert first == again and first
    assert all(any(q in c for c in chunks) and len(q.split()) >= 6 for q in first)
    assert len(off_domain_questions()) >= 30


@pytest.mark.parametrize("share", [1.0, 0.55])
def test_calibration_adapts_to_the_knowledge_bases_scale(sample_runtime, embedder, share):
    scaled = embedder if share == 1.0 else CachedEmbedder(CompressedScale(embedder, share))
    calibrated = retriever(sample_runtime, scaled, calibrate=True)
    calibration = calibrated.calibrate_now()
    assert calibration is not None and calibration.floor < calibration.match
    answer = calibrated.answer(RetrievalRequest(query=ANSWERED))
    assert answer.status == "success", answer.confidence
    assert answer.confidence["calibrated"] and answer.confidence["kb_version"] == calibration.version
    assert calibrated.answer(RetrievalRequest(query=UNRELATED)).status != "success"


def test_fixed_thresholds_do_not_carry_to_another_scale(sample_runtime, embedder):
    """Today's behaviour, kept as the fallback: on the compressed scale it hedges a plain answer."""
    fixed = retriever(sample_runtime, CachedEmbedder(CompressedScale(embedder)), calibrate=False)
    answer = fixed.answer(RetrievalRequest(query=ANSWERED))
    assert answer.status != "success" and answer.confidence["calibrated"] is False


def test_the_first_question_is_answered_calibrated_and_the_calibration_is_stored(make_database, embedder,
                                                                                 tmp_path):
    """Nothing stored yet: the first question measures the calibration before it is answered, and
    stores it; another process (a second retriever) reads it and measures nothing."""
    from worker.ingest.ingestor import Ingestor, ingest_sample_corpus
    from worker.store.calibrations import PostgresCalibrations
    from worker.store.database import Database

    db = Database(make_database("first_question"))
    db.migrate(embedder.dim)
    ingest_sample_corpus(Ingestor(db, embedder))
    try:
        first = Retriever(embedder=embedder, backend=PostgresBackend(db), reranker=None, calibrate=True)
        answer = first.answer(RetrievalRequest(query=ANSWERED))
        assert answer.confidence["calibrated"] is True and answer.status == "success"
        stored = PostgresCalibrations(db).read("default", embedder.model)
        assert stored.fresh and stored.stored.floor == pytest.approx(answer.confidence["floor"], abs=1e-4)

        class Counting(PostgresBackend):
            samples = 0

            def calibration_chunks(self, limit, community=None):
                Counting.samples += 1
                return super().calibration_chunks(limit, community)

        second = Retriever(embedder=embedder, backend=Counting(db), reranker=None, calibrate=True)
        again = second.answer(RetrievalRequest(query=ANSWERED))
        assert Counting.samples == 0  # read, not measured
        assert {k: again.confidence[k] for k in ("score", "floor", "match", "near_miss", "kb_version")} == \
            {k: answer.confidence[k] for k in ("score", "floor", "match", "near_miss", "kb_version")}
        first.close()
        second.close()
    finally:
        db.close()


def test_a_stale_calibration_answers_while_the_new_one_is_measured_once(make_database, embedder):
    """Documents changed by a writer that did not measure (SQL by hand): the stale calibration
    answers at once, one process measures the new one in the background, and stores it."""
    from worker.ingest.ingestor import Ingestor, ingest_sample_corpus
    from worker.store.calibrations import PostgresCalibrations
    from worker.store.database import Database

    db = Database(make_database("stale"))
    db.migrate(embedder.dim)
    ingest_sample_corpus(Ingestor(db, embedder))
    try:
        retriever = Retriever(embedder=embedder, backend=PostgresBackend(db), reranker=None, calibrate=True)
        measured = retriever.calibrate_now("default")
        with db.connect() as conn:  # a change no worker measured
            conn.execute("update knowledge_chunks set content = content || ' ' where chunk_index = 0 "
                         "and document_id = (select min(document_id) from knowledge_chunks)")
            conn.commit()
        answer = retriever.answer(RetrievalRequest(query=ANSWERED))
        assert answer.confidence["calibrated"] is True and answer.confidence["kb_version"] == measured.version
        retriever.calibrator.wait(timeout=120)
        reading = PostgresCalibrations(db).read("default", embedder.model)
        assert reading.fresh and reading.stored.kb_version > measured.version
        assert retriever.answer(RetrievalRequest(query=ANSWERED)).confidence["kb_version"] == reading.current_version
        retriever.close()
    finally:
        db.close()


def test_an_ingest_moves_the_stored_calibrations_version_and_the_next_answer_uses_it(make_database, embedder,
                                                                                    tmp_path):
    """A write is followed by a measurement (knowledge_base_changed, which every ingest and delete
    path calls): the stored calibration is at the new version before the next question."""
    from worker.ingest.ingestor import Ingestor, ingest_sample_corpus
    from worker.ingest.readers import parse_text
    from worker.models import DocumentFields
    from worker.store.calibrations import PostgresCalibrations
    from worker.store.database import Database

    db = Database(make_database("recalibrate"))
    db.migrate(embedder.dim)
    ingest_sample_corpus(Ingestor(db, embedder))
    try:
        calibrated = retriever_on(db, embedder)
        first = calibrated.calibrate_now()
        ingestor = Ingestor(db, embedder)
        ingestor.write([ingestor.prepare_text(parse_text("Hammocks must come down in winter."),
                                              DocumentFields(document_id="hammocks", name="Hammocks",
                                                             document_type="other"))])
        assert calibrated.backend.version("default") > first.version
        calibrated.knowledge_base_changed()
        stored = PostgresCalibrations(db).read("default", embedder.model)
        assert stored.fresh and stored.stored.kb_version == calibrated.backend.version("default") > first.version
        # another process's next answer uses the new one, measuring nothing
        answer = retriever_on(db, embedder).answer(RetrievalRequest(query=ANSWERED))
        assert answer.confidence["kb_version"] == stored.stored.kb_version
        calibrated.close()
    finally:
        db.close()


def retriever_on(db, embedder) -> Retriever:
    return Retriever(embedder=embedder, backend=PostgresBackend(db), reranker=None, calibrate=True)


def test_a_knowledge_base_too_small_to_calibrate_says_so(make_database, embedder):
    from worker.ingest.ingestor import Ingestor
    from worker.ingest.readers import parse_text
    from worker.models import DocumentFields
    from worker.retrieve.calibration import TOO_SMALL_WARNING
    from worker.store.database import Database

    db = Database(make_database("too_small"))
    db.migrate(embedder.dim)
    ingestor = Ingestor(db, embedder)
    ingestor.write([ingestor.prepare_text(parse_text("Fences may be six feet tall in rear yards."),
                                          DocumentFields(document_id="fences", name="Fences", document_type="other"))])
    try:
        answer = retriever_on(db, embedder).answer(RetrievalRequest(query=ANSWERED))
        assert answer.confidence["calibrated"] is False and TOO_SMALL_WARNING in answer.warnings
    finally:
        db.close()


def test_the_confidence_score_stays_within_0_and_1():
    calibration = Calibration(version=1, floor=0.2, match=0.6, questions=100)
    assert calibration.confidence(0.9) == 1.0 and calibration.confidence(0.1) == 0.0
    assert calibration.confidence(0.4) == pytest.approx(0.5)
    cuts, fixed = StatusCuts(), FixedThresholds()
    assert decide(0.95, calibration, cuts, fixed).score == 1.0
    assert decide(0.05, calibration, cuts, fixed).status == "no_results"


def test_the_webhook_reports_the_confidence(client):
    answer = client.post(RETRIEVAL_ROUTE, json={"query": ANSWERED}).get_json()
    assert {"status", "message", "best_score", "confidence"} <= set(answer)
    assert set(answer["confidence"]) == {"score", "relevance", "calibrated", "floor", "match", "near_miss", "top",
                                         "kb_version", "rerank", "decided_on", "first_stage"}
    assert answer["confidence"]["first_stage"] is None  # decided on the first-stage relevance itself
    assert answer["confidence"]["score"] is None or 0 <= answer["confidence"]["score"] <= 1
