"""Chunk granularity at equal tokens: today's chunks against a stock splitter's, overlap, and
passages that carry their neighbours' sentences (shipped for a caller-sized context).

Each variant runs the whole answer harness (``arc-retrieval eval``: every community ingested
through the normal path into its own database, every question through the webhook) with one
part of the pipeline patched here, and keeps per community: evidence in context and in SOURCE 1
at the worker's own tokens (the anchors given the same tokens per question) and at a
``token_budget`` of 500, 1,000 and 2,000, status right, negatives answered ``success``, and how
many chunks the documents made.

* ``today``: the shipped chunking (a section's blocks packed up to the model's 256 tokens).
* ``stock``: a stock loader's granularity: each document's text in reading order cut by
  ``RecursiveCharacterTextSplitter(1000, 200)``, each piece cited by the section and page it
  begins in; embedded, searched and assembled by the worker (the model reads its first 256 tokens).
* ``overlap``: today's chunks, each that follows another of its section opening with that
  chunk's last sentence (when the whole still fits the model; the sentences are packed to 224
  tokens so that it usually does).
* ``carry``: today's chunks, embedded as today; in every context each passage is shown with the
  sentence before it and the sentence after it (from the chunks around it, in its section) while
  the budget has room, SOURCE 1 first. The pipeline does this for a context the caller sized
  (``token_budget``), so ``today`` now carries at the budgets too; the committed ``today``
  figures were measured before it did.
* ``fill``: today's chunks; a caller's ``token_budget`` is filled to the token with the beginning
  of the best ranked chunk not yet in (cut, marked "…", at least 24 tokens of text).
* ``carry-fill``: ``carry``, then ``fill`` with the room left.

Passage vectors are cached under ``ARC_DATA_DIR/cache`` (give each variant its own data dir);
``ARC_STATEMENT_TIMEOUT_MS=120000`` lets a loaded machine ingest the long declarations.

    ARC_STATEMENT_TIMEOUT_MS=120000 ARC_DATA_DIR=DATA/VARIANT python benchmarks/granularity.py \\
        run HOA_DEV VARIANT --out benchmarks/granularity
    python benchmarks/granularity.py report --out benchmarks/granularity
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

from worker.config import Settings
from worker.embeddings import CachedEmbedder, build_embedder
from worker.evaluation import anchors
from worker.evaluation import answer_harness as harness
from worker.evaluation.answers import load_answer_dataset, summarise
from worker.ingest import chunking
from worker.ingest.ingestor import Ingestor
from worker.models import ChunkResult
from worker.retrieve import context as context_stage

VARIANTS = ("today", "stock", "overlap", "carry", "fill", "carry-fill")
BUDGETS = (500, 1000, 2000)
ARC = harness.ARC
SAME = {"n8n": "n8n default, same tokens", "hybrid": "hybrid, same tokens"}
STOCK_SIZE, STOCK_OVERLAP = 1000, 200
OVERLAP_PACK = 224  # the sentences of an ``overlap`` chunk, packed below the model's 256
MIN_CUT_TOKENS = 24


# -- chunking variants ------------------------------------------------------------------------------


def stock_chunks(blocks: list[chunking.Block]) -> list[chunking.Chunk]:
    """A document's blocks in reading order as one text, cut as a stock loader cuts it."""
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    text, starts = "", []
    for block in blocks:
        starts.append(len(text))
        text += block.text + "\n\n"
    splitter = RecursiveCharacterTextSplitter(chunk_size=STOCK_SIZE, chunk_overlap=STOCK_OVERLAP, add_start_index=True)
    chunks = []
    for i, piece in enumerate(splitter.create_documents([text])):
        at = piece.metadata["start_index"]
        block = blocks[max(j for j, s in enumerate(starts) if s <= at)] if at >= 0 else blocks[0]
        path = chunking.SECTION_SEPARATOR.join(block.section)
        chunks.append(chunking.Chunk(i, path, piece.page_content, block.page))
    return chunks


def last_sentence(text: str) -> str:
    return chunking.SENTENCE_END.split(text.strip())[-1].strip()


def overlapped(chunks: list[chunking.Chunk], count: Callable[[str], int], limit: int) -> list[chunking.Chunk]:
    """Each chunk that follows another of its section opens with that chunk's last sentence, when
    the whole (heading path included) still fits ``limit``."""
    out = []
    for i, chunk in enumerate(chunks):
        before = chunks[i - 1] if i else None
        content = chunk.content
        if before is not None and before.section_path == chunk.section_path and not chunking.is_table(before.content):
            repeated = last_sentence(before.content)
            candidate = f"{repeated}\n\n{content}"
            if repeated and count(chunk.section_path) + 4 + count(candidate) <= limit:
                content = candidate
        out.append(chunking.Chunk(chunk.chunk_index, chunk.section_path, content, chunk.page_number))
    return out


def patch_chunking(variant: str, stats: dict) -> None:
    shipped = Ingestor.chunk

    def chunk(self: Ingestor, parsed) -> list[chunking.Chunk]:
        if variant == "stock":
            made = stock_chunks(list(parsed.blocks))
        elif variant == "overlap":
            packed = chunking.chunk_blocks(parsed.blocks, self.embedder.count_tokens, OVERLAP_PACK)
            made = overlapped(packed, self.embedder.count_tokens, self.max_chunk_tokens)
        else:
            made = shipped(self, parsed)
        counts = [self.embedder.count_tokens(c.embedding_text(parsed.title)) for c in made]
        stats.setdefault("chunks", 0)
        stats["chunks"] += len(made)
        stats.setdefault("model_tokens", []).extend(counts)
        return made

    Ingestor.chunk = chunk  # type: ignore[method-assign]


# -- context variants -------------------------------------------------------------------------------


def patch_context(variant: str) -> None:
    shipped = context_stage.assemble

    def assemble(ranked: list[ChunkResult], **kw) -> context_stage.Context:
        if "carry" in variant:
            kw["carry"] = True  # every context, not only one a caller sized (the pipeline's rule)
        built = shipped(ranked, **kw)
        citations = kw.get("citations", "compact")
        # a budget the caller set alone: the pipeline fills with the whole ranking (fill = len(ranked))
        if "fill" in variant and ranked and kw.get("fill") == len(ranked) and built.chunks:
            built = filled(built, ranked, kw["counter"], kw["token_budget"], citations)
        return built

    context_stage.assemble = assemble  # type: ignore[assignment]


def filled(built, ranked, counter, budget: int, citations) -> context_stage.Context:
    """``built`` with the room left given to the beginning of the best ranked chunk not in it."""
    ids = {c.id for c in built.chunks}
    rest = next((c for c in ranked if c.id not in ids), None)
    if rest is None:
        return built
    room = budget - built.tokens
    keep = counter.count(rest.content)
    best = built
    lo, hi = MIN_CUT_TOKENS, min(keep, room)
    while lo <= hi:  # the longest beginning whose whole context fits
        mid = (lo + hi) // 2
        cut = rest.model_copy(update={"content": counter.truncate(rest.content, mid).rstrip() + " …"})
        rendered = context_stage._render([*built.chunks, cut], counter, citations)
        if rendered.tokens <= budget:
            best, lo = rendered, mid + 1
        else:
            hi = mid - 1
    return best


# -- a run ------------------------------------------------------------------------------------------


def run(dataset_dir: Path, variant: str, out: Path) -> None:
    settings = Settings.from_env()
    embedder = CachedEmbedder(build_embedder(settings), maxsize=100_000)
    anchors.BUDGETS = BUDGETS  # the budgets of point 4; 4,000 holds the default context whole
    chunk_stats: dict[str, dict] = {}
    current: dict = {}
    shipped_each = harness.each_community

    def each(*a, **k):
        for loaded in shipped_each(*a, **k):
            chunk_stats[loaded.community] = dict(current)
            current.clear()
            yield loaded

    harness.each_community = each
    patch_chunking(variant, current)
    patch_context(variant)
    settings.database.data_dir.mkdir(parents=True, exist_ok=True)
    results = harness.evaluate_answers(
        load_answer_dataset(dataset_dir),
        settings=settings,
        embedder=embedder,
        data_dir=settings.database.data_dir.resolve(),
        progress=False,
    )
    data = results.to_json()
    worker_at = results.budgets.at_budget[ARC]
    communities = results.communities()
    summary = {}
    for c in [*communities, "all"]:

        def mine(outcomes, c=c):
            return [o for o in outcomes if c == "all" or o.question.community == c]

        own = summarise(mine(results.outcomes[ARC]))
        row = {
            "own": _point(own),
            "status_right": own["status_right"],
            "negatives_success": own["negatives_success"],
            "hedged": own["hedged"],
        }
        for key, name in SAME.items():
            row[f"own {key}"] = _point(summarise(mine(results.budgets.equal_tokens[name])))
        for b in BUDGETS:
            row[str(b)] = _point(summarise(mine(worker_at[b])))
            for key, name in (("n8n", harness.N8N), ("hybrid", harness.HYBRID)):
                row[f"{b} {key}"] = _point(summarise(mine(results.budgets.at_budget[name][b])))
        if c != "all":
            tokens = chunk_stats.get(c, {}).get("model_tokens", [])
            row["chunks"] = len(tokens)
            row["mean_chunk_model_tokens"] = sum(tokens) / max(len(tokens), 1)
            row["chunks_over_256"] = sum(t > 256 for t in tokens)
        summary[c] = row
    questions = [
        {
            "id": o.question.id,
            "community": o.question.community,
            "kind": o.question.kind,
            "status": o.status,
            "own": [o.in_context, o.in_source1, o.tokens],
            **{str(b): [x.in_context, x.in_source1, x.tokens] for b in BUDGETS for x in [worker_at[b][i]]},
        }
        for i, o in enumerate(results.outcomes[ARC])
    ]
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{variant}.json").write_text(
        json.dumps(
            {
                "variant": variant,
                "command": "python benchmarks/granularity.py " + " ".join(sys.argv[1:]),
                "calibrations": data["calibrations"],
                "communities": summary,
                "questions": questions,
            },
            indent=1,
        )
        + "\n"
    )


def _point(s: dict) -> dict:
    return {
        "evidence": s["evidence_in_context"],
        "source1": s["evidence_in_source1"],
        "tokens": s["mean_context_tokens"],
    }


# -- the report -------------------------------------------------------------------------------------


def holds(row: dict, today: dict) -> dict[str, bool]:
    """Point 4's tests for one community: evidence at least the best anchor's at the same tokens
    (own, 1,000, 2,000), SOURCE 1 not below today's, negatives ``success`` not above today's."""
    checks = {}
    for at in ("own", "1000", "2000"):
        anchor = max(row[f"{at} n8n"]["evidence"], row[f"{at} hybrid"]["evidence"])
        checks[f"evidence >= best anchor @ {at}"] = row[at]["evidence"] >= anchor - 1e-9
    checks["SOURCE 1 not below today's (own, 1000, 2000)"] = all(
        row[at]["source1"] >= today[at]["source1"] - 1e-9 for at in ("own", "1000", "2000")
    )
    checks["negatives success not higher"] = row["negatives_success"] <= today["negatives_success"] + 1e-9
    return checks


def report(out: Path) -> None:
    runs = {v: json.loads((out / f"{v}.json").read_text()) for v in VARIANTS if (out / f"{v}.json").exists()}
    if "today" not in runs:
        raise SystemExit("the today run is needed first")
    today = runs["today"]["communities"]
    communities = [c for c in today if c != "all"]
    lines = [
        "# Chunk granularity at equal tokens (hoa-dev)",
        "",
        "Each variant runs the whole answer harness with one part of the pipeline patched "
        "(`benchmarks/granularity.py`; what each variant is: its docstring). Local model, reranker off, "
        "answers asked after calibration. Commands (one process a variant, each with its own "
        "`ARC_DATA_DIR` for its passage vectors):",
        "",
        "```",
        *[
            f"ARC_STATEMENT_TIMEOUT_MS=120000 ARC_DATA_DIR=DATA/{v} python benchmarks/granularity.py run HOA_DEV {v} "
            "--out benchmarks/granularity"
            for v in runs
        ],
        "python benchmarks/granularity.py report --out benchmarks/granularity",
        "```",
        "",
        "What the numbers say, and why nothing is shipped: docs/answer-quality.md, *Alternatives measured*.",
        "",
        "## Chunks",
        "",
        "| variant | " + " | ".join(communities) + " |",
        "|---|" + "---|" * len(communities),
    ]
    for v, r in runs.items():
        cells = [
            f"{r['communities'][c]['chunks']} ({r['communities'][c]['mean_chunk_model_tokens']:.0f} tokens, "
            f"{r['communities'][c]['chunks_over_256']} over 256)"
            for c in communities
        ]
        lines.append(f"| {v} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Chunks a community's documents made (mean model tokens of what is embedded: document name, "
        "section path and text; the model reads 256).",
        "",
        "## Evidence in context / in SOURCE 1, at equal tokens",
        "",
        "`own`: the default request (mean context tokens in brackets), each anchor given the worker's "
        "tokens per question; `1000`, `2000`: `token_budget` in the request, the anchors cut at it. "
        "The anchors (n8n default / hybrid top-5) read the same files whatever the variant.",
        "",
        "| community | variant | own | n8n / hybrid at own | 1000 | n8n / hybrid | 2000 | n8n / hybrid | 500 "
        "| status right | negatives `success` |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in [*communities, "all"]:
        for v, r in runs.items():
            row = r["communities"][c]
            cells = [f"{_pair(row['own'])} ({row['own']['tokens']:.0f})", _anchors(row, "own")]
            for b in ("1000", "2000"):
                cells += [f"{_pair(row[b])} ({row[b]['tokens']:.0f})", _anchors(row, b)]
            cells += [_pair(row["500"]), _f(row["status_right"]), _f(row["negatives_success"])]
            lines.append(f"| {c} | {v} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "## Point 4 per variant",
        "",
        "On every community: evidence in context at least the best anchor's at the same tokens (own, "
        "1,000, 2,000), SOURCE 1 not below `today`'s at any of the three, negatives `success` not "
        "above `today`'s. The communities that fail a test are named.",
        "",
        "| variant | " + " | ".join(holds(today[communities[0]], today[communities[0]])) + " |",
        "|---|" + "---|" * 5,
    ]
    for v, r in runs.items():
        failing: dict[str, list[str]] = {}
        for c in communities:
            for name, ok in holds(r["communities"][c], today[c]).items():
                failing.setdefault(name, [])
                if not ok:
                    failing[name].append(c)
        lines.append(f"| {v} | " + " | ".join(", ".join(f) or "all hold" for f in failing.values()) + " |")
    lines += ["", *_changes(runs), ""]
    (out / "results.md").write_text("\n".join(lines))
    print("\n".join(lines))


def _changes(runs: dict) -> list[str]:
    """Per variant, the questions whose evidence entered or left the context against ``today``."""
    base = {q["id"]: q for q in runs["today"]["questions"]}
    lines = [
        "## Questions that change against `today`",
        "",
        "Answerable questions whose evidence entered (+) or left (-) the context, per request.",
        "",
        "| variant | request | + | - |",
        "|---|---|---|---|",
    ]
    for v, r in runs.items():
        if v == "today":
            continue
        for at in ("own", *[str(b) for b in BUDGETS]):
            gained = [
                q["id"] for q in r["questions"] if q["kind"] == "answerable" and q[at][0] and not base[q["id"]][at][0]
            ]
            lost = [
                q["id"] for q in r["questions"] if q["kind"] == "answerable" and not q[at][0] and base[q["id"]][at][0]
            ]
            lines.append(f"| {v} | {at} | {', '.join(gained) or '-'} | {', '.join(lost) or '-'} |")
    return lines


def _anchors(row: dict, at: str) -> str:
    return f"{_f(row[f'{at} n8n']['evidence'])} / {_f(row[f'{at} hybrid']['evidence'])}"


def _pair(point: dict) -> str:
    return f"{_f(point['evidence'])} / {_f(point['source1'])}"


def _f(value) -> str:
    return "-" if value is None else f"{value:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    one = sub.add_parser("run")
    one.add_argument("dataset", type=Path)
    one.add_argument("variant", choices=VARIANTS)
    one.add_argument("--out", type=Path, required=True)
    both = sub.add_parser("report")
    both.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    if args.command == "run":
        run(args.dataset, args.variant, args.out)
    else:
        report(args.out)


if __name__ == "__main__":
    main()
