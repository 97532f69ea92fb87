"""Unicode normalisation shared by ingestion and questions, so both sides spell a word alike.

NFKC folds compatibility forms into their plain letters: the ligatures a PDF printed from a
browser stores ("ﬁrst" -> "first", "ﬂoor" -> "floor"), full-width letters, superscript digits.
Invisible format characters (soft hyphens, zero-width spaces and joiners, byte-order marks) are
dropped: they split a word for full-text search without showing on the page. Case, line breaks,
form feeds (page breaks in text) and accents are kept; accents are folded by the full-text leg
itself (``arc_fold_accents`` in ``sql/``), so the stored text still shows them.
"""

from __future__ import annotations

import re
import unicodedata

SOFT_HYPHEN = "\u00ad"
_FORMAT_CHARACTERS = re.compile(
    r"[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f"
    r"\u202a-\u202e\u2060-\u206f\ufe00-\ufe0f\ufeff\ufff9-\ufffb]"
)


def normalise_text(text: str) -> str:
    """``text`` in NFKC with invisible format characters removed; case and layout kept."""
    if text.isascii():
        return text
    return _FORMAT_CHARACTERS.sub("", unicodedata.normalize("NFKC", text))
