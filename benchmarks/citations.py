"""What the ``[SOURCE n]`` headers cost: tokens per header and per answer, compact against full.

Every question of an answer set (hoa-dev layout) goes through the real webhook twice, once with
``"citations": "compact"`` and once with ``"citations": "full"``, at the default request and at a
``token_budget`` of 1,000 and 2,000. Reported per community: the mean tokens of a header (the label
line and, for ``full``, the labelled lines through ``Content:``), the mean context tokens and the
share of them the headers take, and the evidence in context (at a budget, the tokens the headers
no longer take carry text).

    python benchmarks/citations.py ../shared/datasets/hoa-dev --out benchmarks/citations
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from worker.config import Settings
from worker.embeddings import CachedEmbedder, build_embedder
from worker.evaluation import answer_harness
from worker.evaluation.answers import evidence_found, load_answer_dataset, split_sources
from worker.tokens import default_counter

FORMATS = ("full", "compact")
BUDGETS = (None, 1000, 2000)  # None: the default request
_FULL_HEADER = re.compile(r"^\[SOURCE \d+\]\n(?:.*\n)*?Content:\n")
_COMPACT_HEADER = re.compile(r"^(?:\[DOCUMENT\][^\n]*\n)?\[SOURCE \d+\][^\n]*\n")


def header_tokens(block: str, citations: str, counter) -> int:
    found = (_FULL_HEADER if citations == "full" else _COMPACT_HEADER).match(block)
    return counter.count(found.group(0)) if found else 0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("dataset", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument(
        "--before", type=Path, help="an earlier run's results.json: its compact rows are shown as 'compact before'"
    )
    args = parser.parse_args()
    settings = Settings.from_env()
    embedder = CachedEmbedder(build_embedder(settings), maxsize=100_000)
    counter = default_counter()
    dataset = load_answer_dataset(args.dataset)
    settings.database.data_dir.mkdir(parents=True, exist_ok=True)
    data_dir = settings.database.data_dir.resolve()
    cache = answer_harness.VectorCache.of_passages(data_dir, embedder)
    rows: dict[str, dict[str, dict]] = {}
    example = ""
    for loaded in answer_harness.each_community(
        dataset, settings=settings, embedder=embedder, cache=cache, data_dir=data_dir
    ):
        cache.save()
        client, retriever = answer_harness._webhook_client(settings, loaded.db, embedder)
        if settings.status.status_calibration:
            retriever.calibrate_now()
        for citations in FORMATS:
            for budget in BUDGETS:
                key = f"{citations} @ {budget or 'default'}"
                stats = rows.setdefault(loaded.community, {}).setdefault(
                    key, {"headers": 0, "header_tokens": 0, "answers": 0, "tokens": 0, "answerable": 0, "found": 0}
                )
                for question in loaded.questions:
                    request = {"citations": citations} | ({"token_budget": budget} if budget else {})
                    body, _ = answer_harness.ask_webhook(client, settings, question, **request)
                    blocks = split_sources(body["context"])
                    stats["headers"] += len(blocks)
                    stats["header_tokens"] += sum(header_tokens(b, citations, counter) for b in blocks)
                    stats["answers"] += 1
                    stats["tokens"] += body["context_tokens"]
                    if question.kind == "answerable":
                        stats["answerable"] += 1
                        stats["found"] += evidence_found(question.evidence, body["context"])
                    if citations == "compact" and budget is None and not example and len(blocks) > 2:
                        example = "".join(_COMPACT_HEADER.match(b).group(0) for b in blocks)  # type: ignore[union-attr]
    before = json.loads(args.before.read_text())["results"] if args.before else {}
    write(args.out, rows, example, command="python " + " ".join(sys.argv), before=before)


def summary(stats: dict) -> dict:
    return {
        "tokens_per_header": stats["header_tokens"] / max(stats["headers"], 1),
        "headers_per_answer": stats["headers"] / max(stats["answers"], 1),
        "tokens_per_answer": stats["tokens"] / max(stats["answers"], 1),
        "header_share": stats["header_tokens"] / max(stats["tokens"], 1),
        "evidence_in_context": stats["found"] / max(stats["answerable"], 1),
    }


def write(out: Path, rows: dict[str, dict[str, dict]], example: str, *, command: str, before: dict) -> None:
    out.mkdir(parents=True, exist_ok=True)
    pooled: dict[str, dict] = {}
    for by_key in rows.values():
        for key, stats in by_key.items():
            into = pooled.setdefault(key, dict.fromkeys(stats, 0))
            for name, value in stats.items():
                into[name] += value
    table = {
        **{c: {k: summary(s) for k, s in by.items()} for c, by in rows.items()},
        "all": {k: summary(s) for k, s in pooled.items()},
    }
    for community, by_key in before.items():  # an earlier run's compact rows, for comparison
        for key, s in by_key.items():
            if key.startswith("compact @") and community in table:
                table[community][key.replace("compact", "compact before", 1)] = s
    (out / "results.json").write_text(json.dumps({"command": command, "results": table, "raw": rows}, indent=2))
    lines = [
        "# Citation headers: compact against full",
        "",
        f"Command: `{command}`",
        "",
        "Every question through the real webhook with `\"citations\": \"full\"` (labelled lines) and "
        "`\"compact\"` (a `[DOCUMENT]` line once for a run of one document's passages, then one line a "
        "passage), at the default request and at a `token_budget`. Tokens: cl100k. A header is the "
        "`[SOURCE n]` line with the `[DOCUMENT]` line above it if any, and, for `full`, the labelled lines "
        "through `Content:`. `compact before`: the one-line compact header of the run given as `--before` "
        "(document, section, page and binding on every `[SOURCE n]` line).",
        "",
        "| community | request | tokens per header | headers per answer | tokens per answer | headers' share "
        "| evidence in context |",
        "|---|---|---|---|---|---|---|",
    ]
    for community, by_key in table.items():
        for key, s in by_key.items():
            lines.append(
                f"| {community} | {key} | {s['tokens_per_header']:.1f} | {s['headers_per_answer']:.2f} | "
                f"{s['tokens_per_answer']:.0f} | {s['header_share']:.1%} | {s['evidence_in_context']:.3f} |"
            )
    lines += ["", "Compact headers of one answer:", "", "```", example, "```", ""]
    (out / "results.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
