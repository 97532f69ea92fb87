"""Retrieval metrics against hand-computed values."""

import math

import pytest

from worker.evaluation.metrics import mrr_at_k, ndcg_at_k, percentile, recall_at_k, summarise


def test_ndcg_by_hand():
    relevant = {"a": 1, "b": 2}
    # ranking: x, b, a -> DCG = 0/log2(2) + 2/log2(3) + 1/log2(4) = 1.26186 + 0.5
    # ideal: b, a      -> IDCG = 2/log2(2) + 1/log2(3) = 2 + 0.63093
    expected = (2 / math.log2(3) + 1 / 2) / (2 + 1 / math.log2(3))
    assert ndcg_at_k(["x", "b", "a"], relevant, 10) == pytest.approx(expected)
    assert ndcg_at_k(["b", "a"], relevant, 10) == pytest.approx(1.0)
    assert ndcg_at_k(["x", "y"], relevant, 10) == 0.0
    assert ndcg_at_k(["x", "b"], relevant, 1) == 0.0


def test_recall_and_mrr_by_hand():
    relevant = {"a": 1, "b": 1, "c": 0}
    assert recall_at_k(["a", "x", "b"], relevant, 2) == 0.5
    assert recall_at_k(["a", "x", "b"], relevant, 3) == 1.0
    assert mrr_at_k(["x", "y", "b"], relevant, 10) == pytest.approx(1 / 3)
    assert mrr_at_k(["x", "c"], relevant, 10) == 0.0  # score 0 is not relevant
    assert mrr_at_k(["x", "y", "b"], relevant, 2) == 0.0


def test_summary_and_percentile():
    qrels = {"q1": {"a": 1}, "q2": {"b": 1}}
    result = summarise({"q1": ["a"], "q2": ["x", "b"]}, qrels)
    assert result["mrr@10"] == pytest.approx(0.75)
    assert result["recall@5"] == 1.0 and result["queries"] == 2
    assert percentile([1, 2, 3, 4], 50) == 2.5 and percentile([5], 95) == 5
