"""The answer's status, decided in one place from everything that bears on it.

These do, in this order of precedence:

1. the confidence (``confidence.py``): the best first-stage relevance on the knowledge base's
   calibrated scale (the fixed cuts when it has none) gives ``no_results``, ``low_confidence``
   or ``success``; a question in another language that the model reads is decided there on its
   language's own scale (``language_scale.py``); when a rerank service scored the candidates
   (``rerank_services.py``), its best score sets this first status instead;
2. the question's subject (``subject.py``): a ``no_results`` from the confidence for a question
   nearer to the knowledge base than to questions from other domains is ``low_confidence``,
   with its closest passages (a rerank service's ``no_results`` stands: it read the passages);
3. the question's language (``language.py``): one the embedding model cannot read is
   ``low_confidence`` whatever the score (the score says nothing about the documents), and one
   in another language that it reads but that has no scale of its own is never ``no_results``
   (the English scale was measured on the knowledge base's own sentences);
4. an explicit ``min_relevance`` that keeps every chunk out of the context (``minimum.py``) makes
   it ``no_results``: the agent gets nothing to cite;
5. a ``success`` whose context lacks the kind of answer the question asks for (an amount of
   money, ``answer_type.py``) becomes ``low_confidence``: the passages are on the subject but do
   not state it.

Past the first, each step only lowers the status, except the subject and language rules, which
keep an on-subject or unread question from being ``no_results``; the message tells the agent what
to do with it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...models import Status
from ..language import Reading
from .answer_type import AnswerType
from .confidence import Confidence
from .minimum import empty_context_warning
from .subject import Subject

NO_RESULTS_MESSAGE = (
    "No passage in the knowledge base matches this question. Do not answer from general "
    "knowledge; say the governing documents do not address it, or ask the user to "
    "rephrase."
)
LOW_CONFIDENCE_MESSAGE = (
    "Only weakly related passages were found. Answer cautiously, cite the sources, and "
    "say that the documents may not address the question directly."
)
# The passages may be squarely on the subject: what they lack is the figure asked for.
MISSING_ANSWER_MESSAGE = (
    "The passages found are on the subject but state {absent}. Do not give one from "
    "general knowledge; say the governing documents do not state it, cite the sources, "
    "and suggest asking the association."
)
STATUS_MESSAGES: dict[str, str | None] = {
    "success": None,
    "low_confidence": LOW_CONFIDENCE_MESSAGE,
    "no_results": NO_RESULTS_MESSAGE,
}


@dataclass(frozen=True)
class Verdict:
    status: Status
    message: str | None
    warnings: list[str] = field(default_factory=list)


def first(
    confidence: Confidence,
    *,
    service: Status | None = None,
    reading: Reading | None = None,
    subject: Subject | None = None,
) -> tuple[Status, str | None]:
    """The status before the context is assembled (``no_results`` leaves it empty) and its
    message: the confidence's, or the rerank service's when one scored the candidates, then the
    subject rule (on the confidence's only) and the language rule."""
    status: Status = service if service is not None else confidence.status
    message = STATUS_MESSAGES[status]
    if service is None and subject is not None:
        status, message = subject.overrule(status, message)
    if reading is not None:
        overruled, message = reading.overrule(status, message)
        status = overruled  # type: ignore[assignment]
    return status, message


def settle(
    opening: tuple[Status, str | None],
    *,
    context_chunks: int,
    minimum: float | None,
    best: float | None,
    lacking: AnswerType | None,
) -> Verdict:
    """The status, its message and the warnings that explain a lowered one.

    ``opening``: the status and message :func:`first` gave before the context was assembled;
    ``context_chunks``: how many chunks the context holds; ``minimum``: the request's explicit
    ``min_relevance`` (None: the default context); ``best``: the best final score, named in the
    warning; ``lacking``: the kind of answer the question asks for that the context does not hold.
    """
    status, message = opening
    if status == "no_results":
        return Verdict("no_results", message)
    if minimum is not None and context_chunks == 0:
        return Verdict("no_results", NO_RESULTS_MESSAGE, [empty_context_warning(minimum, best)])
    if status == "success" and lacking is not None:
        return Verdict(
            "low_confidence",
            MISSING_ANSWER_MESSAGE.format(absent=lacking.absent),
            [f"the question asks for {lacking.name} and the context states {lacking.absent}"],
        )
    return Verdict(status, message)
