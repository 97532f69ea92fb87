"""Section numbers in headings: "ARTICLE VII Use Restrictions > Section 4", "Article 7, Section 4"
and "7.4" name the same section. Amendments name the sections they replace this way, and the
ingestor and the models both read them, so the key lives below both."""

from __future__ import annotations

import re

# A Roman numeral as a scan's OCR may read it: "I" misread as "J", "1", "|" or "!" ("ARTICLE JX" is
# Article IX, "V1I" is VII). A token counts as one only when it also holds a real Roman letter, so
# "Exhibit J" stays a lettered part and "12" a number.
_ROMAN_AS_READ = r"(?=[ivxlcdmj1|!]*[ivxlcdm])[ivxlcdmj1|!]+(?![\w|!])"
_PART = re.compile(
    r"\b(article|section|chapter|part|exhibit|appendix|schedule|§)\s*"
    rf"({_ROMAN_AS_READ}|[0-9]+(?:\.[0-9]+)*|[a-z]\b)",
    re.I,
)
_MISREAD_I = str.maketrans("j1|!", "iiii")
_LEADING_NUMBER = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)*)\.?\s")
_ROMAN = {"i": 1, "v": 5, "x": 10, "l": 50, "c": 100, "d": 500, "m": 1000}


def section_key(text: str) -> tuple[tuple[str, str], ...]:
    """("article", "7"), ("section", "4") ... in order: "ARTICLE VII Use Restrictions > Section 4"
    and "Article 7, Section 4" give the same key; a heading "4.2 Fencing" is section 4.2."""
    parts: list[tuple[str, str]] = []
    for segment in text.split(" > "):
        found = [(kind.lower().replace("§", "section"), _number(value)) for kind, value in _PART.findall(segment)]
        if not found and (leading := _LEADING_NUMBER.match(segment)):
            found = [("section", leading.group(1))]
        parts.extend(found)
    return tuple(parts)


def amends(named: str, section_path: str) -> bool:
    """Whether a chunk under ``section_path`` is in the section ``named`` (or one inside it)."""
    want, have = section_key(named), section_key(section_path)
    if not want:
        return False
    position = 0
    for part in have:  # the named parts, in order, within the chunk's path
        if part == want[position]:
            position += 1
            if position == len(want):
                return True
    return False


def _number(value: str) -> str:
    low = value.lower()
    if low.isdigit() or "." in low:
        return low
    if len(low) == 1 and low not in "ivx":  # a lettered part: "Exhibit A"
        return low
    low = low.translate(_MISREAD_I)
    total = 0
    for i, char in enumerate(low):
        worth = _ROMAN[char]
        total += -worth if i + 1 < len(low) and _ROMAN[low[i + 1]] > worth else worth
    return str(total)


# "Article XII of the Declaration", "Article XIV, Section 2 of the Declaration", "Section 4 of the
# By-Laws": a part named by number, then the document it is in, named by its kind.
_CITATION = re.compile(
    r"\b((?:article|section|§)\s*[ivxlcdm0-9]+(?:\.[0-9]+)*"
    r"(?:\s*[,.]?\s*(?:section|§)\s*[0-9]+(?:\.[0-9]+)*)?)"
    r"(?:\s*\([a-z0-9]{1,3}\))?"
    r"\s+of\s+(?:the|said|this)\s+([a-z][a-z-]+(?:\s+of\s+incorporation)?)\b",
    re.I,
)


def citations(text: str) -> list[tuple[str, str]]:
    """The sections ``text`` names in another document, each as (section, document kind):
    "Article XII of the Declaration reserves ..." gives ("Article XII", "declaration"). A bare
    "Section 4" names no one section of a document whose articles each have a Section 4: left out."""
    found = []
    for section, document in _CITATION.findall(text):
        key = section_key(section)
        if any(kind == "article" for kind, _ in key) or any("." in number for _, number in key):
            found.append((section, _letters(document)))
    return found


def cites_into(document: str, document_name: str) -> bool:
    """Whether a document named ``document_name`` is of the kind a citation names (``document`` as
    :func:`citations` gives it): "By-Laws (May 20, 1985)" is the by-laws a citation names."""
    return bool(document) and document in _letters(document_name)


def _letters(text: str) -> str:
    return re.sub(r"[^a-z]", "", text.lower())
