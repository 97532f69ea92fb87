"""The kind of answer a question asks for, and whether the context holds one.

A question that asks *how much* a fee, a fine or the dues are wants an amount. Governing documents
often speak of the assessment, the fine or the transfer fee in passages that never state an amount
(the board sets it each year, or a schedule elsewhere does): such a passage is on topic and scores
like an answer, and the status said `success` for a question the documents cannot answer. On
hoa-dev two of the four negatives answered `success` were of this kind ("how much are the HOA dues",
"how much is the fine if ...") and no answerable question asked for an amount its context lacked
(README, "The status, per community"). Checking the expected answer type is an old device of
question answering (TREC QA systems matched "how much" to money and quantity answers); here it only
ever lowers `success` to `low_confidence`, with a warning naming what is missing, and never hides a
passage. Only money is checked: a duration or a count is often stated in words a pattern cannot
tell from the rest ("promptly", "a reasonable time", "no more than two").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_MONEY_WORDS = (
    r"fees?|dues|fines?|costs?|prices?|charges?|deposits?|assessments?|penalt(?:y|ies)|rent|rates?"
    r"|tolls?"
)


@dataclass(frozen=True)
class AnswerType:
    """What a question asks for (``asked``) and what a text that answers it must hold (``found``)."""

    name: str  # "an amount of money"
    absent: str  # "no amount of money"
    asked: re.Pattern[str]
    found: re.Pattern[str]


AMOUNT_OF_MONEY = AnswerType(
    name="an amount of money",
    absent="no amount of money",
    asked=re.compile(
        # "how much" with a money word or a payment in the same clause ("how much is the fine",
        # "how much do we pay"), not "how much space"
        r"\bhow much\b(?=(?:\W+\w+){0,6}?\W+(?:" + _MONEY_WORDS + r"|pay|paying|paid|charged?|owe|cost)\b)"
        # "what is the (quarterly) fee", "what are the dues"; not "what is a special assessment",
        # which asks what one is, nor "what is the deadline to pay the dues"
        r"|\bwhat(?:s|'s| is| are| was| were)\s+(?!an?\s)(?:(?!(?:to|for|of|on|in|about|pay\w*)\b)\w+\s+){0,3}?(?:"
        + _MONEY_WORDS
        + r")\b"
        # "the fine amount", "the amount of the transfer fee"
        r"|\b(?:"
        + _MONEY_WORDS
        + r")\s+amounts?\b|\bamount of (?:the |a |an |my |our )?(?:\w+\s+){0,2}?(?:"
        + _MONEY_WORDS
        + r")\b",
        re.IGNORECASE,
    ),
    # Generous on purpose: an amount found where there is none only leaves the status as it was,
    # while one missed lowers a right answer. Legal text writes amounts in words too ("ten
    # percent", "one-quarter of the annual assessment").
    found=re.compile(
        r"\$\s?\d|\b\d[\d,]*(?:\.\d+)?\s*(?:dollars|usd|cents|percent|per cent)\b|\d\s?%"
        r"|\b(?:dollars?|cents)\b"
        r"|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|thirty"
        r"|forty|fifty|sixty|seventy|eighty|ninety|hundred)(?:[- ]\w+)?\s+(?:percent|per cent)\b"
        r"|\b(?:one|two|three)[- ](?:half|halves|thirds?|quarters?|fourths?|fifths?|tenths?)\s+of\b",
        re.IGNORECASE,
    ),
)

CHECKED: tuple[AnswerType, ...] = (AMOUNT_OF_MONEY,)


def missing(question: str, context: str) -> AnswerType | None:
    """The kind of answer ``question`` asks for that ``context`` does not hold, if any."""
    for kind in CHECKED:
        if kind.asked.search(question) and not kind.found.search(context):
            return kind
    return None
