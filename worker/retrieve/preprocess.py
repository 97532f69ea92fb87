"""Stage 1: the question as typed -> normalised text, keywords, query type, weights, filter.

Case is kept (it carries meaning in "ARC" vs "arc" and in section names); everything else that
only adds noise for embedding or full-text matching is normalised away.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from typing import Literal

from ..textnorm import normalise_text

QueryType = Literal["definition", "location", "terminology", "general"]

# Fusion weights (vector, full-text) per query type, applied to min-max normalised leg scores.
# "general" is tuned on SciFact/SQuAD (benchmarks/retrieval/: 0.4/0.6 beats 0.7/0.3); the others
# lean the same way around it: definitions lean semantic, "where is X mentioned" and keyword
# queries lean lexical.
WEIGHTS: dict[str, tuple[float, float]] = {
    "definition": (0.6, 0.4),
    "location": (0.25, 0.75),
    "terminology": (0.35, 0.65),
    "general": (0.4, 0.6),
}

_TRANSLATE = str.maketrans(
    {
        "\u2018": "'",
        "\u2019": "'",
        "\u201a": "'",
        "\u201b": "'",
        "\u2032": "'",
        "\u201c": '"',
        "\u201d": '"',
        "\u201e": '"',
        "\u2033": '"',
        "\u00ab": '"',
        "\u00bb": '"',
        "\u2010": "-",
        "\u2011": "-",
        "\u2012": "-",
        "\u2013": "-",
        "\u2014": "-",
        "\u2015": "-",
        "\u2212": "-",
        "\u00a0": " ",
        "\u200b": "",
        "\ufeff": "",
    }
)

_CONTRACTIONS = {
    "can't": "cannot",
    "won't": "will not",
    "shan't": "shall not",
    "let's": "let us",
    "i'm": "i am",
    "ain't": "is not",
    "what's": "what is",
    "where's": "where is",
    "who's": "who is",
    "how's": "how is",
    "when's": "when is",
    "why's": "why is",
    "that's": "that is",
    "there's": "there is",
    "here's": "here is",
    "it's": "it is",
    "he's": "he is",
    "she's": "she is",
}
_CONTRACTION_RE = re.compile(r"\b(" + "|".join(re.escape(k) for k in _CONTRACTIONS) + r")\b", re.I)
_SUFFIX_RE = re.compile(r"\b(\w+)(n't|'re|'ve|'ll|'d)\b", re.I)
_SUFFIXES = {"n't": " not", "'re": " are", "'ve": " have", "'ll": " will", "'d": " would"}
_REPEATED_PUNCT = re.compile(r"([!?.,;:])\1+")
_MIXED_END = re.compile(r"[!?]{2,}")

STOPWORDS = frozenset(
    """
a about above after again against all am an and any are as at be because been before being below
between both but by can cannot could did do does doing down during each few for from further had has
have having he her here hers herself him himself his how i if in into is it its itself just me more
most my myself no nor not now of off on once only or other our ours ourselves out over own same she
should so some such than that the their theirs them themselves then there these they this those
through to too under until up very was we were what when where which while who whom why will with
would you your yours yourself yourselves tell please allowed say says said mean means
""".split()
)

_PHRASE = re.compile(r'"([^"]{1,100})"')
_SECTION_REF = re.compile(
    r"\b(?:(?:section|article|chapter|exhibit|appendix|schedule|part)\s+[A-Z0-9]+(?:\.\d+)*(?:\s*\([A-Za-z0-9]{1,3}\))?"
    r"|\d+(?:\.\d+)+(?:\s*\([A-Za-z0-9]{1,3}\))?)",
    re.I,
)
# Letters of any alphabet: "máxima" is one word, not "m" and "xima"
_WORD = re.compile(r"[^\W_][\w&'-]*")

_DEFINITION = re.compile(
    r"^(what\s+(does|do|did)\b.+\bmean\b|what\s+is\s+meant\s+by\b|define\b|definition\s+of\b|"
    r"what\s+is\s+the\s+(definition|meaning)\s+of\b|meaning\s+of\b|what\s+counts\s+as\b)",
    re.I,
)
# "Where is X mentioned" asks for a place in the documents; "where is the pool" does not.
_LOCATION = re.compile(
    r"(\bwhere\b.*\b(mention(ed)?|discuss(ed)?|cover(ed)?|address(ed)?|defined|stated?|say|says|talks?)\b|"
    r"\bwhich\s+(section|article|chapter|page|document|clause)s?\b|\bfind\s+the\s+(section|clause|rule)\b|"
    r"\bwhat\s+(section|article|page|chapter)\b)",
    re.I,
)
_QUESTION_WORD = re.compile(r"^(what|how|why|when|where|who|which|can|may|do|does|is|are|should|must)\b", re.I)

# Phrasing that names a document type. It steers the ranking towards that type and never hides
# other chunks (pipeline.first_stage_order); only ``document_types`` in the request filters.
_DOCTYPE_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("ccr", re.compile(r"\b(cc\s*&\s*rs?|cc&r'?s|ccrs?|covenants?|declaration|deed\s+restrictions?)\b", re.I)),
    (
        "design_guidelines",
        re.compile(
            r"\b(according\s+to\s+the\s+(design\s+)?guidelines|(design\s+)?guidelines\s+(say|state|require|allow)|"
            r"in\s+the\s+(design\s+)?guidelines|design\s+guidelines|per\s+the\s+guidelines)\b",
            re.I,
        ),
    ),
    # "prior approval" means approval beforehand ("do I need prior approval to paint"), not a
    # past decision; the plural or another noun names the letters.
    (
        "response_letter",
        re.compile(
            r"\b(previous(ly)?|past|earlier)\s+(approvals?|decisions?|rulings?|letters?|cases?|approved)\b|"
            r"\bprior\s+(approvals|decisions?|rulings?|letters?|cases?)\b|"
            r"\bdecision\s+letters?\b|\bprecedents?\b|\b(been\s+)?approved\s+before\b",
            re.I,
        ),
    ),
    (
        "application_form",
        re.compile(
            r"\b(application\s+(process|form)|how\s+(do\s+i|to)\s+apply|submit\s+an\s+application|apply\s+for\s+approval)\b",
            re.I,
        ),
    ),
]


@dataclass(frozen=True)
class ProcessedQuery:
    original: str
    normalized: str
    keywords: list[str] = field(default_factory=list)
    query_type: QueryType = "general"
    detected_document_types: list[str] = field(default_factory=list)

    @property
    def weights(self) -> tuple[float, float]:
        return WEIGHTS[self.query_type]


def normalize(text: str) -> str:
    text = normalise_text(text).translate(_TRANSLATE)
    text = "".join(ch for ch in text if ch in "\t\n" or unicodedata.category(ch)[0] != "C")
    text = _CONTRACTION_RE.sub(lambda m: _match_case(m.group(0), _CONTRACTIONS[m.group(0).lower()]), text)
    text = _SUFFIX_RE.sub(lambda m: m.group(1) + _SUFFIXES[m.group(2).lower()], text)
    text = _MIXED_END.sub(lambda m: "?" if "?" in m.group(0) else "!", text)
    text = _REPEATED_PUNCT.sub(r"\1", text)
    return re.sub(r"\s+", " ", text).strip()


def _match_case(original: str, replacement: str) -> str:
    if original.isupper() and len(original) > 1:
        return replacement.upper()
    if original[0].isupper():
        return replacement[0].upper() + replacement[1:]
    return replacement


def keywords(text: str) -> list[str]:
    """Content words, with quoted phrases and section references ("4.2", "Exhibit A") kept whole."""
    found: list[str] = []
    rest = text
    for pattern in (_PHRASE, _SECTION_REF):
        for match in pattern.finditer(rest):
            found.append((match.group(1) if pattern is _PHRASE else match.group(0)).strip())
        rest = pattern.sub(" ", rest)
    for word in _WORD.findall(rest):
        word = word.strip("'-")
        if word and word.lower() not in STOPWORDS and (len(word) > 1 or word.isdigit()):
            found.append(word)
    unique: dict[str, str] = {}  # the first spelling of each word, in order
    for k in found:
        unique.setdefault(k.lower(), k)
    return list(unique.values())


def classify(text: str, words: list[str]) -> QueryType:
    if _DEFINITION.search(text):
        return "definition"
    if _LOCATION.search(text):
        return "location"
    if len(text.split()) <= 4 and not text.endswith("?") and not _QUESTION_WORD.match(text):
        return "terminology"
    return "general"


def detect_document_types(text: str) -> list[str]:
    return [doc_type for doc_type, pattern in _DOCTYPE_PATTERNS if pattern.search(text)]


def preprocess(query: str) -> ProcessedQuery:
    normalized = normalize(query)
    words = keywords(normalized)
    return ProcessedQuery(
        original=query,
        normalized=normalized,
        keywords=words,
        query_type=classify(normalized, words),
        detected_document_types=detect_document_types(normalized),
    )
