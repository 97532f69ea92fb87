"""Confirmed answers at question time: a question like one the keeper confirmed gets the
confirmed answer (its passage as ``[SOURCE 1]`` and ``success``, or ``no_results`` for a
confirmed "the documents do not address it").

What counts as "like" is decided on each knowledge base, and a confirmation must never take a
question it does not answer, so a question takes confirmation *c* only when all of these hold:

1. *c* is the confirmed question nearest to it (cosine of the question embeddings), by at least
   :data:`MARGIN` over the nearest confirmation with another answer;
2. that similarity reaches the knowledge base's own cut (:func:`like_cut`): the similarities
   between *different* questions there (each confirmed question against the confirmations with
   another answer and the homeowner questions every association gets) say how near a different
   question on the same subject comes;
3. retrieval agrees (passages only): the confirmed passage is among the question's own first
   :data:`AGREE_RANK` first-stage candidates, so a question that retrieves elsewhere is left alone;
4. both ask for the same kind of answer when both name one (:func:`asking`): "how tall can my
   fence be" wants a height, "what fence materials are allowed" does not.

Confirmations live in memory per community, loaded with their state today
(``sql/functions/arc_confirmations.sql``) and kept for the knowledge base's version they were
read at: a changed document is seen by every process at its next question, and a stale
confirmation is never served. Confirmations written by another process are read again after
:attr:`Confirmations.refresh_seconds`; this process's own writes are seen at once. A community
without confirmations costs one cached lookup per question.
"""

from __future__ import annotations

import re
import threading
from importlib import resources
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..models import ChunkResult, ConfirmedMatch, Status
from ..store.confirmations import StoredConfirmation
from .status import Verdict

# A question takes the nearest confirmation only this far ahead of the nearest one with another answer.
MARGIN = 0.04
# The confirmed passage must be among the question's own first AGREE_RANK candidates.
AGREE_RANK = 10
# The "like" cut: the quantile of the different questions' nearest similarities, within bounds
# (a community with few confirmations has a thin distribution; never below LIKE_FLOOR).
LIKE_QUANTILE = 0.9
LIKE_FLOOR = 0.55
LIKE_CEILING = 0.85
# A "none" takes a question's whole answer away: it needs this much more similarity.
NONE_EXTRA = 0.1
CONFIRMED_MESSAGE = "The keeper confirmed that this passage answers this question ([SOURCE 1])."
NONE_MESSAGE = "The keeper of the documents confirmed that they do not address this question; say so rather than guess."

_ASKING: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("money", re.compile(r"\bhow much\b.*\b(fee|dues|fine|cost|pay|charge|assessment|deposit)s?\b|\bcost\b|\bprice\b")),
    (
        "time",
        re.compile(
            r"\bhow (long|soon|often|far in advance|many (days|weeks|months|years|hours))\b|\bwhen\b|\bdeadline\b|\bwhat time\b|\bhours\b"
        ),
    ),
    (
        "size",
        re.compile(
            r"\bhow (tall|high|big|large|wide|deep|far|close)\b|\bheight\b|\bsize\b|\bsquare f|\bfeet\b|\bsetback\b"
        ),
    ),
    ("count", re.compile(r"\bhow many\b|\bnumber of\b|\bmaximum number\b")),
    ("who", re.compile(r"\bwho\b|\bwhose\b|\bwhich (person|committee|board|officer)\b")),
    (
        "kind",
        re.compile(
            r"\bwhat (kind|kinds|type|types|sort|color|colors|colour|colours|material|materials|style)s?\b|\bwhich (color|colour|material|type|kind)s?\b"
        ),
    ),
)


def asking(question: str) -> str | None:
    """The kind of answer a question asks for, when its wording says (None: it does not say)."""
    text = question.lower()
    for name, pattern in _ASKING:
        if pattern.search(text):
            return name
    return None


def homeowner_questions() -> list[str]:
    """Questions any association gets (``worker/assets/homeowner_questions.txt``): different
    questions from a community's confirmed ones, as a rule, for :func:`like_cut`."""
    text = resources.files("worker").joinpath("assets/homeowner_questions.txt").read_text(encoding="utf-8")
    return [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]


def like_cut(different: Sequence[float]) -> float:
    """The cosine a question must reach to be like a confirmed one, from the similarities between
    different questions of the knowledge base (each confirmed question's nearest different one)."""
    if not len(different):
        return LIKE_CEILING
    return float(min(max(np.quantile(np.asarray(different), LIKE_QUANTILE), LIKE_FLOOR), LIKE_CEILING))


@dataclass(frozen=True)
class Entry:
    """A valid confirmation, as the matcher reads it."""

    id: int
    query: str
    answer: str  # "passage" or "none"
    chunk_id: int | None
    asks: str | None


@dataclass(frozen=True)
class Known:
    """One community's confirmations at one knowledge-base version."""

    version: int
    loaded_at: float
    entries: tuple[Entry, ...] = ()
    matrix: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.float32))
    cut: float = LIKE_CEILING
    stored: tuple[StoredConfirmation, ...] = ()


@dataclass(frozen=True)
class Match:
    """A question that takes a confirmation."""

    id: int
    query: str
    similarity: float
    answer: str
    chunk_id: int | None

    def public(self) -> ConfirmedMatch:
        return ConfirmedMatch(id=self.id, query=self.query, similarity=round(self.similarity, 4))

    def opening(self) -> tuple[Status, str]:
        """The status the confirmation sets before the context is built (``no_results``: empty)."""
        return ("no_results", NONE_MESSAGE) if self.answer == "none" else ("success", CONFIRMED_MESSAGE)

    def verdict(self) -> Verdict:
        return Verdict(*self.opening())

    def first(self, candidates: list[ChunkResult]) -> list[ChunkResult]:
        """The candidates with the confirmed passage first (scored as the best, so that a minimum
        the request sets keeps it)."""
        if self.chunk_id is None:
            return candidates
        found = next((c for c in candidates if c.id == self.chunk_id), None)
        if found is None:
            return candidates
        best = max((c.final_score for c in candidates), default=0.0)
        found.final_score = max(found.final_score, best)
        return [found, *(c for c in candidates if c.id != self.chunk_id)]


Loader = Callable[[str], list[StoredConfirmation]]
Versions = Callable[[str], int]
Embed = Callable[[list[str]], np.ndarray]


class Confirmations:
    """Every community's confirmations this process has read, each at its version."""

    def __init__(
        self,
        *,
        load: Loader | None,
        version: Versions,
        model: str,
        reference: Callable[[], np.ndarray] | None = None,
        refresh_seconds: float = 2.0,
    ):
        self._load = load
        self._version = version
        self.model = model
        self._reference = reference
        self._reference_vectors: np.ndarray | None = None
        self.refresh_seconds = refresh_seconds
        self._known: dict[str, Known] = {}
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return self._load is not None

    def forget(self, community: str | None = None) -> None:
        """After this process wrote a confirmation (None: every community, a documents change)."""
        with self._lock:
            if community is None:
                self._known.clear()
            else:
                self._known.pop(community, None)

    def known(self, community: str) -> Known:
        """The community's confirmations as they stand, read again when its documents changed or
        another process may have written (``refresh_seconds``)."""
        now = time.monotonic()
        with self._lock:
            held = self._known.get(community)
        if held is not None and now - held.loaded_at < self.refresh_seconds and not held.entries:
            return held  # none here: no database call on the answer's path
        version = self._version(community)
        if held is not None and held.version == version and now - held.loaded_at < self.refresh_seconds:
            return held
        fresh = self._read(community, version, now)
        with self._lock:
            self._known[community] = fresh
        return fresh

    def _read(self, community: str, version: int, now: float) -> Known:
        stored = tuple(self._load(community)) if self._load is not None else ()
        usable = [s for s in stored if s.state == "confirmed" and s.embedding_model == self.model and s.embedding.size]
        if not usable:
            return Known(version, now, stored=stored)
        matrix = np.stack([_unit(s.embedding) for s in usable])
        entries = tuple(Entry(s.id, s.query, s.answer, s.chunk_id, asking(s.query)) for s in usable)
        return Known(version, now, entries, matrix, like_cut(self._different(entries, matrix)), stored)

    def _different(self, entries: tuple[Entry, ...], matrix: np.ndarray) -> list[float]:
        """Each confirmed question's similarity to its nearest different question: the confirmed
        ones with another answer, and the homeowner questions any association gets."""
        out: list[float] = []
        reference = self._references()
        answers = [(e.answer, e.chunk_id) for e in entries]
        sims = matrix @ matrix.T
        for i in range(len(entries)):
            others = [sims[i, j] for j in range(len(entries)) if answers[j] != answers[i]]
            if reference is not None and reference.size:
                others.append(float((reference @ matrix[i]).max()))
            if others:
                out.append(float(max(others)))
        return out

    def _references(self) -> np.ndarray | None:
        if self._reference_vectors is None and self._reference is not None:
            self._reference_vectors = np.stack([_unit(v) for v in self._reference()])
        return self._reference_vectors

    def match(
        self, community: str, question: str, embedding: np.ndarray | None, candidates: Sequence[ChunkResult]
    ) -> Match | None:
        """The confirmation ``question`` takes, if any (module docstring)."""
        if self._load is None or embedding is None:
            return None
        known = self.known(community)
        if not known.entries:
            return None
        sims = known.matrix @ _unit(embedding)
        best = int(np.argmax(sims))
        entry, similarity = known.entries[best], float(sims[best])
        rival = max(
            (
                float(sims[j])
                for j, e in enumerate(known.entries)
                if (e.answer, e.chunk_id) != (entry.answer, entry.chunk_id)
            ),
            default=-1.0,
        )
        if similarity - rival < MARGIN:
            return None
        needed = known.cut + (NONE_EXTRA if entry.answer == "none" else 0.0)
        if similarity < needed:
            return None
        asks = asking(question)
        if asks is not None and entry.asks is not None and asks != entry.asks:
            return None
        if entry.answer == "passage":
            ranks = [i for i, c in enumerate(candidates[:AGREE_RANK]) if c.id == entry.chunk_id]
            if not ranks:
                return None
        return Match(entry.id, entry.query, similarity, entry.answer, entry.chunk_id)


def _unit(vector: np.ndarray) -> np.ndarray:
    v = np.asarray(vector, dtype=np.float32)
    norm = float(np.linalg.norm(v))
    return v / norm if norm else v
