"""Stage 6, the whole answer: preprocess -> embed -> search -> rerank -> assemble -> status.

:class:`Retriever` holds the long-lived stages and turns one :class:`RetrievalRequest` into one
:class:`RetrievalResponse`, timing every stage. The webhook, the eval harness and the CLI all
call :meth:`Retriever.answer`, so they measure the same code path.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
import weakref
from collections.abc import Iterator, Sequence
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
from . import answer_type
from . import confidence as confidence_stage
from . import context as context_stage
from . import minimum
from .amendments import bring_amendments
from .authority import Adjustments
from .executor import BoundedExecutor
from .naming import named_documents
from .preprocess import preprocess
from .rerank import Reranker
from .scoring import first_stage_order
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
# A serving process calibrates every community as it starts when there are at most this many;
# past that each community's first question starts its own, as before: a calibration is 160
# searches, and 100 communities would keep a core busy for minutes after every start.
CALIBRATE_AT_START = 8

NO_RESULTS_MESSAGE = ("No passage in the knowledge base matches this question. Do not answer from general "
                      "knowledge; say the governing documents do not address it, or ask the user to rephrase.")
LOW_CONFIDENCE_MESSAGE = ("Only weakly related passages were found. Answer cautiously, cite the sources, and "
                          "say that the documents may not address the question directly.")
# The passages may be squarely on the subject: what they lack is the figure asked for.
MISSING_ANSWER_MESSAGE = ("The passages found are on the subject but state {absent}. Do not give one from "
                          "general knowledge; say the governing documents do not state it, cite the sources, and "
                          "suggest asking the association.")
STATUS_MESSAGES = {"success": None, "low_confidence": LOW_CONFIDENCE_MESSAGE, "no_results": NO_RESULTS_MESSAGE}


# The status acts on the best first-stage relevance, measured against the knowledge base's own
# calibration (worker/confidence.py); these fixed cuts on it apply only while there is none.
Thresholds = confidence_stage.FixedThresholds


@dataclass(frozen=True)
class ContextPolicy:
    """How the default context is filled (an explicit ``min_relevance`` in a request overrides)."""

    min_context_chunks: int = 6     # the best few go in whenever the answer is not no_results ...
    min_relevance: float = 0.5      # ... chunks past them need this
    steer_boost: float = 1.1        # a document type the question names (``CC&Rs say``)
    name_boost: float = 1.1         # a document the question names (``the shops bylaws``, retrieve/naming.py)
    leg_top: int = 3                # each leg's best few follow those first chunks (context.leg_tops_first)
    fill_chunks: int = 20           # a caller who gives a token_budget without top_k: chunks it may fill


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
    def __init__(self, *, embedder: CachedEmbedder, backend: SearchBackend, reranker: Reranker | None,
                 thresholds: Thresholds = Thresholds(), policy: ContextPolicy = ContextPolicy(),
                 embedding_timeout: float = 10.0,
                 default_fusion: str = "weighted", counter: TokenCounter | None = None,
                 search_cache: SearchCache | None = None, authority: Adjustments | None = None,
                 cuts: confidence_stage.StatusCuts = confidence_stage.StatusCuts(), calibrate: bool = False,
                 calibration_questions: int = confidence_stage.CALIBRATION_QUESTIONS,
                 near_miss_reach: float = confidence_stage.NEAR_MISS_REACH):
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
        self._embed_pool = BoundedExecutor("embedding", workers=PROVIDER_WORKERS, queue=PROVIDER_QUEUE)
        self._search_pool = BoundedExecutor("full-text", workers=PROVIDER_WORKERS, queue=PROVIDER_QUEUE)
        self.cuts = cuts
        # Off unless asked: the server asks (ARC_STATUS_CALIBRATION, serve/app.py); a retriever
        # built by hand for one purpose does not start background searches of its own.
        self.calibrate = calibrate
        self.calibration_questions = calibration_questions
        self.near_miss_reach = near_miss_reach
        # One calibration per community: each has its own documents, statistics and so its own
        # score scale (a community of short rule lists scores higher than one of declarations).
        self.calibrations: dict[str, confidence_stage.Calibration | None] = {}
        self._calibrated_versions: dict[str, int] = {}
        self._wanted: set[str] = set()  # communities the background thread is to (re)calibrate
        self._wanted_lock = threading.Lock()
        self._calibrating = threading.Lock()
        self._calibration_thread: threading.Thread | None = None
        self._stopping = threading.Event()
        # A calibration still running when the interpreter exits stops between two searches
        # instead of being killed inside the embedding model.
        atexit.register(_stop_calibration, weakref.ref(self))

    def close(self) -> None:
        """Drop queued provider calls; a stopping worker has no request left to give them to."""
        self.stop_calibration()
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
            hard_filter = list(request.document_types) if request.document_types else None
            # Phrasing ("do the CC&Rs say") steers the ranking; only an explicit filter hides chunks.
            steer = [] if hard_filter else processed.detected_document_types
            weights = request.weights or Weights(vector=processed.weights[0], fts=processed.weights[1])
            fusion = request.fusion or self.default_fusion

            expansion = expand(processed.normalized) + self._compounds(processed.normalized, community)
        params = SearchParams(query_text=processed.normalized, embedding=None,
                              expansion_text=" ".join(expansion) or None,
                              match_count=request.candidates, vector_weight=weights.vector,
                              fts_weight=weights.fts, fusion=fusion,
                              document_types=tuple(hard_filter) if hard_filter else None,
                              binding_only=request.binding_only, include_superseded=request.include_superseded,
                              community=community)
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
            candidates = first_stage_order(candidates, have_embedding=embedding is not None, steer=steer,
                                           steer_boost=self.policy.steer_boost, authority=self.authority,
                                           weights=request.weights, named=named,
                                           name_boost=self.policy.name_boost)

        reranked, usage = False, {}
        with timer.stage("rerank"):
            use_llm = request.rerank if request.rerank is not None else self.reranker is not None
            if use_llm and self.reranker is None:
                warnings.append("reranking requested but no LLM is configured; first-stage order kept")
            elif use_llm and candidates:
                outcome = self.reranker.rerank(processed.normalized, candidates, request.top_k)
                candidates, reranked, usage = outcome.chunks, outcome.reranked, outcome.usage
                warnings.extend(outcome.warnings)
            elif self.reranker is None:
                warnings.append("reranker off (no LLM configured): scores are first-stage relevance")

        candidates = bring_amendments(candidates, request.top_k)
        best = candidates[0].final_score if candidates else None
        # The status carries without the reranker: it reads the first-stage relevance, the one
        # score the calibration measured, whether or not an LLM reordered the list.
        confidence = confidence_stage.decide(max((c.relevance for c in candidates), default=None),
                                             self._calibration_now(community), self.cuts, self.thresholds)
        status, message = confidence.status, STATUS_MESSAGES[confidence.status]
        with timer.stage("context"):
            qualifying = minimum.qualifying(candidates, request.min_relevance)
            if status == "no_results":
                built = context_stage.Context(text="", tokens=0, chunks=[])
            else:
                built = self._assemble(qualifying, request)
            if request.min_relevance is not None and not built.chunks and status != "no_results":
                status, message = "no_results", NO_RESULTS_MESSAGE
                warnings.append(minimum.empty_context_warning(request.min_relevance, best))
            lacking = (answer_type.missing(processed.normalized, built.text)
                       if status == "success" and self.cuts.answer_types else None)
            if lacking is not None:
                status, message = "low_confidence", MISSING_ANSWER_MESSAGE.format(absent=lacking.absent)
                warnings.append(f"the question asks for {lacking.name} and the context states {lacking.absent}")
            in_context = built.source_of
            # The ranking, best first; neighbours pulled into the context follow it.
            shown = minimum.listed(qualifying, built.chunks, request.top_k)
            for chunk in shown:
                chunk.source = in_context.get(chunk.id)
        timings = dict(timer.timings, total=timer.total())
        return RetrievalResponse(
            status=status, message=message,
            query=QueryInfo(original=request.query, normalized=processed.normalized, keywords=processed.keywords,
                            query_type=processed.query_type, weights=weights, fusion=fusion,
                            document_types=hard_filter, filter_source="request" if hard_filter else "none",
                            steered_to=steer or None),
            chunks=shown, context=built.text, context_tokens=built.tokens,
            sources=len(set(built.source_of.values())),
            best_score=None if best is None else round(best, 4),
            confidence={**confidence.public(), "rerank": _best_rerank(candidates) if reranked else None},
            reranked=reranked, warnings=warnings,
            usage=usage, timings_ms=timings, request_id=request_id, community=community,
            debug={"candidates": len(candidates), "candidate_documents": [c.document_id for c in candidates],
                   "embedding_cache": {"hits": self.embedder.hits, "misses": self.embedder.misses},
                   "search_cache_hits": self.search_cache.hits} if request.debug else None,
        )

    def _assemble(self, ranked: list[ChunkResult], request: RetrievalRequest) -> context_stage.Context:
        # An explicit min_relevance is a hard rule. By default the best few chunks always go in
        # (the answer is not no_results, so the best one cleared that threshold): a low-confidence
        # answer carries its best evidence, and the passages around a strong hit come with it.
        # A caller who sizes the context (token_budget or top_k in the request) gets it filled in
        # ranking order up to that size; each leg's best few are among the chunks that go in first.
        explicit = request.min_relevance is not None
        given = request.model_fields_set
        sized = "token_budget" in given or "top_k" in given
        max_chunks = request.top_k if "top_k" in given or not sized else max(request.top_k, self.policy.fill_chunks)
        first = max_chunks if sized else self.policy.min_context_chunks
        if not explicit:
            ranked, first = context_stage.leg_tops_first(ranked, self.policy.leg_top, first)
            if "top_k" not in given:  # a leg's best hit goes in beside the ranking's best, not instead
                max_chunks = max(max_chunks, first)
        return context_stage.assemble(
            ranked, counter=self.counter, token_budget=request.token_budget,
            min_relevance=request.min_relevance if explicit else self.policy.min_relevance,
            min_chunks=0 if explicit else first,
            floor=0.0, max_chunks=max_chunks,
            # neighbours are not scored against the question: a hard minimum leaves them out
            neighbours=None if explicit else self._neighbours)

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

    def _embed(self, text: str, params: SearchParams,
               warnings: list[str]) -> tuple[np.ndarray | None, Future | None]:
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

    def _neighbours(self, chunk: ChunkResult) -> list[ChunkResult]:
        found = self.backend.neighbours(chunk.id, 1)
        for n in found:
            n.final_score = 0.0
        return found

    # -- status calibration --------------------------------------------------------------------

    @property
    def calibration(self) -> confidence_stage.Calibration | None:
        """The default community's calibration (the only one's, when there is one)."""
        if DEFAULT_COMMUNITY in self.calibrations:
            return self.calibrations[DEFAULT_COMMUNITY]
        return next(iter(self.calibrations.values()), None)

    def _calibration_now(self, community: str | None) -> confidence_stage.Calibration | None:
        """The community's calibration. A change to its documents starts a new one in the
        background; until it is ready the previous one answers (one document more or less barely
        moves the scale), or the fixed thresholds when there is none yet."""
        if not self.calibrate or community is None:
            return None
        try:
            version = self.backend.version(community)
        except Exception:  # the search itself reports an unreachable database
            return self.calibrations.get(community)
        if version != self._calibrated_versions.get(community):
            self._start_calibration({community})
        return self.calibrations.get(community)

    def refresh_calibration(self) -> None:
        """After a change this process made: measure again, now rather than at the next question,
        every community calibrated so far whose documents changed."""
        if self.calibrate:
            self._start_calibration(set(self.calibrations) or {DEFAULT_COMMUNITY})

    def knowledge_base_changed(self) -> None:
        """Every path that ingests or deletes calls this: cached searches would answer from the
        old documents, and the status's scale belongs to the old knowledge base."""
        self.search_cache.clear()
        self.refresh_calibration()

    def calibrate_in_background(self) -> None:
        """Start measuring the communities now, at a serving process's start, so that their first
        questions are not answered on the fixed thresholds while the first of them would start it
        (all of them when there are at most ``CALIBRATE_AT_START``)."""
        if not self.calibrate:
            return
        try:
            communities = set(self.backend.communities())
        except Exception as exc:  # the database is not up yet: the first question starts it
            log.warning("status calibration not started", extra={"reason": type(exc).__name__})
            return
        if len(communities) <= CALIBRATE_AT_START:
            self._start_calibration(communities or {DEFAULT_COMMUNITY})

    def stop_calibration(self) -> None:
        self._stopping.set()
        thread = self._calibration_thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)

    def calibrate_now(self, community: str | None = None) -> confidence_stage.Calibration | None:
        """Calibrate ``community`` (None: every community) at its current version before
        returning, and give its calibration (None: the default community's). Ingestion and the
        evaluation call this; requests never wait for it."""
        with self._calibrating:
            for name in [community] if community is not None else self.backend.communities():
                self._calibrate(name, self.backend.version(name))
        return self.calibrations.get(community) if community is not None else self.calibration

    def _start_calibration(self, communities: set[str]) -> None:
        with self._wanted_lock:
            self._wanted |= communities
        if self._stopping.is_set() or not self._calibrating.acquire(blocking=False):
            return  # the running thread takes the new wishes before it stops
        self._calibration_thread = threading.Thread(target=self._calibrate_wanted, name="arc-calibration",
                                                    daemon=True)
        self._calibration_thread.start()

    def _calibrate_wanted(self) -> None:
        try:
            while not self._stopping.is_set():
                with self._wanted_lock:
                    if not self._wanted:
                        return
                    community = self._wanted.pop()
                version = None
                try:
                    version = self.backend.version(community)
                    if version != self._calibrated_versions.get(community):
                        self._calibrate(community, version)
                except CalibrationStopped:
                    return
                except Exception as exc:  # the database went away, the provider failed: try on the next change
                    if version is not None:
                        self._calibrated_versions[community] = version
                    log.warning("status calibration failed; the previous calibration stays",
                                extra={"community": community, "reason": type(exc).__name__})
        finally:
            self._calibrating.release()

    def _calibrate(self, community: str, version: int) -> confidence_stage.Calibration | None:
        started = time.perf_counter()
        chunks = self.backend.calibration_chunks(self.calibration_questions * 2, community)
        found = confidence_stage.calibrate(lambda texts: self._best_relevances(texts, community), chunks, version,
                                           self.calibration_questions, self.near_miss_reach)
        self.calibrations[community], self._calibrated_versions[community] = found, version
        log.info("status calibrated", extra={"community": community, "kb_version": version,
                                             "ms": round((time.perf_counter() - started) * 1000),
                                             **confidence_stage.anchors(found)})
        return found

    def _best_relevances(self, texts: Sequence[str], community: str | None = None) -> list[confidence_stage.Best]:
        """Each text's best first-stage relevance in ``community``, by the same path a question
        takes, and its best among the passages that do not hold it (its near miss)."""
        processed = [preprocess(t) for t in texts]
        vectors = self.embedder.embed([p.normalized for p in processed])
        # One lookup of every text's compound words, not one round trip per text.
        compounds = [compound_candidates(p.normalized) for p in processed]
        frequency = self.backend.word_frequencies(sorted({w for c in compounds for w in c.lookups()}), community)
        best = []
        for text, p, vector, candidates in zip(texts, processed, vectors, compounds):
            if self._stopping.is_set():
                raise CalibrationStopped
            expansion = expand(p.normalized) + compound_expansions(candidates, frequency)
            params = SearchParams(query_text=p.normalized, embedding=vector, expansion_text=" ".join(expansion) or None,
                                  vector_weight=p.weights[0], fts_weight=p.weights[1], fusion=self.default_fusion,
                                  community=community)
            found = first_stage_order(self.backend.search(params), have_embedding=True, steer=[],
                                      steer_boost=1.0, authority=self.authority)
            quoted = _spaced(text)
            best.append(confidence_stage.Best(
                relevance=max((c.relevance for c in found), default=0.0),
                elsewhere=max((c.relevance for c in found if quoted not in _spaced(c.content)), default=0.0)))
        return best


def _spaced(text: str) -> str:
    return " ".join(text.split())


def _best_rerank(candidates: list[ChunkResult]) -> float | None:
    """The LLM's best score, beside the status for the agent to weigh; the status carries without it."""
    scores = [c.rerank_score for c in candidates if c.rerank_score is not None]
    return round(max(scores), 4) if scores else None


class CalibrationStopped(Exception):
    pass


def _stop_calibration(ref: weakref.ref) -> None:
    retriever = ref()
    if retriever is not None:
        retriever.stop_calibration()
