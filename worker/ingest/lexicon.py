"""English words, for what a reader decides about text it cannot check with anyone: whether
"two-" at a line's end and "story" on the next are a compound or one word broken in two.

The word list is the whole-word part of the local embedding model's WordPiece vocabulary (the
tokenizer file the project ships, 30k entries, about 20k whole lower-case words): no download,
and the same list on every machine.
"""

from __future__ import annotations

import json
from functools import lru_cache

from ..embeddings import TOKENIZER_PATH


@lru_cache(maxsize=1)
def english_words() -> frozenset[str]:
    vocab = json.loads(TOKENIZER_PATH.read_text(encoding="utf-8"))["model"]["vocab"]
    return frozenset(word for word in vocab if word.isalpha() and word.islower() and word.isascii())
