"""Which chunks the full-text leg reads when a question's words hold more postings than it may read.

hybrid_search reads at most ``fts_scan_limit`` (5,000) postings, each word's best first, and
scores the best candidates exactly. A corpus of millions of chunks is not needed to see what that
bound costs: on a BEIR set the limit is lowered until most questions hold more postings than it
allows, and the leg alone (no embedding) is scored against the judgements at each limit.

    python benchmarks/fts_selection.py ../shared/datasets/scifact ../shared/datasets/squad-v1.1-dev \
        --out benchmarks/fts_selection
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from worker.config import Settings
from worker.embeddings import CachedEmbedder, build_embedder
from worker.evaluation.dataset import load_dataset
from worker.evaluation.harness import loaded_database
from worker.evaluation.metrics import summarise
from worker.retrieve.preprocess import normalize

LIMITS = (1_000_000, 5000, 1000, 300, 100)
QUERY = """select document_id, fts_rank from hybrid_search(query_text => %(q)s, query_embedding => null,
           match_count => 20, vector_weight => 0, fts_weight => 1, fts_scan_limit => %(limit)s)
           where fts_rank is not null order by fts_rank"""


def measure(folder: Path, settings: Settings, embedder: CachedEmbedder, data_dir: Path) -> list[dict]:
    dataset = load_dataset(folder)
    rows = []
    with loaded_database(dataset, embedder, data_dir) as (db, _, _, _), db.connect() as conn:
        for limit in LIMITS:
            rankings, over = {}, 0
            for qid, text in sorted(dataset.queries.items()):
                found = conn.execute(QUERY, {"q": normalize(text)[:2000], "limit": limit}).fetchall()
                rankings[qid] = list(dict.fromkeys(d for d, _ in found))
                postings = conn.execute(
                    "select coalesce(sum(least(t.df, c.postings_per_lexeme)), 0) from bm25_query_terms(%s) t,"
                    " bm25_corpus c where c.id and t.df > 0", (normalize(text)[:2000],)).fetchone()[0]
                over += postings > limit
            summary = summarise(rankings, dataset.qrels)
            rows.append({"dataset": folder.name, "fts_scan_limit": limit,
                         "questions_over_the_limit": round(over / len(dataset.queries), 3),
                         "ndcg@10": round(summary["ndcg@10"], 4), "recall@20": round(summary["recall@20"], 4)})
            print(rows[-1], flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("datasets", type=Path, nargs="+")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    settings = Settings.from_env()
    data_dir = settings.database.data_dir.resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    embedder = CachedEmbedder(build_embedder(settings), maxsize=100_000)
    rows = [r for folder in args.datasets for r in measure(folder, settings, embedder, data_dir)]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(rows, indent=1) + "\n")
    lines = ["# Full-text leg under its read limit", "",
             "Command: `python benchmarks/fts_selection.py " + " ".join(map(str, args.datasets))
             + f" --out {args.out}`", "",
             "The full-text leg alone (no embedding); `questions over the limit`: share of questions whose"
             " words hold more stored postings than the limit lets the leg read.", "",
             "| dataset | fts_scan_limit | questions over the limit | nDCG@10 | Recall@20 |", "|---|---|---|---|---|"]
    lines += [f"| {r['dataset']} | {r['fts_scan_limit']} | {r['questions_over_the_limit']} | {r['ndcg@10']} |"
              f" {r['recall@20']} |" for r in rows]
    # the earlier designs' tables, below the first "## " heading, survive a re-run
    md = args.out / "results.md"
    history = md.read_text().partition("\n## ")[2] if md.exists() else ""
    md.write_text("\n".join(lines) + "\n" + ("\n## " + history if history else ""))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
