"""Which documents a question names: "the shops bylaws", "our CC&Rs", "the Holloway addendum".

Two associations' near-identical by-laws, or a declaration and the amendment that repeats its
wording, score alike on the passage's text; the words that tell them apart are in the documents'
names. A question word counts for the documents whose names hold it (stemmed, "By-Laws" =
"bylaws", and the initials of a name's capitalised words: "CC&Rs" = Covenants, Conditions and
Restrictions), weighted by how few of the candidates' documents share it (idf over the names),
so words every name holds ("Wyndham Forest" in a community's every document name) count nothing.
Words that name the same set of documents count once ("Wyndham" and "Forest" are one mention).
Nothing here is a list of names: it reads the names the knowledge base was given.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from functools import lru_cache

import Stemmer

from .preprocess import STOPWORDS

_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9&'’-]*")
_JOINERS = re.compile(r"[&'’-]")
# A mention must tell the named documents apart from at least this share of the others: ln(N/df)
# >= 0.5 means a word held by at most ~60% of the candidates' documents.
MIN_WEIGHT = 0.5
_stemmer = Stemmer.Stemmer("english")


def _token(word: str) -> str:
    return _JOINERS.sub("", word.lower())


def _words(text: str) -> list[str]:
    out = []
    for word in _WORD.findall(text):
        token = _token(word)
        # years name documents ("the 2003 amendment"); other numbers do not
        if token and token not in STOPWORDS and (not token.isdigit() or len(token) == 4):
            out.append(_stemmer.stemWord(token))
    return out


@lru_cache(maxsize=4096)
def name_terms(name: str) -> frozenset[str]:
    """A document name's words (stemmed) and the initials of its runs of capitalised words."""
    terms = set(_words(name))
    capitalised = [
        _token(w)[0] for w in _WORD.findall(name) if w[0].isupper() and _token(w) not in STOPWORDS and _token(w)
    ]
    initials = "".join(capitalised)
    for size in (3, 4, 5):
        terms.update(initials[i : i + size] for i in range(len(initials) - size + 1))
    return frozenset(terms)


def question_terms(question: str) -> set[str]:
    terms = set()
    for word in _words(question):
        terms.add(word)
        if 3 < len(word) <= 6 and word.endswith("s"):  # "CC&Rs" -> "ccr", an acronym's plural
            terms.add(word[:-1])
    return terms


def name_scores(question: str, names: Mapping[str, str]) -> dict[str, float]:
    """document id -> how strongly the question names it (0: not at all)."""
    asked = question_terms(question)
    terms = {document: name_terms(name or "") for document, name in names.items()}
    total = len(terms)
    mentions: dict[frozenset[str], None] = {}
    for word in asked:
        holders = frozenset(d for d, t in terms.items() if word in t)
        if holders and len(holders) < total:
            mentions[holders] = None
    scores = dict.fromkeys(terms, 0.0)
    for holders in mentions:
        for document in holders:
            scores[document] += math.log(total / len(holders))
    return scores


def named_documents(question: str, names: Mapping[str, str]) -> set[str]:
    """The documents the question names best, if it names any clearly enough."""
    scores = name_scores(question, names)
    best = max(scores.values(), default=0.0)
    if best < MIN_WEIGHT:
        return set()
    return {document for document, score in scores.items() if score == best}
