"""Stage 6, the whole answer: preprocess -> embed -> search -> rerank -> assemble -> status.

:class:`Retriever` holds the long-lived stages and turns one :class:`RetrievalRequest` into one
:class:`RetrievalResponse`, timing every stage. The webhook, the eval harness and the CLI all
call :meth:`Retriever.answer`, so they measure the same code path. The status is decided by
``status.settle`` on the community's stored calibration (``calibration.py``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import contextmanager
from dataclasses import dataclass, replace

import numpy as np

from ..embeddings import CachedEmbedder
from ..models import (
    DEFAULT_COMMUNITY,
    ChunkResult,
    QueryInfo,
    RetrievalRequest,
    RetrievalResponse,
    Weights,
)
from ..store import communities
from ..tokens import TokenCounter, default_counter
from . import answer_type, language, language_scale, minimum, rerank_services
from . import confidence as confidence_stage
from . import context as context_stage
from . import sentences as sentence_stage
from . import status as status_stage
from .amendments import bring_amendments
from .authority import Adjustments
from .calibration import Calibrations
from .confirmed import Confirmations
from .executor import BoundedExecutor
from .naming import named_documents
from .preprocess import preprocess
from .rerank import Reranker
from .scoring import boost, first_stage_order
from .search import SearchBackend, SearchCache, SearchParams
from .vocabulary import compound_candidates, compound_expansions, expand

log = logging.getLogger("arc.pipeline")

# The full-text leg (needed alone if the embedding fails) starts this long before the embedding's
# deadline: a timed-out embedding then costs no extra search time, and one that arrives in time
# (every healthy remote call) costs no wasted search. Starting it at 50 ms, as before, ran a
# search for nothing on every uncached question to a remote provider, to save at most that
# search's own 10-20 ms on a failure.
FULL_TEXT_HEAD_START = 0.25
# Provider calls per process: admission control (worker/serve/admission.py) lets 8 requests run, each
# with one embedding call and at most one speculative search; the queue leaves room for calls
# still finishing for requests that have just given up. Past that: 503 ProvidersBusy.
PROVIDER_WORKERS = 4
PROVIDER_QUEUE = 8


# The status acts on the best first-stage relevance, measured against the knowledge base's own
# calibration (confidence.py, calibration.py); these fixed cuts on it apply only without one.
Thresholds = confidence_stage.FixedThresholds


@dataclass(frozen=True)
class ContextPolicy:
    """How the default context is filled (an explicit ``min_relevance`` in a request overrides)."""

    min_context_chunks: int = 6  # the best few go in whenever the answer is not no_results ...
    min_relevance: float = 0.5  # ... chunks past them need this
    steer_boost: float = 1.1  # a document type the question names (``CC&Rs say``)
    name_boost: float = 1.1  # a document the question names (``the shops bylaws``, retrieve/naming.py)
    leg_top: int = 3  # each leg's best few follow those first chunks (context.leg_tops_first)
    sentence_top: int = 0  # the first candidates re-ordered by their best sentence (sentences.py);
    sentence_share: float = 0.0  # its share of the blend (0: off; measured in docs/answers.md)


class Timer:
    def __init__(self) -> None:
        self.timings: dict[str, float] = {}
        self._start = time.perf_counter()

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.timings[name] = round((time.perf_counter() - start) * 1000, 2)

    def total(self) -> float:
        return round((time.perf_counter() - self._start) * 1000, 2)


class Retriever:
    def __init__(
        self,
        *,
        embedder: CachedEmbedder,
        backend: SearchBackend,
        reranker: Reranker | None,
        thresholds: Thresholds = confidence_stage.DEFAULT_THRESHOLDS,
        policy: ContextPolicy = ContextPolicy(),
        embedding_timeout: float = 10.0,
        default_fusion: str = "weighted",
        counter: TokenCounter | None = None,
        search_cache: SearchCache | None = None,
        authority: Adjustments | None = None,
        cuts: confidence_stage.StatusCuts = confidence_stage.DEFAULT_CUTS,
        calibrate: bool = False,
        calibration_questions: int = confidence_stage.CALIBRATION_QUESTIONS,
        near_miss_reach: float = confidence_stage.NEAR_MISS_REACH,
        confirmations: Confirmations | None = None,
    ):
        self.embedder = embedder
        self.backend = backend
        self.reranker = reranker
        self.thresholds = thresholds
        self.policy = policy
        self.authority = authority or Adjustments()
        self.embedding_timeout = embedding_timeout
        self.default_fusion = default_fusion
        self.counter = counter or default_counter()
        self.search_cache = search_cache if search_cache is not None else SearchCache()
        self.sentence_vectors = sentence_stage.SentenceVectors(embedder.embed)
        self._embed_pool = BoundedExecutor("embedding", workers=PROVIDER_WORKERS, queue=PROVIDER_QUEUE)
        self._search_pool = BoundedExecutor("full-text", workers=PROVIDER_WORKERS, queue=PROVIDER_QUEUE)
        self.cuts = cuts
        # The keeper's confirmed answers (confirmed.py); none loaded: a matcher that never matches.
        self.confirmations = confirmations or Confirmations(load=None, stamp=str, model=embedder.model)
        # One calibration per community: each has its own documents, statistics and so its own
        # score scale (a community of short rule lists scores higher than one of declarations).
        # Off unless asked: the server asks (ARC_STATUS_CALIBRATION, serve/app.py); a retriever
        # built by hand for one purpose decides on the fixed cuts.
        self.calibrator = Calibrations(
            embedder=embedder,
            backend=backend,
            order=self._calibration_order,
            enabled=calibrate,
            questions=calibration_questions,
            reach=near_miss_reach,
            fusion=default_fusion,
            reranker=reranker,
        )

    def close(self) -> None:
        """Drop queued provider calls; a stopping worker has no request left to give them to."""
        self.calibrator.stop()
        self._embed_pool.shutdown()
        self._search_pool.shutdown()
        close = getattr(self.reranker, "close", None)
        if close is not None:
            close()

    def answer(self, request: RetrievalRequest, request_id: str | None = None) -> RetrievalResponse:
        timer = Timer()
        warnings: list[str] = []

        with timer.stage("preprocess"):
            # Before anything costs: a request without its community, or for an unknown one, is refused.
            known = self.backend.communities()
            community = communities.resolve(request.community, known)
            processed = preprocess(request.query)
            hard_filter: list[str] | None = list(request.document_types) if request.document_types else None
            # Phrasing ("do the CC&Rs say") steers the ranking; only an explicit filter hides chunks.
            steer = [] if hard_filter else processed.detected_document_types
            # language.py: a question in another language leans on the vector leg, or is said unread
            reading = language.read(processed.normalized, self.embedder.model)
            warnings.extend(reading.warnings)
            chosen = reading.weights(processed.weights)
            weights = request.weights or Weights(vector=chosen[0], fts=chosen[1])
            fusion = request.fusion or self.default_fusion

            expansion = expand(processed.normalized) + self._compounds(processed.normalized, community)
        params = SearchParams(
            query_text=processed.normalized,
            embedding=None,
            expansion_text=" ".join(expansion) or None,
            match_count=request.candidates,
            vector_weight=weights.vector,
            fts_weight=weights.fts,
            fusion=fusion,
            document_types=tuple(hard_filter) if hard_filter else None,
            binding_only=request.binding_only,
            include_superseded=request.include_superseded,
            community=community,
        )
        with timer.stage("embed"):
            embedding, full_text_only = self._embed(processed.normalized, params, warnings)

        with timer.stage("search"):
            if not known:  # an empty knowledge base holds no community to search: nothing to find
                candidates = []
            elif embedding is not None:
                params = replace(params, embedding=embedding)
                candidates = self._search(params)
            else:
                candidates = full_text_only.result() if full_text_only is not None else self._search(params)
            named = named_documents(processed.normalized, {c.document_id: c.document_name for c in candidates})
            candidates = first_stage_order(
                candidates,
                have_embedding=embedding is not None,
                steer=steer,
                steer_boost=self.policy.steer_boost,
                authority=self.authority,
                weights=request.weights,
                named=named,
                name_boost=self.policy.name_boost,
            )

        use_llm = request.rerank if request.rerank is not None else self.reranker is not None
        by_sentence = self.policy.sentence_top > 1 and self.policy.sentence_share > 0
        llm_orders = use_llm and self.reranker is not None
        if by_sentence and embedding is not None and candidates and not llm_orders:
            with timer.stage("sentences"):
                candidates = self._by_sentence(
                    embedding,
                    candidates,
                    {
                        c.id: boost(
                            c,
                            authority=self.authority,
                            steer=steer,
                            steer_boost=self.policy.steer_boost,
                            named=named,
                            name_boost=self.policy.name_boost,
                        )
                        for c in candidates
                    },
                )

        reranked = False
        usage: dict[str, int] = {}
        with timer.stage("rerank"):
            if use_llm and self.reranker is None:
                warnings.append("reranking requested but no LLM is configured; first-stage order kept")
            elif use_llm and candidates and self.reranker is not None:  # (None: warned above)
                outcome = self.reranker.rerank(processed.normalized, candidates, request.top_k)
                candidates, reranked, usage = outcome.chunks, outcome.reranked, outcome.usage
                warnings.extend(outcome.warnings)
            elif self.reranker is None:
                warnings.append("reranker off (no LLM configured): scores are first-stage relevance")

        candidates = bring_amendments(candidates, request.top_k)
        # A question like one the keeper confirmed: its passage first, its status decided below.
        confirmed = self.confirmations.match(community, processed.normalized, embedding, candidates) if known else None
        if confirmed is not None:
            candidates = confirmed.first(candidates)
        best = candidates[0].final_score if candidates else None
        # The status carries without the reranker: it reads the first-stage relevance on its
        # calibrated scale, whether or not an LLM reordered the list.
        scale = self.calibrator.for_question(community) if known else None
        if scale is not None and scale.warning:
            warnings.append(scale.warning)
        # A rerank service's best score, when one scored the candidates, sets the first status, on
        # the service's scale measured with the calibration (the fixed RERANK_* cuts without one).
        service = (
            rerank_services.verdict(self.reranker, candidates, scale.rerank if scale else None, self.cuts)
            if reranked
            else None
        )
        if service is not None and service.warning:
            warnings.append(service.warning)
        # Otherwise a question in another language the model reads is decided on its language's own
        # scale (language_scale.py); the service's scale was measured with the knowledge base's text.
        own = (
            self.calibrator.for_language(community, reading, scale)
            if embedding is not None and service is None
            else None
        )
        if own is not None:
            reading = replace(reading, scaled=True)
            warnings.append(reading.scale_warning())
        confidence = confidence_stage.decide(
            language_scale.relevance(candidates) if own else max((c.relevance for c in candidates), default=None),
            own or (scale.calibration if scale else None),
            self.cuts,
            self.thresholds,
        )
        service_status = service.status if service is not None else None
        with timer.stage("context"):
            qualifying = minimum.qualifying(candidates, request.min_relevance)
            opening = status_stage.first(confidence, service=service_status, reading=reading)
            if confirmed is not None:
                opening = confirmed.opening()
            if opening[0] == "no_results":
                built = context_stage.Context(text="", tokens=0, chunks=[])
            else:
                built = self._assemble(qualifying, request)
            lacking = answer_type.missing(processed.normalized, built.text) if self.cuts.answer_types else None
            verdict = (
                confirmed.verdict()
                if confirmed
                else status_stage.settle(
                    opening,
                    context_chunks=len(built.chunks),
                    minimum=request.min_relevance,
                    best=best,
                    lacking=lacking,
                )
            )
            status, message = verdict.status, verdict.message
            warnings.extend(verdict.warnings)
            in_context = built.source_of
            # The ranking, best first; neighbours pulled into the context follow it.
            shown = minimum.listed(qualifying, built.chunks, request.top_k)
            for chunk in shown:
                chunk.source = in_context.get(chunk.id)
        timings = dict(timer.timings, total=timer.total())
        return RetrievalResponse(
            status=status,
            message=message,
            query=QueryInfo(
                original=request.query,
                normalized=processed.normalized,
                keywords=processed.keywords,
                query_type=processed.query_type,
                weights=weights,
                fusion=fusion,
                document_types=hard_filter,
                filter_source="request" if hard_filter else "none",
                steered_to=steer or None,
            ),
            chunks=shown,
            context=built.text,
            context_tokens=built.tokens,
            sources=len(set(built.source_of.values())),
            best_score=None if best is None else round(best, 4),
            confidence={
                **confidence.public(),
                **reading.public(),
                "rerank": _best_rerank(candidates) if reranked else None,
                "decided_on": "confirmed" if confirmed else "rerank" if service is not None else "relevance",
                **(service.public(confidence) if service is not None else {"first_stage": None}),
            },
            reranked=reranked,
            confirmed=confirmed.public() if confirmed else None,
            warnings=warnings,
            usage=usage,
            timings_ms=timings,
            request_id=request_id,
            community=community,
            debug={
                "candidates": len(candidates),
                "candidate_documents": [c.document_id for c in candidates],
                "embedding_cache": {"hits": self.embedder.hits, "misses": self.embedder.misses},
                "search_cache_hits": self.search_cache.hits,
            }
            if request.debug
            else None,
        )

    def _assemble(self, ranked: list[ChunkResult], request: RetrievalRequest) -> context_stage.Context:
        # An explicit min_relevance is a hard rule. By default the best few chunks always go in
        # (the answer is not no_results, so the best one cleared that threshold): a low-confidence
        # answer carries its best evidence, and the passages around a strong hit come with it.
        # Each leg's best few are among the chunks that go in first.
        explicit = request.min_relevance is not None
        given = request.model_fields_set
        # The design's context first (at most top_k chunks, the best few of them whatever their
        # score); a caller who sized it (token_budget or top_k) then gets the rest of the ranking
        # up to that size: top_k chunks in all, or with a budget alone as far as the budget goes.
        if "top_k" in given:
            fill = request.top_k
        elif "token_budget" in given:
            fill = len(ranked)
        else:
            fill = 0
        max_chunks = request.top_k
        first = min(self.policy.min_context_chunks, max_chunks)
        if not explicit:
            ranked, first = context_stage.leg_tops_first(ranked, self.policy.leg_top, first)
            if "top_k" not in given:  # a leg's best hit goes in beside the ranking's best, not instead
                max_chunks = max(max_chunks, first)
        return context_stage.assemble(
            ranked,
            counter=self.counter,
            token_budget=request.token_budget,
            min_relevance=self.policy.min_relevance if request.min_relevance is None else request.min_relevance,
            min_chunks=0 if explicit else first,
            floor=0.0,
            max_chunks=max_chunks,
            # neighbours are not scored against the question: a hard minimum leaves them out
            neighbours=None if explicit else self._neighbours,
            fill=fill,
            fill_needs=request.min_relevance if explicit else 0.0,
        )

    # -- stages --------------------------------------------------------------------------------

    def _search(self, params: SearchParams) -> list[ChunkResult]:
        if not self.search_cache.enabled:
            return self.backend.search(params)
        # Read before searching: a change that lands during the search leaves the entry stale.
        version = self.backend.version(params.community)
        found = self.search_cache.get(params, version)
        if found is None:
            found = self.backend.search(params, min_version=version)
            self.search_cache.put(params, version, found)
        return found

    def _embed(self, text: str, params: SearchParams, warnings: list[str]) -> tuple[np.ndarray | None, Future | None]:
        """The query vector, or None (with a warning) when the provider fails or is too slow.

        A provider still silent shortly before the deadline gets the full-text leg started beside
        it, so a timeout costs no extra search time.
        """
        deadline = time.monotonic() + self.embedding_timeout
        future = self._embed_pool.submit(self._embed_before, text, deadline)
        full_text_only: Future | None = None
        try:
            try:
                return future.result(timeout=max(self.embedding_timeout - FULL_TEXT_HEAD_START, 0)), None
            except FutureTimeout:
                full_text_only = self._search_pool.submit(self._search, params)
                return future.result(timeout=max(deadline - time.monotonic(), 0)), full_text_only
        except FutureTimeout:
            future.cancel()  # still queued: never sent
            reason = f"no embedding within {self.embedding_timeout:g} s"
        except Exception as exc:  # any provider failure degrades to full-text, never an error
            reason = f"embedding failed ({type(exc).__name__})"
        log.warning("embedding failed; full-text only", extra={"reason": reason})
        warnings.append(f"degraded: {reason}; results come from full-text search only")
        return None, full_text_only

    def _embed_before(self, text: str, deadline: float) -> np.ndarray:
        """The provider call gets what is left of the request's budget, so it ends when the
        request stops waiting for it, not a client timeout (and its retries) later."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("the embedding budget ran out while the call was queued")
        return self.embedder.embed_query(text, timeout=remaining)

    def _compounds(self, question: str, community: str | None) -> list[str]:
        """The community's own spelling of the question's compounds (vocabulary.py)."""
        candidates = compound_candidates(question)
        return compound_expansions(candidates, self.backend.word_frequencies(candidates.lookups(), community))

    def _by_sentence(
        self, embedding: np.ndarray, candidates: list[ChunkResult], boosts: dict[int, float]
    ) -> list[ChunkResult]:
        """The first candidates re-ordered by their best sentence; the first-stage order when the
        embedder fails (the stage refines an order, it never costs an answer)."""
        top = self.policy.sentence_top
        try:
            best = sentence_stage.best_sentences(embedding, candidates[:top], self.sentence_vectors)
        except Exception as exc:
            log.warning("sentence scoring failed; first-stage order kept", extra={"reason": type(exc).__name__})
            return candidates
        return sentence_stage.reorder(candidates, best, top=top, share=self.policy.sentence_share, boosts=boosts)

    def _neighbours(self, chunk: ChunkResult) -> list[ChunkResult]:
        found = self.backend.neighbours(chunk.id, 1)
        for n in found:
            n.final_score = 0.0
        return found

    # -- status calibration (calibration.py) --------------------------------------------------

    def _calibration_order(self, found: list[ChunkResult]) -> list[ChunkResult]:
        """A calibration question's candidates, scored as a question's are (without steer or request weights)."""
        return first_stage_order(found, have_embedding=True, steer=[], steer_boost=1.0, authority=self.authority)

    @property
    def calibrate(self) -> bool:
        return self.calibrator.enabled

    @property
    def calibrations(self) -> dict[str, confidence_stage.Calibration | None]:
        """The calibrations this process has read or measured, per community (None: too small)."""
        return self.calibrator.known

    @property
    def calibration(self) -> confidence_stage.Calibration | None:
        """The default community's calibration (the only one's, when there is one)."""
        if DEFAULT_COMMUNITY in self.calibrations:
            return self.calibrations[DEFAULT_COMMUNITY]
        return next(iter(self.calibrations.values()), None)

    def knowledge_base_changed(self) -> None:
        """Every path that ingests or deletes calls this after its write: cached searches would
        answer from the old documents, and the status's scale belongs to the old knowledge base,
        so the changed communities are measured again and stored before it returns."""
        self.search_cache.clear()
        self.confirmations.forget()
        try:
            self.calibrator.refresh()
        except Exception as exc:  # stored is stored: the next reader measures what is missing
            log.warning("status calibration after a change failed", extra={"reason": type(exc).__name__})

    def prepare_calibrations(self) -> None:
        """At a serving process's start: the stored calibrations answer; whatever is missing or
        stale is measured in the background (and a question finding one missing measures it)."""
        self.calibrator.prepare()

    def stop_calibration(self) -> None:
        self.calibrator.stop()

    def calibrate_now(self, community: str | None = None) -> confidence_stage.Calibration | None:
        """``community``'s calibration (None: every community's, returning the default one's) at
        its current version, read or measured and stored before returning. Ingestion and the
        evaluation call this; requests never wait for a stored one."""
        if community is not None:
            return self.calibrator.current(community)
        self.calibrator.measure_all()
        return self.calibration

    def _best_relevances(self, texts: list[str], community: str | None = None) -> list[confidence_stage.Best]:
        return self.calibrator.best_relevances(texts, community)


def _best_rerank(candidates: list[ChunkResult]) -> float | None:
    """The LLM's best score, beside the status for the agent to weigh; the status carries without it."""
    scores = [c.rerank_score for c in candidates if c.rerank_score is not None]
    return round(max(scores), 4) if scores else None
