"""The status learns its success cut from the keeper's confirmed questions: below 10 answerable
and 5 "none" confirmations nothing changes; from there the cut is fitted, stored with the
calibration, read by another process and shown on the Confirmed answers page; removing
confirmations below the thresholds brings today's calibration back. The fitting rule itself on
hand-made points. Real Postgres, the real local model, the pages and webhooks over Flask."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.helpers import make_settings
from worker.evaluation.answers import normalise_for_match
from worker.ingest.ingestor import Ingestor, ingest_sample_corpus
from worker.retrieve.status import fitted_cut
from worker.retrieve.status.confidence import DEFAULT_CUTS, DEFAULT_THRESHOLDS, Calibration, decide
from worker.retrieve.status.fitted_cut import Point
from worker.runtime import Runtime
from worker.serve.app import create_app
from worker.service.caller import LOCAL
from worker.service.confirmations import ConfirmationService, DatasetRow, import_rows
from worker.store.calibrations import FittedCut
from worker.store.database import Database

ADMIN_TOKEN = "admin-token-0123456789abcdef"
SAMPLE_QUESTIONS = "worker/sample_corpus/questions.jsonl"


# -- the rule, on hand-made points ---------------------------------------------------------------


def points(answerable: list[float], unanswerable: list[float]) -> list[Point]:
    return [Point(s, True) for s in answerable] + [Point(s, False) for s in unanswerable]


def test_the_cut_is_anchored_between_the_medians_and_only_lowers_the_configured_one():
    found = points([0.40, 0.45, 0.9], [0.1, 0.2])
    # 0.4 of the way from the median "none" (0.15) to the median answerable (0.45)
    assert fitted_cut.anchored_cut(found, 0.5) == pytest.approx(0.15 + 0.4 * 0.30)
    assert fitted_cut.accuracy(found, 0.27) == 1.0 and fitted_cut.accuracy(found, 0.5) == pytest.approx(0.6)
    # a community whose questions score high keeps the configured cut: the anchor never raises it
    assert fitted_cut.anchored_cut(points([0.8, 0.9], [0.4, 0.45]), 0.5) == 0.5
    # never below the no_results cut
    assert fitted_cut.anchored_cut(points([0.05, 0.3], [0.0, 0.01]), 0.5, floor=0.2) == pytest.approx(0.2)
    # one outlier does not move a median: the cut is the same with the best answerable at 0.9 or 0.5
    assert fitted_cut.anchored_cut(points([0.40, 0.45, 0.5], [0.1, 0.2]), 0.5) == pytest.approx(0.27)


def test_the_cut_calls_no_more_unanswerable_questions_success_than_the_configured_cut():
    # anchored at 0.299, the "none" at 0.33 would be success: the configured cut stays
    found = points([0.35, 0.4, 0.45, 0.9], [0.1, 0.33])
    assert fitted_cut.anchored_cut(found, 0.5) == 0.5
    # a "none" the configured cut already calls success does not stop it
    assert fitted_cut.anchored_cut(points([0.4, 0.45, 0.5], [0.1, 0.15, 0.6]), 0.5) == pytest.approx(0.27)


def test_leave_one_out_accuracy_by_hand():
    # answerable 0.3, 0.35, 0.7; unanswerable 0.1, 0.32.
    found = points([0.3, 0.35, 0.7], [0.1, 0.32])
    # Left out, each point is decided by the cut the other four anchor (0.4 of the way between
    # their medians, unless the remaining "none" would then be success):
    # 0.3 by 0.336 (wrong); 0.35 by 0.326 (right); 0.7 by 0.5, since 0.256 would call the 0.32
    # "none" success (right); 0.1 by 0.332 (right); 0.32 by 0.2 (wrong).
    by_hand = []
    for i, point in enumerate(found):
        cut = fitted_cut.anchored_cut([*found[:i], *found[i + 1 :]], 0.5)
        by_hand.append((point.score >= cut) == point.answerable)
    assert by_hand == [False, True, True, True, False]
    assert fitted_cut.leave_one_out(found, 0.5) == pytest.approx(3 / 5)


def test_a_fit_needs_ten_answerable_and_five_none_and_decides_only_when_it_does_better():
    assert fitted_cut.fit(points([0.9] * 9, [0.1] * 5), 0.5) is None
    assert fitted_cut.fit(points([0.9] * 10, [0.1] * 4), 0.5) is None
    # answerable questions that score 0.35-0.44 and "none" ones at 0.1-0.2: the configured 0.5 hedges them all
    found = fitted_cut.fit(points([0.35 + 0.01 * i for i in range(10)], [0.1, 0.12, 0.15, 0.18, 0.2]), 0.5)
    assert found is not None and 0.2 < found.success_at <= 0.35
    assert found.loo_accuracy == 1.0 and found.configured_accuracy == pytest.approx(5 / 15) and found.in_force
    # already separated by the configured cut: a lower cut gains nothing on them, so it does not decide
    same = fitted_cut.fit(points([0.6 + 0.01 * i for i in range(10)], [0.1] * 5), 0.5)
    assert same is not None and same.success_at < 0.5 and (same.gained, same.lost) == (0, 0) and not same.in_force


def test_off_domain_questions_keep_the_cut_above_them():
    # the keeper's answerable questions reach down to 0.3; off-domain questions sit up to 0.35
    keeper = points([0.3, 0.32, *[0.45] * 8], [0.1] * 5)
    alone = fitted_cut.fit(keeper, 0.5, 0.2)
    assert alone is not None and alone.success_at == pytest.approx(0.24) and alone.in_force
    off_domain = [Point(s, False) for s in (0.0, 0.05, 0.1, 0.31, 0.33, 0.35)]
    guarded = fitted_cut.fit(keeper, 0.5, 0.2, always=off_domain)
    assert guarded is not None and guarded.success_at == 0.5 and not guarded.in_force
    # the accuracies are the keeper's questions': the off-domain ones are not counted
    assert guarded.configured_accuracy == fitted_cut.accuracy(keeper, 0.5)


def test_a_fit_decides_only_below_the_configured_cut_and_on_a_gain_left_out():
    def cut(gained: int, lost: int, success_at: float = 0.4) -> FittedCut:
        return FittedCut(success_at, 10, 5, 0.0, 0.0, 0.5, gained=gained, lost=lost)

    assert cut(1, 0).in_force and cut(3, 2).in_force
    assert not cut(0, 0).in_force and not cut(2, 2).in_force and not cut(1, 3).in_force
    assert not cut(5, 0, success_at=0.5).in_force  # the guards kept the configured cut


def test_a_calibration_with_a_fitted_cut_decides_on_it():
    scale = Calibration(version=1, floor=0.1, match=0.9, questions=100)
    relevance = 0.1 + 0.4 * 0.8  # confidence 0.4: under the configured 0.5
    assert decide(relevance, scale, DEFAULT_CUTS, DEFAULT_THRESHOLDS).status == "low_confidence"
    fitted = Calibration(version=1, floor=0.1, match=0.9, questions=100, success_at=0.35)
    assert decide(relevance, fitted, DEFAULT_CUTS, DEFAULT_THRESHOLDS).status == "success"
    # the no_results cut is untouched
    assert decide(0.1 + 0.1 * 0.8, fitted, DEFAULT_CUTS, DEFAULT_THRESHOLDS).status == "no_results"


# -- stored with the calibration, read everywhere, shown on the page ------------------------------


@pytest.fixture(scope="module")
def keeper(make_database, embedder, tmp_path_factory):
    url = make_database("fitcut")
    db = Database(url)
    db.migrate(embedder.dim)
    ingest_sample_corpus(Ingestor(db, embedder))
    settings = make_settings(tmp_path_factory.mktemp("fitcut"), url, ingest_token=ADMIN_TOKEN, status_calibration=True)
    app = create_app(runtime=Runtime(settings, db, embedder))
    yield app, db, settings, embedder
    db.close()


def sample_rows(answerable: int, unanswerable: int) -> list[DatasetRow]:
    lines = Path(SAMPLE_QUESTIONS).read_text().splitlines()
    rows = [DatasetRow.model_validate(json.loads(line)) for line in lines]
    return [r for r in rows if r.kind == "answerable"][:answerable] + [r for r in rows if r.kind != "answerable"][
        :unanswerable
    ]


def signed_in(client):
    page = client.get("/login").get_data(as_text=True)
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)
    assert client.post("/login", data={"token": ADMIN_TOKEN, "csrf_token": csrf}).status_code == 302
    return client


def stored_fit(app) -> FittedCut | None:
    calibrator = app.extensions["arc"].knowledge.retriever.calibrator
    reading = calibrator.store.read("default", calibrator.key)
    assert reading.fresh
    return reading.stored.fitted


def test_the_cut_is_fitted_stored_read_by_another_process_shown_and_cleared(keeper):
    app, db, settings, embedder = keeper
    knowledge = app.extensions["arc"].knowledge
    calibrator = knowledge.retriever.calibrator
    service = ConfirmationService(knowledge)
    client = signed_in(app.test_client())
    before = calibrator.for_question("default").calibration
    assert before is not None and before.success_at is None

    # nine answerable and five "none": too few, today's calibration unchanged
    done, _ = import_rows(service, sample_rows(9, 5), "default", normalise_for_match)
    assert done == 14
    calibrator.wait_refits(timeout=120)
    assert stored_fit(app) is None
    assert calibrator.for_question("default").calibration == before
    page = " ".join(client.get("/confirmations").get_data(as_text=True).split())
    assert "needs 10 answerable and 5 not in the documents; it has 9 and 5" in page

    # every sample question: fitted on 15 answerable and 7 "none"
    import_rows(service, sample_rows(15, 7), "default", normalise_for_match)
    calibrator.wait_refits(timeout=120)
    fit = stored_fit(app)
    assert fit is not None and (fit.answerable, fit.unanswerable) == (15, 7)
    assert 0.0 <= fit.loo_accuracy <= 1.0 and fit.configured_at == settings.status.success_at
    expected = fit.success_at if fit.in_force else None
    assert calibrator.for_question("default").calibration.success_at == expected

    # another process over the same database reads the same cut with the calibration
    other = create_app(runtime=Runtime(settings, Database(db.url), embedder))
    assert other.extensions["arc"].knowledge.retriever.calibrator.for_question("default").calibration.success_at == (
        expected
    )

    # the page shows the cut, what it rests on and its leave-one-out accuracy
    page = " ".join(client.get("/confirmations").get_data(as_text=True).split())
    assert f"{fit.success_at:.3f}" in page and "15 answerable" in page and "7 not in the documents" in page
    assert f"{fit.loo_accuracy:.2f}" in page and re.search(r"in force|not in force", page)

    # removing answerable ones below ten: the fitted cut is cleared
    listed = service.list("default", LOCAL, candidates=False)
    for c in [c for c in listed if c.answer == "passage"][:6]:
        service.delete(c.id, LOCAL)
    calibrator.wait_refits(timeout=120)
    assert stored_fit(app) is None
    assert calibrator.for_question("default").calibration.success_at is None
