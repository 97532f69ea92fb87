"""Which chunks the full-text leg reads when a question matches more than it may read.

hybrid_search reads at most ``fts_scan_limit`` (5,000) matching chunks and scores those. A corpus
of millions of chunks is not needed to see what that choice costs: on a BEIR set the limit is
lowered until most questions match more chunks than it allows, and the leg alone (no embedding)
is scored against the judgements at each limit. Unlimited is the exact BM25 ranking.

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
from worker.preprocess import normalize

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
                matches = conn.execute(
                    "select count(*) from knowledge_chunks where fts @@ "
                    "(select string_agg(quote_literal(lexeme), ' | ')::tsquery from bm25_query_terms(%s) where df > 0)",
                    (normalize(text)[:2000],)).fetchone()[0]
                over += matches > limit
            summary = summarise(rankings, dataset.qrels)
            rows.append({"dataset": folder.name, "fts_scan_limit": limit,
                         "questions_matching_more": round(over / len(dataset.queries), 3),
                         "ndcg@10": round(summary["ndcg@10"], 4), "recall@20": round(summary["recall@20"], 4)})
            print(rows[-1], flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("datasets", type=Path, nargs="+")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    settings = Settings.from_env()
    data_dir = settings.data_dir.resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    embedder = CachedEmbedder(build_embedder(settings), maxsize=100_000)
    rows = [r for folder in args.datasets for r in measure(folder, settings, embedder, data_dir)]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(rows, indent=1) + "\n")
    lines = ["# Full-text leg under its read limit", "",
             "Command: `python benchmarks/fts_selection.py " + " ".join(map(str, args.datasets))
             + f" --out {args.out}`", "",
             "The full-text leg alone (no embedding); `questions_matching_more`: share of questions whose"
             " words match more chunks than the limit lets the leg read.", "",
             "| dataset | fts_scan_limit | questions matching more | nDCG@10 | Recall@20 |", "|---|---|---|---|---|"]
    lines += [f"| {r['dataset']} | {r['fts_scan_limit']} | {r['questions_matching_more']} | {r['ndcg@10']} |"
              f" {r['recall@20']} |" for r in rows]
    (args.out / "results.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
