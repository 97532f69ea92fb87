"""The answer's status, measured against the knowledge base's own scores.

A fixed threshold on the best relevance means something different for every embedding model
and every document set: cosine similarities sit on a model's own scale, and short rule lists
score higher than long declarations. So each knowledge base is calibrated on itself (after Li
et al. 2024, arXiv 2410.08320): the same retriever is asked

* questions from other domains (``assets/off_domain_questions.txt``, no governing-document
  words): the median of their best relevance is the knowledge base's *floor*, what an
  unrelated question scores here;
* sentences taken from the knowledge base's own chunks, asked back: the median of their best
  relevance is its *match*, what a question whose passage is here scores, and the median of
  their best relevance among the passages that do not hold them is its *near miss*, what a
  question on one of its subjects scores when its own passage is not there.

A question's confidence (``confidence.score`` in every answer) is where its best relevance falls
between the floor and the top of the scale, ``(relevance - floor) / (top - floor)``, clamped to
0..1: 0 is the unrelated level or below, 1 the level of a passage quoted back (``match``), or
nearer when the knowledge base's passages are distinct from each other (:attr:`Calibration.top`),
or above. The status cuts act on that number (``no_results`` below 0.2, ``success`` from 0.5), so
they are the same for every knowledge base and model. A calibration belongs to one version of a
community's documents and one embedding model; ``calibration.py`` measures, stores and reads it.
"""

from __future__ import annotations

import random
import re
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources

from ...models import Status

# The two cuts on the calibrated confidence (README "Status"). Fitted on hoa-dev's three
# communities leave-one-out (fit on two, shown on the third: cuts 0.48-0.58 for success); 0.5
# is the round value in that range. No answerable hoa-dev question sits below 0.25.
SUCCESS_AT = 0.5
NO_RESULTS_BELOW = 0.2
# The top of the scale is at most this many times the near miss's distance from the floor, so that
# `success` (0.5) is reached at 0.8 of the way from the floor to the near miss. A knowledge base
# whose passages repeat each other (minutes that restate the rules, a declaration consolidated with
# the amendments beside it) has a near miss close to its match, and there the match decides as
# before; one whose passages are distinct (one declaration, a short set of guidelines) has a low
# near miss, and the quoted-back match there sits far above what a well-answered question in
# everyday words scores: on hoa-dev's CC&Rs alone the cut at 0.5 of the match hedged 7 of 16
# answered questions while no unanswerable one came near it. Fitted leave-one-out on hoa-dev's
# three communities and its CC&Rs alone (0.80 in every fold on the near-miss scale, 0.74-0.82
# equally good); README "The status, per community".
NEAR_MISS_REACH = 1.6
# ... but never below this share of the match's span: in a knowledge base of a few unrelated
# passages a sentence's best other passage may score no better than an unrelated question, and a
# top near the floor would call everything success. The measured knowledge bases keep 0.75-0.9.
TOP_AT_LEAST = 0.6
# Sentences asked back per calibration: the median settles within 0.01 from about 80 on.
CALIBRATION_QUESTIONS = 120
_SENTENCE = re.compile(r"(?<=[.;:!?])\s+")
_MIN_WORDS, _MAX_WORDS = 6, 60
_SEED = 20261125  # the sample is the same for the same chunks: a recalibration is reproducible


@dataclass(frozen=True)
class Calibration:
    """Where unrelated and matching questions score on one knowledge base, at one version."""

    version: int
    floor: float
    match: float
    questions: int
    near_miss: float | None = None
    reach: float = NEAR_MISS_REACH  # 0: the match alone
    # The success cut the community's confirmed questions fitted on this scale, when it is in
    # force (fitted_cut.py); None: the configured cut.
    success_at: float | None = None

    @property
    def top(self) -> float:
        """What a confidence of 1 stands for: the match, or the near miss's reach when lower."""
        if self.near_miss is None or self.reach <= 0:
            return self.match
        reached = self.floor + self.reach * (self.near_miss - self.floor)
        return max(min(self.match, reached), self.floor + TOP_AT_LEAST * (self.match - self.floor))

    def anchors(self) -> dict[str, float | None]:
        """The three measured levels, rounded, as reports and logs show them."""
        return {
            name: None if value is None else round(value, 4)
            for name, value in (("floor", self.floor), ("match", self.match), ("near_miss", self.near_miss))
        }

    def confidence(self, relevance: float) -> float:
        """Where ``relevance`` falls from the floor (0) to the top (1), clamped to 0..1: past either
        end says nothing more (no cut sits there), and a score outside 0..1 reads as a bug."""
        # A knowledge base whose quoted sentences barely outscore unrelated questions has no
        # usable scale; the small span keeps the division finite and the confidence low.
        span = max(self.top - self.floor, 1e-3)
        return min(max((relevance - self.floor) / span, 0.0), 1.0)


@dataclass(frozen=True)
class StatusCuts:
    success_at: float = SUCCESS_AT
    no_results_below: float = NO_RESULTS_BELOW
    # `success` also needs the kind of answer the question asks for in the context (answer_type.py)
    answer_types: bool = True
    # `no_results` only for a question nearer to other domains than to the knowledge base (subject.py)
    on_subject: bool = True


DEFAULT_CUTS = StatusCuts()


@dataclass(frozen=True)
class FixedThresholds:
    """Used only while a knowledge base has no calibration (empty, or being calibrated)."""

    no_results_below: float = 0.3
    low_confidence_below: float = 0.5


DEFAULT_THRESHOLDS = FixedThresholds()


@dataclass(frozen=True)
class Confidence:
    status: Status
    score: float | None  # the calibrated confidence, 0..1; None when uncalibrated
    relevance: float | None  # the best first-stage relevance it was computed from
    calibrated: bool
    calibration: Calibration | None = None  # what the score was measured against

    def public(self) -> dict[str, object]:
        def rounded(value: float | None) -> float | None:
            return None if value is None else round(value, 4)

        top = self.calibration.top if self.calibration else None
        return {
            "score": rounded(self.score),
            "relevance": rounded(self.relevance),
            "calibrated": self.calibrated,
            **anchors(self.calibration),
            "top": rounded(top),
            "kb_version": self.calibration and self.calibration.version,
        }


def anchors(calibration: Calibration | None) -> dict[str, float | None]:
    """A calibration's rounded anchors, or the same keys empty when there is none."""
    return calibration.anchors() if calibration else dict.fromkeys(("floor", "match", "near_miss"))


def decide(
    relevance: float | None, calibration: Calibration | None, cuts: StatusCuts, fixed: FixedThresholds
) -> Confidence:
    """``success`` / ``low_confidence`` / ``no_results`` for a question's best relevance."""
    if relevance is None:
        return Confidence("no_results", None, None, calibration is not None)
    if calibration is None:
        status: Status = (
            "no_results"
            if relevance < fixed.no_results_below
            else "low_confidence"
            if relevance < fixed.low_confidence_below
            else "success"
        )
        return Confidence(status, None, relevance, False)
    score = calibration.confidence(relevance)
    success_at = cuts.success_at if calibration.success_at is None else calibration.success_at
    fitted: Status = (
        "no_results" if score < cuts.no_results_below else "low_confidence" if score < success_at else "success"
    )
    return Confidence(fitted, score, relevance, True, calibration)


def off_domain_questions() -> list[str]:
    text = resources.files("worker").joinpath("assets/off_domain_questions.txt").read_text(encoding="utf-8")
    return [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]


def pseudo_questions(chunks: Sequence[str], count: int = CALIBRATION_QUESTIONS) -> list[str]:
    """One sentence from each of up to ``count`` chunks, chosen with a fixed seed: what a
    question whose passage is in the knowledge base scores, on this knowledge base."""
    rng = random.Random(_SEED)
    picked = rng.sample(range(len(chunks)), min(count, len(chunks)))
    questions = []
    for i in sorted(picked):
        sentences = [s for s in _SENTENCE.split(chunks[i]) if _MIN_WORDS <= len(s.split()) <= _MAX_WORDS]
        if sentences:
            questions.append(rng.choice(sentences))
    return questions


def quotes(passage: str, text: str) -> bool:
    """Whether ``passage`` holds ``text`` word for word (whitespace aside): a sentence asked back
    is not its own near miss."""
    return " ".join(text.split()) in " ".join(passage.split())


@dataclass(frozen=True)
class Best:
    """A text's best first-stage relevance, and its best among passages that do not hold the text."""

    relevance: float
    elsewhere: float


def calibrate(
    best_relevance: Callable[[Sequence[str]], list[Best]],
    chunks: Sequence[str],
    version: int,
    count: int = CALIBRATION_QUESTIONS,
    reach: float = NEAR_MISS_REACH,
) -> Calibration | None:
    """Ask the knowledge base the off-domain questions and its own sentences; None when it is
    too small to say anything (fewer than 5 usable sentences)."""
    inside = pseudo_questions(chunks, count)
    if len(inside) < 5:
        return None
    outside = best_relevance(off_domain_questions())
    matched = best_relevance(inside)
    return Calibration(
        version=version,
        floor=statistics.median(b.relevance for b in outside),
        match=statistics.median(b.relevance for b in matched),
        near_miss=statistics.median(b.elsewhere for b in matched),
        questions=len(inside),
        reach=reach,
    )
