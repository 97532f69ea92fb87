"""How homeowners ask versus how governing documents are written.

Homeowners say "dues", "HOA", "yearly meeting", "get paid"; declarations and by-laws say
"assessments", "Association", "annual meeting", "compensation". The full-text leg only matches
words, so :func:`expand` adds the documents' words for the homeowners' ones. The list is
deliberately small and generic (terms used by HOA governing documents in general, not by one
association's); the embedding leg reads the question as typed.
"""

from __future__ import annotations

import itertools
import re
import threading
from dataclasses import dataclass

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
# itself (sql/functions/arc_word_frequencies.sql, per community), so nothing here lists words.
_LETTERS = re.compile(r"[A-Za-z]+")
SPLIT_MIN = 7  # a word this long may be two words run together ...
PART_MIN = 3  # ... of at least this many letters each


@dataclass(frozen=True)
class CompoundCandidates:
    words: tuple[str, ...]
    splits: dict[str, tuple[tuple[str, str], ...]]
    joins: tuple[tuple[str, str], ...]

    def lookups(self) -> list[str]:
        """Every word whose frequency in the knowledge base decides something."""
        needed = set(self.words) | {a + b for a, b in self.joins}
        needed |= {part for pairs in self.splits.values() for pair in pairs for part in pair}
        return sorted(needed)


def compound_candidates(question: str) -> CompoundCandidates:
    words = tuple(w.lower() for w in _LETTERS.findall(question))
    splits = {
        w: tuple((w[:i], w[i:]) for i in range(PART_MIN, len(w) - PART_MIN + 1))
        for w in set(words)
        if len(w) >= SPLIT_MIN
    }
    joins = tuple((a, b) for a, b in itertools.pairwise(words) if len(a) >= PART_MIN and len(b) >= PART_MIN)
    return CompoundCandidates(words, splits, joins)


def compound_expansions(candidates: CompoundCandidates, frequency: dict[str, int]) -> list[str]:
    """The documents' spelling of the question's compounds: a word no chunk holds, split where
    both halves are the documents' words (the split whose rarer half is commonest), and two
    adjacent words joined where the documents write them as one (stopwords never join)."""
    present = set(candidates.words)
    extra: list[str] = []
    for word, pairs in sorted(candidates.splits.items()):
        if frequency.get(word, 0) != 0:
            continue
        found = [
            (min(frequency.get(a, 0), frequency.get(b, 0)), a, b)
            for a, b in pairs
            if frequency.get(a, 0) > 0 and frequency.get(b, 0) > 0
        ]
        if found:
            _, a, b = max(found)
            extra += [a, b]
    for a, b in candidates.joins:
        if (
            frequency.get(a, -1) >= 0
            and frequency.get(b, -1) >= 0
            and frequency.get(a + b, 0) > 0
            and a + b not in present
        ):
            extra.append(a + b)
    return [w for i, w in enumerate(extra) if w not in present and w not in extra[:i]]


class Spellings:
    """Per community, the words' frequencies a process has read (the one call returns them), for
    the version they were read at: a question's compounds are spelled from them before its search,
    and the call that searches says whether the version still holds (``first_stage.py``)."""

    def __init__(self, max_words: int = 20_000):
        self.max_words = max_words
        self._held: dict[str, tuple[int, dict[str, int]]] = {}
        self._lock = threading.Lock()

    def get(self, community: str) -> dict[str, int] | None:
        with self._lock:
            held = self._held.get(community)
        return None if held is None else held[1]

    def put(self, community: str, version: int, frequencies: dict[str, int]) -> None:
        with self._lock:
            held = self._held.get(community)
            if held is None or held[0] != version or len(held[1]) > self.max_words:
                self._held[community] = (version, dict(frequencies))
            else:
                held[1].update(frequencies)
