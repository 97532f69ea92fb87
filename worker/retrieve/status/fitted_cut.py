"""The ``success`` cut a community's own confirmed questions put in force.

The calibrated cut (``confidence.py``) is the same for every knowledge base: ``success`` from a
confidence of 0.5. Where a community's answerable and unanswerable questions score alike, no cut
is right on all of them, and the best one lies where that community's questions fall. Its keeper
tells us where: each confirmed question says which side of the cut it belongs on, a confirmed
passage above it (``success``), a confirmed "not in the documents" below it.

Once a community has :data:`MIN_ANSWERABLE` valid passage confirmations and :data:`MIN_NONE`
valid "none" ones, each confirmed question is asked again as if unconfirmed, its confidence read
on the calibration, and the cut that puts the most of them on their side is fitted. Few points
choose a cut that fits them and not the next question, so:

* the candidates are the configured cut and the midpoints between neighbouring confidences, and
  among the cuts right on the most points the one nearest the configured cut wins (the fitted cut
  moves only as far as the points ask);
* no candidate calls ``success`` more of the "none" questions than the configured cut does: an
  answer called ``success`` that the documents do not hold costs an agent more than a hedged one,
  so the fit lowers the cut only beneath the unanswerable questions it has seen;
* its leave-one-out accuracy (each point decided by the cut fitted on the others) is set beside
  the configured cut's accuracy on the same points, and the fitted cut decides only when, left
  out, it puts clearly more questions right: of the questions the two cuts decide differently,
  the ones it gains outnumber the ones it loses by at least 2 and by 1.64 standard deviations (a
  sign test at one-sided 95 %). Otherwise the page shows the figures and the configured cut stays.

Measured on hoa-dev (docs/confirmations.md): scores of answerable and unanswerable questions
overlap there, and a fit in force traded hedged answers for unanswerable and off-topic questions
called ``success`` on questions it had not seen; none of the four communities' confirmations
gives a clear gain, so the configured cut stays on all four.

Confirmations are what a keeper chose to confirm, not the questions a community gets: they leave
out the questions from other domains that any assistant is asked. So the fit also counts the
calibration's off-domain questions (``assets/off_domain_questions.txt``, asked of the knowledge
base at fit time) as unanswerable: a cut fitted on on-subject questions alone can fall to where
"what time does the DMV open" is ``success``, and these keep it above them. They are always in the
fit and never in the accuracies shown, which are the keeper's questions'. The cut never falls
below the ``no_results`` cut either.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

from ...store.calibrations import FittedCut

# Valid confirmations a fit needs: passages (answerable) and "none" (unanswerable).
MIN_ANSWERABLE = 10
MIN_NONE = 5


@dataclass(frozen=True)
class Point:
    """One confirmed question: its confidence asked as if unconfirmed, and whether it has an answer."""

    score: float
    answerable: bool


def enough(answerable: int, unanswerable: int) -> bool:
    return answerable >= MIN_ANSWERABLE and unanswerable >= MIN_NONE


def accuracy(points: Sequence[Point], cut: float) -> float:
    """The share of points on their side of ``cut`` (answerable at or above it, the rest below)."""
    if not points:
        return 0.0
    return sum((p.score >= cut) == p.answerable for p in points) / len(points)


def best_cut(points: Sequence[Point], configured: float, floor: float = 0.0) -> float:
    """The cut right on the most points, the nearest to ``configured`` among equals, never below ``floor``."""
    answerable = sorted(p.score for p in points if p.answerable)
    unanswerable = sorted(p.score for p in points if not p.answerable)
    scores = sorted({p.score for p in points})
    candidates = {configured, *((a + b) / 2 for a, b in pairwise(scores))}
    if scores:
        candidates |= {scores[0], scores[-1] + 1e-6}

    def right(cut: float) -> int:  # answerable at or above the cut, unanswerable below it
        return len(answerable) - bisect_left(answerable, cut) + bisect_left(unanswerable, cut)

    def called_success(cut: float) -> int:  # unanswerable ones at or above it
        return len(unanswerable) - bisect_left(unanswerable, cut)

    allowed = called_success(configured)
    kept = [c for c in candidates if c >= floor and called_success(c) <= allowed] or [configured]
    return max(kept, key=lambda c: (right(c), -abs(c - configured)))


def leave_one_out(
    points: Sequence[Point], configured: float, floor: float = 0.0, always: Sequence[Point] = ()
) -> float:
    """The share of ``points`` the cut fitted on the others (and ``always``) puts on their side."""
    return sum(left_out(points, configured, floor, always)) / len(points) if points else 0.0


def left_out(
    points: Sequence[Point], configured: float, floor: float = 0.0, always: Sequence[Point] = ()
) -> list[bool]:
    """For each point, whether the cut fitted on the others (and ``always``) puts it on its side."""
    return [
        (point.score >= best_cut([*points[:i], *points[i + 1 :], *always], configured, floor)) == point.answerable
        for i, point in enumerate(points)
    ]


def fit(
    points: Sequence[Point], configured: float, floor: float = 0.0, always: Sequence[Point] = ()
) -> FittedCut | None:
    """The fitted cut on the keeper's ``points`` and the off-domain questions' (``always``); None
    when the keeper's are too few (:func:`enough`)."""
    answerable = sum(p.answerable for p in points)
    unanswerable = len(points) - answerable
    if not enough(answerable, unanswerable):
        return None
    fitted = left_out(points, configured, floor, always)
    today = [(p.score >= configured) == p.answerable for p in points]
    return FittedCut(
        success_at=round(best_cut([*points, *always], configured, floor), 6),
        answerable=answerable,
        unanswerable=unanswerable,
        loo_accuracy=sum(fitted) / len(points),
        configured_accuracy=sum(today) / len(points),
        configured_at=configured,
        gained=sum(f and not t for f, t in zip(fitted, today, strict=True)),
        lost=sum(t and not f for f, t in zip(fitted, today, strict=True)),
    )
