"""Anchors at the worker's own token count, and the evidence-against-budget curve: an anchor
takes its chunks in its order until the context holds as many tokens as it is given."""

from __future__ import annotations

import json

from click.testing import CliRunner

from worker.cli import main
from worker.evaluation.anchors import BUDGETS, JOIN, within_tokens
from worker.tokens import default_counter

CHUNKS = [f"Chunk {i}: " + " ".join(f"word{i}x{j}" for j in range(60)) for i in range(6)]


def test_an_anchor_gets_exactly_the_tokens_it_is_given_in_its_own_order():
    counter = default_counter()
    whole = [counter.count(c) for c in CHUNKS]
    for budget in (1, 50, whole[0], whole[0] + 40, sum(whole) // 2, 10 * sum(whole)):
        taken = within_tokens(CHUNKS, budget, counter)
        used = counter.count(JOIN.join(taken))
        assert used <= budget, (budget, used)
        if budget < sum(whole):
            assert used >= budget - 3, (budget, used)  # filled, not stopped at a chunk's edge
        assert taken[:-1] == CHUNKS[:len(taken) - 1] and CHUNKS[len(taken) - 1].startswith(taken[-1])
    assert within_tokens(CHUNKS, 0, counter) == []
    assert within_tokens(CHUNKS, 10 * sum(whole), counter) == CHUNKS


def test_the_report_compares_at_equal_tokens_and_draws_the_budget_curve(worker_process, tiny, tmp_path, monkeypatch):
    monkeypatch.setenv("ARC_DATA_DIR", str(tmp_path / "arc"))
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["eval", str(tiny), "--out", str(out)])
    assert result.exit_code == 0, result.output
    data = json.loads((out / "results.json").read_text())
    arc_tokens = {r["id"]: r["tokens"] for r in data["questions"]["arc-retrieval"]}
    for system, rows in data["equal_tokens"]["questions"].items():
        for row in rows:  # never more than the worker spent on that question
            assert row["tokens"] <= arc_tokens[row["id"]], (system, row)
    curve = data["budget_curve"]
    assert set(curve) == {"arc-retrieval", "n8n default", "hybrid top-5"}
    for system, points in curve.items():
        assert [p["budget"] for p in points] == list(BUDGETS)
        assert all(p["mean_context_tokens"] <= p["budget"] for p in points), (system, points)
        assert all(0 <= p["evidence_in_context"] <= 1 for p in points)
    report = (out / "results.md").read_text()
    assert "## At the worker's token count" in report and "## Evidence against token budget" in report
    assert (out / "budget.png").stat().st_size > 1000
