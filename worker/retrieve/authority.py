"""How much a source's standing counts: binding documents and design guidelines are favoured,
superseded ones, and sections another document amended, demoted. One set of multipliers,
applied to the first-stage score (so the order without an LLM already prefers the CC&Rs to
meeting minutes that discuss them) and to the rerank score (the spec's binding x1.1, design
guidelines x1.05, superseded x0.5), capped at 1.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..models import ChunkResult


@dataclass(frozen=True)
class Adjustments:
    binding: float = 1.1
    superseded: float = 0.5
    document_type: dict[str, float] = field(default_factory=lambda: {"design_guidelines": 1.05})

    def factor(self, chunk: ChunkResult) -> float:
        value = self.document_type.get(chunk.document_type, 1.0)
        if chunk.is_binding:
            value *= self.binding
        if chunk.superseded_by or chunk.amended_by:  # an amended section is no longer the rule
            value *= self.superseded
        return value

    def apply(self, chunk: ChunkResult, score: float) -> float:
        return min(1.0, max(0.0, score * self.factor(chunk)))
