"""The question's language, against what the knowledge base and the embedding model can read.

The documents are read in English: the full-text leg stems with Postgres's ``english``
configuration (sql/002) and the default model, all-MiniLM-L6-v2, was trained on English only. A
question in Spanish about them would get ``no_results`` and the message that the documents do
not address it, when the worker had only failed to read it. So each question's language is
identified (py3langid: a naive Bayes model over byte n-grams, 97 languages, offline, numpy only)
among the languages homeowners most often write in, and:

* the embedding model cannot read it (English only): the answer says so, ``low_confidence`` with a
  message telling the agent to ask again in English and never to say the documents are silent, a
  warning naming the language and what to configure, and ``confidence.language``;
* the model reads it (multilingual-e5-small, OpenAI's models): the full-text leg, which finds
  next to nothing in another language, gives the fused ranking to the vector leg, and the status
  is decided on the language's own scale, measured on the knowledge base with the calibration
  (``language_scale.py``); a language without one (no questions shipped for it, or a knowledge
  base calibrated without them) is never ``no_results``: the English scale reads it as unrelated.

A question counts as another language only when the identifier is sure of it (English at most
:data:`ENGLISH_AT_MOST`, the other language at least :data:`OTHER_AT_LEAST`), the question is long
enough to tell (:data:`MIN_WORDS` words, or :data:`MIN_OTHER_SCRIPT` letters of a script other than
Latin: "HOA dues" or "cuota HOA" stays English), and it does not read as English to simpler
tests that catch the identifier's slips on short English sentences ("Who do gurus control?",
"Obesity raises life quality."): two or more English function words, or nine words in ten in the
English vocabulary of the default model's tokenizer. Measured (tests/test_language.py keeps the
first two): none of hoa-dev's 194 English questions and all 56 Spanish and 56 French ones of
benchmarks/language/ are flagged; of BEIR's English queries none of SQuAD's 5,285 and 5 of
SciFact's 809 claims, all jargon with no function word ("Pyridostatin deregulates G2/M
progression.").
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import threading
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger("arc.language")

# The language the knowledge base is read in: the full-text configuration of sql/002.
KNOWLEDGE_BASE_LANGUAGE = "en"
# Models that read English only; every other model is taken to read the question (OpenAI's and
# multilingual-e5-small read about 100 languages).
ENGLISH_ONLY_MODELS = frozenset({"all-MiniLM-L6-v2"})

# Languages told apart, ISO 639-1, with the names the warning uses. Regional languages that the
# identifier confuses with their neighbours on a short question (Catalan and Galician with
# Spanish and Portuguese, Latin, Occitan, Walloon) are left out: a question in one of them is
# still recognised as not English, under its neighbour's name.
LANGUAGE_NAMES: dict[str, str] = {
    "en": "English",
    "es": "Spanish",
    "pt": "Portuguese",
    "fr": "French",
    "de": "German",
    "it": "Italian",
    "nl": "Dutch",
    "pl": "Polish",
    "ru": "Russian",
    "uk": "Ukrainian",
    "ro": "Romanian",
    "cs": "Czech",
    "sk": "Slovak",
    "hu": "Hungarian",
    "el": "Greek",
    "tr": "Turkish",
    "ar": "Arabic",
    "he": "Hebrew",
    "fa": "Persian",
    "ur": "Urdu",
    "hi": "Hindi",
    "bn": "Bengali",
    "pa": "Punjabi",
    "gu": "Gujarati",
    "ta": "Tamil",
    "te": "Telugu",
    "ml": "Malayalam",
    "mr": "Marathi",
    "ne": "Nepali",
    "zh": "Chinese",
    "ja": "Japanese",
    "ko": "Korean",
    "vi": "Vietnamese",
    "th": "Thai",
    "id": "Indonesian",
    "ms": "Malay",
    "tl": "Tagalog",
    "sw": "Swahili",
    "am": "Amharic",
    "ht": "Haitian Creole",
    "sv": "Swedish",
    "da": "Danish",
    "no": "Norwegian",
    "fi": "Finnish",
    "hr": "Croatian",
    "sr": "Serbian",
    "bg": "Bulgarian",
    "hy": "Armenian",
    "ka": "Georgian",
    "km": "Khmer",
    "lo": "Lao",
}
ENGLISH_AT_MOST = 0.02
OTHER_AT_LEAST = 0.6
MIN_WORDS = 3
MIN_OTHER_SCRIPT = 4
# Words that mark English and are not words of the languages it is confused with (no "a", "in",
# "on", "no", "as", "was", "will", "is"): two of them make a question English.
ENGLISH_MARKERS = frozenset(
    """
the what who whom whose when where which why how do did does doing are were been being can could should
would shall must may my our your their his its of to for with and if i we you they it this that these
those have has had at by from about there than then not any some or be get need allowed after before
just only because while
""".split()
)
ENGLISH_MARKERS_AT_LEAST = 2
ENGLISH_VOCABULARY_AT_LEAST = 0.9
VOCABULARY_PATH = Path(__file__).resolve().parent.parent / "assets" / "minilm-tokenizer.json"
_WORD = re.compile(r"[^\W\d_]+")
# The fusion weights (vector, full-text) for a question in another language the model reads: the
# full-text leg's English stems match only names, numbers and the odd cognate there
# (benchmarks/language/results.md).
FOREIGN_WEIGHTS = (0.9, 0.1)

# py3langid 0.3.0's model, a pickle: loaded only with this digest.
MODEL_SHA256 = "8c99809ff6de3d129e447306d30ceae4713735230dced7e8d4d46df89e6968ce"

UNREAD_MESSAGE = (
    "This question is in {language}, which this knowledge base's search cannot read (its "
    "embedding model reads English only), so the passages below were matched on shared words at "
    "best. Do not say the governing documents do not address it: search again with the question "
    "translated into English, or tell the user to ask in English."
)

FOREIGN_MESSAGE = (
    "This question is in {language}; the passages below are the closest the search found, but "
    "its confidence scale was measured on English sentences, so a low score does not show that "
    "the documents are silent. Answer only from passages that clearly apply, cite them, and say "
    "when they do not settle the question."
)


@dataclass(frozen=True)
class Language:
    code: str
    probability: float

    @property
    def name(self) -> str:
        return LANGUAGE_NAMES.get(self.code, self.code)


@dataclass(frozen=True)
class Reading:
    """What the question's language means for one answer."""

    language: Language | None  # None: English, or too short to tell
    readable: bool = True  # the embedding model reads the question's language
    model: str = ""
    warnings: list[str] = field(default_factory=list)
    scaled: bool = False  # the status was decided on the language's own scale (language_scale.py)

    def weights(self, chosen: tuple[float, float]) -> tuple[float, float]:
        """The fusion weights: ``chosen`` (the query type's), or leaning on the vector leg."""
        return FOREIGN_WEIGHTS if self.language is not None and self.readable else chosen

    def overrule(self, status: str, message: str | None) -> tuple[str, str | None]:
        """A question the model cannot read is never ``success`` nor ``no_results``: the score says
        nothing about the documents. One it reads, decided on its language's own scale, keeps its
        status; without one it is never ``no_results``: the English scale was measured with the
        knowledge base's own sentences, and a question in another language scores lower on it
        whether or not its passage is there (benchmarks/language/)."""
        if self.language is None or self.scaled:
            return status, message
        if not self.readable:
            return "low_confidence", UNREAD_MESSAGE.format(language=self.language.name)
        if status == "no_results":
            return "low_confidence", FOREIGN_MESSAGE.format(language=self.language.name)
        return status, message

    def scale_warning(self) -> str:
        name = self.language.name if self.language else "English"
        return (
            f"status decided on {name}'s own scale, measured on this knowledge base with the "
            "calibration (on the vector leg's cosine)"
        )

    def public(self) -> dict[str, object]:
        """The keys the answer's ``confidence`` gains for a question in another language."""
        if self.language is None:
            return {}
        return {"language": self.language.code, "language_readable": self.readable, "language_scale": self.scaled}


def read(question: str, model: str) -> Reading:
    """The question's language and whether ``model`` reads it, with the warnings to show."""
    language = detect(question)
    if language is None:
        return Reading(None, model=model)
    readable = model not in ENGLISH_ONLY_MODELS
    said = f"question in {language.name} ({language.code})"
    if readable:
        warning = f"{said}: the full-text leg reads English only, so the ranking leans on the vector leg ({model})"
    else:
        warning = (
            f"{said}: the embedding model {model} reads English only, so the question was not understood; "
            "set EMBEDDING_MODEL=multilingual-e5-small (local) or an OpenAI embedding model and run "
            "`arc-retrieval reembed`, or ask in English"
        )
    return Reading(language, readable, model, [warning])


def detect(text: str) -> Language | None:
    """The question's language when it is surely not English; None otherwise (and when the
    identifier cannot be loaded: the question is then answered as an English one)."""
    if not _long_enough(text):
        return None
    identifier = _identifier()
    if identifier is None:
        return None
    ranked = dict(identifier.rank(text))
    best = max(ranked, key=ranked.__getitem__)
    if best == KNOWLEDGE_BASE_LANGUAGE or ranked[best] < OTHER_AT_LEAST:
        return None
    if ranked.get(KNOWLEDGE_BASE_LANGUAGE, 0.0) > ENGLISH_AT_MOST or _reads_as_english(text):
        return None
    return Language(best, round(float(ranked[best]), 4))


def _reads_as_english(text: str) -> bool:
    words = _WORD.findall(text.lower())
    if sum(w in ENGLISH_MARKERS for w in words) >= ENGLISH_MARKERS_AT_LEAST:
        return True
    vocabulary = _vocabulary()
    known = sum(_unaccented(w) in vocabulary for w in words)
    return bool(words) and known / len(words) >= ENGLISH_VOCABULARY_AT_LEAST


def _unaccented(word: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFD", word) if unicodedata.category(c) != "Mn")


_vocabularies: list[frozenset[str]] = []


def _vocabulary() -> frozenset[str]:
    """The whole words of all-MiniLM-L6-v2's (uncased, unaccented) WordPiece vocabulary."""
    if not _vocabularies:
        with _load_lock:
            if not _vocabularies:
                tokens = json.loads(VOCABULARY_PATH.read_text(encoding="utf-8"))["model"]["vocab"]
                _vocabularies.append(frozenset(t for t in tokens if t.isalpha()))
    return _vocabularies[0]


def _long_enough(text: str) -> bool:
    words = sum(1 for w in text.split() if any(c.isalpha() for c in w))
    other_script = sum(1 for c in text if c.isalpha() and ord(c) > 0x24F)
    return words >= MIN_WORDS or other_script >= MIN_OTHER_SCRIPT


_load_lock = threading.Lock()
_loaded: list[Any] = []  # [the identifier, or None when it could not be loaded]


def _identifier() -> Any:
    """The identifier, loaded once per process (about half a second), restricted to LANGUAGE_NAMES."""
    if not _loaded:
        with _load_lock:
            if not _loaded:
                _loaded.append(_load())
    return _loaded[0]


def _load() -> Any:
    try:
        import py3langid
        from py3langid.langid import MODEL_FILE, LanguageIdentifier

        path = Path(py3langid.__file__).parent / MODEL_FILE
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        if digest != MODEL_SHA256:
            raise ValueError(
                f"{path.name} has sha256 {digest[:12]}..., expected {MODEL_SHA256[:12]}...: reinstall py3langid 0.3.0"
            )
        identifier = LanguageIdentifier.from_pickled_model(MODEL_FILE, norm_probs=True)
        identifier.set_languages(list(LANGUAGE_NAMES))
        return identifier
    except Exception as exc:  # never a failed answer: questions are then all taken as English
        log.error(
            "language identification unavailable; every question is taken as English",
            extra={"reason": str(exc) or type(exc).__name__},
        )
        return None
