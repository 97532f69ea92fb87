"""Confirmed answers, measured: what a keeper's confirmation does for the next homeowner.

Each community of an answer dataset gets its own knowledge base, filled and calibrated as
``arc-retrieval eval`` does (worker/evaluation/answer_harness.py); every question goes through
the retrieval webhook with the agents' token, every confirmation through
``POST /webhook/arc-confirm`` with the keeper's (ingest) token, as a deployment would see them.
Per community:

* **before**: every question, original or rewording, asked with no confirmation;
* **(a)** the originals that a rewording rewords are confirmed: an answerable one with the chunk
  holding its evidence (worker/evaluation/rewordings.py finds it from the documents API's
  chunks, the way the harness judges evidence), an unanswerable or off-topic one as
  ``"answer": "none"``;
* **(b)** the rewordings are asked: their evidence in ``[SOURCE 1]`` and their status right
  (goals: 0.95 and 0.95);
* **(c)** every other original is asked with those confirmations in place and compared with
  *before*: evidence and SOURCE 1 within 0.01, status right not lower; each question whose
  evidence, SOURCE 1 or status changed is listed;
* **(d)** the confirmations are removed, a fixed seeded half of the originals (answerable and
  unanswerable alike) is confirmed and the other half asked: its status right against *before*
  (goal: 0.78 on every community).

Rewordings are lines of the dataset's own format with ``of`` naming the original: the dataset's
``questions.jsonl`` lines that carry ``of``, and those of ``--rewordings`` (by default this
folder's hoa-dev file when the dataset carries none of its own).

    python benchmarks/confirmations.py /work/shared/datasets/hoa-dev
    python benchmarks/confirmations.py DATASET --rewordings FILE --out DIR --community NAME
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from worker.config import Settings  # noqa: E402
from worker.embeddings import CachedEmbedder, build_embedder  # noqa: E402
from worker.evaluation.answer_harness import VectorCache, each_community  # noqa: E402
from worker.evaluation.confirmation_harness import measure_community  # noqa: E402
from worker.evaluation.rewordings import has_rewordings, load_with_rewordings  # noqa: E402

HERE = Path(__file__).resolve().parent / "confirmations"
DEFAULT_REWORDINGS = HERE / "hoa-dev-rewordings.jsonl"
SEED = 57
GOAL_REWORDINGS = 0.95  # SOURCE 1 and status right on the rewordings
TOLERANCE = 0.01  # evidence and SOURCE 1 of the other questions
GOAL_HALF = 0.78  # status right on the held-out half
QUALITY_TIMEOUT_MS = 120_000


# -- report -----------------------------------------------------------------------------------


def _c(value) -> str:
    return "-" if value is None else f"{value:.2f}" if isinstance(value, float) else str(value)


def _goal(ok: bool) -> str:
    return "yes" if ok else "**no**"


def _matched(confirmed: dict | None) -> str:
    """The confirmation an answer took: its query and similarity."""
    if not confirmed:
        return "-"
    return f"{confirmed.get('query', '')[:60]!r} ({_c(confirmed.get('similarity'))})".replace("|", "/")


def report(data: dict, command: str) -> str:
    communities = data["communities"]
    lines = [
        f"# Confirmed answers: {data['dataset']}",
        "",
        f"Embedding model {data['embedding_model']}, reranker {data['reranker']}; each community its own "
        "knowledge base, its status calibrated before the first question; questions through the retrieval "
        "webhook with the agents' token, confirmations through `POST /webhook/arc-confirm` with the keeper's.",
        "",
        f"Command: `{command}`",
        "",
        f"Rewordings: {data['rewordings_source']}.",
        "",
        "## (b) The rewordings, their originals confirmed",
        "",
        f"Goals: evidence in SOURCE 1 >= {GOAL_REWORDINGS} (answerable) and status right >= {GOAL_REWORDINGS} "
        "(all). *before*: the same rewordings with no confirmation.",
        "",
        "| community | rewordings (answerable / negative) | originals confirmed | SOURCE 1 before | SOURCE 1 | "
        "status right before | status right | decided on a confirmation | goals met | "
        "the originals asked again: SOURCE 1, status right |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in communities:
        r = c["rewordings"]
        b, a, o = r["before"], r["after"], r["originals_after"]
        met = (a["evidence_in_source1"] or 0) >= GOAL_REWORDINGS and (a["status_right"] or 0) >= GOAL_REWORDINGS
        lines.append(
            f"| {c['community']} | {a['questions']} ({a['answerable']} / {a['negatives']}) | "
            f"{r['confirmed_originals']} | {_c(b['evidence_in_source1'])} | {_c(a['evidence_in_source1'])} | "
            f"{_c(b['status_right'])} | {_c(a['status_right'])} | {_c(a['decided_on_confirmed'])} | {_goal(met)} | "
            f"{_c(o['evidence_in_source1'])}, {_c(o['status_right'])} |"
        )
    lines += [
        "",
        "## (c) Every other question, with those confirmations in place",
        "",
        f"Evidence and SOURCE 1 within {TOLERANCE} of no confirmations, status right not lower: a confirmation "
        "never takes a question it does not answer.",
        "",
        "| community | questions | evidence before | evidence | SOURCE 1 before | SOURCE 1 | status right before | "
        "status right | changed | within |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in communities:
        b, a = c["others"]["before"], c["others"]["after"]
        ok = (
            abs((a["evidence_in_context"] or 0) - (b["evidence_in_context"] or 0)) <= TOLERANCE
            and abs((a["evidence_in_source1"] or 0) - (b["evidence_in_source1"] or 0)) <= TOLERANCE
            and (a["status_right"] or 0) >= (b["status_right"] or 0)
        )
        lines.append(
            f"| {c['community']} | {a['questions']} | {_c(b['evidence_in_context'])} | "
            f"{_c(a['evidence_in_context'])} | "
            f"{_c(b['evidence_in_source1'])} | {_c(a['evidence_in_source1'])} | {_c(b['status_right'])} | "
            f"{_c(a['status_right'])} | {len(c['others']['changed'])} | {_goal(ok)} |"
        )
    lines += [
        "",
        "## (d) Half of a community's questions confirmed, the other half asked",
        "",
        f"A fixed split (seed {data['seed']}, each kind halved): status right on the held-out half with no "
        f"confirmation (today) and with the other half confirmed. Goal: >= {GOAL_HALF} on every community.",
        "",
        "| community | confirmed | held out | status right today | status right | evidence today | evidence | "
        "SOURCE 1 today | SOURCE 1 | changed | goal met |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in communities:
        h = c["half"]
        b, a = h["before"], h["after"]
        lines.append(
            f"| {c['community']} | {h['confirmed']} | {h['held_out']} | {_c(b['status_right'])} | "
            f"{_c(a['status_right'])} | {_c(b['evidence_in_context'])} | {_c(a['evidence_in_context'])} | "
            f"{_c(b['evidence_in_source1'])} | {_c(a['evidence_in_source1'])} | {len(h['changed'])} | "
            f"{_goal((a['status_right'] or 0) >= GOAL_HALF)} |"
        )
    lines += [
        "",
        "## Rewordings that missed",
        "",
        "An answerable rewording whose evidence is not in SOURCE 1 or whose status is not `success`, a negative "
        "one answered `success`. *cosine*: the rewording against its original (the embedding model's); "
        "*rank*: the original's rank among the confirmed questions by cosine to the rewording (1: the nearest); "
        "*matched*: the confirmation the answer names (its query and similarity) when it names one; "
        "*evidence at*: the SOURCE holding the evidence.",
        "",
        "| community | id | of | kind | status | decided on | cosine | rank | matched | evidence at | rewording | "
        "original |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in communities:
        for q in c["rewordings"]["questions"]:
            if q["status_right"] and q["evidence_in_source1"] is not False:
                continue
            m = q["confirmed"]
            matched = _matched(m)
            lines.append(
                f"| {c['community']} | {q['id']} | {q['of']} | {q['kind']} | {q['status']} | "
                f"{q['decided_on'] or '-'} | "
                f"{q['cosine_to_original']:.3f} | {q['original_rank']} | {matched} | {_c(q['evidence_source'])} | "
                f"{q['question'].replace('|', '/')} | {q['original'].replace('|', '/')} |"
            )
    for part, title in (("others", "(c)"), ("half", "(d)")):
        lines += [
            "",
            f"## Questions that changed in {title}",
            "",
            "| community | id | kind | status before | status | evidence before | evidence | SOURCE 1 before | "
            "SOURCE 1 | decided on | matched | question |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for c in communities:
            for ch in c[part]["changed"]:
                b, a = ch["before"], ch["after"]
                lines.append(
                    f"| {c['community']} | {ch['id']} | {a['kind']} | {b['status']} | {a['status']} | "
                    f"{_c(b['evidence_in_context'])} | {_c(a['evidence_in_context'])} | "
                    f"{_c(b['evidence_in_source1'])} | "
                    f"{_c(a['evidence_in_source1'])} | {a['decided_on'] or '-'} | "
                    f"{_matched(a['confirmed'])} | {ch['question'].replace('|', '/')} |"
                )
    unconfirmable = [(c["community"], q) for c in communities for q in c["rewordings"]["unconfirmable"]]
    lines += [
        "",
        "Answerable originals whose evidence no chunk holds, left unconfirmed: "
        + (", ".join(f"{c} {q}" for c, q in unconfirmable) or "none")
        + ". An evidence phrase cut by a chunk boundary names the chunk holding its longest piece: "
        + (
            ", ".join(
                f"{c['community']} {k}"
                for c in communities
                for k, v in c["rewordings"]["evidence_chunks"].items()
                if v["found"] == "partial"
            )
            or "none"
        )
        + ".",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset", type=Path, help="an answer dataset folder (questions.jsonl + community folders)")
    parser.add_argument(
        "--rewordings",
        default=None,
        help="a questions file of rewordings (lines with `of`); `none` for only the dataset's own; "
        "default: the dataset's own lines with `of`, else benchmarks/confirmations/hoa-dev-rewordings.jsonl",
    )
    parser.add_argument("--out", type=Path, default=HERE)
    parser.add_argument("--community", action="append", default=[], help="only these communities (repeatable)")
    parser.add_argument("--seed", type=int, default=SEED, help="the seed of (d)'s split")
    args = parser.parse_args(argv)

    own = has_rewordings(args.dataset)
    if args.rewordings == "none":
        rewordings_file = None
    elif args.rewordings:
        rewordings_file = Path(args.rewordings)
    else:
        rewordings_file = None if own else DEFAULT_REWORDINGS
    dataset, rewording_set = load_with_rewordings(args.dataset, rewordings_file)
    if not rewording_set.rewordings:
        parser.error("no rewordings: the dataset has no lines with `of` and no --rewordings file was given")

    from worker.store.embedded import exit_on_signals

    exit_on_signals()
    settings = Settings.from_env().replace(
        api_token=secrets.token_urlsafe(24),
        ingest_token=secrets.token_urlsafe(24),
        # a shared, loaded machine must not fail a calibration's search on the serving timeout
        statement_timeout_ms=QUALITY_TIMEOUT_MS,
    )
    embedder = CachedEmbedder(build_embedder(settings), maxsize=100_000)
    data_dir = settings.database.data_dir.resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    cache = VectorCache.of_passages(data_dir, embedder)
    communities = []
    for loaded in each_community(
        dataset, settings=settings, embedder=embedder, cache=cache, data_dir=data_dir, only=args.community
    ):
        cache.save()
        print(f"{loaded.community}: measuring", file=sys.stderr, flush=True)
        communities.append(
            measure_community(loaded, rewording_set, settings=settings, embedder=embedder, seed=args.seed)
        )
    data = {
        "dataset": dataset.name,
        "embedding_model": embedder.model,
        "reranker": "on" if settings.reranking.reranker == "llm" else "off",
        "rewordings_source": ("the dataset's own lines with `of`" if own else "")
        + (f"{' and ' if own else ''}`{_shown(rewordings_file)}`" if rewordings_file else ""),
        "seed": args.seed,
        "communities": communities,
    }
    command = ".venv/bin/python benchmarks/confirmations.py " + " ".join(
        _shown(Path(a)) if "/" in a else a for a in sys.argv[1:]
    )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(data, indent=1) + "\n")
    (args.out / "results.md").write_text(report(data, command))
    print((args.out / "results.md").read_text())


def _shown(path: Path) -> str:
    """A path as the report shows it: relative to the repository when inside it."""
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


if __name__ == "__main__":
    main()
