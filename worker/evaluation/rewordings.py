"""Rewordings of an answer dataset's questions, and what confirming an original needs.

A rewording asks again what an existing question (its original) asks, in another homeowner's
words. It is a line of the answer dataset's format with one more field, ``of``, naming the
original's ``id``; an answerable rewording without ``evidence`` or ``gold_document`` takes its
original's. Rewordings come from a file of their own or from the dataset's ``questions.jsonl``
itself (its lines that carry ``of``).

Confirming an original that is answerable names the chunk that holds its evidence, found the way
the answer harness judges evidence (:func:`~worker.evaluation.answers.evidence_found` on the
chunk's text) among the chunks of its gold document, then among every chunk of the knowledge
base. A phrase that a chunk boundary cuts is credited to the chunk holding its longest piece.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher
from pathlib import Path

from .answers import (
    NEGATIVE_KINDS,
    QUESTIONS_FILE,
    AnswerDataset,
    Question,
    evidence_found,
    load_answer_dataset,
    normalise_for_match,
    question_from_row,
)


@dataclass(frozen=True)
class Rewording:
    """A question asked again in other words, with the id of the question it rewords."""

    question: Question
    of: str


@dataclass(frozen=True)
class RewordingSet:
    """A dataset's originals (the questions that reword nothing) and the rewordings of them."""

    originals: list[Question]
    rewordings: list[Rewording]

    def reworded(self, community: str) -> list[Question]:
        """The originals of ``community`` that at least one rewording rewords, in dataset order."""
        named = {r.of for r in self.rewordings}
        return [q for q in self.originals if q.community == community and q.id in named]

    def of_community(self, community: str) -> list[Rewording]:
        return [r for r in self.rewordings if r.question.community == community]


def _rows(path: Path) -> list[tuple[str, dict]]:
    """The lines of a questions file, each with where it is (``file:line``) for errors."""
    with Path(path).open(encoding="utf-8") as fh:
        return [(f"{Path(path).name}:{n}", json.loads(line)) for n, line in enumerate(fh, start=1) if line.strip()]


def has_rewordings(folder: Path) -> bool:
    """Whether an answer dataset's ``questions.jsonl`` carries rewordings of its own (``of``)."""
    return any(row.get("of") for _, row in _rows(Path(folder) / QUESTIONS_FILE))


def load_with_rewordings(folder: Path, rewordings_file: Path | None = None) -> tuple[AnswerDataset, RewordingSet]:
    """An answer dataset split into originals and rewordings (its lines with ``of``), with the
    rewordings of ``rewordings_file`` added; the dataset holds both. Raise ValueError naming
    the line when a rewording names no original of the dataset, another community's, or one of
    the other side (answerable against unanswerable or off topic), or when an id repeats."""
    rows = [(where, row, bool(row.get("of"))) for where, row in _rows(Path(folder) / QUESTIONS_FILE)]
    if rewordings_file is not None:
        rows += [(where, row, True) for where, row in _rows(rewordings_file)]
    raw = {str(row["id"]): row for _, row, reworded in rows if not reworded}
    originals = [question_from_row(row, where) for where, row, reworded in rows if not reworded]
    pairs = []
    for where, row, reworded in rows:
        if not reworded:
            continue
        original = raw.get(str(row.get("of") or ""))
        if original is None:
            raise ValueError(f"{where}: of: names no original question of the dataset ({row.get('of')!r})")
        if row.get("community") and row["community"] != original.get("community"):
            raise ValueError(
                f"{where}: community: {row['community']!r}, its original {row['of']} is {original.get('community')!r}"
            )
        if (row.get("kind") in NEGATIVE_KINDS) != (original.get("kind") in NEGATIVE_KINDS):
            raise ValueError(f"{where}: kind: {row.get('kind')}, its original {row['of']} is {original.get('kind')}")
        row = {**row, "community": original.get("community")}
        if row.get("kind") == "answerable":
            row["evidence"] = row.get("evidence") or original.get("evidence")
            row["gold_document"] = row.get("gold_document") or original.get("gold_document")
        pairs.append((where, question_from_row(row, where), str(row["of"])))
    ids = [q.id for q in originals] + [q.id for _, q, _ in pairs]
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    if repeated:
        raise ValueError(f"id: used more than once: {', '.join(repeated[:10])}")
    dataset = load_answer_dataset(Path(folder), originals + [q for _, q, _ in pairs])
    by_id = {q.id: q for q in dataset.questions}
    rewordings = [Rewording(by_id[q.id], of) for _, q, of in pairs]
    return dataset, RewordingSet([by_id[q.id] for q in originals], rewordings)


@dataclass(frozen=True)
class ChunkText:
    """A chunk as the documents API shows it: its id and text."""

    id: int
    document_id: str
    section_path: str
    content: str

    @property
    def text(self) -> str:
        return f"{self.section_path}\n{self.content}"


@dataclass(frozen=True)
class EvidenceChunk:
    """The chunk a confirmation of an answerable question names, and how it was found:
    ``gold`` (the phrase is in a chunk of the gold document), ``elsewhere`` (in a chunk of
    another document), ``partial`` (the longest piece of a phrase a chunk boundary cuts)."""

    chunk_id: int
    document_id: str
    found: str


def evidence_chunk(question: Question, chunks: Sequence[ChunkText]) -> EvidenceChunk | None:
    """The chunk holding ``question``'s evidence: the first of its gold document (in chunk
    order) holding a phrase, else the first of any document, else the chunk holding the
    longest piece of a phrase (preferring the gold document's). None for an empty list."""
    gold = [c for c in chunks if c.document_id == question.gold_document]
    for found, group in (("gold", gold), ("elsewhere", chunks)):
        for chunk in group:
            if evidence_found(question.evidence, chunk.text):
                return EvidenceChunk(chunk.id, chunk.document_id, found)
    best: tuple[int, bool, ChunkText] | None = None
    for chunk in chunks:
        length = max((_longest_piece(p, chunk.text) for p in question.evidence), default=0)
        key = (length, chunk.document_id == question.gold_document)
        if length and (best is None or key > best[:2]):
            best = (*key, chunk)
    return None if best is None else EvidenceChunk(best[2].id, best[2].document_id, "partial")


def _longest_piece(phrase: str, text: str) -> int:
    a, b = normalise_for_match(phrase), normalise_for_match(text)
    return SequenceMatcher(None, a, b, autojunk=False).find_longest_match(0, len(a), 0, len(b)).size


def half_split(questions: Iterable[Question], seed: int) -> tuple[list[Question], list[Question]]:
    """A fixed split of one community's questions into a confirmed half and a held-out half,
    answerable and unanswerable (with off topic) alike: each kind is shuffled by ``seed`` and
    the community's name, and the first half of it (rounded down) is confirmed."""
    questions = list(questions)
    community = questions[0].community if questions else ""
    pick = random.Random(f"{seed}:{community}")
    confirmed: list[Question] = []
    held_out: list[Question] = []
    for negative in (False, True):
        group = sorted((q for q in questions if q.negative == negative), key=lambda q: q.id)
        pick.shuffle(group)
        confirmed += group[: len(group) // 2]
        held_out += group[len(group) // 2 :]
    order = {q.id: n for n, q in enumerate(questions)}
    return sorted(confirmed, key=lambda q: order[q.id]), sorted(held_out, key=lambda q: order[q.id])
