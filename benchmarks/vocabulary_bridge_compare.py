"""Per community, each bridge run of benchmarks/vocabulary_bridge.py against the shipped answers
(benchmarks/answers/hoa-dev/results.json): evidence in context at the worker's tokens and at 500 /
1,000 / 2,000, SOURCE 1, status right, negatives `success`, mean tokens, and the questions whose
evidence or SOURCE 1 changed. A run holds when no community's evidence (at any of those) or
SOURCE 1 is lower and no community's negatives `success` is higher.

    python benchmarks/vocabulary_bridge_compare.py BASELINE.json NAME=RUN/results.json ...
"""

import json
import sys
from pathlib import Path

BUDGETS = (500, 1000, 2000)


def rows(results: dict) -> dict[str, dict[str, float]]:
    out = {}
    for community, c in results["communities"].items():
        curve = {
            b["budget"]: b["evidence_in_context"]
            for b in results["budget_curve_by_community"][community]["arc-retrieval"]
        }
        out[community] = {
            "evidence": c["evidence_in_context"],
            **{f"ev@{b}": curve[b] for b in BUDGETS},
            "source1": c["evidence_in_source1"],
            "status": c["status_right"],
            "neg_success": c["negatives_success"],
            "tokens": c["mean_context_tokens"],
        }
    return out


def by_question(results: dict) -> dict[str, dict]:
    return {q["id"]: q for q in results["questions"]["arc-retrieval"]}


def main() -> None:
    base = json.loads(Path(sys.argv[1]).read_text())
    base_rows, base_q = rows(base), by_question(base)
    keys = list(next(iter(base_rows.values())))
    print("| run | community | " + " | ".join(keys) + " | holds |")
    print("|---" * (len(keys) + 3) + "|")
    for community, r in base_rows.items():
        print(
            f"| shipped | {community} | "
            + " | ".join(f"{r[k]:.2f}" if k != "tokens" else f"{r[k]:.0f}" for k in keys)
            + " | |"
        )
    changes = []
    for arg in sys.argv[2:]:
        name, path = arg.split("=", 1)
        run = json.loads(Path(path).read_text())
        for community, r in rows(run).items():
            b = base_rows[community]
            worse = [k for k in keys if k not in ("tokens", "status", "neg_success") and r[k] < b[k] - 1e-9]
            if r["neg_success"] > b["neg_success"] + 1e-9:
                worse.append("neg_success")
            cells = [f"{r[k]:.2f}" if k != "tokens" else f"{r[k]:.0f}" for k in keys]
            print(
                f"| {name} | {community} | "
                + " | ".join(cells)
                + f" | {'yes' if not worse else 'no: ' + ', '.join(worse)} |"
            )
        for qid, q in by_question(run).items():
            o = base_q[qid]
            diff = [
                f"{k} {o[k]}->{q[k]}"
                for k in ("evidence_in_context", "evidence_in_source1", "status")
                if o.get(k) != q.get(k)
            ]
            if diff:
                changes.append(f"{name} {qid} {q['community']} {q['kind']}: {'; '.join(diff)}")
    print()
    print("\n".join(changes))


if __name__ == "__main__":
    main()
