"""Dated questions on hoa-dev: the evidence in force that day, and no passage that was not.

``questions.jsonl`` holds questions over the hoa-dev communities that have amendments or replaced
documents (Franklin Square: eight recorded amendments, one superseding another; Wyndham Forest:
two amendments and dated design standards), each with the date it is asked as of (``as_of``),
the phrases of the evidence in force that day (``evidence``) and of the evidence in force now
(``now_evidence``); a line naming ``hoa_dev`` takes its question and evidence from hoa-dev's own
file. ``documents.json`` holds the day each document took effect, read from the documents
themselves, and the sections each amendment replaces: this script passes them at ingest
(``effective_date``, ``amends`` on the manifest entries), the dataset stays as it is.

Each question is asked twice through the retrieval webhook, with ``as_of`` and without, and
scored on the context the agent gets: the evidence in it, and the passages in it that were not in
force on the day asked (``as_of``; today for the answers without it), judged from
``documents.json`` alone (a document not yet in effect, one superseded by then, a section an
amendment in effect by then replaced), not from what the worker marked.

    .venv/bin/python benchmarks/as_of/run.py --hoa-dev ../shared/datasets/hoa-dev --out benchmarks/as_of
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

import psycopg

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT))

from worker.config import Settings  # noqa: E402
from worker.embeddings import CachedEmbedder, LocalEmbedder  # noqa: E402
from worker.evaluation.answer_harness import VectorCache  # noqa: E402
from worker.evaluation.answers import evidence_found  # noqa: E402
from worker.ingest.ingestor import Ingestor, embedding_texts  # noqa: E402
from worker.ingest.manifest import load_manifest  # noqa: E402
from worker.models import Amendment  # noqa: E402
from worker.runtime import Runtime  # noqa: E402
from worker.sections import amends as section_amends  # noqa: E402
from worker.serve.app import create_app  # noqa: E402
from worker.service.build import build_retriever  # noqa: E402
from worker.store.database import Database  # noqa: E402
from worker.store.embedded import EmbeddedPostgres  # noqa: E402


@dataclass
class Dated:
    """What documents.json says of one document, with the manifest's supersedes."""

    effective_date: date | None = None
    amends: list[Amendment] = field(default_factory=list)
    supersedes: str | None = None


def documents_of(community: str, manifest, overlay: dict) -> dict[str, Dated]:
    given = overlay.get(community, {})
    out = {}
    for entry in manifest.documents:
        extra = given.get(entry.document_id, {})
        out[entry.document_id] = Dated(
            date.fromisoformat(extra["effective_date"]) if extra.get("effective_date") else None,
            [Amendment(a["document_id"], tuple(a["sections"])) for a in extra.get("amends", [])],
            entry.supersedes,
        )
    return out


def was_in_force(chunk: dict, day: date, documents: dict[str, Dated]) -> bool:
    """The ground truth, from documents.json: the chunk's document had taken effect by ``day``,
    nothing in effect by then superseded it or replaced its section."""
    own = documents[chunk["document_id"]]
    if own.effective_date is not None and own.effective_date > day:
        return False
    for other_id, other in documents.items():
        in_effect = other.effective_date is None or other.effective_date <= day
        if not in_effect:
            continue
        if other.supersedes == chunk["document_id"]:
            return False
        for amendment in other.amends:
            if amendment.document_id == chunk["document_id"] and any(
                section_amends(s, chunk["section_path"]) for s in amendment.sections
            ):
                return False
    return True


def load_questions(hoa_dev: Path) -> list[dict]:
    hoa = {q["id"]: q for q in map(json.loads, (hoa_dev / "questions.jsonl").read_text().splitlines())}
    rows = []
    for line in (HERE / "questions.jsonl").read_text().splitlines():
        row = json.loads(line)
        if "hoa_dev" in row:
            source = hoa[row["hoa_dev"]]
            row = {**row, "question": source["question"], "evidence": source["evidence"],
                   "now_evidence": source["evidence"], "gold_document": source["gold_document"]}
        rows.append(row)
    return rows


def ask(client, community: str, question: str, **more) -> dict:
    # each community has a database of its own, holding it alone
    response = client.post("/webhook/arc-retrieval", json={"query": question, **more})
    if response.status_code != 200:
        raise RuntimeError(f"{question!r}: {response.status_code} {response.get_json()}")
    return response.get_json()


def evidence_rank(client, community: str, question: str, evidence: list[str], **more) -> int | None:
    """Where a missed question's evidence ranks among the first 20 candidates (1 = first), asked
    again with no minimum relevance; None: not among them."""
    wide = ask(client, community, question, top_k=20, min_relevance=0, **more)
    return next((i for i, c in enumerate(wide["chunks"], 1) if evidence_found(evidence, c["content"])), None)


def score(answer: dict, evidence: list[str], day: date, documents: dict[str, Dated]) -> dict:
    in_context = [c for c in answer["chunks"] if c["source"] is not None]
    out_of_force = sorted({f"{c['document_id']} > {c['section_path']}" for c in in_context
                           if not was_in_force(c, day, documents)})
    return {
        "evidence": evidence_found(evidence, answer["context"]),
        "not_in_force": out_of_force,
        "status": answer["status"],
        "tokens": answer["context_tokens"],
        "undated_warning": any(w.startswith("as_of ") for w in answer["warnings"]),
        "documents": sorted({c["document_id"] for c in in_context}),
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hoa-dev", type=Path, default=ROOT.parent / "shared" / "datasets" / "hoa-dev")
    parser.add_argument("--out", type=Path, default=HERE)
    parser.add_argument("--data-dir", type=Path, default=ROOT / ".arc-data")
    parser.add_argument("--only", default="", help="comma-separated question ids (a look at a few; no report)")
    args = parser.parse_args(argv)
    overlay = json.loads((HERE / "documents.json").read_text())
    questions = load_questions(args.hoa_dev)
    if args.only:
        questions = [q for q in questions if q["id"] in args.only.split(",")]
    today = date.today()
    embedder = CachedEmbedder(LocalEmbedder())
    cache = VectorCache.of_passages(args.data_dir, embedder)
    workdir = Path(tempfile.mkdtemp(prefix="as-of-", dir=args.data_dir))
    server = EmbeddedPostgres(workdir, runtime_dir=args.data_dir)
    results = []
    try:
        server_url = server.start()
        for community in sorted({q["community"] for q in questions}):
            manifest = load_manifest(args.hoa_dev / community)
            documents = documents_of(community, manifest, overlay)
            name = f"asof_{community.replace('-', '_')}_{uuid.uuid4().hex[:6]}"
            with psycopg.connect(server_url, autocommit=True) as conn:
                conn.execute(f'create database "{name}"')
            url = server_url.replace("/postgres?", f"/{name}?", 1)
            db = Database(url, statement_timeout_ms=600_000)  # a loaded machine: the load is not what is measured
            try:
                db.migrate(embedder.dim)
                ingestor = Ingestor(db, embedder)
                prepared = []
                for entry in manifest.documents:
                    extra = overlay.get(community, {}).get(entry.document_id, {})
                    dated = entry.model_copy(update={
                        "effective_date": documents[entry.document_id].effective_date,
                        "amends": [Amendment(a["document_id"], tuple(a["sections"])) for a in extra.get("amends", [])]
                        or entry.amends,
                    })
                    prepared.append(ingestor.prepare_file(manifest.path_of(dated), dated.document_fields()))
                ingestor.write(prepared, cache.embed(embedding_texts(prepared)))
                cache.save()
                settings = Settings.from_env({}, data_dir=args.data_dir, database_url=url, rate_limit=0)
                runtime = Runtime(settings, db, embedder)
                retriever = build_retriever(runtime)
                retriever.calibrate_now()
                client = create_app(runtime=runtime, retriever=retriever).test_client()
                for q in (q for q in questions if q["community"] == community):
                    day = date.fromisoformat(q["as_of"])
                    start = time.perf_counter()
                    dated_answer = ask(client, community, q["question"], as_of=q["as_of"])
                    dated_ms = (time.perf_counter() - start) * 1000
                    start = time.perf_counter()
                    now_answer = ask(client, community, q["question"])
                    now_ms = (time.perf_counter() - start) * 1000
                    if args.only:
                        for label, body in (("as_of", dated_answer), ("now", now_answer)):
                            print(q["id"], label, body["status"], body["context_tokens"], [
                                (c["document_id"][-20:], c["section_path"][-40:], c["source"], round(c["final_score"], 3))
                                for c in body["chunks"]])
                    missed = {}
                    for label, extra, evidence in (("with_as_of", {"as_of": q["as_of"]}, q["evidence"]),
                                                   ("without", {}, q["now_evidence"])):
                        if not evidence_found(evidence, (dated_answer if extra else now_answer)["context"]):
                            missed[label] = evidence_rank(client, community, q["question"], evidence, **extra)
                    results.append({
                        "id": q["id"], "community": community, "question": q["question"], "as_of": q["as_of"],
                        "with_as_of": {**score(dated_answer, q["evidence"], day, documents), "ms": round(dated_ms, 1)},
                        "without": {**score(now_answer, q["now_evidence"], today, documents), "ms": round(now_ms, 1)},
                    })
                    for label, rank in missed.items():
                        results[-1][label]["evidence_rank"] = rank
                retriever.close()
            finally:
                db.close()
    finally:
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    if args.only:
        return 0
    write_report(results, args.out, " ".join(["benchmarks/as_of/run.py", *argv]))
    return 0


def _share(rows: list[dict], key: str) -> float:
    return sum(1 for r in rows if r[key]["evidence"]) / len(rows) if rows else 0.0


def _found(scored: dict) -> str:
    if scored["evidence"]:
        return "yes"
    rank = scored.get("evidence_rank")
    return f"no (rank {rank if rank is not None else '-'})"


def write_report(results: list[dict], out: Path, command: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    lines = [
        "# Dated questions on hoa-dev: the evidence in force that day",
        "",
        f"Command: `.venv/bin/python {command}` (all-MiniLM-L6-v2 int8, the webhook as configured,",
        "status calibrated per community; dates and amended sections from `documents.json`).",
        "",
        "| community | questions | evidence in context, as_of | passages not in force that day | "
        "evidence in context, now | passages not in force now | tokens as_of / now |",
        "|---|---|---|---|---|---|---|",
    ]
    for community in [*sorted({r["community"] for r in results}), "all"]:
        rows = [r for r in results if community in ("all", r["community"])]
        leaks = sum(len(r["with_as_of"]["not_in_force"]) for r in rows)
        stale = sum(len(r["without"]["not_in_force"]) for r in rows)
        tokens = (sum(r["with_as_of"]["tokens"] for r in rows) / len(rows), sum(r["without"]["tokens"] for r in rows) / len(rows))
        lines.append(
            f"| {community} | {len(rows)} | {_share(rows, 'with_as_of'):.2f} | {leaks} | "
            f"{_share(rows, 'without'):.2f} | {stale} | {tokens[0]:,.0f} / {tokens[1]:,.0f} |"
        )
    lines += [
        "",
        "\"Passages not in force now\" are the amended sections today's answer still carries, marked in",
        "their `[SOURCE n]` as amended (and demoted), as it has always done without a date.",
        "",
        "A missed evidence's rank is where it stands among the first 20 candidates of the same question",
        "asked with no minimum relevance (-: not among them).",
        "",
        "| question | as_of | evidence as_of | not in force that day | evidence now | documents in the context as_of |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        a, n = r["with_as_of"], r["without"]
        lines.append(
            f"| {r['id']} | {r['as_of']} | {_found(a)} | {len(a['not_in_force'])} | "
            f"{_found(n)} | {', '.join(d.removeprefix(r['community'] + '-') for d in a['documents'])} |"
        )
    (out / "results.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
