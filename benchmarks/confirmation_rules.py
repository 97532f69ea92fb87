"""The confirmation matcher's rule 6, chosen and checked offline (worker/retrieve/confirmed.py).

``record`` runs benchmarks/confirmations.py with every call of the matcher recorded: the question
asked (its dataset id), the confirmations' similarities to it, the nearest one's answer, and the
candidates' first-stage relevance and vector similarity. ``fit`` replays the matcher's decision
on those recordings for a grid of rule 6's numbers: fewest wrong takes first, then SOURCE 1 +
status right on the rewordings, then the strictest setting; once on all communities and once
leaving each community out (fitted on the others, checked on it).

A wrong take is counted conservatively: a passage confirmation taken by an unanswerable question
or by one whose own evidence the passage does not hold, or a "none" taken by an answerable one.
Takes that rules 1-5 make on their own are the harness's to report, not counted here.

    python benchmarks/confirmation_rules.py record /work/shared/datasets/hoa-dev --out /tmp/rules
    python benchmarks/confirmation_rules.py fit /tmp/rules
"""

from __future__ import annotations

import argparse
import itertools
import json
import runpy
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from worker.evaluation import confirmation_harness  # noqa: E402
from worker.evaluation.answers import evidence_found  # noqa: E402
from worker.retrieve import confirmed  # noqa: E402
from worker.retrieve.status import fitted_cut  # noqa: E402

GRID = {
    "extra": (0.05, 0.1, 0.15),
    "margin": (0.1, 0.15, 0.2),
    "share": (0.7, 0.8, 0.9),
    "top_rank": (2, 3),
    "top_vector_rank": (1, 2),
    "top_margin": (0.05, 0.1),
    "top_below_like": (0.0, 0.05, 0.1),
}
SHIPPED = {
    "extra": confirmed.AGREE_EXTRA,
    "margin": confirmed.AGREE_MARGIN,
    "share": confirmed.AGREE_SHARE,
    "top_rank": confirmed.TOP_RANK,
    "top_vector_rank": confirmed.TOP_VECTOR_RANK,
    "top_margin": confirmed.TOP_MARGIN,
    "top_below_like": confirmed.TOP_BELOW_LIKE,
}


# -- record -------------------------------------------------------------------------------------


def record(argv: list[str], out: Path) -> None:
    """Run the confirmations harness with the matcher's inputs written to ``out/calls.jsonl``."""
    asking: dict[str, object] = {"epoch": 0}
    calls: list[dict] = []
    answers: list[dict] = []
    fits: list[dict] = []
    ask, match = confirmation_harness.ask, confirmed.Confirmations.match
    confirm_all, remove_all = confirmation_harness.confirm_all, confirmation_harness.Keeper.remove_all
    fit_cut = fitted_cut.fit

    def asked(client, settings, question):  # type: ignore[no-untyped-def]
        asking["question"] = question
        asking["candidates"] = []
        answer = ask(client, settings, question)
        answers.append(
            {
                "id": question.id,
                "community": question.community,
                "kind": question.kind,
                "epoch": asking["epoch"],
                **{k: v for k, v in answer.row().items() if k not in ("id", "kind")},
                "candidates": asking["candidates"],
            }
        )
        return answer

    def bumped(function):  # type: ignore[no-untyped-def]
        def wrapped(*args, **kwargs):  # type: ignore[no-untyped-def]
            done = function(*args, **kwargs)
            asking["epoch"] = int(asking["epoch"]) + 1  # type: ignore[call-overload]
            return done

        return wrapped

    def fitted(points, configured, floor=0.0, always=()):  # type: ignore[no-untyped-def]
        q = asking.get("question")
        fits.append(
            {
                "community": getattr(q, "community", None),
                "epoch": asking["epoch"],
                "points": [[p.score, p.answerable] for p in points],
                "always": [p.score for p in always],
                "configured": configured,
                "floor": floor,
            }
        )
        return fit_cut(points, configured, floor, always)

    def matched(self, community, question, embedding, candidates, stamp=None):  # type: ignore[no-untyped-def]
        asking["candidates"] = [[c.id, c.relevance, c.vector_score] for c in candidates]
        taken = match(self, community, question, embedding, candidates, stamp)
        known = self.known(community, stamp)
        q = asking.get("question")
        if q is None or embedding is None or not known.entries:
            return taken
        sims = known.matrix @ (np.asarray(embedding, dtype=np.float32) / np.linalg.norm(embedding))
        best = int(np.argmax(sims))
        entry = known.entries[best]
        others = sims[known.answers != known.answers[best]]
        ids = [c.id for c in candidates]
        rank = ids.index(entry.chunk_id) if entry.chunk_id in ids else None
        passage = candidates[rank] if rank is not None else None
        own_vector = (passage.vector_score or 0.0) if passage is not None else 0.0
        calls.append(
            {
                "id": q.id,  # type: ignore[attr-defined]
                "community": q.community,  # type: ignore[attr-defined]
                "kind": q.kind,  # type: ignore[attr-defined]
                "confirmed": [e.query for e in known.entries],
                "nearest": entry.query,
                "answer": entry.answer,
                "similarity": float(sims[best]),
                "rival": float(others.max()) if others.size else -1.0,
                "like": known.scale.like,
                "near": known.scale.near,
                "rank": rank,
                "vector_rank": sum((c.vector_score or 0.0) > own_vector for c in candidates) if passage else None,
                "share": passage.relevance / max(c.relevance for c in candidates) if passage else None,
                "holds_evidence": bool(passage and evidence_found(list(q.evidence), passage.content)),  # type: ignore[attr-defined]
                "asks": [confirmed.asking(question), entry.asks],
                "rules_1_5": taken is not None and not _rule6_only(self, taken, question, entry, passage),
            }
        )
        return taken

    confirmation_harness.ask = asked  # type: ignore[assignment]
    confirmation_harness.confirm_all = bumped(confirm_all)  # type: ignore[assignment]
    confirmation_harness.Keeper.remove_all = bumped(remove_all)  # type: ignore[method-assign]
    fitted_cut.fit = fitted  # type: ignore[assignment]
    confirmed.Confirmations.match = matched  # type: ignore[method-assign]
    sys.argv = [str(ROOT / "benchmarks/confirmations.py"), *argv, "--out", str(out)]
    try:
        runpy.run_path(sys.argv[0], run_name="__main__")
    finally:
        out.mkdir(parents=True, exist_ok=True)
        (out / "calls.jsonl").write_text("".join(json.dumps(c) + "\n" for c in calls))
        (out / "answers.jsonl").write_text("".join(json.dumps(a) + "\n" for a in answers))
        (out / "fits.jsonl").write_text("".join(json.dumps(f) + "\n" for f in fits))


def _rule6_only(matcher, taken, question, entry, passage) -> bool:  # type: ignore[no-untyped-def]
    """Whether ``taken`` needed rule 6: rule 5's word test alone would have refused it."""
    if entry.answer == "none" or passage is None:
        return False
    return len(matcher.unmet(question, entry.query, passage.content)) > confirmed.UNCOVERED_ALLOWED


# -- fit ----------------------------------------------------------------------------------------


@dataclass
class Call:
    """One recorded question with what the replay needs."""

    community: str
    phase: str  # "b" a rewording, "orig" a confirmed question asked again, "other" the rest
    kind: str
    right_target: bool  # the nearest confirmation is its original's (or its own)
    before_source1: bool
    before_right: bool
    row: dict


def _calls(folder: Path) -> list[Call]:
    results = json.loads((folder / "results.json").read_text())
    before: dict[str, dict] = {}
    original: dict[str, str] = {}  # rewording id -> its original's text
    originals: set[str] = set()
    for c in results["communities"]:
        for r in c["rewordings"]["questions"]:
            before[r["id"]] = r["before"]
            original[r["id"]] = r["original"]
            originals.add(r["of"])
    found = []
    for line in (folder / "calls.jsonl").read_text().splitlines():
        row = json.loads(line)
        qid = row["id"]
        if qid in original:
            phase, target = "b", original[qid]
        elif qid in originals and row["similarity"] > 0.999:
            continue  # a confirmed question asked again
        else:
            phase, target = "other", None
        b = before.get(qid, {})
        found.append(
            Call(
                row["community"],
                phase,
                row["kind"],
                target is not None and row["nearest"] == target,
                bool(b.get("evidence_in_source1")),
                bool(b.get("status_right")),
                row,
            )
        )
    return found


def _takes(row: dict, p: dict) -> bool:
    """Whether the matcher with rule 6's numbers ``p`` takes the nearest confirmation."""
    if row["rules_1_5"]:
        return True
    asks = row["asks"]
    if row["answer"] == "none" or row["rank"] is None or (None not in asks and asks[0] != asks[1]):
        return False
    # rule 2: the passage among the first AGREE_RANK candidates, the question on the scale
    floor = row["near"] if row["rank"] < confirmed.NEAR_RANK else row["like"]
    if row["rank"] >= confirmed.AGREE_RANK or row["similarity"] < floor:
        return False
    margin = row["similarity"] - row["rival"]
    if row["similarity"] >= row["like"] + p["extra"] and margin >= p["margin"] and (row["share"] or 0) >= p["share"]:
        return True
    return (
        row["rank"] < p["top_rank"]
        and row["vector_rank"] < p["top_vector_rank"]
        and margin >= p["top_margin"]
        and row["similarity"] >= row["like"] - p["top_below_like"]
    )


def score(calls: list[Call], p: dict, community: str) -> tuple[float, float, int]:
    """SOURCE 1 and status right on the community's rewordings, and wrong takes of rule 6."""
    source1, right, wrong = [], [], 0
    for c in (c for c in calls if c.community == community):
        took = _takes(c.row, p)
        harmful = False
        if took and not c.row["rules_1_5"] and not c.right_target:
            if c.row["answer"] == "none":
                harmful = c.kind == "answerable"
            else:
                harmful = c.kind != "answerable" or not c.row["holds_evidence"]
        wrong += harmful
        if c.phase != "b":
            continue
        if c.kind == "answerable":
            source1.append((took and c.right_target) or (c.before_source1 and not harmful))
        right.append((took and c.right_target) or (c.before_right and not harmful))
    return (sum(source1) / max(len(source1), 1), sum(right) / max(len(right), 1), wrong)


def _strictness(p: dict) -> float:
    return (
        p["extra"]
        + p["margin"]
        + p["share"]
        - p["top_rank"]
        - p["top_vector_rank"]
        + p["top_margin"]
        - p["top_below_like"]
    )


def best(calls: list[Call], communities: list[str]) -> dict:
    chosen, key = {}, None
    for values in itertools.product(*GRID.values()):
        p = dict(zip(GRID, values, strict=True))
        scores = [score(calls, p, c) for c in communities]
        k = (-sum(s[2] for s in scores), round(sum(s[0] + s[1] for s in scores), 6), _strictness(p))
        if key is None or k > key:
            chosen, key = p, k
    return chosen


def fit(folder: Path) -> None:
    calls = _calls(folder)
    communities = sorted({c.community for c in calls if c.community})
    shown = lambda p: " / ".join(f"{p[k]:g}" for k in GRID)  # noqa: E731
    print("numbers:", " / ".join(GRID))
    for name, p in (("shipped", SHIPPED), ("fitted on all", best(calls, communities))):
        print(f"{name}: {shown(p)}")
        for c in communities:
            s1, right, wrong = score(calls, p, c)
            print(f"  {c}: SOURCE 1 {s1:.2f}, status right {right:.2f}, wrong takes {wrong}")
    for held in communities:
        p = best(calls, [c for c in communities if c != held])
        s1, right, wrong = score(calls, p, held)
        print(f"held out {held}: fitted {shown(p)} -> SOURCE 1 {s1:.2f}, status right {right:.2f}, wrong takes {wrong}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record", help="run benchmarks/confirmations.py with the matcher's inputs recorded")
    rec.add_argument("dataset")
    rec.add_argument("--out", type=Path, required=True)
    rec.add_argument("--community", action="append", default=[], help="only these communities (repeatable)")
    fitting = sub.add_parser("fit", help="replay the recordings over the grid, all and leaving each community out")
    fitting.add_argument("folder", type=Path)
    args = parser.parse_args()
    if args.command == "record":
        record([args.dataset, *(a for c in args.community for a in ("--community", c))], args.out)
    else:
        fit(args.folder)


if __name__ == "__main__":
    main()
