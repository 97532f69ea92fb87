"""Answer-level evaluation: what the agent receives, not how the candidate list ranks.

A dataset is a folder with a ``questions.jsonl`` and one or more communities, each a folder with
a ``manifest.json`` and its documents (or a folder that is itself one community). Each question:

    {"id", "community", "question", "kind": "answerable" | "unanswerable" | "off_topic",
     "gold_document"?, "evidence"?: [verbatim phrases], "notes"?: "[tag] ..."}

An answerable question counts as answered when one of its evidence phrases occurs in the
returned context after both are normalised by :func:`normalise_for_match`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..ingest.manifest import MANIFEST_NAME
from .metrics import percentile

KINDS = ("answerable", "unanswerable", "off_topic")
NEGATIVE_KINDS = ("unanswerable", "off_topic")
QUESTIONS_FILE = "questions.jsonl"

_LEADING_TAGS = re.compile(r"^((?:\s*\[[^\]]+\])+)")
_MARKUP = str.maketrans({c: " " for c in "*_`#>|\\"})
_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"'})
_SOURCE_HEADER = re.compile(r"^\[SOURCE \d+\](?= |$)", re.M)  # compact: facts follow on the line


@dataclass(frozen=True)
class Question:
    id: str
    community: str
    question: str
    kind: str
    gold_document: str | None = None
    evidence: tuple[str, ...] = ()
    notes: str = ""

    @property
    def tags(self) -> list[str]:
        """The bracketed tags that open ``notes``; ``[faq:x]`` counts as ``faq``."""
        found = _LEADING_TAGS.match(self.notes or "")
        tags = re.findall(r"\[([^\]]+)\]", found.group(1)) if found else []
        return [t.split(":", 1)[0] for t in tags]

    @property
    def negative(self) -> bool:
        return self.kind in NEGATIVE_KINDS


@dataclass(frozen=True)
class AnswerDataset:
    name: str
    communities: dict[str, Path]  # community -> folder holding its manifest.json
    questions: list[Question]


def load_questions(path: Path) -> list[Question]:
    questions = []
    with Path(path).open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, start=1):
            if line.strip():
                questions.append(question_from_row(json.loads(line), f"{Path(path).name}:{n}"))
    return questions


def question_from_row(row: dict, where: str) -> Question:
    """One line of a ``questions.jsonl``, checked (``where`` names it in the error)."""
    if row.get("kind") not in KINDS:
        raise ValueError(f"{where}: kind must be one of {', '.join(KINDS)}")
    if row["kind"] == "answerable" and not row.get("evidence"):
        raise ValueError(f"{where}: an answerable question needs evidence phrases")
    return Question(
        id=str(row["id"]),
        community=str(row.get("community", "")),
        question=row["question"],
        kind=row["kind"],
        gold_document=row.get("gold_document"),
        evidence=tuple(row.get("evidence") or ()),
        notes=row.get("notes") or "",
    )


def is_answer_dataset(folder: Path) -> bool:
    return (Path(folder) / QUESTIONS_FILE).is_file()


def load_answer_dataset(folder: Path, questions: list[Question] | None = None) -> AnswerDataset:
    """Communities are the sub-folders holding a manifest; a folder holding one itself is a
    single community, which every question uses. ``questions``: these instead of the folder's
    ``questions.jsonl``."""
    folder = Path(folder)
    questions = load_questions(folder / QUESTIONS_FILE) if questions is None else questions
    if (folder / MANIFEST_NAME).is_file():
        communities = {folder.name: folder}
        questions = [Question(**{**q.__dict__, "community": folder.name}) for q in questions]
    else:
        communities = {p.name: p for p in sorted(folder.iterdir()) if (p / MANIFEST_NAME).is_file()}
    unknown = sorted({q.community for q in questions} - set(communities))
    if unknown:
        raise ValueError(f"questions name communities with no manifest: {', '.join(unknown)}")
    return AnswerDataset(folder.name, communities, questions)


def normalise_for_match(text: str) -> str:
    """Lower case, Markdown markup characters to spaces, straight quotes, single spaces."""
    return re.sub(r"\s+", " ", text.lower().translate(_QUOTES).translate(_MARKUP)).strip()


def split_sources(context: str) -> list[str]:
    """The ``[SOURCE n]`` blocks of a context, in order (a context without headers is one block)."""
    if not context.strip():
        return []
    starts = [m.start() for m in _SOURCE_HEADER.finditer(context)]
    if not starts:
        return [context]
    return [context[a:b] for a, b in zip(starts, [*starts[1:], len(context)], strict=True)]


def evidence_found(evidence: Iterable[str], text: str) -> bool:
    haystack = normalise_for_match(text)
    return any(normalise_for_match(phrase) in haystack for phrase in evidence)


@dataclass
class Outcome:
    """What one system handed the agent for one question."""

    question: Question
    context: str
    sources: list[str]  # the context's blocks, SOURCE 1 first
    tokens: int
    latency_ms: float
    status: str | None = None  # anchors have no status
    best_score: float | None = None
    confidence: float | None = None  # the signal the status was decided on (calibrated, or the best relevance)
    evidence_in_kb: bool | None = None  # an evidence phrase is somewhere in the knowledge base's text
    notes: dict = field(default_factory=dict)

    @property
    def in_context(self) -> bool:
        return evidence_found(self.question.evidence, self.context)

    @property
    def in_source1(self) -> bool:
        return bool(self.sources) and evidence_found(self.question.evidence, self.sources[0])

    @property
    def empty(self) -> bool:
        return not self.context.strip()

    def row(self) -> dict:
        q = self.question
        return {
            "id": q.id,
            "community": q.community,
            "kind": q.kind,
            "tags": q.tags,
            "status": self.status,
            "best_score": self.best_score,
            "confidence": self.confidence,
            "tokens": self.tokens,
            "sources": len(self.sources),
            "evidence_in_context": self.in_context if q.kind == "answerable" else None,
            "evidence_in_source1": self.in_source1 if q.kind == "answerable" else None,
            "latency_ms": round(self.latency_ms, 2),
            **self.notes,
        }


def _mean(values: Sequence[float]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


def summarise(outcomes: Sequence[Outcome]) -> dict[str, float | int | None]:
    answerable = [o for o in outcomes if o.question.kind == "answerable"]
    negatives = [o for o in outcomes if o.question.negative]
    has_status = any(o.status is not None for o in outcomes)
    summary: dict[str, float | int | None] = {
        "questions": len(outcomes),
        "answerable": len(answerable),
        "negatives": len(negatives),
        "evidence_in_context": _mean([o.in_context for o in answerable]),
        "evidence_in_source1": _mean([o.in_source1 for o in answerable]),
        "answerable_empty_context": _mean([o.empty for o in answerable]),
        "mean_context_tokens": _mean([o.tokens for o in outcomes]),
        "mean_answerable_tokens": _mean([o.tokens for o in answerable]),
        "mean_sources": _mean([len(o.sources) for o in answerable]),
        "p50_ms": round(percentile([o.latency_ms for o in outcomes], 50), 2) if outcomes else None,
        "p95_ms": round(percentile([o.latency_ms for o in outcomes], 95), 2) if outcomes else None,
    }
    if has_status:
        summary.update(
            {
                "answerable_no_results": _mean([o.status == "no_results" for o in answerable]),
                "answerable_low_confidence": _mean([o.status == "low_confidence" for o in answerable]),
                "negatives_success": _mean([o.status == "success" for o in negatives]),
                "negatives_no_results": _mean([o.status == "no_results" for o in negatives]),
                # The yardstick: success with the evidence in the context; anything but success for
                # unanswerable and off-topic questions.
                "status_right": _mean([status_right(o) for o in outcomes]),
                # Right answers the agent is told to doubt: evidence in the context, status not success.
                "hedged": _mean([o.status != "success" for o in answerable if o.in_context]),
                # The worst answer: a refusal although the knowledge base holds the evidence.
                "answerable_no_results_with_evidence": sum(
                    o.status == "no_results" and bool(o.evidence_in_kb) for o in answerable
                ),
                "confidence_auroc": auroc([o.confidence for o in answerable], [o.confidence for o in negatives]),
            }
        )
    return summary


def status_right(outcome: Outcome) -> bool:
    if outcome.question.negative:
        return outcome.status != "success"
    return outcome.status == "success" and outcome.in_context


def auroc(positives: Sequence[float | None], negatives: Sequence[float | None]) -> float | None:
    """How often an answerable question's confidence beats an unanswerable one's (ties half)."""
    pos = [p for p in positives if p is not None]
    neg = [n for n in negatives if n is not None]
    if not pos or not neg:
        return None
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return round(wins / (len(pos) * len(neg)), 4)


def breakdown(outcomes: Sequence[Outcome]) -> dict[str, dict[str, dict]]:
    """The summary per question kind and per tag."""
    by_kind = {
        kind: summarise([o for o in outcomes if o.question.kind == kind])
        for kind in KINDS
        if any(o.question.kind == kind for o in outcomes)
    }
    tags = sorted({t for o in outcomes for t in o.question.tags})
    by_tag = {tag: summarise([o for o in outcomes if tag in o.question.tags]) for tag in tags}
    return {"kind": by_kind, "tag": by_tag}
