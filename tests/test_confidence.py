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
from worker.retrieve.confidence import (Calibration, FixedThresholds, StatusCuts, decide, off_domain_questions,
                                        pseudo_questions)
from worker.retrieve.pipeline import Retriever
from worker.retrieve.search import PostgresBackend
from worker.serve.webhooks import RETRIEVAL_ROUTE

ANSWERED = "What is the maximum fence height?"
UNRELATED = "How do I bake sourdough bread?"


class CompressedScale:
    """A query embedder whose cosine similarities to every passage are ``share`` of the real ones
    (plus a little noise): what a model with a lower similarity scale gives."""

    def __init__(self, inner: CachedEmbedder, share: float = 0.55):
        self.inner, self.share = inner, share
        self.model, self.dim, self.max_tokens = inner.model, inner.dim, inner.max_tokens
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


def test_a_change_to_the_knowledge_base_recalibrates_in_the_background(sample_runtime, embedder):
    calibrated = retriever(sample_runtime, embedder, calibrate=True)
    first = calibrated.answer(RetrievalRequest(query=ANSWERED))
    assert first.confidence["calibrated"] is False  # nothing measured yet: fixed thresholds, no waiting
    with calibrated._calibrating:  # the background calibration has finished
        pass
    assert calibrated.calibration is not None
    assert calibrated.answer(RetrievalRequest(query=ANSWERED)).confidence["calibrated"] is True



def test_an_ingest_moves_the_version_the_calibration_follows(make_database, embedder, tmp_path):
    """The calibration is keyed by the whole knowledge base's version: a load of any document
    moves it, and refresh_calibration then measures the knowledge base again."""
    from worker.ingest.ingestor import Ingestor, ingest_sample_corpus
    from worker.ingest.readers import parse_text
    from worker.runtime import Runtime
    from worker.store.database import Database

    from .conftest import make_settings

    url = make_database("recalibrate")
    db = Database(url)
    db.migrate(embedder.dim)
    ingest_sample_corpus(Ingestor(db, embedder))
    calibrated = retriever(Runtime(make_settings(tmp_path, url), db, embedder), embedder, calibrate=True)
    first = calibrated.calibrate_now()
    ingestor = Ingestor(db, embedder)
    ingestor.write([ingestor.prepare_text(parse_text("Hammocks must come down in winter."),
                                          document_id="hammocks", name="Hammocks", document_type="other")])
    assert calibrated.backend.version() > first.version
    calibrated.refresh_calibration()
    with calibrated._calibrating:  # the background calibration has finished
        pass
    assert calibrated.calibration.version > first.version
    calibrated.stop_calibration()
    db.close()

def test_the_webhook_reports_the_confidence(client):
    answer = client.post(RETRIEVAL_ROUTE, json={"query": ANSWERED}).get_json()
    assert {"status", "message", "best_score", "confidence"} <= set(answer)
    assert set(answer["confidence"]) == {"score", "relevance", "calibrated", "floor", "match", "near_miss", "kb_version",
                                         "rerank"}
