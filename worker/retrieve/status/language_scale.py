"""The status scale of a question in another language that the embedding model reads.

The status calibration (``confidence.py``) is measured with English: off-domain questions for its
floor, the knowledge base's own (English) sentences asked back for its match and near miss. With a
multilingual model (multilingual-e5-small, OpenAI's) a question in Spanish about English documents
reaches its passage, but scores lower than the same question in English: the cross-language cosine
sits lower, and the full-text leg, which stems English, adds nothing. On the English scale every
such question reads as unrelated (benchmarks/language/results.md). So each language that ships
questions here (``worker/assets/off_domain_questions.LANG.txt`` and
``homeowner_questions.LANG.txt``) gets a scale of its own, measured on the knowledge base at
calibration time, on the vector leg alone (the cosine similarity; the full-text leg is noise for
the language):

* its *floor*: the median best cosine of the off-domain questions asked in that language, what an
  unrelated question in the language scores here;
* its *drop*: the median of how much lower the best cosine of each homeowner question
  (``homeowner_questions.txt``, written for the purpose, no community's documents) is in that
  language than in English, asked of this knowledge base: what the model loses across languages
  on questions about this knowledge base's subjects;
* its *match* and *near miss*: the English calibration's, in cosines (from the same searches),
  less that drop: where a question in the language whose passage is here, or on one of its
  subjects, scores.

A question in that language is then decided on that scale like an English one on its own (the same
cuts on the same 0..1 confidence, ``confidence.Calibration``), its best cosine as the relevance.
A question in a language without such files, or asked while a scale is missing (a knowledge base
calibrated without them, an embedding that failed), keeps the rule of ``language.py``: never
``no_results``.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources

from ...models import ChunkResult
from ...store.language_scales import StoredScale
from . import confidence as confidence_stage

OFF_DOMAIN = "off_domain_questions"
HOMEOWNER = "homeowner_questions"
# Fewer usable pairs than this and the drop is not measured (a file cut short, a bad edit).
MIN_PAIRS = 10


@dataclass(frozen=True)
class Scored(confidence_stage.Best):
    """A text's best relevance (and elsewhere, ``Best``), with the same for the vector leg alone."""

    vector: float = 0.0
    vector_elsewhere: float = 0.0


# Asks texts of the knowledge base in the language given (ISO 639-1), as a question in that
# language is asked; returns each text's best scores.
Ask = Callable[[Sequence[str], str], list[Scored]]


def _lines(name: str) -> list[str] | None:
    path = resources.files("worker").joinpath(f"assets/{name}")
    if not path.is_file():
        return None
    text = path.read_text(encoding="utf-8")
    return [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]


def languages() -> list[str]:
    """The languages (ISO 639-1) that ship both files a scale is measured with."""
    folder = resources.files("worker").joinpath("assets")
    names = {entry.name for entry in folder.iterdir()}
    found = set()
    for name in names:
        parts = name.split(".")
        if len(parts) == 3 and parts[0] == OFF_DOMAIN and f"{HOMEOWNER}.{parts[1]}.txt" in names:
            found.add(parts[1])
    return sorted(found)


def questions(language: str) -> tuple[list[str], list[tuple[str, str]]]:
    """``language``'s off-domain questions, and the homeowner questions as (English, language)
    pairs; a file's lines pair with the English file's line for line."""
    off_domain = _lines(f"{OFF_DOMAIN}.{language}.txt") or []
    english, other = _lines(f"{HOMEOWNER}.txt") or [], _lines(f"{HOMEOWNER}.{language}.txt") or []
    if len(english) != len(other):
        raise ValueError(f"{HOMEOWNER}.{language}.txt has {len(other)} questions, the English file {len(english)}")
    return off_domain, list(zip(english, other, strict=True))


@dataclass(frozen=True)
class EnglishCosines:
    """The English calibration's match and near miss on the vector leg (same searches)."""

    match: float
    near_miss: float


def english_cosines(asked: Mapping[str, Scored]) -> EnglishCosines | None:
    """From the calibration's own searches (text -> scores): its own sentences' median best cosine
    and best cosine elsewhere; None when there are none (a knowledge base too small)."""
    off_domain = set(confidence_stage.off_domain_questions())
    inside = [s for text, s in asked.items() if text not in off_domain]
    if not inside:
        return None
    return EnglishCosines(
        statistics.median(s.vector for s in inside), statistics.median(s.vector_elsewhere for s in inside)
    )


def measure(ask: Ask, english: EnglishCosines, wanted: Sequence[str] | None = None) -> list[StoredScale]:
    """Each language's scale on this knowledge base (``wanted``: default every language shipped)."""
    scales = []
    english_asked: dict[tuple[str, ...], Sequence[Scored]] = {}  # languages share their English side
    for language in languages() if wanted is None else wanted:
        off_domain, pairs = questions(language)
        if not off_domain or len(pairs) < MIN_PAIRS:
            continue
        floor = statistics.median(s.vector for s in ask(off_domain, language))
        english_side = tuple(e for e, _ in pairs)
        if english_side not in english_asked:
            english_asked[english_side] = ask(list(english_side), "en")
        in_english = english_asked[english_side]
        translated = ask([t for _, t in pairs], language)
        drop = statistics.median(e.vector - t.vector for e, t in zip(in_english, translated, strict=True))
        if english.match - drop <= floor:
            # the model's own sentences, carried across, score no higher than unrelated questions
            # in the language: no scale to decide on (the rule for a language without one holds)
            continue
        scales.append(
            StoredScale(
                language=language,
                floor=floor,
                match=english.match - drop,
                near_miss=english.near_miss - drop,
                drop=drop,
                pairs=len(pairs),
            )
        )
    return scales


def calibration(scale: StoredScale, version: int, reach: float) -> confidence_stage.Calibration:
    """The language's scale as a calibration the status decides on (in cosines)."""
    return confidence_stage.Calibration(
        version=version,
        floor=scale.floor,
        match=scale.match,
        near_miss=scale.near_miss,
        questions=scale.pairs,
        reach=reach,
    )


def relevance(candidates: Sequence[ChunkResult]) -> float | None:
    """What a question in another language is decided on: its best cosine among the candidates."""
    found = [c.vector_score for c in candidates if c.vector_score is not None]
    return max(found) if found else None
