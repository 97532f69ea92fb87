"""What a caller asked of one answer, as plain typed values the pipeline reads.

A door parses its input into a :class:`~worker.models.RetrievalRequest`; :meth:`AnswerOptions.of`
turns that into the options the pipeline takes, with "not given" explicit (``None``) where the
answer depends on whether the caller said it: a caller who sized the context (``top_k`` or
``token_budget``) gets it filled up to that size, a default context does not.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from ..models import Citations, RetrievalRequest, Weights

DEFAULT_TOP_K: int = RetrievalRequest.model_fields["top_k"].default
DEFAULT_TOKEN_BUDGET: int = RetrievalRequest.model_fields["token_budget"].default
DEFAULT_CANDIDATES: int = RetrievalRequest.model_fields["candidates"].default


@dataclass(frozen=True)
class AnswerOptions:
    """One question and how to answer it; ``None``: the caller did not say (the default applies)."""

    query: str
    community: str | None = None
    document_types: tuple[str, ...] | None = None  # a hard filter
    binding_only: bool = False
    include_superseded: bool = False
    top_k: int | None = None
    candidates: int = DEFAULT_CANDIDATES
    token_budget: int | None = None
    min_relevance: float | None = None  # a hard minimum
    weights: Weights | None = None
    fusion: str | None = None
    rerank: bool | None = None
    debug: bool = False
    citations: Citations = "compact"  # how each [SOURCE n] names its passage
    as_of: date | None = None  # answer from what was in force that day (None: today)

    @classmethod
    def of(cls, request: RetrievalRequest) -> AnswerOptions:
        given = request.model_fields_set
        return cls(
            query=request.query,
            community=request.community,
            document_types=tuple(request.document_types) if request.document_types else None,
            binding_only=request.binding_only,
            include_superseded=request.include_superseded,
            top_k=request.top_k if "top_k" in given else None,
            candidates=request.candidates,
            token_budget=request.token_budget if "token_budget" in given else None,
            min_relevance=request.min_relevance,
            weights=request.weights,
            fusion=request.fusion,
            rerank=request.rerank,
            debug=request.debug,
            citations=request.citations,
            as_of=request.as_of,
        )

    @property
    def max_chunks(self) -> int:
        """The most chunks the answer lists (given or the default)."""
        return DEFAULT_TOP_K if self.top_k is None else self.top_k

    @property
    def sized(self) -> bool:
        """The caller sized the context: it goes as far down the ranking as that size."""
        return self.top_k is not None or self.token_budget is not None

    @property
    def carry(self) -> bool:
        """Passages carry the sentences around them: a budget the caller set is theirs to spend."""
        return self.token_budget is not None

    @property
    def budget(self) -> int:
        """The context's token budget (given or the default)."""
        return DEFAULT_TOKEN_BUDGET if self.token_budget is None else self.token_budget
