"""BEIR corpora: one ``corpus.jsonl`` line per document."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ...textnorm import normalise_text


@dataclass(frozen=True)
class CorpusRecord:
    """One line of a BEIR ``corpus.jsonl``: ``_id``, ``title``, ``text``."""

    doc_id: str
    title: str
    text: str


def read_beir_corpus(path: Path) -> Iterator[CorpusRecord]:
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                row = json.loads(line)
                yield CorpusRecord(
                    str(row["_id"]), normalise_text(row.get("title") or ""), normalise_text(row.get("text") or "")
                )
