"""The answer's status, decided in one place from everything that bears on it.

Three things do, in this order of precedence:

1. the confidence (``confidence.py``): the best first-stage relevance on the knowledge base's
   calibrated scale (the fixed cuts when it has none) gives ``no_results``, ``low_confidence``
   or ``success``;
2. an explicit ``min_relevance`` that keeps every chunk out of the context (``minimum.py``) makes
   it ``no_results``: the agent gets nothing to cite;
3. a ``success`` whose context lacks the kind of answer the question asks for (an amount of
   money, ``answer_type.py``) becomes ``low_confidence``: the passages are on the subject but do
   not state it.

Each step only ever lowers the status; the message tells the agent what to do with it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..models import Status
from .answer_type import AnswerType
from .confidence import Confidence
from .minimum import empty_context_warning

NO_RESULTS_MESSAGE = ("No passage in the knowledge base matches this question. Do not answer from general "
                      "knowledge; say the governing documents do not address it, or ask the user to "
                      "rephrase.")
LOW_CONFIDENCE_MESSAGE = ("Only weakly related passages were found. Answer cautiously, cite the sources, and "
                          "say that the documents may not address the question directly.")
# The passages may be squarely on the subject: what they lack is the figure asked for.
MISSING_ANSWER_MESSAGE = ("The passages found are on the subject but state {absent}. Do not give one from "
                          "general knowledge; say the governing documents do not state it, cite the sources, "
                          "and suggest asking the association.")
STATUS_MESSAGES: dict[str, str | None] = {"success": None, "low_confidence": LOW_CONFIDENCE_MESSAGE,
                                          "no_results": NO_RESULTS_MESSAGE}


@dataclass(frozen=True)
class Verdict:
    status: Status
    message: str | None
    warnings: list[str] = field(default_factory=list)


def settle(confidence: Confidence, *, context_chunks: int, minimum: float | None, best: float | None,
           lacking: AnswerType | None) -> Verdict:
    """The status, its message and the warnings that explain a lowered one.

    ``context_chunks``: how many chunks the context holds; ``minimum``: the request's explicit
    ``min_relevance`` (None: the default context); ``best``: the best final score, named in the
    warning; ``lacking``: the kind of answer the question asks for that the context does not hold.
    """
    if confidence.status == "no_results":
        return Verdict("no_results", NO_RESULTS_MESSAGE)
    if minimum is not None and context_chunks == 0:
        return Verdict("no_results", NO_RESULTS_MESSAGE, [empty_context_warning(minimum, best)])
    if confidence.status == "success" and lacking is not None:
        return Verdict("low_confidence", MISSING_ANSWER_MESSAGE.format(absent=lacking.absent),
                       [f"the question asks for {lacking.name} and the context states {lacking.absent}"])
    status: Status = "success" if confidence.status == "success" else "low_confidence"
    return Verdict(status, STATUS_MESSAGES[status])
