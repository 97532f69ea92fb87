"""Whether a question is on the knowledge base's subject at all: ``no_results`` is for one that is not.

The calibrated confidence reads the best relevance, and a question can score like an unrelated one
while its words are the documents' own: the embedding model places a homeowner's "our roof is shot,
can we go with a metal roof or change the pitch?" far from the resolution that allows only "roof
pitches ... already in use", which the full-text leg ranks first. Emptying the context then hides
the answer the ranking found. So ``no_results`` (empty context, "do not answer from general
knowledge") is kept for a question nearer to other domains than to the knowledge base: its best
passage's cosine against its nearest question among the calibration's off-domain questions
(``assets/off_domain_questions.txt``: cooking, trivia, programming), both read by the same model. A
weak question on the documents' subject becomes ``low_confidence`` and carries its closest
passages, with a message telling the agent to answer only from them. The comparison is between
two similarities of one model to one question, so it needs no cut of its own; it only ever turns
``no_results`` into ``low_confidence``, never into ``success``.

On hoa-dev's 194 questions no answerable one is nearer to the off-domain questions than to its
knowledge base, 16 of 24 off-topic ones are, and 5 of 38 unanswerable ones
(docs/answer-quality.md, "On the documents' subject").
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ...embeddings import unit_length
from ...models import ChunkResult, Status
from .confidence import off_domain_questions

log = logging.getLogger("arc.status")

ON_SUBJECT_MESSAGE = (
    "No passage matches this question closely, but it is on the documents' subject: the closest "
    "passages are in the context. Answer only from them and cite them; if they do not address the "
    "question, say the governing documents do not, and do not answer from general knowledge."
)
ON_SUBJECT_WARNING = (
    "low_confidence rather than no_results: the question is nearer to the knowledge base "
    "(cosine {passage:.2f}) than to questions from other domains ({elsewhere:.2f})"
)


@dataclass(frozen=True)
class Subject:
    """A question's best passage's cosine and its nearest off-domain question's."""

    passage: float
    elsewhere: float

    @property
    def on_subject(self) -> bool:
        return self.passage > self.elsewhere

    def overrule(self, status: Status, message: str | None) -> tuple[Status, str | None]:
        """The status and its message: ``no_results`` on the subject is ``low_confidence``."""
        if status != "no_results" or not self.on_subject:
            return status, message
        return "low_confidence", ON_SUBJECT_MESSAGE

    def warning(self) -> str:
        """What the answer's warnings say when :meth:`overrule` lifted a ``no_results``."""
        return ON_SUBJECT_WARNING.format(passage=self.passage, elsewhere=self.elsewhere)


class OffDomain:
    """The off-domain questions' vectors for one embedder, embedded once, when first needed."""

    def __init__(self, embed_queries: Callable[[list[str]], np.ndarray]):
        self._embed_queries = embed_queries
        self._vectors: np.ndarray | None = None
        self._lock = threading.Lock()

    def vectors(self) -> np.ndarray | None:
        """Unit rows, one per off-domain question; None when the embedder fails (then the
        confidence's status stands)."""
        with self._lock:
            if self._vectors is None:
                try:
                    self._vectors = unit_length(self._embed_queries(off_domain_questions()))
                except Exception as exc:  # an embedding provider's failure costs this rule, not the answer
                    log.warning("off-domain questions not embedded (%s); no_results stays as scored", exc)
                    return None
            return self._vectors

    def subject(self, question: np.ndarray | None, candidates: Sequence[ChunkResult]) -> Subject | None:
        """Where ``question`` stands between the knowledge base (its best candidate's cosine) and
        other domains; None without a question vector, a candidate with a cosine, or the vectors."""
        passage = max((c.vector_score for c in candidates if c.vector_score is not None), default=None)
        if question is None or passage is None:
            return None
        vectors = self.vectors()
        if vectors is None or not len(vectors):
            return None
        elsewhere = float(np.max(vectors @ unit_length(question)))
        return Subject(passage=float(passage), elsewhere=elsewhere)
