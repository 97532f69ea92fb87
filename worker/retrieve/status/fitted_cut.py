"""The ``success`` cut a community's own confirmed questions put in force.

The calibrated cut (``confidence.py``) is the same for every knowledge base: ``success`` from a
confidence of 0.5. Where a community's questions score lower on its calibrated scale than the
calibration's own sentences do, that cut hedges answers the documents hold. Its keeper tells us
where its questions fall: each confirmed question says which side of the cut it belongs on, a
confirmed passage above it (``success``), a confirmed "not in the documents" below it.

Once a community has :data:`MIN_ANSWERABLE` valid passage confirmations and :data:`MIN_NONE`
valid "none" ones, each confirmed question is asked again as if unconfirmed and its confidence
read on the calibration. The cut is not the one that puts the most of them right (on a few dozen
points that cut follows the points, and it lost on questions it had not seen); the scale is
re-anchored on two robust figures instead:

* the median confidence of the confirmed answerable questions and of the confirmed "none" ones,
  and the cut :data:`ANCHOR_AT` of the way from the second to the first; it only ever lowers the
  configured cut (raising it hedged answerable rewordings) and never falls below the
  ``no_results`` cut;
* it calls no more of the confirmed "none" questions and of the calibration's off-domain
  questions (``assets/off_domain_questions.txt``, asked of the knowledge base at fit time: the
  questions from other domains any assistant is asked, which confirmations leave out) ``success``
  than the configured cut does; otherwise the configured cut stays. Where answerable and
  unanswerable questions score alike, a lower cut trades hedged answers for unanswerable ones
  called ``success``, and which side wins depends only on the mix of questions asked next;
* left out in turn, each confirmed question decided by the cut anchored on the others, it puts
  more of them right than the configured cut (:attr:`FittedCut.in_force`); otherwise the page
  shows the figures and the configured cut stays.

Measured on hoa-dev (docs/confirmations.md): with the rewordings' originals confirmed, every
other question keeps its status on all four communities; with half of a community's questions
confirmed, over 100 seeded halves per community, the status on the other half rises on 5 of 300
and falls on 1 (on the harness's own half: Wyndham Forest 0.72 -> 0.78, the rest unchanged).
Without the guards the anchored cut raises most halves of Franklin Square and Wyndham Forest, but
lowers a fifth of Heronwood's, and with mostly answerable questions confirmed it calls Franklin
Square's other, mostly unanswerable, questions ``success``.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from ...store.calibrations import FittedCut

# Valid confirmations a fit needs: passages (answerable) and "none" (unanswerable).
MIN_ANSWERABLE = 10
MIN_NONE = 5
# Where the cut sits from the median "none" confidence (0) to the median answerable one (1).
ANCHOR_AT = 0.4


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


def anchored_cut(points: Sequence[Point], configured: float, floor: float = 0.0, always: Sequence[Point] = ()) -> float:
    """The cut :data:`ANCHOR_AT` of the way from the points' median "none" confidence to their
    median answerable one, between ``floor`` and ``configured``; ``configured`` when it would call
    more of the unanswerable points and ``always`` (off-domain questions) ``success``."""
    answerable = [p.score for p in points if p.answerable]
    unanswerable = [p.score for p in points if not p.answerable]
    if not answerable or not unanswerable:
        return configured
    low, high = statistics.median(unanswerable), statistics.median(answerable)
    cut = min(max(low + ANCHOR_AT * (high - low), floor), configured)
    negatives = [*unanswerable, *(p.score for p in always)]
    if sum(s >= cut for s in negatives) > sum(s >= configured for s in negatives):
        return configured
    return cut


def leave_one_out(
    points: Sequence[Point], configured: float, floor: float = 0.0, always: Sequence[Point] = ()
) -> float:
    """The share of ``points`` the cut anchored on the others (and ``always``) puts on their side."""
    return sum(left_out(points, configured, floor, always)) / len(points) if points else 0.0


def left_out(
    points: Sequence[Point], configured: float, floor: float = 0.0, always: Sequence[Point] = ()
) -> list[bool]:
    """For each point, whether the cut anchored on the others (and ``always``) puts it on its side."""
    return [
        (point.score >= anchored_cut([*points[:i], *points[i + 1 :]], configured, floor, always)) == point.answerable
        for i, point in enumerate(points)
    ]


def fit(
    points: Sequence[Point], configured: float, floor: float = 0.0, always: Sequence[Point] = ()
) -> FittedCut | None:
    """The cut anchored on the keeper's ``points``, guarded by the off-domain questions'
    (``always``); None when the keeper's are too few (:func:`enough`)."""
    answerable = sum(p.answerable for p in points)
    unanswerable = len(points) - answerable
    if not enough(answerable, unanswerable):
        return None
    fitted = left_out(points, configured, floor, always)
    today = [(p.score >= configured) == p.answerable for p in points]
    return FittedCut(
        success_at=round(anchored_cut(points, configured, floor, always), 6),
        answerable=answerable,
        unanswerable=unanswerable,
        loo_accuracy=sum(fitted) / len(points),
        configured_accuracy=sum(today) / len(points),
        configured_at=configured,
        gained=sum(f and not t for f, t in zip(fitted, today, strict=True)),
        lost=sum(t and not f for f, t in zip(fitted, today, strict=True)),
    )
