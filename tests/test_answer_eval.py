"""The answer-level evaluation: its metrics on hand-made outcomes with known results, and the
command end to end on a tiny two-community dataset written here."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from worker.cli import main
from worker.evaluation.answers import (Outcome, Question, breakdown, evidence_found, load_answer_dataset,
                                       normalise_for_match, split_sources, summarise)
from tests.helpers import TINY_QUESTIONS as QUESTIONS


def test_normalisation_is_the_one_the_issue_specifies():
    assert normalise_for_match("**The  Board**\n may `raise` it\u2019s |dues| > 5%") == \
        "the board may raise it's dues 5%"
    assert evidence_found(["Board of three (3) directors"], "managed by a\n**Board of three (3)\ndirectors**")
    assert not evidence_found(["Board of five directors"], "a Board of three (3) directors")


def test_sources_split_on_their_headers():
    context = "[SOURCE 1]\nDocument: A\nContent:\nx\n---\n[SOURCE 2]\nDocument: B\nContent:\ny"
    blocks = split_sources(context)
    assert len(blocks) == 2 and "Document: A" in blocks[0] and "Document: B" in blocks[1]
    assert split_sources("") == [] and split_sources("plain chunk") == ["plain chunk"]
    compact = "[SOURCE 1] A | p. 2 | binding\nx, see [SOURCE 9]\n---\n[SOURCE 2] B | binding\ny"
    assert split_sources(compact) == ["[SOURCE 1] A | p. 2 | binding\nx, see [SOURCE 9]\n---\n", "[SOURCE 2] B | binding\ny"]
    # a document's line opens the block of the first SOURCE below it
    grouped = ("[DOCUMENT] A | binding\n[SOURCE 1] S1 | p. 2\nx\n---\n[SOURCE 2] … > S2\ny\n---\n"
               "[DOCUMENT] B | not binding\n[SOURCE 3]\nz")
    assert split_sources(grouped) == ["[DOCUMENT] A | binding\n[SOURCE 1] S1 | p. 2\nx\n---\n",
                                      "[SOURCE 2] … > S2\ny\n---\n", "[DOCUMENT] B | not binding\n[SOURCE 3]\nz"]


def q(i: str, kind: str, evidence=(), notes="") -> Question:
    return Question(id=i, community="c", question=f"question {i}", kind=kind, evidence=tuple(evidence), notes=notes)


def outcome(question: Question, sources: list[str], status: str, tokens: int) -> Outcome:
    return Outcome(question=question, context="\n".join(sources), sources=sources, tokens=tokens,
                   latency_ms=10.0, status=status, best_score=0.5)


def test_metrics_on_hand_made_outcomes():
    outcomes = [
        outcome(q("1", "answerable", ["the fence rule"], "[where] x"), ["The fence rule.", "other"], "success", 100),
        outcome(q("2", "answerable", ["shed size"], "[where] y"), ["other", "the shed size"], "low_confidence", 200),
        outcome(q("3", "answerable", ["solar"]), [], "no_results", 0),
        outcome(q("4", "answerable", ["paint"]), ["nothing relevant"], "success", 300),
        outcome(q("5", "unanswerable"), ["something"], "success", 400),
        outcome(q("6", "off_topic"), [], "no_results", 0),
    ]
    s = summarise(outcomes)
    assert s["evidence_in_context"] == 0.5 and s["evidence_in_source1"] == 0.25
    assert s["answerable_empty_context"] == 0.25 and s["answerable_no_results"] == 0.25
    assert s["negatives_success"] == 0.5 and s["negatives_no_results"] == 0.5
    assert s["mean_context_tokens"] == pytest.approx(1000 / 6, abs=1e-3)
    parts = breakdown(outcomes)
    assert parts["tag"]["where"]["evidence_in_context"] == 1.0 and parts["tag"]["where"]["questions"] == 2
    assert parts["kind"]["unanswerable"]["negatives_success"] == 1.0


def test_status_measures_on_hand_made_outcomes():
    """Status right, hedged, refusals with the evidence in the knowledge base, and the AUROC."""
    def scored(question, sources, status, confidence, in_kb=None):
        found = outcome(question, sources, status, 10)
        found.confidence, found.evidence_in_kb = confidence, in_kb
        return found

    outcomes = [
        scored(q("1", "answerable", ["fence rule"]), ["the fence rule"], "success", 0.9, True),      # right
        scored(q("2", "answerable", ["shed size"]), ["the shed size"], "low_confidence", 0.4, True),  # hedged
        scored(q("3", "answerable", ["solar"]), [], "no_results", 0.1, True),          # refused, evidence in KB
        scored(q("4", "answerable", ["paint"]), [], "no_results", 0.05, False),        # refused, not in the KB
        scored(q("5", "unanswerable"), ["something"], "success", 0.6),                 # wrong
        scored(q("6", "off_topic"), [], "no_results", 0.0),                            # right
    ]
    s = summarise(outcomes)
    assert s["status_right"] == pytest.approx(2 / 6, abs=1e-4)
    assert s["hedged"] == 0.5  # of the two answerable questions with their evidence in the context
    assert s["answerable_no_results_with_evidence"] == 1
    # answerable 0.9 0.4 0.1 0.05 against negatives 0.6 and 0.0: 5 of 8 pairs won
    assert s["confidence_auroc"] == pytest.approx(5 / 8)


def test_leave_one_community_out_fits_on_the_others_and_shows_on_the_held_out_one():
    from worker.evaluation.answer_harness import leave_one_community_out

    def one(community, i, kind, confidence):
        question = Question(id=f"{community}{i}", community=community, question="q", kind=kind,
                            evidence=("rule",) if kind == "answerable" else ())
        found = Outcome(question=question, context="the rule", sources=["the rule"], tokens=5, latency_ms=1.0,
                        status="success" if confidence >= 0.5 else "low_confidence")
        found.confidence = confidence
        return found

    # a and b separate at 0.5; c's scores sit higher, so a cut fitted on a and b lets its negative through
    outcomes = [one(c, i, kind, v) for c, rows in {
        "a": [("answerable", 0.7), ("answerable", 0.6), ("unanswerable", 0.3)],
        "b": [("answerable", 0.8), ("unanswerable", 0.4), ("off_topic", 0.1)],
        "c": [("answerable", 0.9), ("unanswerable", 0.55)]}.items() for i, (kind, v) in enumerate(rows)]
    rows = {r["community"]: r for r in leave_one_community_out(outcomes)}
    assert 0.4 < rows["c"]["cut"] <= 0.55
    assert rows["c"]["negatives_success"] == 1.0 and rows["c"]["status_right"] == 0.5
    assert rows["a"]["status_right"] == 1.0 and rows["a"]["hedged"] == 0.0


def test_a_fitted_cut_sees_the_answer_type_check():
    """A negative whose context lacks the amount it asks for is never `success` in the worker,
    whatever the cut (worker/retrieve/status/answer_type.py): the fitted cuts must not count it as one."""
    from worker.evaluation.answer_harness import leave_one_community_out

    def one(community, i, kind, confidence, lacks=False):
        question = Question(id=f"{community}{i}", community=community, question="q", kind=kind,
                            evidence=("rule",) if kind == "answerable" else ())
        return Outcome(question=question, context="the rule", sources=["the rule"], tokens=5, latency_ms=1.0,
                       status="success" if confidence >= 0.5 and not lacks else "low_confidence",
                       confidence=confidence, notes={"lacks_answer_type": lacks})

    outcomes = [one(c, i, *row) for c, rows in {
        "a": [("answerable", 0.7), ("unanswerable", 0.3)],
        "b": [("answerable", 0.8), ("unanswerable", 0.2)],
        "c": [("answerable", 0.9), ("unanswerable", 0.95, True)]}.items() for i, row in enumerate(rows)]
    rows = {r["community"]: r for r in leave_one_community_out(outcomes)}
    assert rows["c"]["negatives_success"] == 0.0 and rows["c"]["status_right"] == 1.0


def test_dataset_layout(tiny):
    dataset = load_answer_dataset(tiny)
    assert set(dataset.communities) == {"oakridge", "pinecrest"} and len(dataset.questions) == 5
    (tiny / "questions.jsonl").write_text(json.dumps({**QUESTIONS[0], "community": "nowhere"}) + "\n")
    with pytest.raises(ValueError, match="nowhere"):
        load_answer_dataset(tiny)


def test_eval_command_on_an_answer_dataset(worker_process, tiny, tmp_path, monkeypatch):
    monkeypatch.setenv("ARC_DATA_DIR", str(tmp_path / "arc"))
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["eval", str(tiny), "--out", str(out)])
    assert result.exit_code == 0, result.output
    data = json.loads((out / "results.json").read_text())
    assert set(data["systems"]) == {"arc-retrieval", "n8n default", "hybrid top-5"}
    arc = data["systems"]["arc-retrieval"]
    assert arc["questions"] == 5 and arc["answerable"] == 3
    assert arc["evidence_in_context"] == 1.0 and arc["answerable_empty_context"] == 0.0
    rows = {r["id"]: r for r in data["questions"]["arc-retrieval"]}
    assert rows["o3"]["status"] == "no_results" and rows["o3"]["tokens"] == 0
    assert data["systems"]["n8n default"]["evidence_in_context"] == 1.0  # tiny files: one chunk each
    assert "negatives_success" not in data["systems"]["n8n default"]  # anchors have no status
    assert data["breakdown"]["arc-retrieval"]["tag"]["where"]["questions"] == 1
    report = (out / "results.md").read_text()
    assert "| arc-retrieval |" in report and "## Status thresholds" in report
    # Each community is its own knowledge base, reported on its own and in the combined file.
    assert set(data["communities"]) == {"oakridge", "pinecrest"}
    assert data["communities"]["oakridge"]["questions"] == 3
    assert {"status_right", "hedged", "answerable_no_results_with_evidence", "confidence_auroc"} <= set(arc)
    assert "## arc-retrieval per community" in report
    for community in ("oakridge", "pinecrest"):
        assert json.loads((out / community / "results.json").read_text())["systems"]["arc-retrieval"]["questions"] \
            == sum(row["community"] == community for row in QUESTIONS)
    assert (out / "chart.png").stat().st_size > 1000
