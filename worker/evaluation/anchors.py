"""Two reference systems the answer-level evaluation compares against, run outside the database
on the same files and embedding model:

* **n8n default**: what n8n's Supabase Vector Store node with its Default Data Loader gives out of
  the box: ``RecursiveCharacterTextSplitter(chunk_size=1000, chunk_overlap=200)`` over each file's
  text, dense top-4; the context is those 4 chunks.
* **hybrid top-5**: the same chunks, bm25s (Lucene IDF, k1 0.9, b 0.4, English stopwords and
  stemmer) and dense scores each min-max normalised over the corpus, fused 0.5/0.5, top 5.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

N8N_TOP_K = 4
HYBRID_TOP_K = 5
JOIN = "\n\n"


@dataclass
class AnchorIndex:
    chunks: list[str]
    vectors: np.ndarray
    bm25: Any  # a bm25s.BM25; None when the files gave no text (a scan, to n8n's loader)
    stemmer: Any  # a Stemmer.Stemmer

    def dense_scores(self, query_vector: np.ndarray) -> np.ndarray:
        if not self.chunks:
            return np.zeros(0, dtype=np.float32)
        return self.vectors @ np.asarray(query_vector, dtype=np.float32)

    def bm25_scores(self, query: str) -> np.ndarray:
        import bm25s

        if self.bm25 is None:
            return np.zeros(0, dtype=np.float32)
        tokens = bm25s.tokenize([query], stopwords="en", stemmer=self.stemmer, show_progress=False, return_ids=False)[0]
        return np.asarray(self.bm25.get_scores(tokens), dtype=np.float32) if tokens else np.zeros(len(self.chunks))


def split_files(paths: Sequence[Path]) -> list[str]:
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    splitter = RecursiveCharacterTextSplitter(chunk_size=1000, chunk_overlap=200)
    return [chunk for path in paths for chunk in splitter.split_text(_file_text(Path(path)))]


def _file_text(path: Path) -> str:
    """A file's text as n8n's Default Data Loader has it: a PDF's text layer (its PDF loader does
    no OCR, so a scan gives nothing), any other file as UTF-8 text."""
    if path.suffix.lower() != ".pdf":
        return path.read_text(encoding="utf-8")
    from pypdf import PdfReader

    return "\n\n".join(page.extract_text() or "" for page in PdfReader(str(path)).pages)


def build_index(paths: Sequence[Path], embed: Callable[[list[str]], np.ndarray]) -> AnchorIndex:
    import bm25s
    import Stemmer

    chunks = split_files(paths)
    stemmer = Stemmer.Stemmer("english")
    if not chunks:
        return AnchorIndex([], np.zeros((0, 1), dtype=np.float32), None, stemmer)
    bm25 = bm25s.BM25(k1=0.9, b=0.4, method="lucene")
    bm25.index(bm25s.tokenize(chunks, stopwords="en", stemmer=stemmer, show_progress=False), show_progress=False)
    return AnchorIndex(chunks, embed(chunks), bm25, stemmer)


def n8n_default(index: AnchorIndex, query_vector: np.ndarray, k: int = N8N_TOP_K) -> list[str]:
    return _top(index, index.dense_scores(query_vector), k)


def hybrid_top5(index: AnchorIndex, query: str, query_vector: np.ndarray, k: int = HYBRID_TOP_K) -> list[str]:
    fused = 0.5 * _min_max(index.dense_scores(query_vector)) + 0.5 * _min_max(index.bm25_scores(query))
    return _top(index, fused, k)


def _min_max(scores: np.ndarray) -> np.ndarray:
    span = float(scores.max() - scores.min()) if len(scores) else 0.0
    return (scores - scores.min()) / span if span > 0 else np.zeros_like(scores)


def _top(index: AnchorIndex, scores: np.ndarray, k: int) -> list[str]:
    order = np.argsort(-scores, kind="stable")[:k]
    return [index.chunks[i] for i in order]


# -- the same number of tokens as the worker --------------------------------------------------------

# Budgets of the evidence-against-tokens curve (README "Answer quality").
BUDGETS = (500, 1000, 2000, 4000)


def n8n_ranking(index: AnchorIndex, query_vector: np.ndarray) -> list[str]:
    """Every chunk, best first, by the n8n default's dense score."""
    return n8n_default(index, query_vector, k=len(index.chunks))


def hybrid_ranking(index: AnchorIndex, query: str, query_vector: np.ndarray) -> list[str]:
    """Every chunk, best first, by the hybrid anchor's fused score."""
    return hybrid_top5(index, query, query_vector, k=len(index.chunks))


def within_tokens(ranked: Sequence[str], budget: int, counter) -> list[str]:
    """The chunks in their order until their context (joined by ``JOIN``) holds ``budget`` tokens,
    the last one cut to fit: an anchor given exactly what the worker spent on a question."""
    taken: list[str] = []
    for chunk in ranked:
        room = budget - (counter.count(JOIN.join([*taken, ""])) if taken else 0)
        if room <= 0:
            break
        if counter.count(chunk) <= room:
            taken.append(chunk)
            continue
        cut = counter.truncate(chunk, room)
        # BPE may merge across the join: trim until the whole context fits
        while cut and counter.count(JOIN.join([*taken, cut])) > budget:
            cut = counter.truncate(cut, max(counter.count(cut) - 1, 0))
        if cut:
            taken.append(cut)
        break
    return taken
