"""``arc-retrieval eval``: ingest a BEIR corpus into a fresh embedded database, run every query
through :meth:`worker.retrieve.pipeline.Retriever.answer` (the webhook's code path) in each mode, and
report nDCG@10, Recall@5/20, MRR@10 and latency, next to two references computed outside the
database: ``bm25s`` (k1 0.9, b 0.4, English stopwords and stemming) and exact ``dense`` search.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

from ..embeddings import CachedEmbedder
from ..ingest.ingestor import Ingestor, beir_documents, embedding_texts
from ..models import RetrievalRequest, Weights
from ..retrieve.pipeline import Retriever
from ..retrieve.preprocess import normalize
from ..retrieve.rerank import Reranker
from ..retrieve.search_cache import SearchCache
from ..store import bm25
from ..store.database import Database
from ..store.embedded import EmbeddedPostgres
from ..store.postgres_search import PostgresBackend
from .dataset import BeirDataset
from .metrics import percentile, recall_at_k, summarise

DATABASE_MODES: dict[str, Callable[[str], dict]] = {
    "vector": lambda q: {"weights": Weights(vector=1, fts=0), "fusion": "weighted"},
    "fts": lambda q: {"weights": Weights(vector=0, fts=1), "fusion": "weighted"},
    "hybrid-weighted": lambda q: {"fusion": "weighted"},
    "hybrid-rrf": lambda q: {"fusion": "rrf"},
    "default": lambda q: {},
}
REFERENCE_MODES = ("bm25s", "dense")
ALL_MODES = (*REFERENCE_MODES, *DATABASE_MODES)


@dataclass
class ModeResult:
    rankings: dict[str, list[str]]
    latencies_ms: list[float]
    sql_ms: list[float]
    candidates: dict[str, list[str]] | None = None


def cached_corpus_embeddings(
    dataset: BeirDataset, texts: list[str], embedder: CachedEmbedder, cache_dir: Path, ingestor: Ingestor
) -> np.ndarray:
    """Corpus vectors, reused across runs (keyed by model, dimension and corpus hash)."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    path = cache_dir / f"corpus-{embedder.model}-{embedder.dim}-{dataset.corpus_hash()}.npy"
    if path.exists():
        vectors = np.load(path)
        if vectors.shape == (len(texts), embedder.dim):
            return vectors
    vectors = ingestor.embed(texts, progress=True)
    np.save(path, vectors)
    return vectors


def cached_query_embeddings(dataset: BeirDataset, embedder: CachedEmbedder, cache_dir: Path) -> dict[str, np.ndarray]:
    """Query vectors keyed by normalised text; primes the embedder's query cache, so every mode
    measures the same thing (search, not the model)."""
    texts = sorted({normalize(q) for q in dataset.queries.values()})
    import hashlib

    key = hashlib.sha256("\n".join(texts).encode()).hexdigest()[:16]
    path = cache_dir / f"queries-{embedder.model}-{embedder.dim}-{key}.npy"
    if path.exists():
        vectors = np.load(path)
    else:
        vectors = embedder.inner.embed_queries(texts)
        np.save(path, vectors)
    found = dict(zip(texts, vectors, strict=True))
    embedder.prime(found)
    return found


def run_database_mode(retriever: Retriever, dataset: BeirDataset, mode: str, rerank: bool) -> ModeResult:
    options = DATABASE_MODES[mode]
    rankings: dict[str, list[str]] = {}
    candidates: dict[str, list[str]] = {}
    latencies, sql = [], []
    for qid, text in tqdm(sorted(dataset.queries.items()), desc=mode, unit="q"):
        request = RetrievalRequest(
            query=text[:2000],
            top_k=20,
            min_relevance=0.0,
            token_budget=32000,
            rerank=rerank,
            debug=True,
            **options(text),
        )
        start = time.perf_counter()
        answer = retriever.answer(request)
        latencies.append((time.perf_counter() - start) * 1000)
        sql.append(answer.timings_ms.get("search", 0.0))
        ranking: list[str] = []
        for chunk in answer.chunks:
            if chunk.document_id not in ranking:
                ranking.append(chunk.document_id)
        rankings[qid] = ranking
        candidates[qid] = answer.debug["candidate_documents"] if answer.debug else ranking
    return ModeResult(rankings, latencies, sql, candidates)


def run_bm25s(dataset: BeirDataset, ids: list[str], texts: list[str]) -> ModeResult:
    import bm25s
    import Stemmer

    stemmer = Stemmer.Stemmer("english")
    retriever = bm25s.BM25(k1=0.9, b=0.4)
    retriever.index(bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False), show_progress=False)
    rankings: dict[str, list[str]] = {}
    latencies: list[float] = []
    for qid, text in tqdm(sorted(dataset.queries.items()), desc="bm25s", unit="q"):
        start = time.perf_counter()
        tokens = bm25s.tokenize([text], stopwords="en", stemmer=stemmer, show_progress=False)
        if not tokens.vocab:
            rankings[qid] = []
            continue
        docs, _ = retriever.retrieve(tokens, k=min(20, len(ids)), show_progress=False)
        latencies.append((time.perf_counter() - start) * 1000)
        rankings[qid] = [ids[i] for i in docs[0]]
    return ModeResult(rankings, latencies, [])


def run_dense(dataset: BeirDataset, ids: list[str], corpus: np.ndarray, queries: dict[str, np.ndarray]) -> ModeResult:
    rankings, latencies = {}, []
    for qid, text in tqdm(sorted(dataset.queries.items()), desc="dense", unit="q"):
        start = time.perf_counter()
        scores = corpus @ queries[normalize(text)]
        top = np.argpartition(-scores, min(20, len(ids) - 1))[:20]
        top = top[np.argsort(-scores[top])]
        latencies.append((time.perf_counter() - start) * 1000)
        rankings[qid] = [ids[i] for i in top]
    return ModeResult(rankings, latencies, [])


LoadedCorpus = tuple[Database, list[str], list[str], np.ndarray]


@contextmanager
def loaded_database(dataset: BeirDataset, embedder: CachedEmbedder, data_dir: Path) -> Iterator[LoadedCorpus]:
    """A fresh embedded database holding the corpus (vectors cached across runs), stopped and
    removed afterwards. Yields the database, the document ids, their texts and their vectors."""
    documents = beir_documents(dataset.corpus_path)
    ids = [d.document_id for d in documents]
    texts = embedding_texts(documents)
    workdir = Path(tempfile.mkdtemp(prefix="eval-", dir=data_dir))
    server = EmbeddedPostgres(workdir, runtime_dir=data_dir)
    try:
        # No statement timeout: a benchmark's bulk load stores 1,000 documents per statement, which
        # a busy two-core machine took longer than any per-question limit to write.
        db = Database(server.start(), statement_timeout_ms=0)
        db.migrate(embedder.dim)
        ingestor = Ingestor(db, embedder)
        corpus_vectors = cached_corpus_embeddings(dataset, texts, embedder, data_dir / "cache", ingestor)
        ingestor.write(documents, corpus_vectors, progress=True, batch_documents=1000)
        bm25.refresh(db, seconds=None)
        bm25.vacuum(db)  # what `arc-retrieval db maintain` does after a large load
        try:
            yield db, ids, texts, corpus_vectors
        finally:
            db.close()
    finally:
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def evaluate(
    dataset: BeirDataset,
    modes: list[str],
    *,
    embedder: CachedEmbedder,
    data_dir: Path,
    reranker: Reranker | None = None,
    rerank: bool = False,
) -> dict[str, dict[str, float]]:
    with loaded_database(dataset, embedder, data_dir) as (db, ids, texts, corpus_vectors):
        query_vectors = cached_query_embeddings(dataset, embedder, data_dir / "cache")
        # No result cache: modes that share parameters must each be measured.
        retriever = Retriever(
            embedder=embedder, backend=PostgresBackend(db), reranker=reranker, search_cache=SearchCache(ttl_seconds=0)
        )
        results: dict[str, dict[str, float]] = {}
        for mode in modes:
            if mode == "bm25s":
                outcome = run_bm25s(dataset, ids, texts)
            elif mode == "dense":
                outcome = run_dense(dataset, ids, corpus_vectors, query_vectors)
            else:
                outcome = run_database_mode(retriever, dataset, mode, rerank)
            summary = summarise(outcome.rankings, dataset.qrels)
            if outcome.candidates is not None:
                # How much the reranker could ever see: recall over the whole fused candidate list.
                judged = [q for q in dataset.qrels if q in outcome.candidates]
                summary["candidates_recall"] = sum(
                    recall_at_k(outcome.candidates[q], dataset.qrels[q], len(outcome.candidates[q])) for q in judged
                ) / max(len(judged), 1)
            summary["p50_ms"] = percentile(outcome.latencies_ms, 50)
            summary["p95_ms"] = percentile(outcome.latencies_ms, 95)
            if outcome.sql_ms:
                summary["sql_p50_ms"] = percentile(outcome.sql_ms, 50)
                summary["sql_p95_ms"] = percentile(outcome.sql_ms, 95)
            results[mode] = {k: round(v, 4) for k, v in summary.items()}
        return results


def write_report(results: dict[str, dict[str, float]], out: Path, *, title: str, command: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    columns = ["ndcg@10", "recall@5", "recall@20", "mrr@10", "candidates_recall", "p50_ms", "p95_ms", "sql_p95_ms"]
    lines = [
        f"# {title}",
        "",
        f"Command: `{command}`",
        "",
        "| mode | " + " | ".join(columns) + " |",
        "|---|" + "---|" * len(columns),
    ]
    for mode, row in results.items():
        cells = [
            f"{row[c]:.3f}" if c in row and "ms" not in c else (f"{row[c]:.1f}" if c in row else "-") for c in columns
        ]
        lines.append(f"| {mode} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "candidates_recall: recall over the whole fused candidate list (40 per leg) that reranking sees. "
        "p50/p95: whole pipeline per query (query embeddings cached, reranker off unless stated); "
        "sql_p95: the hybrid_search call alone. bm25s and dense are references computed outside "
        "the database on the same corpus and model.",
        "",
    ]
    (out / "results.md").write_text("\n".join(lines))
    _chart(results, out / "chart.png", title)


def _chart(results: dict[str, dict[str, float]], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = ["ndcg@10", "recall@5", "recall@20", "mrr@10"]
    modes = list(results)
    width = 0.8 / max(len(modes), 1)
    fig, ax = plt.subplots(figsize=(9, 4.5))
    for i, mode in enumerate(modes):
        xs = [m + i * width for m in range(len(metrics))]
        ax.bar(xs, [results[mode].get(k, 0) for k in metrics], width, label=mode)
    ax.set_xticks([m + width * (len(modes) - 1) / 2 for m in range(len(metrics))], metrics)
    ax.set_ylim(0, 1)
    ax.set_title(title)
    ax.legend(fontsize=8, ncol=3)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
