"""`no_results` (an empty context) is for a question on no subject of the knowledge base.

On hoa-dev's Franklin Square "our roof is shot. can we go with a metal roof instead of what everyone
else has, or change the roof pitch?" scored like an unrelated question on the calibrated scale (the
local model puts it far from the resolution that allows only the "roof pitches ... already in use")
while the full-text leg ranked that resolution first; the answer was `no_results` with an empty
context, even for a caller who asked for 2,000 tokens. A question nearer to the knowledge base than
to the calibration's off-domain questions is `low_confidence` instead, with its closest passages
(worker/retrieve/status/subject.py). Here the sample corpus's roofing rule is put under the
`no_results` cut by raising the cut, as the local model put Franklin Square's under it.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers import RETRIEVAL_ROUTE, make_settings, scored_chunk
from worker.retrieve.status import decision
from worker.retrieve.status.confidence import Confidence
from worker.retrieve.status.subject import ON_SUBJECT_MESSAGE, OffDomain, Subject
from worker.runtime import Runtime
from worker.serve.app import create_app
from worker.service.build import build_retriever

ROOF = "our roof is shot. can we go with a metal roof instead of what everyone else has?"
ROOF_RULE = "standing-seam metal"  # design guidelines 2024, 5.2 Roofing
UNRELATED = "How do I bake sourdough bread?"
# Above where the roof question scores on the sample corpus (about 0.6): every question is under it.
HIGH_CUT = 0.9


def _client(runtime: Runtime, tmp_path, **overrides):
    settings = make_settings(tmp_path, runtime.settings.database.database_url, **overrides)
    own = Runtime(settings, runtime.db, runtime.embedder)
    retriever = build_retriever(own)
    retriever.calibrate_now()
    return create_app(runtime=own, retriever=retriever).test_client()


def _ask(client, query: str, **request) -> dict:
    response = client.post(RETRIEVAL_ROUTE, json={"query": query, **request})
    assert response.status_code == 200, response.get_json()
    return response.get_json()


@pytest.fixture(scope="module")
def under_the_cut(sample_runtime, tmp_path_factory):
    return _client(sample_runtime, tmp_path_factory.mktemp("cut"), no_results_at=HIGH_CUT, success_at=HIGH_CUT)


def test_a_weak_question_on_the_subject_keeps_its_passages(under_the_cut):
    for request in ({}, {"token_budget": 2000}):
        answer = _ask(under_the_cut, ROOF, **request)
        assert answer["confidence"]["score"] < HIGH_CUT
        assert answer["status"] == "low_confidence"
        assert answer["message"] == ON_SUBJECT_MESSAGE
        assert ROOF_RULE in answer["context"]
        assert 0 < answer["context_tokens"] <= request.get("token_budget", 10_000)
        assert any("low_confidence rather than no_results" in w for w in answer["warnings"])


def test_an_unrelated_question_stays_no_results_with_nothing(under_the_cut):
    for request in ({}, {"token_budget": 2000}):
        answer = _ask(under_the_cut, UNRELATED, **request)
        assert answer["status"] == "no_results"
        assert answer["context"] == "" and answer["context_tokens"] == 0
        assert not any("rather than no_results" in w for w in answer["warnings"])


def test_turned_off_the_weak_question_is_no_results_with_an_empty_context(sample_runtime, tmp_path):
    client = _client(
        sample_runtime, tmp_path, no_results_at=HIGH_CUT, success_at=HIGH_CUT, status_on_subject=False
    )
    answer = _ask(client, ROOF, token_budget=2000)
    assert answer["status"] == "no_results"
    assert answer["context"] == ""


def test_the_rule_only_lifts_no_results_and_never_a_rerank_services():
    on, off = Subject(passage=0.25, elsewhere=0.11), Subject(passage=0.2, elsewhere=0.29)
    assert on.on_subject and not off.on_subject
    assert on.overrule("no_results", "m") == ("low_confidence", ON_SUBJECT_MESSAGE)
    assert off.overrule("no_results", "m") == ("no_results", "m")
    for status in ("success", "low_confidence"):
        assert on.overrule(status, "m") == (status, "m")
    weak = Confidence("no_results", 0.1, 0.2, True)
    assert decision.first(weak, subject=on)[0] == "low_confidence"
    assert decision.first(weak, subject=off)[0] == "no_results"
    # a rerank service read the question and the passages together: its no_results stands
    assert decision.first(weak, service="no_results", subject=on)[0] == "no_results"


def test_an_embedder_that_fails_leaves_the_status_as_scored():
    def failing(texts: list[str]) -> np.ndarray:
        raise TimeoutError("provider down")

    assert OffDomain(failing).subject(np.ones(4, dtype=np.float32), []) is None
    chunk = scored_chunk(1, 0.2).model_copy(update={"vector_score": 0.3})
    assert OffDomain(failing).subject(np.ones(4, dtype=np.float32), [chunk]) is None
    near = OffDomain(lambda texts: np.tile(np.eye(4, dtype=np.float32)[0], (len(texts), 1)))
    subject = near.subject(np.eye(4, dtype=np.float32)[1], [chunk])
    assert subject is not None and subject.elsewhere == pytest.approx(0.0) and subject.on_subject
