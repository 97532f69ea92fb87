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
