"""How many database calls each answer of an answer dataset makes, per community.

Each community is loaded into a database of its own (as ``arc-retrieval eval`` does), its status
calibrated, then every question is asked through the retrieval webhook three times, as a caller
would: with the default request, then with ``token_budget`` 1,000 and 2,000. Each answer's
``debug.database_calls`` is tallied; an answer that made more than one call is listed with the
statements it sent beyond the question's one call (where in the worker each came from).

    ARC_STATEMENT_TIMEOUT_MS=120000 .venv/bin/python benchmarks/database_calls.py DATASET \\
        --data-dir DIR --out benchmarks/database_calls

``DATASET``: an answer dataset (a folder with questions.jsonl and each community's manifest).
``--data-dir``: where the embedded Postgres and the passage vectors' cache live.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from worker.config import Settings  # noqa: E402
from worker.embeddings import CachedEmbedder, build_embedder  # noqa: E402
from worker.evaluation.answer_harness import VectorCache, _webhook_client, ask_webhook, each_community  # noqa: E402
from worker.evaluation.answers import load_answer_dataset  # noqa: E402
from worker.store import calls  # noqa: E402

REQUESTS = (("default", {}), ("token_budget 1,000", {"token_budget": 1000}), ("token_budget 2,000", {"token_budget": 2000}))


def where_from() -> str:
    """The worker's own frame that sent a statement (its module and function)."""
    for frame in reversed(traceback.extract_stack()[:-2]):
        if "/worker/" in frame.filename and "/store/calls.py" not in frame.filename:
            return f"{frame.filename.rsplit('/worker/', 1)[1]}:{frame.name}"
    return "?"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dataset", type=Path)
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "database_calls")
    args = parser.parse_args()

    sent: list[str] = []
    counted_one = calls.one

    def one() -> None:
        sent.append(where_from())
        counted_one()

    calls.one = one
    settings = Settings.from_env()
    embedder = CachedEmbedder(build_embedder(settings), maxsize=100_000)
    dataset = load_answer_dataset(args.dataset)
    cache = VectorCache.of_passages(args.data_dir, embedder)
    table = ["| community | request | answers | one call | more | of which the community's first question |",
             "|---|---|---|---|---|---|"]
    extra: list[str] = []
    for loaded in each_community(dataset, settings=settings, embedder=embedder, cache=cache, data_dir=args.data_dir):
        client, retriever = _webhook_client(settings, loaded.db, embedder)
        retriever.calibrate_now()
        tally: dict[str, Counter] = {name: Counter() for name, _ in REQUESTS}
        for position, question in enumerate(loaded.questions):
            for name, request in REQUESTS:
                sent.clear()
                body, _ = ask_webhook(client, settings, question, debug=True, **request)
                made = int(body["debug"]["database_calls"])
                tally[name]["one" if made == 1 else "more"] += 1
                if made > 1:
                    tally[name]["first" if position == 0 else "later"] += 1
                    beyond = [s for s in sent if not s.endswith("_answer_call")]
                    extra.append(f"| {loaded.community} | {question.id} | {name} | {made} | {', '.join(beyond)} |")
        for name, _ in REQUESTS:
            t = tally[name]
            table.append(f"| {loaded.community} | {name} | {t['one'] + t['more']} | {t['one']} | {t['more']} | "
                         f"{t['first']} |")
        print("\n".join(table[-3:]), flush=True)
    lines = [
        "# Database calls per answer",
        "",
        f"Command: `ARC_STATEMENT_TIMEOUT_MS=120000 .venv/bin/python benchmarks/database_calls.py {args.dataset.name} "
        "--data-dir DIR`",
        "",
        "Each community in a database of its own, its status calibrated; every question asked through the "
        "webhook with the default request, then with `token_budget` 1,000 and 2,000. A community's first "
        "question also reads the communities.",
        "",
        *table,
        "",
        "## Answers that made more than one call",
        "",
        "*sent besides*: where in the worker each statement beyond the question's call came from.",
        "",
        "| community | question | request | calls | sent besides |",
        "|---|---|---|---|---|",
        *extra,
    ]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
