"""What every reader returns, and what the Markdown and text-layout readers share.

Patterns run on every line of untrusted text, so none may backtrack: each is anchored or fails
at once, and what would need a lazy group against trailing spaces is done in Python ("# a" +
2,000 spaces + "b" took 10 s against an older heading pattern, holding the process).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..chunking import Block

TABLE_ROW = re.compile(r"^\s*\|.*\|\s*$")


@dataclass(frozen=True)
class ParsedDocument:
    title: str | None
    blocks: list[Block]
    ocr_pages: int = 0
    ocr_seconds: float = 0.0  # wall-clock time reading them


def enter_section(stack: list[tuple[int, str]], level: int, name: str) -> None:
    """Open a section: headings at its level or deeper are closed first."""
    while stack and stack[-1][0] >= level:
        stack.pop()
    stack.append((level, name))
