"""What stale BM25 weights cost: nDCG@10 of the full-text leg and of the default hybrid when every
chunk's weights were written with an average length off by a factor (sql/010_bm25_maintenance.sql
rewrites them in steps after a drift of more than 5%, so between a load and the last step some
chunks score this way).

    python benchmarks/bm25_staleness.py ../shared/datasets/scifact --out benchmarks/bm25_staleness
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from worker.config import Settings
from worker.embeddings import CachedEmbedder, build_embedder
from worker.evaluation.dataset import load_dataset
from worker.evaluation.harness import cached_query_embeddings, loaded_database, run_database_mode
from worker.evaluation.metrics import summarise
from worker.retrieve.pipeline import Retriever
from worker.store.postgres_search import PostgresBackend
from worker.retrieve.search_cache import SearchCache

FACTORS = (1.0, 0.95, 1.05, 0.8, 1.25, 0.5, 2.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    settings = Settings.from_env()
    data_dir = settings.database.data_dir.resolve()
    embedder = CachedEmbedder(build_embedder(settings), maxsize=100_000)
    dataset = load_dataset(args.dataset)
    rows = []
    with loaded_database(dataset, embedder, data_dir) as (db, _, _, _):
        cached_query_embeddings(dataset, embedder, data_dir / "cache")
        retriever = Retriever(embedder=embedder, backend=PostgresBackend(db), reranker=None,
                              search_cache=SearchCache(ttl_seconds=0))
        for factor in FACTORS:
            with db.connect() as conn:
                conn.execute("update bm25_corpus set avgdl_indexed = %s * total_length::float8 / n_docs, "
                             "generation = generation + 1", (factor,))
                # steps alone: bm25.refresh() would first see the drift and reset avgdl
                while conn.execute("select bm25_refresh_step(100000)").fetchone()[0]:
                    pass
                conn.commit()
            row = {"avgdl_factor": factor}
            for mode in ("fts", "default"):
                outcome = run_database_mode(retriever, dataset, mode, rerank=False)
                row[f"{mode}_ndcg@10"] = round(summarise(outcome.rankings, dataset.qrels)["ndcg@10"], 4)
            rows.append(row)
            print(row, flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(rows, indent=1) + "\n")
    lines = [f"# Stale BM25 weights: {dataset.name}", "",
             f"Command: `python benchmarks/bm25_staleness.py {args.dataset} --out {args.out}`", "",
             "Every chunk's weights written with avgdl x factor (1.0: exact); the query side is live.", "",
             "| avgdl factor | fts nDCG@10 | default nDCG@10 |", "|---|---|---|"]
    lines += [f"| {r['avgdl_factor']} | {r['fts_ndcg@10']} | {r['default_ndcg@10']} |" for r in rows]
    (args.out / "results.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
