"""The whole answer: first stage -> rerank -> status -> context.

:class:`Retriever` holds the long-lived stages and turns one question (:class:`AnswerOptions`,
plain typed values a door builds from its request) into one :class:`RetrievalResponse`, timing
every stage. The webhook, the eval harness and the CLI all come through :meth:`Retriever.ask`,
so they measure the same code path. Each stage returns its own result; the response is built from
them at the end. The first stage (``first_stage.py``) is the one the status calibration asks
through; the status is decided by ``status.settle`` on the community's stored calibration
(``calibration.py``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import date

import numpy as np

from ..embeddings import CachedEmbedder
from ..models import DEFAULT_COMMUNITY, ChunkResult, QueryInfo, RetrievalRequest, RetrievalResponse, Status
from ..store import calls
from ..store.search import NeighbourReach, SearchBackend
from ..tokens import TokenCounter, default_counter
from . import context as context_stage
from . import in_force, language, rerank_services
from . import sentences as sentence_stage
from .amendments import bring_amendments
from .authority import Adjustments
from .calibration import Calibrations
from .confirmed import Confirmations, Match
from .first_stage import Boosts, FirstStage, Searched
from .options import AnswerOptions
from .rerank import Reranker
from .scoring import boost
from .search_cache import SearchCache
from .status import answer_type, language_scale, minimum
from .status import confidence as confidence_stage
from .status import decision as status_stage
from .status.subject import OffDomain, Subject
from .timing import Timer

log = logging.getLogger("arc.pipeline")


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
    # The question's one call brings the neighbours of this many of the best fused candidates and
    # of each leg's best few, the chunks the default context adds where a chunk is cut mid-thought;
    # a chunk further down that needs its neighbours costs one more call (docs/performance.md,
    # "Round trips to the database").
    neighbours_of: int = 16
    sentence_top: int = 0  # the first candidates re-ordered by their best sentence (sentences.py);
    sentence_share: float = 0.0  # its share of the blend (0: off; measured in docs/answers.md)


@dataclass(frozen=True)
class Reranked:
    """The rerank stage's order (the first stage's when nothing reordered it)."""

    candidates: list[ChunkResult]
    reranked: bool = False
    usage: dict[str, int] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class Standing:
    """What the status is decided on: the confidence, and the rerank service's verdict when one
    scored the candidates."""

    confidence: confidence_stage.Confidence
    service: rerank_services.Verdict | None
    reading: language.Reading
    warnings: tuple[str, ...] = ()
    subject: Subject | None = None  # read only for a no_results from the confidence


@dataclass(frozen=True)
class Settled:
    """The context stage: the context, the status it settles, and the chunks listed."""

    built: context_stage.Context
    status: Status
    message: str | None
    shown: list[ChunkResult]
    warnings: tuple[str, ...] = ()


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
        self.first_stage = FirstStage(
            embedder=embedder,
            backend=backend,
            search_cache=self.search_cache,
            authority=self.authority,
            default_fusion=default_fusion,
            embedding_timeout=embedding_timeout,
        )
        self.cuts = cuts
        # What a question on no subject of the knowledge base is nearer to (status/subject.py).
        self.off_domain = OffDomain(embedder.embed_queries)
        # The keeper's confirmed answers (confirmed.py); none loaded: a matcher that never matches.
        self.confirmations = confirmations or Confirmations(load=None, stamp=str, model=embedder.model)
        # One calibration per community: each has its own documents, statistics and so its own
        # score scale (a community of short rule lists scores higher than one of declarations).
        # Off unless asked: the server asks (ARC_STATUS_CALIBRATION, serve/app.py); a retriever
        # built by hand for one purpose decides on the fixed cuts.
        self.calibrator = Calibrations(
            embedder=embedder,
            backend=backend,
            first_stage=self.first_stage,
            enabled=calibrate,
            questions=calibration_questions,
            reach=near_miss_reach,
            reranker=reranker,
            cuts=cuts,
            confirmed=self.confirmations.questions,
        )

    def close(self) -> None:
        """Drop queued provider calls; a stopping worker has no request left to give them to."""
        self.calibrator.stop()
        self.first_stage.close()
        close = getattr(self.reranker, "close", None)
        if close is not None:
            close()

    def answer(self, request: RetrievalRequest, request_id: str | None = None) -> RetrievalResponse:
        """:meth:`ask` for a validated request (the harness's and the tools' way in)."""
        return self.ask(AnswerOptions.of(request), request_id)

    def ask(self, options: AnswerOptions, request_id: str | None = None) -> RetrievalResponse:
        timer = Timer()
        with calls.counted() as tally:
            searched = self.first_stage.run(
                options,
                timer,
                Boosts(steer=self.policy.steer_boost, name=self.policy.name_boost),
                calibration_model=self.calibrator.key if self.calibrator.enabled else None,
                reach=self._reach(options),
            )
            ranked = self._rerank(searched, options, timer)
            candidates = bring_amendments(ranked.candidates, options.max_chunks)
            # A question like one the keeper confirmed: its passage first, its status decided by it.
            confirmed = self._confirmed(searched, candidates)
            if confirmed is not None:
                candidates = confirmed.first(candidates)
            standing = self._status(searched, candidates, ranked.reranked)
            settled = self._context(searched, candidates, standing, options, timer, confirmed)
            if options.as_of is not None:
                settled = self._as_of(options.as_of, searched, candidates, settled)
        return self._response(
            options, request_id, timer, tally, searched, ranked, candidates, standing, settled, confirmed
        )

    # -- stages --------------------------------------------------------------------------------

    def _rerank(self, searched: Searched, options: AnswerOptions, timer: Timer) -> Reranked:
        candidates = searched.candidates
        use_llm = options.rerank if options.rerank is not None else self.reranker is not None
        by_sentence = self.policy.sentence_top > 1 and self.policy.sentence_share > 0
        llm_orders = use_llm and self.reranker is not None
        if by_sentence and searched.embedding is not None and candidates and not llm_orders:
            with timer.stage("sentences"):
                candidates = self._by_sentence(searched.embedding, candidates, self._boosts(searched))

        with timer.stage("rerank"):
            if use_llm and self.reranker is None:
                return Reranked(
                    candidates, warnings=("reranking requested but no LLM is configured; first-stage order kept",)
                )
            if use_llm and candidates and self.reranker is not None:  # (None: warned above)
                outcome = self.reranker.rerank(searched.processed.normalized, candidates, options.max_chunks)
                return Reranked(outcome.chunks, outcome.reranked, outcome.usage, tuple(outcome.warnings))
            if self.reranker is None:
                return Reranked(
                    candidates, warnings=("reranker off (no LLM configured): scores are first-stage relevance",)
                )
            return Reranked(candidates)

    def _confirmed(self, searched: Searched, candidates: list[ChunkResult]) -> Match | None:
        if not searched.any_community:
            return None
        stamp = searched.state.confirmations if searched.state is not None else None
        return self.confirmations.match(
            searched.community, searched.processed.normalized, searched.embedding, candidates, stamp
        )

    def _status(self, searched: Searched, candidates: list[ChunkResult], reranked: bool) -> Standing:
        warnings: list[str] = []
        reading = searched.reading
        # The status carries without the reranker: it reads the first-stage relevance on its
        # calibrated scale, whether or not an LLM reordered the list.
        scale = (
            self.calibrator.for_question(
                searched.community, searched.state.calibration if searched.state is not None else None
            )
            if searched.any_community
            else None
        )
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
            self.calibrator.for_language(searched.community, reading, scale)
            if searched.embedding is not None and service is None
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
        # A no_results on the documents' subject keeps its closest passages (status/subject.py).
        subject = (
            self.off_domain.subject(searched.embedding, candidates)
            if self.cuts.on_subject and service is None and confidence.status == "no_results"
            else None
        )
        if subject is not None and subject.on_subject:
            warnings.append(subject.warning())
        return Standing(confidence, service, reading, tuple(warnings), subject)

    def _context(
        self,
        searched: Searched,
        candidates: list[ChunkResult],
        standing: Standing,
        options: AnswerOptions,
        timer: Timer,
        confirmed: Match | None = None,
    ) -> Settled:
        best = candidates[0].final_score if candidates else None
        service_status = standing.service.status if standing.service is not None else None
        with timer.stage("context"):
            qualifying = minimum.qualifying(candidates, options.min_relevance)
            opening = status_stage.first(
                standing.confidence, service=service_status, reading=standing.reading, subject=standing.subject
            )
            if confirmed is not None:
                opening = confirmed.opening()
            if opening[0] == "no_results":
                built = context_stage.Context(text="", tokens=0, chunks=[])
            else:
                read = searched.state.neighbours if searched.state is not None else None
                built = self._assemble(qualifying, options, searched.community, read)
            lacking = answer_type.missing(searched.processed.normalized, built.text) if self.cuts.answer_types else None
            verdict = (
                confirmed.verdict()
                if confirmed is not None
                else status_stage.settle(
                    opening,
                    context_chunks=len(built.chunks),
                    minimum=options.min_relevance,
                    best=best,
                    lacking=lacking,
                )
            )
            # The ranking, best first; neighbours pulled into the context follow it.
            listed = minimum.listed(qualifying, built.chunks, options.max_chunks)
            shown = [chunk.model_copy(update={"source": built.source_of.get(chunk.id)}) for chunk in listed]
        return Settled(built, verdict.status, verdict.message, shown, tuple(verdict.warnings))

    def _as_of(self, as_of: date, searched: Searched, candidates: list[ChunkResult], settled: Settled) -> Settled:
        """An answer as of a date says when it used undated documents, and when nothing was in force yet."""
        if not candidates:
            nothing = in_force.nothing_in_force(as_of, self.backend.document_dates(searched.community))
            if nothing is not None:
                return replace(settled, status="no_results", message=nothing)
        undated = in_force.undated_warning(as_of, settled.built.chunks)
        return replace(settled, warnings=(*settled.warnings, undated)) if undated is not None else settled

    def _response(
        self,
        options: AnswerOptions,
        request_id: str | None,
        timer: Timer,
        tally: calls.Tally,
        searched: Searched,
        ranked: Reranked,
        candidates: list[ChunkResult],
        standing: Standing,
        settled: Settled,
        confirmed: Match | None,
    ) -> RetrievalResponse:
        best = candidates[0].final_score if candidates else None
        processed = searched.processed
        service = standing.service
        # Round trips to the database, beside the stages' milliseconds: across a network each costs one.
        timings = dict(timer.timings, total=timer.total(), database_calls=tally.calls)
        return RetrievalResponse(
            status=settled.status,
            message=settled.message,
            query=QueryInfo(
                original=options.query,
                normalized=processed.normalized,
                keywords=processed.keywords,
                query_type=processed.query_type,
                weights=searched.weights,
                fusion=searched.fusion,
                document_types=searched.hard_filter,
                filter_source="request" if searched.hard_filter else "none",
                steered_to=searched.steer or None,
            ),
            chunks=settled.shown,
            context=settled.built.text,
            context_tokens=settled.built.tokens,
            sources=len(set(settled.built.source_of.values())),
            best_score=None if best is None else round(best, 4),
            confidence={
                **standing.confidence.public(),
                **standing.reading.public(),
                "rerank": _best_rerank(candidates) if ranked.reranked else None,
                "decided_on": "confirmed" if confirmed else "rerank" if service is not None else "relevance",
                **(service.public(standing.confidence) if service is not None else {"first_stage": None}),
            },
            reranked=ranked.reranked,
            confirmed=confirmed.public() if confirmed else None,
            warnings=[*searched.warnings, *ranked.warnings, *standing.warnings, *settled.warnings],
            usage=ranked.usage,
            timings_ms=timings,
            request_id=request_id,
            community=searched.community,
            debug={
                "candidates": len(candidates),
                "candidate_documents": [c.document_id for c in candidates],
                "embedding_cache": {"hits": self.embedder.hits, "misses": self.embedder.misses},
                "search_cache_hits": self.search_cache.hits,
                "database_calls": tally.calls,
            }
            if options.debug
            else None,
        )

    def _assemble(
        self,
        ranked: list[ChunkResult],
        options: AnswerOptions,
        community: str,
        read: dict[int, list[ChunkResult]] | None = None,
    ) -> context_stage.Context:
        # An explicit min_relevance is a hard rule. By default the best few chunks always go in
        # (the answer is not no_results, so the best one cleared that threshold): a low-confidence
        # answer carries its best evidence, and the passages around a strong hit come with it.
        # Each leg's best few are among the chunks that go in first.
        explicit = options.min_relevance is not None
        # The design's context first (at most top_k chunks, the best few of them whatever their
        # score); a caller who sized it (token_budget or top_k) then gets the rest of the ranking
        # up to that size: top_k chunks in all, or with a budget alone as far as the budget goes.
        if options.top_k is not None:
            fill = options.top_k
        elif options.token_budget is not None:
            fill = len(ranked)
        else:
            fill = 0
        max_chunks = options.max_chunks
        first = min(self.policy.min_context_chunks, max_chunks)
        if not explicit:
            ranked, first = context_stage.leg_tops_first(ranked, self.policy.leg_top, first)
            if options.top_k is None:  # a leg's best hit goes in beside the ranking's best, not instead
                max_chunks = max(max_chunks, first)
        return context_stage.assemble(
            ranked,
            counter=self.counter,
            token_budget=options.budget,
            min_relevance=self.policy.min_relevance if options.min_relevance is None else options.min_relevance,
            min_chunks=0 if explicit else first,
            floor=0.0,
            max_chunks=max_chunks,
            # neighbours are not scored against the question: a hard minimum leaves them out
            neighbours=None if explicit else self._neighbours_for(options.as_of, community, read),
            fill=fill,
            fill_needs=options.min_relevance if explicit else 0.0,
            carry=options.carry,
            citations=options.citations,
        )

    def _boosts(self, searched: Searched) -> dict[int, float]:
        """Each candidate's source factor, as the first-stage order weighed it."""
        return {
            c.id: boost(
                c,
                authority=self.authority,
                steer=searched.steer,
                steer_boost=self.policy.steer_boost,
                named=searched.named,
                name_boost=self.policy.name_boost,
            )
            for c in searched.candidates
        }

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

    def _reach(self, options: AnswerOptions) -> NeighbourReach:
        """Whose neighbours the question's one call reads: a context the caller sized goes as far
        down the ranking as its size, so every candidate's, and where its passages carry the
        sentences around them, the neighbours' own too."""
        if not options.sized:
            return NeighbourReach(of=self.policy.neighbours_of, leg_top=self.policy.leg_top)
        return NeighbourReach(of=2 * options.candidates, depth=2 if options.carry else 1)

    def _neighbours_for(
        self, as_of: date | None, community: str, read: dict[int, list[ChunkResult]] | None
    ) -> Callable[[ChunkResult], list[ChunkResult]]:
        """The neighbours context assembly may add (``read``: those the search's call brought,
        by chunk id; any other chunk's are asked for): as of a date, only those in force that day."""

        def around(chunk: ChunkResult) -> list[ChunkResult]:
            found = read.get(chunk.id) if read is not None else None
            if found is None:
                found = self.backend.neighbours(chunk.id, 1)
            # unscored against the question
            return [n.model_copy(update={"final_score": 0.0}) for n in found]

        if as_of is None:
            return around

        def in_force_then(chunk: ChunkResult) -> list[ChunkResult]:
            found = around(chunk)
            replacing = in_force.replacing_ids(found)
            dates = self.backend.document_dates(community, replacing) if replacing else {}
            return in_force.neighbours_in_force(found, as_of, dates)

        return in_force_then

    # -- status calibration (calibration.py) --------------------------------------------------

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
        its current version, read or measured and stored before returning, with the success cut
        the confirmations fit (a refit under way is waited for). Ingestion and the evaluation call
        this; requests never wait for a stored one."""
        self.calibrator.wait_refits()
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
