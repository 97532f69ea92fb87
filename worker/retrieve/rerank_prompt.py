"""What the reranking LLM is asked and how its reply is read: the prompt, the JSON schema of the
reply (structured outputs where the server has them) and a parser for whatever comes back."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..models import ChunkResult

SYSTEM_PROMPT = (
    "You rank evidence for questions about a community's governing documents (design guidelines, "
    "CC&Rs, prior decision letters, application forms). You answer only with JSON."
)

# Named and checked (tests/test_rerank.py) so that a template edit cannot drop a variable.
USER_PROMPT_TEMPLATE = """Question: {question}

Score how relevant each candidate passage is to answering the question, from 0.0 to 1.0.
Rubric, in order of weight:
1. It directly answers the question (the rule, number or decision asked about): 0.8-1.0.
2. It gives context needed to apply the answer (conditions, exceptions, procedure): 0.6-0.8.
3. It defines a term the question depends on: 0.5-0.7.
4. It is an authoritative source on the topic but does not answer: 0.3-0.5.
Be strict: a passage that is only tangentially related scores below 0.5; an unrelated one near 0.

Candidates:
{candidates}

Reply with JSON: {{"scores": [{{"chunk_id": "<id>", "relevance_score": <0..1>, "reasoning": "<one sentence>"}}, ...]}}
with one entry per candidate id above."""

CANDIDATE_TEMPLATE = """<candidate id="{id}">
Document: {document_name} ({document_type})
Section: {section}
{content}
</candidate>"""

RESPONSE_SCHEMA: dict[str, Any] = {
    "name": "relevance_scores",
    "strict": True,
    "schema": {
        "type": "object",
        "additionalProperties": False,
        "required": ["scores"],
        "properties": {
            "scores": {
                "type": "array",
                "items": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["chunk_id", "relevance_score", "reasoning"],
                    "properties": {
                        "chunk_id": {"type": "string"},
                        "relevance_score": {"type": "number"},
                        "reasoning": {"type": "string"},
                    },
                },
            }
        },
    },
}


@dataclass(frozen=True)
class Score:
    value: float
    reasoning: str | None


def render_prompt(question: str, batch: Sequence[ChunkResult], truncate: Callable[[str], str]) -> str:
    """The user message for one batch; ``truncate`` caps each passage (the LLM's tokens cost)."""
    blocks = "\n".join(
        CANDIDATE_TEMPLATE.format(
            id=c.id,
            document_name=c.document_name,
            document_type=c.document_type,
            section=c.section_path or "-",
            content=truncate(c.content),
        )
        for c in batch
    )
    return USER_PROMPT_TEMPLATE.format(question=question, candidates=blocks)


_OBJECT = re.compile(r"\{[^{}]*\}", re.S)


def parse_scores(text: str, candidate_ids: set[int]) -> dict[int, Score]:
    """Scores from an LLM reply, however it came back.

    Handles JSON in code fences or prose, a bare list, ``{"scores": [...]}``, a reply cut off
    midway (every complete object counts), ids as strings or numbers, unknown ids (dropped),
    duplicates (the first wins), and scores out of range or as strings (clamped).
    """
    items: Any = []  # parsed JSON, used when it is a list
    start = min((i for i in (text.find("{"), text.find("[")) if i >= 0), default=-1)
    if start >= 0:
        try:
            parsed = json.loads(text[start:].rsplit("```", 1)[0] if "```" in text[start:] else text[start:])
            items = parsed.get("scores", parsed.get("results", [])) if isinstance(parsed, dict) else parsed
        except (ValueError, AttributeError):
            items = []
        if not isinstance(items, list) or not items:
            items = []
            for match in _OBJECT.finditer(text[start:]):
                try:
                    items.append(json.loads(match.group(0)))
                except ValueError:
                    continue
    scores: dict[int, Score] = {}
    for item in items:
        if not isinstance(item, dict):
            continue
        try:
            chunk_id = int(str(item.get("chunk_id", item.get("id"))).strip())
            value = float(str(item.get("relevance_score", item.get("score"))).strip())
        except (TypeError, ValueError):
            continue
        if chunk_id not in candidate_ids or chunk_id in scores or value != value:  # NaN
            continue
        reasoning = item.get("reasoning")
        scores[chunk_id] = Score(min(1.0, max(0.0, value)), str(reasoning)[:500] if reasoning else None)
    return scores
