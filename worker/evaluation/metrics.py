"""Retrieval metrics, as BEIR computes them (pytrec_eval conventions: linear gain for nDCG)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

Qrels = Mapping[str, Mapping[str, int]]  # query id -> {doc id: relevance}


def ndcg_at_k(ranking: Sequence[str], relevant: Mapping[str, int], k: int) -> float:
    dcg = sum(relevant.get(doc, 0) / math.log2(i + 2) for i, doc in enumerate(ranking[:k]))
    ideal = sorted((r for r in relevant.values() if r > 0), reverse=True)[:k]
    idcg = sum(r / math.log2(i + 2) for i, r in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def recall_at_k(ranking: Sequence[str], relevant: Mapping[str, int], k: int) -> float:
    wanted = {doc for doc, r in relevant.items() if r > 0}
    if not wanted:
        return 0.0
    return len(wanted & set(ranking[:k])) / len(wanted)


def mrr_at_k(ranking: Sequence[str], relevant: Mapping[str, int], k: int) -> float:
    for i, doc in enumerate(ranking[:k]):
        if relevant.get(doc, 0) > 0:
            return 1.0 / (i + 1)
    return 0.0


def percentile(values: Sequence[float], p: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * p / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def summarise(rankings: Mapping[str, Sequence[str]], qrels: Qrels) -> dict[str, float]:
    """Mean metrics over the queries that have judgements."""
    queries = [q for q in qrels if q in rankings]
    n = len(queries) or 1
    return {
        "ndcg@10": sum(ndcg_at_k(rankings[q], qrels[q], 10) for q in queries) / n,
        "recall@5": sum(recall_at_k(rankings[q], qrels[q], 5) for q in queries) / n,
        "recall@20": sum(recall_at_k(rankings[q], qrels[q], 20) for q in queries) / n,
        "mrr@10": sum(mrr_at_k(rankings[q], qrels[q], 10) for q in queries) / n,
        "queries": float(len(queries)),
    }
