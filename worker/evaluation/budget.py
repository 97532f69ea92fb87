"""The anchors at the worker's own token count, and evidence against a token budget.

A context twice as long finds evidence more often, so comparing systems at their own lengths
flatters the longer one. Here each anchor takes its chunks in its own order until its context
holds, per question, as many tokens as the worker's (the last chunk cut to fit), and every
system is also measured at fixed budgets (:data:`anchors.BUDGETS`): the worker with that
``token_budget`` in its request, the anchors cut at it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from . import anchors
from .answers import Outcome, Question, summarise

EQUAL = {"n8n default": "n8n default, same tokens", "hybrid top-5": "hybrid, same tokens"}


@dataclass
class BudgetRuns:
    """Per system: the anchors at the worker's count, and every system at each fixed budget."""

    equal_tokens: dict[str, list[Outcome]] = field(default_factory=lambda: {name: [] for name in EQUAL.values()})
    at_budget: dict[str, dict[int, list[Outcome]]] = field(default_factory=dict)

    def add(self, system: str, budget: int, outcome: Outcome) -> None:
        self.at_budget.setdefault(system, {}).setdefault(budget, []).append(outcome)

    def to_json(self, worker: list[Outcome]) -> dict:
        return {
            "equal_tokens": {
                "systems": {name: summarise(o) for name, o in self.equal_tokens.items()},
                "by_community": by_community({**{"arc-retrieval": worker}, **self.equal_tokens}),
                "questions": {name: [x.row() for x in o] for name, o in self.equal_tokens.items()},
            },
            "budget_curve": {
                system: [{"budget": b, **_point(o)} for b, o in sorted(runs.items())]
                for system, runs in self.at_budget.items()
            },
            "budget_curve_by_community": {
                c: {
                    system: [
                        {"budget": b, **_point([o for o in out if o.question.community == c])}
                        for b, out in sorted(runs.items())
                    ]
                    for system, runs in self.at_budget.items()
                }
                for c in sorted({o.question.community for o in worker})
            },
        }


def _point(outcomes: list[Outcome]) -> dict:
    s = summarise(outcomes)
    return {k: s[k] for k in ("evidence_in_context", "evidence_in_source1", "mean_context_tokens")}


def by_community(systems: dict[str, list[Outcome]]) -> dict[str, dict[str, dict]]:
    communities = sorted({o.question.community for outcomes in systems.values() for o in outcomes})
    return {
        c: {name: _point([o for o in outcomes if o.question.community == c]) for name, outcomes in systems.items()}
        for c in communities
    }


def anchor_outcome(question: Question, ranked: Sequence[str], budget: int, counter, latency_ms: float) -> Outcome:
    chunks = anchors.within_tokens(ranked, budget, counter)
    context = anchors.JOIN.join(chunks)
    return Outcome(
        question=question, context=context, sources=chunks, tokens=counter.count(context), latency_ms=latency_ms
    )


def measure(
    runs: BudgetRuns,
    question: Question,
    worker: Outcome,
    ask: Callable[[int], Outcome],
    index: anchors.AnchorIndex,
    embedder,
    counter,
) -> None:
    """One question: the anchors at the worker's count, then every system at each budget."""
    start = time.perf_counter()
    vector = embedder.embed_query(question.question)
    rankings = {
        "n8n default": anchors.n8n_ranking(index, vector),
        "hybrid top-5": anchors.hybrid_ranking(index, question.question, vector),
    }
    latency = (time.perf_counter() - start) * 1000
    for name, ranked in rankings.items():
        runs.equal_tokens[EQUAL[name]].append(anchor_outcome(question, ranked, worker.tokens, counter, latency))
    for budget in anchors.BUDGETS:
        runs.add("arc-retrieval", budget, ask(budget))
        for name, ranked in rankings.items():
            runs.add(name, budget, anchor_outcome(question, ranked, budget, counter, latency))


def report_lines(data: dict) -> list[str]:
    equal = data["equal_tokens"]["by_community"]
    systems = ["arc-retrieval", *EQUAL.values()]
    lines = [
        "",
        "## At the worker's token count",
        "",
        "Each anchor takes its chunks in its own order until its context holds as many tokens as the "
        "worker's context for that question (the last chunk cut to fit). Evidence in context, and in "
        "the first chunk (SOURCE 1 for the worker):",
        "",
        "| community | " + " | ".join(systems) + " | mean tokens |",
        "|---|" + "---|" * (len(systems) + 1),
    ]
    pooled = {name: data["equal_tokens"]["systems"][name] for name in EQUAL.values()}
    rows = [*equal.items(), ("all", {"arc-retrieval": data["systems"]["arc-retrieval"], **pooled})]
    for community, row in rows:
        cells = [f"{_f(row[s]['evidence_in_context'])} / {_f(row[s]['evidence_in_source1'])}" for s in systems]
        tokens = row["arc-retrieval"]["mean_context_tokens"]
        lines.append(f"| {community} | " + " | ".join(cells) + f" | {tokens:.0f} |")
    curve = data["budget_curve"]
    budgets = [p["budget"] for p in next(iter(curve.values()))]
    lines += [
        "",
        "## Evidence against token budget",
        "",
        "The worker with `token_budget` set in its request (default `top_k`), the anchors cut at the "
        "budget: evidence in context (mean context tokens).",
        "",
        "| system | " + " | ".join(str(b) for b in budgets) + " |",
        "|---|" + "---|" * len(budgets),
    ]
    for system, points in curve.items():
        lines.append(
            f"| {system} | "
            + " | ".join(f"{_f(p['evidence_in_context'])} ({p['mean_context_tokens']:.0f})" for p in points)
            + " |"
        )
    lines += _community_curves(data, budgets)
    return lines


def _community_curves(data: dict, budgets: list[int]) -> list[str]:
    """Per community: every system at the worker's default context and at each budget."""
    by_community = data.get("budget_curve_by_community") or {}
    if len(by_community) < 2:
        return []
    equal = data["equal_tokens"]["by_community"]
    lines = [
        "",
        "### Per community",
        "",
        "Evidence in context at the worker's default context (its own tokens; the anchors given the same "
        "tokens per question) and at each budget; the worker's lead over the best anchor in the last column "
        "is the smallest over the default, 1,000 and 2,000 tokens.",
        "",
        "| community | system | default | " + " | ".join(str(b) for b in budgets) + " | lead |",
        "|---|---|---|" + "---|" * (len(budgets) + 1),
    ]
    for community, curves in by_community.items():
        default = {
            "arc-retrieval": equal[community]["arc-retrieval"],
            **{name: equal[community][EQUAL[name]] for name in EQUAL},
        }
        at = {s: {p["budget"]: p["evidence_in_context"] for p in points} for s, points in curves.items()}
        lead = min(
            (default["arc-retrieval"]["evidence_in_context"] or 0)
            - max(default[a]["evidence_in_context"] or 0 for a in EQUAL),
            *[
                (at["arc-retrieval"].get(b) or 0) - max(at[a].get(b) or 0 for a in EQUAL)
                for b in (1000, 2000)
                if b in at["arc-retrieval"]
            ],
        )
        for system in curves:
            cells = [_f(at[system].get(b)) for b in budgets]
            own = default[system]
            first = f"{_f(own['evidence_in_context'])} ({own['mean_context_tokens']:.0f})"
            tail = f"{lead:+.2f}" if system == "arc-retrieval" else ""
            lines.append(f"| {community} | {system} | {first} | " + " | ".join(cells) + f" | {tail} |")
    return lines


def _f(value) -> str:
    return "-" if value is None else f"{value:.2f}"


def chart(data: dict, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    for system, points in data["budget_curve"].items():
        ax.plot(
            [p["mean_context_tokens"] for p in points],
            [p["evidence_in_context"] for p in points],
            marker="o",
            label=system,
        )
    ax.set_xscale("log")
    ax.set_xlabel("mean context tokens (budgets 500 / 1,000 / 2,000 / 4,000)")
    ax.set_ylabel("answerable questions with the evidence in context")
    ax.set_ylim(0, 1)
    ax.set_title(f"{title}: evidence against tokens")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
