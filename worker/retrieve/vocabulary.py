"""How homeowners ask versus how governing documents are written.

Homeowners say "dues", "HOA", "yearly meeting", "get paid"; declarations and by-laws say
"assessments", "Association", "annual meeting", "compensation". The full-text leg only matches
words, so :func:`expand` adds the documents' words for the homeowners' ones. The list is
deliberately small and generic (terms used by HOA governing documents in general, not by one
association's); the embedding leg reads the question as typed.
"""

from __future__ import annotations

import re

# question phrase (a regex, matched case-insensitively on word boundaries) -> document words
SYNONYMS: dict[str, str] = {
    r"dues|fees?|hoa fees?": "assessment assessments",
    r"yearly|every year|once a year": "annual",
    r"hoa|homeowners? association": "association",
    r"bylaws?": "by-laws",
    r"cc&?rs?|covenants?|deed restrictions?": "declaration covenants restrictions",
    r"acc|arc|architectural (review )?(committee|board)": "architectural control committee",
    r"board": "directors",
    r"paid|pay|salary|salaries|stipend": "compensation",
    r"chickens?|goats?|livestock|horses?": "animals poultry livestock",
    r"dogs?|cats?|pets?": "animals pets",
    r"sheds?": "outbuilding accessory structure",
    r"rvs?|campers?|motorhomes?|boats?|trailers?": "recreational vehicle trailer boat",
    r"rent(ing)?|renters?|tenants?|airbnb|vrbo|short[- ]term rental": "lease rental tenant",
    r"fines?|penalt(y|ies)": "fine penalty violation enforcement",
    r"skip|without (approval|permission)|ignore": "violation enforcement",
    r"permission|permit|sign[- ]off|ok(ay)?": "approval",
    r"colou?rs?|paint(ing)?": "color colour paint",
    r"complain(t|ts)?": "complaint violation",
    r"(heard|hear|gotten|got|get) back|no (response|reply|answer|decision)|(never|not|nobody|no one) "
    r"(responded|replied|answered|decided)": "failure approve disapprove deemed approved",
    r"dissolve|disband": "dissolution dissolved",
    r"mow(ing)?|landscap(er|ers|ing)|yard work": "landscaping landscape maintenance",
    r"house|home": "dwelling residence",
    r"back ?yard": "rear yard",
    r"max": "maximum",
    r"min": "minimum",
    r"tall|high|higher": "height",
    r"big|large|size": "size area square feet",
    r"duplex(es)?|apartments?|multi[- ]family": "single family dwelling",
}

_PATTERNS = [(re.compile(rf"\b(?:{pattern})\b", re.I), words) for pattern, words in SYNONYMS.items()]


def expand(question: str) -> list[str]:
    """The documents' words for what the question says in other words (nothing already in it)."""
    present = {w.lower() for w in re.findall(r"[\w&-]+", question)}
    extra: list[str] = []
    for pattern, words in _PATTERNS:
        if pattern.search(question):
            extra += [w for w in words.split() if w.lower() not in present and w not in extra]
    return extra


# -- compounds, read off the knowledge base ------------------------------------------------------
# "backyard" against "back yard", "sunroom" against "sun room", "lawn mower" against "lawnmower":
# the question and the documents (or the scan's OCR) write one compound two ways, and the
# full-text leg matches neither. Which way the documents write it is asked of the knowledge base
# itself, inside the search's call (sql/functions/arc_compound_spellings.sql, per community), so
# nothing here lists words.
_LETTERS = re.compile(r"[A-Za-z]+")


def compound_words(question: str) -> tuple[str, ...]:
    """The question's words, lower case, in order: the search also reads their compounds as the
    knowledge base spells them (a word it lacks split in two, two words joined)."""
    return tuple(w.lower() for w in _LETTERS.findall(question))
