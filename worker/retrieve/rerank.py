"""Stage 4: LLM reranking, then metadata adjustments.

An OpenAI-compatible chat model scores each candidate 0..1 (JSON, temperature 0), in batches
sent side by side within one time budget, and the scores are cached for a few minutes. What it
is asked and how its reply is read live in :mod:`worker.retrieve.rerank_prompt`; any failure leaves the
first-stage order and says why in ``warnings``. Adjustments (:mod:`worker.retrieve.authority`) then
favour binding and design-guideline sources and demote superseded ones.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Any, Protocol

from cachetools import TTLCache

from ..errors import ProvidersBusy
from ..models import ChunkResult
from ..tokens import default_counter
from .authority import Adjustments
from .executor import BoundedExecutor
from .rerank_prompt import (
    RESPONSE_SCHEMA,
    SYSTEM_PROMPT,
    Score,
    parse_scores,
    render_prompt,
)

log = logging.getLogger("arc.rerank")


@dataclass
class RerankOutcome:
    chunks: list[ChunkResult]
    reranked: bool
    warnings: list[str] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)


class Reranker(Protocol):
    def rerank(self, question: str, candidates: list[ChunkResult], top_k: int) -> RerankOutcome: ...


class RerankFailed(Exception):
    pass


class CachedReranker:
    """What every reranker shares: a question's candidates scored once in a few minutes (cached
    by the question and the candidates), a failure that keeps the first-stage order with a
    warning, and the order the scores give with the source's authority (:func:`order_scored`).
    A subclass scores (:meth:`_score`), names its cache key and the usage it counts."""

    max_candidates: int
    adjustments: Adjustments
    guard_top: int
    guard_min: float
    unscored_last = False  # where a chunk the reply did not score goes (order_scored)
    _cache: TTLCache
    _lock: threading.Lock

    def _cache_key(self, question: str, pool: list[ChunkResult]) -> tuple[Any, ...]:
        raise NotImplementedError

    def _new_usage(self) -> dict[str, int]:
        raise NotImplementedError

    def _score(
        self, question: str, pool: list[ChunkResult], usage: dict[str, int]
    ) -> tuple[dict[int, Score], list[str]]:
        """The pool's scores and any warnings about them; raises RerankFailed."""
        raise NotImplementedError

    def _log_extra(self) -> dict[str, str]:
        return {}

    def rerank(self, question: str, candidates: list[ChunkResult], top_k: int) -> RerankOutcome:
        pool = candidates[: self.max_candidates]
        if not pool:
            return RerankOutcome([], reranked=False)
        key = self._cache_key(question, pool)
        with self._lock:
            cached = self._cache.get(key)
        usage = self._new_usage()
        warnings: list[str] = []
        if cached is None:
            try:
                cached, warnings = self._score(question, pool, usage)
            except RerankFailed as exc:
                log.warning("reranker skipped", extra={"reason": str(exc), **self._log_extra()})
                warning = f"reranker skipped: {exc}; results keep the first-stage order"
                return RerankOutcome(candidates, reranked=False, warnings=[warning], usage=usage)
            with self._lock:
                self._cache[key] = cached
        else:
            usage["cache_hit"] = 1
        ordered = order_scored(
            candidates,
            cached,
            self.adjustments,
            guard_top=self.guard_top,
            guard_min=self.guard_min,
            unscored_last=self.unscored_last,
        )
        return RerankOutcome(ordered, reranked=True, warnings=warnings, usage=usage)


class LLMReranker(CachedReranker):
    def __init__(
        self,
        client: Any,
        model: str,
        *,
        timeout: float = 15.0,
        batch_size: int = 20,
        max_candidates: int = 40,
        chunk_token_cap: int = 350,
        guard_top: int = 5,
        guard_min: float = 0.5,
        adjustments: Adjustments | None = None,
        cache_ttl: float = 300.0,
    ):
        if batch_size < 1 or batch_size > 20:
            raise ValueError("batch_size must be 1..20")
        self.client = client
        self.model = model
        self.timeout = timeout
        self.batch_size = batch_size
        self.max_candidates = max_candidates
        self.chunk_token_cap = chunk_token_cap
        self.guard_top = guard_top
        self.guard_min = guard_min
        self.adjustments = adjustments or Adjustments()
        self._structured = True  # flips to plain JSON mode once a server rejects json_schema
        self._cache: TTLCache = TTLCache(maxsize=1024, ttl=cache_ttl)
        self._lock = threading.Lock()
        self._pool = BoundedExecutor("LLM", workers=8, queue=16)
        self._tokens = default_counter()

    def close(self) -> None:
        self._pool.shutdown()

    def _cache_key(self, question: str, pool: list[ChunkResult]) -> tuple[Any, ...]:
        return (self.model, question, tuple(c.id for c in pool))

    def _new_usage(self) -> dict[str, int]:
        return {"prompt_tokens": 0, "completion_tokens": 0, "llm_requests": 0}

    def _score(
        self, question: str, pool: list[ChunkResult], usage: dict[str, int]
    ) -> tuple[dict[int, Score], list[str]]:
        return self._score_all(question, pool, usage), []

    # -- scoring -------------------------------------------------------------------------------

    def _score_all(self, question: str, pool: list[ChunkResult], usage: dict[str, int]) -> dict[int, Score]:
        batches = [pool[i : i + self.batch_size] for i in range(0, len(pool), self.batch_size)]
        deadline = time.monotonic() + self.timeout
        futures = []
        scores: dict[int, Score] = {}
        try:
            for batch in batches:
                futures.append(self._pool.submit(self._score_batch, question, batch, deadline))
            for future in futures:
                try:
                    batch_scores, batch_usage = future.result(timeout=max(0.0, deadline - time.monotonic()))
                except FutureTimeout:
                    raise RerankFailed(f"no reply within {self.timeout:g} s") from None
                for k, v in batch_usage.items():
                    usage[k] = usage.get(k, 0) + v
                scores.update(batch_scores)
        except ProvidersBusy as exc:
            raise RerankFailed(str(exc)) from None
        finally:
            for future in futures:
                future.cancel()  # the ones still queued are never sent
        if not scores:
            raise RerankFailed("the reply scored none of the candidates")
        return scores

    def _score_batch(
        self, question: str, batch: list[ChunkResult], deadline: float | None = None
    ) -> tuple[dict[int, Score], dict[str, int]]:
        import openai

        # A call started late (queued behind others) gets only what is left of the budget.
        timeout = self.timeout if deadline is None else deadline - time.monotonic()
        if timeout <= 0:
            raise RerankFailed(f"no reply within {self.timeout:g} s")
        messages = [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": self.prompt(question, batch)},
        ]
        try:
            response = self._complete(messages, timeout)
        except openai.APITimeoutError:
            raise RerankFailed(f"no reply within {self.timeout:g} s") from None
        except openai.APIStatusError as exc:
            raise RerankFailed(f"the LLM answered HTTP {exc.status_code}") from None
        except openai.APIError as exc:
            raise RerankFailed(f"the LLM request failed ({type(exc).__name__})") from None
        usage = {"llm_requests": 1}
        if response.usage is not None:
            usage["prompt_tokens"] = response.usage.prompt_tokens or 0
            usage["completion_tokens"] = response.usage.completion_tokens or 0
        content = response.choices[0].message.content if response.choices else None
        scores = parse_scores(content or "", {c.id for c in batch})
        if not scores:
            raise RerankFailed("the reply could not be parsed as scores")
        return scores, usage

    def _complete(self, messages: list[dict[str, str]], timeout: float) -> Any:
        import openai

        kwargs = {"model": self.model, "messages": messages, "temperature": 0, "timeout": timeout}
        if self._structured:
            try:
                return self.client.chat.completions.create(
                    response_format={"type": "json_schema", "json_schema": RESPONSE_SCHEMA}, **kwargs
                )
            except openai.BadRequestError as exc:
                if "response_format" not in str(exc) and "json_schema" not in str(exc):
                    raise
                self._structured = False  # an older or compatible server: use JSON mode from now on
        return self.client.chat.completions.create(response_format={"type": "json_object"}, **kwargs)

    def prompt(self, question: str, batch: Sequence[ChunkResult]) -> str:
        return render_prompt(question, batch, lambda text: self._tokens.truncate(text, self.chunk_token_cap))


def order_scored(
    candidates: list[ChunkResult],
    scores: dict[int, Score],
    adjustments: Adjustments,
    *,
    guard_top: int,
    guard_min: float,
    unscored_last: bool = False,
) -> list[ChunkResult]:
    """Every scored candidate's ``final_score`` becomes its adjusted rerank score, and the list is
    ordered by it. Two exceptions keep the first-stage judgement: a chunk the reply did not
    score (after every scored one when ``unscored_last``: a cross-encoder's probabilities and the
    first-stage scale do not mix), and the union guard: one bad judgement must not drop a strong
    first-stage hit (among the first ``guard_top``, relevance at least ``guard_min``), so such a
    chunk keeps the better of the two scores, in the list, the context and the status alike."""
    guarded = {c.id for c in candidates[:guard_top] if c.relevance >= guard_min}

    def judged(chunk: ChunkResult) -> ChunkResult:
        score = scores.get(chunk.id)
        if score is None:
            return chunk
        adjusted = adjustments.apply(chunk, score.value)
        final = chunk.final_score if chunk.id in guarded and chunk.final_score > adjusted else adjusted
        return chunk.model_copy(
            update={
                "rerank_score": score.value,
                "rerank_reasoning": score.reasoning,
                "adjusted_score": adjusted,
                "final_score": final,
            }
        )

    return sorted(
        (judged(c) for c in candidates),
        key=lambda c: (unscored_last and c.id not in scores, -c.final_score, -(c.rerank_score or 0.0)),
    )
