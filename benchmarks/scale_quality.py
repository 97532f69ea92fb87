"""Does the full-text leg still find the best matches among a million chunks?

The SQuAD dev-half corpus (2,067 passages, 5,285 questions) is hidden among N distractor chunks
of real text: sentences of the SciFact abstracts (disjoint from SQuAD), three to five at a time.
The full-text leg alone (hybrid_search with no embedding, as when the embedding provider is down)
answers every question, on SQuAD alone and then with the distractors; ``bm25s`` (k1 0.9, b 0.4,
English stopwords and stemmer: the exact Okapi BM25 reference) runs on the same two corpora.

    python benchmarks/scale_quality.py --datasets ../shared/datasets --distractors 1000000 \
        --out benchmarks/scale/quality
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import Iterator

import psycopg

from worker.store import bm25
from worker.config import Settings
from worker.store.database import Database
from worker.store.embedded import EmbeddedPostgres
from worker.evaluation.dataset import load_dataset
from worker.evaluation.metrics import summarise
from worker.retrieve.preprocess import normalize

QUERY = """select document_id from hybrid_search(query_text => %(q)s, query_embedding => null, match_count => 20,
           vector_weight => 0, fts_weight => 1, fts_scan_limit => %(limit)s, fts_rescore => %(rescore)s)
           order by fts_rank"""
DEFAULT_LIMIT = 5000  # hybrid_search's own default
COPY = ("copy knowledge_chunks (document_id, document_name, document_type, section_path, chunk_index, is_binding,"
        " content, token_count) from stdin")


def sentences_of(corpus: Path) -> list[str]:
    found = []
    for line in corpus.open():
        row = json.loads(line)
        found += [s for s in re.split(r"(?<=[.!?])\s+", row["text"].strip()) if len(s.split()) >= 4]
    return found


def distractors(n: int, sentences: list[str], seed: int = 11):
    pick = random.Random(seed)
    for i in range(n):
        start = pick.randrange(len(sentences))
        body = " ".join(sentences[(start + k) % len(sentences)] for k in range(pick.randint(3, 5)))
        yield f"distractor-{i}", f"Distractor {i}", "other", "", 0, True, body[:2000], len(body.split())


def fts_rankings(conn: psycopg.Connection, queries: dict[str, str], limit: int = DEFAULT_LIMIT,
                 rescore: int | None = None) -> tuple[dict[str, list[str]], list[float]]:
    rankings, times = {}, []
    for qid, text in sorted(queries.items()):
        start = time.perf_counter()
        rows = conn.execute(QUERY, {"q": normalize(text)[:2000], "limit": limit, "rescore": rescore}).fetchall()
        times.append((time.perf_counter() - start) * 1000)
        rankings[qid] = list(dict.fromkeys(r[0] for r in rows))
    return rankings, times


def bm25s_rankings(ids: list[str], texts: list[str], queries: dict[str, str]) -> dict[str, list[str]]:
    import bm25s
    import Stemmer

    stemmer = Stemmer.Stemmer("english")
    index = bm25s.BM25(k1=0.9, b=0.4)
    index.index(bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False), show_progress=False)
    rankings = {}
    for qid, text in sorted(queries.items()):
        tokens = bm25s.tokenize([text], stopwords="en", stemmer=stemmer, show_progress=False)
        if not tokens.vocab:
            rankings[qid] = []
            continue
        docs, _ = index.retrieve(tokens, k=20, show_progress=False, n_threads=2)
        rankings[qid] = [ids[i] for i in docs[0]]
    return rankings


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return round(ordered[int(0.95 * (len(ordered) - 1))], 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", type=Path, required=True)
    parser.add_argument("--distractors", type=int, default=1_000_000)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--other-limits", type=lambda v: [int(x) for x in v.split(",") if x], default=[],
                        help="comma-separated fts_scan_limit values also measured among the distractors")
    parser.add_argument("--other-rescores", type=lambda v: [int(x) for x in v.split(",") if x], default=[],
                        help="comma-separated fts_rescore values (chunks scored exactly) also measured")
    parser.add_argument("--keep", type=Path, default=None,
                        help="keep the distractor database in this folder; a later run with the same folder "
                             "and --distractors only asks the questions again")
    args = parser.parse_args()
    squad = load_dataset(args.datasets / "squad-v1.1-dev")
    records = [json.loads(line) for line in squad.corpus_path.open()]
    ids = [r["_id"] for r in records]
    texts = [(r.get("title", "") + ". " + r["text"]).strip(". ") for r in records]
    pool = sentences_of(args.datasets / "scifact" / "corpus.jsonl")
    data_dir = Settings.from_env().database.data_dir.resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    results: dict[str, dict] = {}
    total = len(ids) + args.distractors
    with _database(data_dir, None) as db, psycopg.connect(db.url, autocommit=True) as conn:
        _load_squad(conn, ids, texts)
        rankings, times = fts_rankings(conn, squad.queries)
        results["squad alone: fts leg"] = {"chunks": len(ids), **_score(rankings, squad), "p95_ms": p95(times)}
    results["squad alone: bm25s"] = {"chunks": len(ids), **_score(bm25s_rankings(ids, texts, squad.queries), squad)}
    print(results, flush=True)

    keep = args.keep / f"distractors-{args.distractors}" if args.keep else None
    with _database(data_dir, keep) as db:
        with psycopg.connect(db.url, autocommit=True) as conn:
            loaded = conn.execute("select count(*) from knowledge_chunks").fetchone()[0] == total
        if loaded:  # --keep on a second run: only the questions are asked again
            load_minutes = json.loads((keep / "load.json").read_text())["load_minutes"]
        else:
            load_minutes = _load_distractors(db, ids, texts, pool, args.distractors)
            if keep:
                (keep / "load.json").write_text(json.dumps({"load_minutes": load_minutes}) + "\n")
        with psycopg.connect(db.url, autocommit=True) as conn:
            rankings, times = fts_rankings(conn, squad.queries)
            results[f"with {args.distractors:,} distractors: fts leg"] = {
                "chunks": total, **_score(rankings, squad), "p95_ms": p95(times), "load_minutes": load_minutes}
            print(results, flush=True)
            for limit in args.other_limits:  # what a smaller read limit would cost (or a larger one gain)
                rankings, times = fts_rankings(conn, squad.queries, limit)
                results[f"with {args.distractors:,} distractors: fts leg, fts_scan_limit {limit}"] = {
                    "chunks": total, **_score(rankings, squad), "p95_ms": p95(times)}
            for rescore in args.other_rescores:
                rankings, times = fts_rankings(conn, squad.queries, rescore=rescore)
                results[f"with {args.distractors:,} distractors: fts leg, fts_rescore {rescore}"] = {
                    "chunks": total, **_score(rankings, squad), "p95_ms": p95(times)}
                print(results, flush=True)
    reference = keep / "bm25s.json" if keep else None
    if reference and reference.exists():  # the same corpus and questions: bm25s answers the same
        scores = json.loads(reference.read_text())
    else:
        all_ids = ids + [f"x{i}" for i in range(args.distractors)]
        all_texts = texts + [row[6] for row in distractors(args.distractors, pool)]
        scores = _score(bm25s_rankings(all_ids, all_texts, squad.queries), squad)
        if reference:
            reference.write_text(json.dumps(scores) + "\n")
    results[f"with {args.distractors:,} distractors: bm25s"] = {"chunks": total, **scores}
    write(results, args)


@contextlib.contextmanager
def _database(data_dir: Path, keep: Path | None) -> Iterator[Database]:
    """A migrated embedded database: in ``keep`` (left there, reused by a later run) or temporary."""
    workdir = keep or Path(tempfile.mkdtemp(prefix="eval-", dir=data_dir))
    server = EmbeddedPostgres(workdir, runtime_dir=data_dir)
    try:
        db = Database(server.start(), statement_timeout_ms=0)
        db.migrate(384)
        yield db
        db.close()
    finally:
        server.stop()
        if keep is None:
            shutil.rmtree(workdir, ignore_errors=True)


def _load_squad(conn: psycopg.Connection, ids: list[str], texts: list[str]) -> None:
    conn.execute("select bm25_seed_avgdl(%s::text[], %s::text[])", ([""] * len(texts), texts))
    with conn.cursor().copy(COPY) as copy:
        for doc_id, text in zip(ids, texts):
            copy.write_row((doc_id, doc_id, "other", "", 0, True, text, len(text.split())))
    conn.execute("vacuum analyze knowledge_chunks")


def _load_distractors(db: Database, ids: list[str], texts: list[str], pool: list[str], n: int) -> float:
    """SQuAD and then ``n`` distractors; returns the minutes the load took."""
    started = time.perf_counter()
    with psycopg.connect(db.url, autocommit=True) as conn:
        conn.execute("truncate knowledge_chunks")
        _load_squad(conn, ids, texts)
        # Bulk path, as for an HNSW index: the postings are built once after the load
        # (bm25_postings_rebuild, the migration's backfill) rather than kept per COPY.
        conn.execute("alter table knowledge_chunks disable trigger knowledge_chunks_bm25_postings_insert")
        rows = distractors(n, pool)
        for start in range(0, n, 50_000):
            with conn.cursor().copy(COPY) as copy:
                for row in (next(rows) for _ in range(min(50_000, n - start))):
                    copy.write_row(row)
            print(f"loaded {start + 50_000:,} distractors", flush=True)
    bm25.refresh(db, seconds=None)
    with psycopg.connect(db.url, autocommit=True) as conn:
        conn.execute("alter table knowledge_chunks enable trigger knowledge_chunks_bm25_postings_insert")
        conn.execute("select bm25_postings_rebuild()")
    bm25.vacuum(db)
    return round((time.perf_counter() - started) / 60, 1)


def _score(rankings: dict[str, list[str]], dataset) -> dict[str, float]:
    summary = summarise(rankings, dataset.qrels)
    return {"ndcg@10": round(summary["ndcg@10"], 4), "recall@20": round(summary["recall@20"], 4)}


def write(results: dict[str, dict], args) -> None:
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    lines = ["# The full-text leg among distractors (SQuAD v1.1 dev half, 5,285 questions)", "",
             f"Command: `python benchmarks/scale_quality.py --datasets {args.datasets} --distractors "
             f"{args.distractors} --out {args.out}"
             + (f" --other-limits {','.join(map(str, args.other_limits))}" if args.other_limits else "")
             + (f" --other-rescores {','.join(map(str, args.other_rescores))}" if args.other_rescores else "") + "`",
             "",
             "Distractors: 3-5 consecutive sentences of SciFact abstracts each (real text, disjoint from SQuAD). "
             "fts leg: `hybrid_search` without an embedding (the embedding-provider-down path), default "
             "settings (at most 5,000 postings read) unless a row names another fts_scan_limit; p95 is per "
             "question on this 2-core machine, 128 MB shared_buffers.", "",
             "| corpus: system | chunks | nDCG@10 | Recall@20 | p95 ms |", "|---|---|---|---|---|"]
    for name, r in results.items():
        lines.append(f"| {name} | {r['chunks']:,} | {r['ndcg@10']} | {r['recall@20']} | {r.get('p95_ms', '-')} |")
    # the earlier designs' tables, below the first "## " heading, survive a re-run
    md = args.out / "results.md"
    history = md.read_text().partition("\n## ")[2] if md.exists() else ""
    md.write_text("\n".join(lines) + "\n" + ("\n## " + history if history else ""))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
