"""Spanish questions about English documents, beside the same questions in English.

``questions-es.jsonl`` holds Spanish versions of hoa-dev questions, written as homeowners would
type them (accents and opening marks sometimes left out), each under its hoa-dev id. This script
makes an answer dataset of those questions in both languages (the evidence, gold document and
kind come from hoa-dev's own file; the community folders are linked, not copied), runs the
ordinary harness on it (``arc-retrieval eval DATASET --out DIR``) with the embedding model asked
for, and writes, per community, English beside Spanish: evidence in context, evidence in SOURCE 1
and status right, how many answers said the question's language could not be read, and how many
were decided on the language's own scale (whose anchors the harness's log gives, kept in
``language-scales.json``). ``compare`` checks the English answers against hoa-dev's benchmark.
e5 runs are slow (a passage a second or so on one core): run its communities as two jobs.

    python benchmarks/language/run.py run --model all-MiniLM-L6-v2 --out benchmarks/language/all-MiniLM-L6-v2
    python benchmarks/language/run.py run --model multilingual-e5-small \
        --communities franklin-square,heronwood,timbers --out benchmarks/language/multilingual-e5-small
    python benchmarks/language/run.py run --model multilingual-e5-small \
        --communities wyndham-forest --out benchmarks/language/multilingual-e5-small-wyndham-forest
    python benchmarks/language/run.py report benchmarks/language/all-MiniLM-L6-v2 \\
        benchmarks/language/multilingual-e5-small benchmarks/language/multilingual-e5-small-wyndham-forest
    python benchmarks/language/run.py compare benchmarks/language/all-MiniLM-L6-v2

``run`` needs ``../shared/datasets/hoa-dev`` (or ``--hoa-dev``); ``ARC_DATA_DIR`` keeps the
passage vectors between runs (``.arc-data/cache``), so a second run embeds only questions.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
NAMES = {"en": "English", "es": "Spanish", "fr": "French"}


def translated_questions(language: str) -> list[dict]:
    path = HERE / f"questions-{language}.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def both_languages(hoa_dev: Path, communities: set[str] | None, language: str = "es") -> list[dict]:
    """Each translated question and its English original, as harness questions ids ``en:ID``,
    ``LANGUAGE:ID``."""
    english = {row["id"]: row for row in map(json.loads, (hoa_dev / "questions.jsonl").read_text().splitlines())}
    rows = []
    for translated in translated_questions(language):
        original = english[translated["id"]]
        if translated["kind"] != original["kind"] or translated["community"] != original["community"]:
            raise SystemExit(f"{translated['id']}: kind or community differs from hoa-dev's")
        if communities and original["community"] not in communities:
            continue
        for code, text in (("en", original["question"]), (language, translated["question"])):
            rows.append({**original, "id": f"{code}:{original['id']}", "question": text})
    return rows


def make_dataset(hoa_dev: Path, communities: set[str] | None, folder: Path, language: str = "es") -> Path:
    rows = both_languages(hoa_dev, communities, language)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "questions.jsonl").write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8"
    )
    for community in sorted({r["community"] for r in rows}):
        (folder / community).symlink_to((hoa_dev / community).resolve(), target_is_directory=True)
    return folder


def run(args: argparse.Namespace) -> None:
    communities = set(args.communities.split(",")) if args.communities else None
    out = Path(args.out).resolve()
    with tempfile.TemporaryDirectory(prefix="language-") as tmp:
        folder = Path(tmp) / f"hoa-dev-en-{args.language}"
        dataset = make_dataset(Path(args.hoa_dev), communities, folder, args.language)
        env = {**os.environ, "EMBEDDING_PROVIDER": "local", "EMBEDDING_MODEL": args.model}
        command = [sys.executable, "-m", "worker.cli", "eval", str(dataset), "--out", str(out)]
        print(" ".join(command), file=sys.stderr, flush=True)
        scales = _run_keeping_scales(command, env)
    (out / "command.txt").write_text(" ".join(["python benchmarks/language/run.py", *sys.argv[1:]]) + "\n")
    (out / "language-scales.json").write_text(json.dumps(scales, indent=1) + "\n")


def _run_keeping_scales(command: list[str], env: dict[str, str]) -> list[dict]:
    """Run the harness, its log passed through; returns each calibration's language scales (from
    its log line) with the English anchors of the calibration they were measured with."""
    measured: list[dict] = []
    pending: dict | None = None
    with subprocess.Popen(
        command, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    ) as process:
        assert process.stderr is not None
        for line in process.stderr:
            sys.stderr.write(line)
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if record.get("msg") == "language scales measured":
                pending = record.get("scales")
            elif record.get("msg") == "status calibrated" and pending is not None:
                anchors = {k: record.get(k) for k in ("floor", "match", "near_miss")}
                measured.append({"anchors": anchors, "scales": pending})
                pending = None
    if process.returncode:
        raise SystemExit(f"the harness failed ({process.returncode})")
    return measured


def _mean(values: list[bool]) -> str:
    return f"{sum(values) / len(values):.2f}" if values else "-"


def _status_right(row: dict) -> bool:
    if row["kind"] == "answerable":
        return row["status"] == "success" and bool(row["evidence_in_context"])
    return row["status"] != "success"


def _unread(row: dict) -> bool:
    return any("was not understood" in w for w in row.get("warnings") or [])


def _scaled(row: dict) -> bool:
    return any("own scale" in w for w in row.get("warnings") or [])


def summary_rows(folders: list[Path]) -> tuple[list[tuple[str, str, dict[str, str]]], str, dict, dict]:
    """Per community and language (and ``all``), over every folder (one model's runs)."""
    rows: list[dict] = []
    calibrations: dict = {}
    scales: dict = {}
    model = ""
    for folder in folders:
        results = json.loads((folder / "results.json").read_text())
        model = results.get("embedding_model") or model
        rows += results["questions"]["arc-retrieval"]
        found = results.get("calibrations") or {}
        calibrations.update(found)
        measured = folder / "language-scales.json"
        for entry in json.loads(measured.read_text()) if measured.exists() else []:
            for community, anchors in found.items():
                if anchors and all(anchors.get(k) == v for k, v in entry["anchors"].items()):
                    scales[community] = entry["scales"]
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for row in rows:
        language = row["id"].split(":", 1)[0]
        groups[(row["community"], language)].append(row)
        groups[("all", language)].append(row)
    table = []
    for (community, language), found in sorted(groups.items(), key=lambda kv: (kv[0][0] == "all", kv[0])):
        answerable = [r for r in found if r["kind"] == "answerable"]
        statuses = defaultdict(int)
        for r in found:
            statuses[r["status"]] += 1
        table.append(
            (
                community,
                language,
                {
                    "questions": str(len(found)),
                    "evidence": _mean([bool(r["evidence_in_context"]) for r in answerable]),
                    "source1": _mean([bool(r["evidence_in_source1"]) for r in answerable]),
                    "status_right": _mean([_status_right(r) for r in found]),
                    "answerable_no_results": str(sum(r["status"] == "no_results" for r in answerable)),
                    "negatives_success": str(sum(r["status"] == "success" for r in found if r["kind"] != "answerable")),
                    "unread": str(sum(_unread(r) for r in found)),
                    "scaled": str(sum(_scaled(r) for r in found)),
                },
            )
        )
    return table, model, calibrations, scales


def _other_language(folder: Path) -> str:
    rows = json.loads((folder / "results.json").read_text())["questions"]["arc-retrieval"]
    return next((r["id"].split(":", 1)[0] for r in rows if not r["id"].startswith("en:")), "es")


def report(args: argparse.Namespace) -> None:
    lines = [
        "# Questions in other languages about English documents",
        "",
        "Spanish and French versions of hoa-dev questions (`questions-es.jsonl`, `questions-fr.jsonl`, "
        "written as homeowners type: accents and opening marks sometimes left out), each asked beside "
        'its English original through the webhook with nothing but `{"query": ...}`. Each cell is '
        "English / the other language. `unread`: answers that said the embedding model cannot read the "
        "question's language; `own scale`: answers whose status was decided on the language's own scale.",
        "",
    ]
    groups: dict[tuple[str, str], list[Path]] = defaultdict(list)
    for folder in map(Path, args.folders):
        model = json.loads((folder / "results.json").read_text()).get("embedding_model", "")
        groups[(model, _other_language(folder))].append(folder)
    for (model, other), folders in groups.items():
        table, model, calibrations, scales = summary_rows(folders)
        commands = [(f / "command.txt").read_text().strip() for f in folders if (f / "command.txt").exists()]
        lines += [f"## {model}, {NAMES.get(other, other)}", "", *(f"Command: `{c}`" + "  " for c in commands), ""]
        lines += [
            "| community | questions | evidence in context | SOURCE 1 | status right | "
            "answerable `no_results` | negatives `success` | unread | own scale |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        cells = {(community, language): c for community, language, c in table}
        for community in dict.fromkeys(community for community, _, _ in table):
            en, it = cells.get((community, "en"), {}), cells.get((community, other), {})

            def pair(key: str, en: dict = en, it: dict = it) -> str:
                return f"{en.get(key, '-')} / {it.get(key, '-')}"

            lines.append(
                f"| {community} | {pair('questions')} | {pair('evidence')} | {pair('source1')} | "
                f"**{pair('status_right')}** | {pair('answerable_no_results')} | "
                f"{pair('negatives_success')} | {pair('unread')} | {pair('scaled')} |"
            )
        lines += [
            "",
            "Calibration anchors (English, on the blended relevance): "
            + "; ".join(
                f"{c}: floor {v['floor']}, match {v['match']}, near miss {v['near_miss']}"
                for c, v in calibrations.items()
                if v
            ),
            "",
        ]
        if scales:
            lines += [
                f"{NAMES.get(other, other)} scales (on the vector leg's cosine): "
                + "; ".join(
                    f"{c}: floor {v['floor']}, match {v['match']}, near miss {v['near_miss']}, drop {v['drop']}"
                    for c, found in scales.items()
                    for code, v in found.items()
                    if code == other
                ),
                "",
            ]
    print("\n".join(lines))


COMPARED = ("status", "best_score", "evidence_in_context", "evidence_in_source1", "tokens")


def compare(args: argparse.Namespace) -> None:
    """The English answers of a run beside the hoa-dev benchmark's, question by question: with the
    default model, asking them beside Spanish ones must change none of them."""
    reference = {r["id"]: r for r in json.loads(Path(args.reference).read_text())["questions"]["arc-retrieval"]}
    same: dict[str, list[bool]] = defaultdict(list)
    for row in json.loads((Path(args.folder) / "results.json").read_text())["questions"]["arc-retrieval"]:
        language, question = row["id"].split(":", 1)
        if language != "en":
            continue
        before = reference[question]
        differs = [k for k in COMPARED if row.get(k) != before.get(k)]
        same[row["community"]].append(not differs)
        if differs:
            print(f"{question}: " + ", ".join(f"{k} {before.get(k)} -> {row.get(k)}" for k in differs))
    for community, found in sorted(same.items()):
        print(f"{community}: {sum(found)} of {len(found)} English answers identical ({', '.join(COMPARED)})")
    print(f"all: {sum(sum(f) for f in same.values())} of {sum(len(f) for f in same.values())} identical")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    one = sub.add_parser("run")
    one.add_argument("--model", required=True)
    one.add_argument("--out", required=True)
    one.add_argument("--communities", help="comma-separated (default: all four)")
    one.add_argument("--language", default="es", help="the translated questions: questions-LANGUAGE.jsonl")
    one.add_argument("--hoa-dev", default=str(ROOT.parent / "shared" / "datasets" / "hoa-dev"))
    both = sub.add_parser("report")
    both.add_argument("folders", nargs="+")
    same = sub.add_parser("compare")
    same.add_argument("folder")
    same.add_argument("--reference", default=str(ROOT / "benchmarks" / "answers" / "hoa-dev" / "results.json"))
    args = parser.parse_args()
    {"run": run, "report": report, "compare": compare}[args.command](args)


if __name__ == "__main__":
    main()
