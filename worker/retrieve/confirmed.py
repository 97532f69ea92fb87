"""Confirmed answers at question time: a question like one the keeper confirmed gets the
confirmed answer (its passage as ``[SOURCE 1]`` and ``success``, or ``no_results`` for a
confirmed "the documents do not address it").

What counts as "like" is measured on each knowledge base, and a confirmation must never take a
question it does not answer, so a question takes confirmation *c* only when all of these hold:

1. *c* is the confirmed question nearest to it (cosine of the question embeddings), by at least
   :data:`MARGIN` over the nearest confirmation with another answer;
2. the similarity reaches the knowledge base's own scale (:class:`LikeScale`), measured on the
   similarities between *different* questions there: each confirmed question's nearest one with
   another answer, and the homeowner questions any association gets (``worker/assets``) against
   each other. ``near`` (their median) is enough when retrieval agrees strongly (the confirmed
   passage among the question's first :data:`NEAR_RANK` candidates); otherwise it takes
   ``like`` (their upper quartile) and the passage among the first :data:`AGREE_RANK`;
3. both ask for the same kind of answer when both name one (:func:`asking`): "how tall can my
   fence be" wants a size, "what fence materials are allowed" a kind, "what day is trash
   pickup" a time, "where do the bins go" a place;
4. a "none" takes a question's whole answer away: it needs ``like`` + :data:`NONE_EXTRA`;
5. the question asks nothing the confirmation leaves out (:func:`uncovered`): its content words
   that the confirmed question lacks must appear in the confirmed passage, or a word of either
   near it by the embedding model (:data:`WORD_NEAR`: "tall" and "height", "kids" and
   "children"), all but :data:`UNCOVERED_ALLOWED` of them ("was there a special assessment" is
   not answered by a passage on design guidelines however near the two questions sit). A "none"
   has no passage: only the confirmed question's words count;
6. or, for a passage, instead of rule 5, strong agreement (:func:`agreed`): a rewording uses
   other key words, so the word test misses it, but it sits past ``like`` by
   :data:`AGREE_EXTRA`, ahead of every other answer by :data:`AGREE_MARGIN`, and retrieval
   scores the confirmed passage at least :data:`AGREE_SHARE` of its best candidate; or retrieval
   puts the confirmed passage at its very top by fused rank and by vector similarity alike, the
   question near ``like`` (a different question on the same subject retrieves another passage
   first). A "none" has no passage to agree on: it takes without rule 5 when the question sits
   past its own level (``like`` + :data:`NONE_EXTRA`) by :data:`AGREE_EXTRA` and ahead of every
   other answer by :data:`AGREE_MARGIN`.

Measured on hoa-dev (docs/confirmations.md): 0.50-0.71 of rewordings take their original's
confirmation by community (rules 1-5 alone: 0.11-0.33), and no confirmation takes a question of
(c) or (d) that rules 1-5 left alone; on 100 seeded halves of each community's questions the
takes that cost a question its SOURCE 1 are on one community (heronwood, 28 in 100 halves).
Rule 6's numbers are the strictest of the settings best on all four communities; chosen on
three, they give the fourth one wrong take in three cases of four, so they are kept at the
strict end.

Confirmations live in memory per community, loaded with their state today
(``sql/functions/arc_confirmations.sql``) and kept for the stamp they were read at (the
community's knowledge-base version and its confirmations' state, one short row): a community
with confirmations reads its stamp at every question, so a changed document or confirmation,
in any process, is seen at the next question and a stale confirmation is never served. A
community without confirmations costs no database call: it is looked at again after
:attr:`Confirmations.refresh_seconds` (this process's own writes at once).
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from importlib import resources

import numpy as np

from ..embeddings import unit_length
from ..models import ChunkResult, ConfirmedMatch, Status
from ..store.confirmations import StoredConfirmation
from .preprocess import STOPWORDS
from .status.answer_type import AMOUNT_OF_MONEY
from .status.decision import Verdict

# A question takes the nearest confirmation only this far ahead of the nearest one with another answer.
MARGIN = 0.04
# The confirmed passage must be among the question's own first AGREE_RANK candidates, or its
# first NEAR_RANK for a question only ``near`` (not ``like``) the confirmed one.
AGREE_RANK = 10
NEAR_RANK = 2
# The scale's quantiles of the different questions' nearest similarities, and its bounds.
NEAR_QUANTILE = 0.5
LIKE_QUANTILE = 0.75
SCALE_FLOOR = 0.35
SCALE_CEILING = 0.85
# A "none" takes a question's whole answer away: it needs this much more than ``like``.
NONE_EXTRA = 0.1
# Rule 6 (:func:`agreed`): a rewording uses other key words, so rule 5 misses it; strong agreement
# of the two questions and of retrieval takes without it. Chosen on hoa-dev's rewordings and
# checked leaving each community out (benchmarks/confirmations/results.md): the strictest of the
# settings with no wrong take and the most rewordings right on the four communities.
AGREE_EXTRA = 0.1  # similarity past ``like``
AGREE_MARGIN = 0.2  # over the nearest confirmation with another answer
AGREE_SHARE = 0.8  # the confirmed passage's relevance over the best candidate's
# Or: the confirmed passage first by the fused ranking or by vector similarity alone and no more
# than TOP_BEHIND places behind the first by the other, the question TOP_MARGIN ahead of another
# answer and no more than TOP_BELOW_LIKE under ``like``. A different question on the confirmed
# one's subject often puts the confirmed passage second or third by both (measured on seeded
# halves of hoa-dev's questions, benchmarks/confirmations/results.md); a rewording rarely does.
TOP_BEHIND = 1
TOP_MARGIN = 0.05
TOP_BELOW_LIKE = 0.05
# How many of a question's own content words the confirmed passage may leave out.
UNCOVERED_ALLOWED = 1
# Two words mean the same here when the embedding model puts them this near (all-MiniLM-L6-v2:
# tall/height 0.85, kids/children 0.89, rent/lease 0.69, back/rear 0.62; words of different
# questions such as shed/fence 0.40, assessment/guidelines 0.38, special/design 0.31).
WORD_NEAR = 0.6
# Word vectors kept per process (each a few hundred bytes).
WORD_CACHE = 50_000
# Two words are the same term when they share this many first letters (or one is the other's start).
STEM_LETTERS = 5
# Words homeowners put in any question, which say nothing of what it asks.
FILLER = frozenset(
    """
actually also anything anyone anybody ever get gets got getting hoa hey hi honestly like much many
need needs know let lot okay ok really right something still sure thing things think want wanted
way well yes yeah guess heard someone somebody us i'm im i've whats
""".split()
)
CONFIRMED_MESSAGE = "The keeper confirmed that this passage answers this question ([SOURCE 1])."
NONE_MESSAGE = "The keeper of the documents confirmed that they do not address this question; say so rather than guess."

_ASKING: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("money", re.compile(r"\bhow much\b.*\b(fee|dues|fine|cost|pay|charge|assessment|deposit)s?\b|\bcost\b|\bprice\b")),
    # A place asked first: "where do the bins go when it isn't pickup day" asks where, not when.
    # "where in the bylaws" and "where are the fence rules" ask for a section, not a place.
    (
        "place",
        re.compile(r"\bwhere\b(?! in (the|our|my|which)\b)(?!\W+(is|are) the (\w+ ){0,2}(rule|section|part)s?\b)"),
    ),
    (
        "time",
        re.compile(
            r"\bhow (long|soon|often|far in advance|many (days|weeks|months|years|hours))\b"
            r"|\bwhen\b|\bdeadline\b|\bwhat time\b|\bhours\b|\b(what|which) (day|date|month|week)\b"
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
            r"\bwhat\b(?:\s+\w+){0,2}?\s+(kind|type|sort|colou?r|material|style)s?\b"
            r"|\bwhich (colou?r|material|type|kind)s?\b|\bmaterials\b"
        ),
    ),
)


def asking(question: str) -> str | None:
    """The kind of answer a question asks for, when its wording says (None: it does not say)."""
    text = question.lower()
    if AMOUNT_OF_MONEY.asked.search(text):
        return "money"
    for name, pattern in _ASKING:
        if pattern.search(text):
            return name
    return None


_TERM = re.compile(r"[^\W\d_][\w'-]*")


def terms(text: str) -> frozenset[str]:
    """A text's content words, lower case, without stopwords, filler and words under 3 letters."""
    words = (w.removesuffix("'s").strip("'-") for w in _TERM.findall(text.lower()))
    return frozenset(w for w in words if len(w) >= 3 and w not in STOPWORDS and w not in FILLER)


def _same_term(a: str, b: str) -> bool:
    n = min(len(a), len(b), STEM_LETTERS)
    return a[:n] == b[:n] and (n == STEM_LETTERS or a.startswith(b) or b.startswith(a))


def uncovered(question: str, confirmed_query: str, passage: str | None) -> list[str]:
    """The question's content words that neither the confirmed question nor its passage holds
    (``passage`` None: a "none" answer, only the confirmed question counts)."""
    known = terms(confirmed_query) | (terms(passage) if passage else frozenset())
    return sorted(w for w in terms(question) if not any(_same_term(w, k) for k in known))


def agreed(
    similarity: float, margin: float, scale: LikeScale, passage: ChunkResult, candidates: Sequence[ChunkResult]
) -> bool:
    """Rule 6: the question and retrieval agree strongly enough to take a passage confirmation
    without rule 5's word test: the question is past ``like`` by :data:`AGREE_EXTRA`, ahead of
    every other answer by :data:`AGREE_MARGIN`, and retrieval scores the confirmed passage at
    least :data:`AGREE_SHARE` of its best candidate's first-stage relevance (a share, so the same
    on every knowledge base's scale); or retrieval puts the confirmed passage at its top by both
    the fused ranking and vector similarity (first by one, :data:`TOP_BEHIND` behind by the
    other at most), the question near ``like`` and ahead of another answer (:data:`TOP_BELOW_LIKE`,
    :data:`TOP_MARGIN`)."""
    best = max((c.relevance for c in candidates), default=0.0)
    if (
        similarity >= scale.like + AGREE_EXTRA
        and margin >= AGREE_MARGIN
        and best > 0
        and passage.relevance >= AGREE_SHARE * best
    ):
        return True
    # Or retrieval puts the confirmed passage at the very top by both its measures.
    rank = next((i for i, c in enumerate(candidates) if c.id == passage.id), len(candidates))
    own = passage.vector_score or 0.0
    by_vector = sum((c.vector_score or 0.0) > own for c in candidates)
    return (
        min(rank, by_vector) == 0
        and rank + by_vector <= TOP_BEHIND
        and margin >= TOP_MARGIN
        and similarity >= scale.like - TOP_BELOW_LIKE
    )


def homeowner_questions() -> list[str]:
    """Questions any association gets (``worker/assets/homeowner_questions.txt``): different
    questions from a community's confirmed ones, as a rule, for :func:`like_cut`."""
    text = resources.files("worker").joinpath("assets/homeowner_questions.txt").read_text(encoding="utf-8")
    return [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]


@dataclass(frozen=True)
class LikeScale:
    """How similar a question must be to a confirmed one: ``near`` with strong retrieval
    agreement, ``like`` with some."""

    near: float = SCALE_CEILING
    like: float = SCALE_CEILING

    @classmethod
    def of(cls, different: Sequence[float]) -> LikeScale:
        """From the similarities between different questions of the knowledge base."""
        if not len(different):
            return cls()
        values = np.asarray(different, dtype=np.float64)

        def bounded(q: float) -> float:
            return float(min(max(np.quantile(values, q), SCALE_FLOOR), SCALE_CEILING))

        return cls(near=bounded(NEAR_QUANTILE), like=bounded(LIKE_QUANTILE))


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
    """One community's confirmations at one stamp (knowledge-base version and confirmations)."""

    stamp: str
    loaded_at: float
    entries: tuple[Entry, ...] = ()
    matrix: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.float32))
    scale: LikeScale = LikeScale()
    stored: tuple[StoredConfirmation, ...] = ()
    # Each entry's answer as one number (its chunk's id; 0 for "none"), to compare at once; made
    # when the confirmations are read (:meth:`of`), not at each question.
    answers: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    @classmethod
    def of(
        cls,
        stamp: str,
        loaded_at: float,
        entries: tuple[Entry, ...],
        matrix: np.ndarray,
        scale: LikeScale,
        stored: tuple[StoredConfirmation, ...],
    ) -> Known:
        answers = np.fromiter((e.chunk_id or 0 for e in entries), dtype=np.int64, count=len(entries))
        return cls(stamp, loaded_at, entries, matrix, scale, stored, answers)


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
        """The candidates with the confirmed passage first, scored just above the best (the context
        orders its sources by score, and a minimum the request sets keeps it)."""
        if self.chunk_id is None:
            return candidates
        found = next((c for c in candidates if c.id == self.chunk_id), None)
        if found is None:
            return candidates
        best = max((c.final_score for c in candidates), default=0.0)
        lifted = found.model_copy(update={"final_score": max(found.final_score, math.nextafter(best, math.inf))})
        return [lifted, *(c for c in candidates if c.id != self.chunk_id)]


Loader = Callable[[str], list[StoredConfirmation]]
Stamps = Callable[[str], str]
Embed = Callable[[list[str]], np.ndarray]


class Confirmations:
    """Every community's confirmations this process has read, each at its stamp."""

    def __init__(
        self,
        *,
        load: Loader | None,
        stamp: Stamps,
        model: str,
        reference: Callable[[], np.ndarray] | None = None,
        words: Embed | None = None,
        refresh_seconds: float = 2.0,
    ):
        self._load = load
        self._stamp = stamp
        self.model = model
        self._reference = reference
        self._reference_nearest: list[float] | None = None
        self._embed_words = words
        self._word_vectors: dict[str, np.ndarray] = {}
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

    def questions(self, community: str) -> list[tuple[str, bool]]:
        """The community's valid confirmed questions as stored now, each with whether it has an
        answer (a passage) or not ("none"): what its success cut is fitted on."""
        stored = self._load(community) if self._load is not None else ()
        return [(s.query, s.answer == "passage") for s in stored if s.state == "confirmed"]

    def known(self, community: str, stamp: str | None = None) -> Known:
        """The community's confirmations as they stand, read again when its documents changed or
        another process may have written (``refresh_seconds``); ``stamp``: theirs as the question's
        one call read it (no read of it here)."""
        now = time.monotonic()
        with self._lock:
            held = self._known.get(community)
        if stamp is None and held is not None and now - held.loaded_at < self.refresh_seconds and not held.entries:
            return held  # none here: no database call on the answer's path
        if stamp is None:
            stamp = self._stamp(community)
        if held is not None and held.stamp == stamp:
            held = replace(held, loaded_at=now)
            with self._lock:
                self._known[community] = held
            return held
        fresh = self._read(community, stamp, now)
        with self._lock:
            self._known[community] = fresh
        return fresh

    def _read(self, community: str, stamp: str, now: float) -> Known:
        stored = tuple(self._load(community)) if self._load is not None else ()
        usable = [s for s in stored if s.state == "confirmed" and s.embedding_model == self.model and s.embedding.size]
        if not usable:
            return Known(stamp, now, stored=stored)
        matrix = np.stack([unit_length(s.embedding) for s in usable])
        entries = tuple(Entry(s.id, s.query, s.answer, s.chunk_id, asking(s.query)) for s in usable)
        return Known.of(stamp, now, entries, matrix, LikeScale.of(self._different(entries, matrix)), stored)

    def _different(self, entries: tuple[Entry, ...], matrix: np.ndarray) -> list[float]:
        """Similarities between different questions: each confirmed question's nearest confirmed
        one with another answer, and each homeowner question's nearest other homeowner question."""
        answers = [(e.answer, e.chunk_id) for e in entries]
        sims = matrix @ matrix.T
        out = [
            float(max(others))
            for i in range(len(entries))
            if (others := [sims[i, j] for j in range(len(entries)) if answers[j] != answers[i]])
        ]
        return out + self._homeowner_nearest()

    def _homeowner_nearest(self) -> list[float]:
        if self._reference_nearest is None:
            nearest: list[float] = []
            if self._reference is not None:
                vectors = np.stack([unit_length(v) for v in self._reference()])
                sims = vectors @ vectors.T
                np.fill_diagonal(sims, -1.0)
                nearest = [float(x) for x in sims.max(axis=1)]
            self._reference_nearest = nearest
        return self._reference_nearest

    def match(
        self,
        community: str,
        question: str,
        embedding: np.ndarray | None,
        candidates: Sequence[ChunkResult],
        stamp: str | None = None,
    ) -> Match | None:
        """The confirmation ``question`` takes, if any (module docstring); ``stamp``: the
        confirmations' as the question's one call read it."""
        if self._load is None or embedding is None:
            return None
        known = self.known(community, stamp)
        if not known.entries:
            return None
        sims = known.matrix @ unit_length(embedding)
        best = int(np.argmax(sims))
        entry, similarity = known.entries[best], float(sims[best])
        others = sims[known.answers != known.answers[best]]
        rival = float(others.max()) if others.size else -1.0
        if similarity - rival < MARGIN:
            return None
        asks = asking(question)
        if asks is not None and entry.asks is not None and asks != entry.asks:
            return None
        scale = known.scale
        passage: str | None = None
        if entry.answer == "none":
            if similarity < scale.like + NONE_EXTRA:
                return None
            if similarity - rival >= AGREE_MARGIN and similarity >= scale.like + NONE_EXTRA + AGREE_EXTRA:
                # rule 6 for a "none": a rewording far past the scale and every other answer
                return Match(entry.id, entry.query, similarity, entry.answer, entry.chunk_id)
        else:
            rank = next((i for i, c in enumerate(candidates[:AGREE_RANK]) if c.id == entry.chunk_id), None)
            if rank is None or similarity < (scale.near if rank < NEAR_RANK else scale.like):
                return None
            if agreed(similarity, similarity - rival, scale, candidates[rank], candidates):
                return Match(entry.id, entry.query, similarity, entry.answer, entry.chunk_id)
            passage = candidates[rank].content
        if len(self.unmet(question, entry.query, passage)) > UNCOVERED_ALLOWED:
            return None
        return Match(entry.id, entry.query, similarity, entry.answer, entry.chunk_id)

    def unmet(self, question: str, confirmed_query: str, passage: str | None) -> list[str]:
        """The question's words the confirmation leaves out (:func:`uncovered`) that no word of the
        confirmed question or passage is near by the embedding model (:data:`WORD_NEAR`)."""
        missing = uncovered(question, confirmed_query, passage)
        if len(missing) <= UNCOVERED_ALLOWED or self._embed_words is None:
            return missing
        known = sorted(terms(confirmed_query) | (terms(passage) if passage else frozenset()))
        if not known:
            return missing
        vectors = self._vectors([*missing, *known])
        near = vectors[: len(missing)] @ vectors[len(missing) :].T
        return [w for w, best in zip(missing, near.max(axis=1), strict=True) if best < WORD_NEAR]

    def _vectors(self, words: list[str]) -> np.ndarray:
        """Unit vectors of single words, each embedded once per process."""
        found = {w: self._word_vectors[w] for w in words if w in self._word_vectors}
        new = [w for w in dict.fromkeys(words) if w not in found]
        if new and self._embed_words is not None:
            fresh = {w: unit_length(v) for w, v in zip(new, self._embed_words(new), strict=True)}
            if len(self._word_vectors) + len(fresh) > WORD_CACHE:
                self._word_vectors.clear()
            self._word_vectors.update(fresh)
            found.update(fresh)
        return np.stack([found[w] for w in words])
