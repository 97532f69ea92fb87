"""The answering sentence: re-order the top of the first-stage list by each chunk's best sentence.

A chunk's embedding averages everything it says; the answer to a question is usually one of its
sentences, and a long chunk that holds it can score below a short one that only shares its
topic. For the first ``top`` candidates this stage splits each chunk into sentences, embeds them
(one batched call, each sentence's vector cached by its text), takes each chunk's best
sentence cosine with the question, and orders those candidates by
``(1 - share) x final_score + share x best sentence``. The candidates keep the set of scores they
had (the best one's score still heads the list, a chunk moved down takes the lower score), so
the thresholds that act on ``final_score`` keep their meaning; the status reads the first-stage
relevance, which this stage does not touch.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence

import numpy as np

from ..models import ChunkResult

Embed = Callable[[list[str]], np.ndarray]

_LINE = re.compile(r"\n+")
_SENTENCE_END = re.compile(r"""(?<=[.!?;])["')\]]?\s+(?=[A-Z0-9"'(\[§•*-])""")
_MARKUP = re.compile(r"[#>*_`|]+")
MIN_WORDS = 3  # shorter fragments (a heading's number, a table rule) are not sentences
MAX_SENTENCES = 40  # per chunk: a long table's rows do not make one question cost a hundred embeddings
MAX_CHARS = 600  # a run-on "sentence" is cut here (the embedder reads ~256 word pieces)


def split(text: str) -> list[str]:
    """The sentences of a chunk: its lines, each split at a sentence end, markup dropped,
    fragments of fewer than :data:`MIN_WORDS` words left out (a chunk of only fragments is
    one sentence: itself)."""
    found: list[str] = []
    for line in _LINE.split(text):
        for piece in _SENTENCE_END.split(line):
            piece = " ".join(_MARKUP.sub(" ", piece).split())
            if len(piece.split()) >= MIN_WORDS:
                found.append(piece[:MAX_CHARS])
    if not found:
        whole = " ".join(_MARKUP.sub(" ", text).split())
        return [whole[:MAX_CHARS]] if whole else []
    return found[:MAX_SENTENCES]


class SentenceVectors:
    """Sentence vectors by text, least recently used dropped past ``maxsize``: the same chunks come
    back question after question, so most of a question's sentences are embedded once."""

    def __init__(self, embed: Embed, maxsize: int = 50_000):
        self._embed = embed
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self.maxsize = maxsize
        self.embedded = 0

    def vectors(self, sentences: Sequence[str]) -> dict[str, np.ndarray]:
        with self._lock:
            known = {s: self._vectors[s] for s in sentences if s in self._vectors}
            for s in known:
                self._vectors.move_to_end(s)
        missing = list(dict.fromkeys(s for s in sentences if s not in known))
        if missing:
            fresh = self._embed(missing)
            self.embedded += len(missing)
            with self._lock:
                for s, v in zip(missing, fresh, strict=True):
                    self._vectors[s] = np.asarray(v, dtype=np.float32)
                    known[s] = self._vectors[s]
                while len(self._vectors) > self.maxsize:
                    self._vectors.popitem(last=False)
        return known


def best_sentences(question: np.ndarray, chunks: Sequence[ChunkResult], vectors: SentenceVectors) -> dict[int, float]:
    """Each chunk's best sentence cosine with the question vector."""
    per_chunk = {c.id: split(c.content) for c in chunks}
    known = vectors.vectors([s for sentences in per_chunk.values() for s in sentences])
    q = np.asarray(question, dtype=np.float32)
    q = q / max(float(np.linalg.norm(q)), 1e-12)
    best: dict[int, float] = {}
    for chunk_id, sentences in per_chunk.items():
        if not sentences:
            best[chunk_id] = 0.0
            continue
        matrix = np.stack([known[s] for s in sentences])
        norms = np.clip(np.linalg.norm(matrix, axis=1), 1e-12, None)
        best[chunk_id] = float(np.max(matrix @ q / norms))
    return best


def reorder(
    ranked: list[ChunkResult], best: dict[int, float], *, top: int, share: float, boosts: dict[int, float] | None = None
) -> list[ChunkResult]:
    """``ranked`` with its first ``top`` chunks ordered by the blend of ``final_score`` and their
    best sentence (x the source's factor in ``boosts``, as the ranking weighs the chunk); those
    chunks take the scores of the places they land on, the rest stays."""
    head = ranked[:top]
    if share <= 0 or len(head) < 2:
        return ranked
    boosts = boosts or {}
    scores = sorted((c.final_score for c in head), reverse=True)
    order = sorted(
        head, key=lambda c: -((1 - share) * c.final_score + share * best.get(c.id, 0.0) * boosts.get(c.id, 1.0))
    )
    moved = [chunk.model_copy(update={"final_score": score}) for chunk, score in zip(order, scores, strict=True)]
    return moved + ranked[top:]
