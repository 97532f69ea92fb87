"""The first stage: question -> normalised text, reading and weights -> embedding -> the searched
candidates in first-stage order.

A resident's question (:meth:`FirstStage.run`) and the status calibration's questions
(:meth:`FirstStage.many`, ``calibration.py``) both take this path, so the calibration measures the
scores a question gets. What differs is said here: a resident's question may name its community,
filters, weights and fusion, is read for its language, steered by the document types and
documents it names, and searched through the cache with an embedding deadline; the calibration
asks in batches, without steer or request weights, uncached.
"""

from __future__ import annotations

import contextvars
import logging
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, replace
from datetime import date

import numpy as np

from ..embeddings import CachedEmbedder
from ..errors import UnknownCommunity
from ..models import ChunkResult, Weights
from ..store import communities
from ..store.search import (
    AnswerCall,
    Answered,
    CommunityRefused,
    DocumentDate,
    NeighbourReach,
    SearchBackend,
    SearchParams,
)
from . import in_force, language
from .amendments import recitals_take_their_instruments_match
from .authority import Adjustments
from .executor import BoundedExecutor
from .naming import named_documents
from .options import AnswerOptions
from .preprocess import ProcessedQuery, preprocess
from .scoring import first_stage_order
from .search_cache import Held, SearchCache
from .timing import Timer
from .vocabulary import compound_words, expand

log = logging.getLogger("arc.pipeline")

# The full-text leg (needed alone if the embedding fails) starts this long before the embedding's
# deadline: a timed-out embedding then costs no extra search time, and one that arrives in time
# (every healthy remote call) costs no wasted search.
FULL_TEXT_HEAD_START = 0.25
# Provider calls per process: admission control (worker/service/admission.py) lets 8 requests run,
# each with one embedding call and at most one speculative search; the queue leaves room for calls
# still finishing for requests that have just given up. Past that: 503 ProvidersBusy.
PROVIDER_WORKERS = 4
PROVIDER_QUEUE = 8


@dataclass(frozen=True)
class Boosts:
    """The factors the first-stage order gives a source the question names."""

    steer: float = 1.1  # a document type the question names (``CC&Rs say``)
    name: float = 1.1  # a document the question names (``the shops bylaws``, retrieve/naming.py)


@dataclass(frozen=True)
class Searched:
    """A question's first stage: what it read in the question, and the candidates, best first."""

    community: str
    any_community: bool  # False: the knowledge base holds no community, so nothing was searched
    processed: ProcessedQuery
    reading: language.Reading
    weights: Weights
    fusion: str
    hard_filter: list[str] | None
    steer: list[str]  # document types the phrasing names (none under a hard filter)
    named: frozenset[str]  # documents the question names
    embedding: np.ndarray | None  # None: the provider failed, full text only
    candidates: list[ChunkResult]
    warnings: tuple[str, ...]
    # what the one call read besides the candidates (None: no call, or a backend without one)
    state: Answered | None = None


class FirstStage:
    def __init__(
        self,
        *,
        embedder: CachedEmbedder,
        backend: SearchBackend,
        search_cache: SearchCache,
        authority: Adjustments,
        default_fusion: str = "weighted",
        embedding_timeout: float = 10.0,
    ):
        self.embedder = embedder
        self.backend = backend
        self.search_cache = search_cache
        self.authority = authority
        self.default_fusion = default_fusion
        self.embedding_timeout = embedding_timeout
        # The communities as this process last read them; the one call checks them against the
        # database (:meth:`_answer`).
        self._communities: tuple[str, ...] | None = None
        self._embed_pool = BoundedExecutor("embedding", workers=PROVIDER_WORKERS, queue=PROVIDER_QUEUE)
        self._search_pool = BoundedExecutor("full-text", workers=PROVIDER_WORKERS, queue=PROVIDER_QUEUE)

    def close(self) -> None:
        """Drop queued provider calls; a stopping worker has no request left to give them to."""
        self._embed_pool.shutdown()
        self._search_pool.shutdown()

    # -- a resident's question -----------------------------------------------------------------

    def run(
        self,
        options: AnswerOptions,
        timer: Timer,
        boosts: Boosts = Boosts(),
        calibration_model: str | None = None,
        reach: NeighbourReach | None = None,
    ) -> Searched:
        """``calibration_model``: the key the status calibration is stored under, and ``reach``:
        the candidates whose neighbours context assembly may add, read with the search
        (:class:`Searched`'s ``state``)."""
        warnings: list[str] = []
        with timer.stage("preprocess"):
            # Before anything costs: a request without its community, or for an unknown one, is refused.
            known = self._known_communities(options.community)
            community = communities.resolve(options.community, known)
            processed = preprocess(options.query)
            hard_filter = list(options.document_types) if options.document_types else None
            # Phrasing ("do the CC&Rs say") steers the ranking; only an explicit filter hides chunks.
            steer = [] if hard_filter else processed.detected_document_types
            # language.py: a question in another language leans on the vector leg, or is said unread
            reading = language.read(processed.normalized, self.embedder.model)
            warnings.extend(reading.warnings)
            chosen = reading.weights(processed.weights)
            weights = options.weights or Weights(vector=chosen[0], fts=chosen[1])
            fusion = options.fusion or self.default_fusion
            expansion = expand(processed.normalized)
        params = SearchParams(
            query_text=processed.normalized,
            embedding=None,
            expansion_text=" ".join(expansion) or None,
            compound_words=compound_words(processed.normalized),
            match_count=options.candidates,
            vector_weight=weights.vector,
            fts_weight=weights.fts,
            fusion=fusion,
            document_types=tuple(hard_filter) if hard_filter else None,
            binding_only=options.binding_only,
            include_superseded=options.include_superseded,
            community=community,
            as_of=options.as_of,
        )
        with timer.stage("embed"):
            embedding, full_text_only = self._embed(processed.normalized, params, warnings)

        state: Answered | None = None
        with timer.stage("search"):
            if not known:  # an empty knowledge base holds no community to search: nothing to find
                found: list[ChunkResult] = []
            elif full_text_only is not None and embedding is None:
                found = full_text_only.result()
            else:
                searched = replace(params, embedding=embedding)
                state = self._answer(searched, options.community, calibration_model, reach or NeighbourReach())
                found = state.rows or []
                community = state.community or community
            found = self._replacements(found, community, options.as_of, state.dates if state is not None else None)
            if options.as_of is not None and found:
                # the same search without the date: the versions of each section on either side of it
                unfiltered = state.unfiltered if state is not None else None
                if unfiltered is None:  # the full-text search alone, which the call did not run
                    unfiltered = self._search(replace(params, embedding=embedding, as_of=None, include_superseded=True))
                found = in_force.stand_in_for_later_amendments(found, unfiltered, options.as_of)
                found = in_force.amendments_take_their_sections_match(found, unfiltered)
                found = in_force.cited_sections_stand_in_for_later_documents(found, unfiltered, options.as_of)
            found = recitals_take_their_instruments_match(found)
            named = frozenset(named_documents(processed.normalized, {c.document_id: c.document_name for c in found}))
            candidates = first_stage_order(
                found,
                have_embedding=embedding is not None,
                steer=steer,
                steer_boost=boosts.steer,
                authority=self.authority,
                weights=options.weights,
                named=named,
                name_boost=boosts.name,
            )
        return Searched(
            community=community,
            any_community=bool(known),
            processed=processed,
            reading=reading,
            weights=weights,
            fusion=fusion,
            hard_filter=hard_filter,
            steer=steer,
            named=named,
            embedding=embedding,
            candidates=candidates,
            warnings=tuple(warnings),
            state=state,
        )

    def _known_communities(self, requested: str | None) -> tuple[str, ...]:
        """The communities as this process last read them, read again when they cannot say what
        ``requested`` means (a name not among them, or none held yet): the one call checks the
        rest (:meth:`_answer`)."""
        held = self._communities
        if held is None or not held or (requested is not None and requested not in held):
            held = self._communities = tuple(self.backend.communities())
        return held

    def _answer(
        self, params: SearchParams, requested: str | None, calibration_model: str | None, reach: NeighbourReach
    ) -> Answered:
        """The search and what the answer reads besides, in one call (``arc_answer``, which also
        spells the question's compounds the knowledge base's way): a cached result is sent back
        only when the community's version moved."""
        answer = self.backend.answer
        held = self.search_cache.held(params)
        if held is not None and not held.reach.covers(reach):
            held = None  # read for a smaller context: read again, with the neighbours this one needs
        call = AnswerCall(
            calibration_model=calibration_model,
            known_version=held.version if held is not None else None,
            neighbours=reach,
        )
        # The community as the request named it: the database resolves an unnamed one itself, so a
        # community added since this process last looked makes the question refused, as it must be.
        asked = replace(params, community=requested) if requested is None else params
        try:
            state = answer(asked, call)
        except CommunityRefused as refused:
            self._communities = tuple(self.backend.communities())
            communities.resolve(requested, self._communities)  # the worker's own error, named as always
            raise UnknownCommunity(f"community: {refused}") from None  # changed again meanwhile
        if state.community is None:  # the knowledge base emptied meanwhile: nothing to find
            self._communities = None
            return replace(state, rows=[])
        if state.community != params.community:  # another community is the only one now: its rows stand
            self._communities = None
            # the cached version was the other community's: a search skipped on it is run now
            return state if state.rows is not None else answer(asked, replace(call, known_version=None))
        if state.rows is None:
            assert held is not None  # rows are left out only for the version a cached result was read at
            self.search_cache.hits += 1
            return replace(
                state, rows=held.rows, neighbours=held.neighbours, dates=held.dates, unfiltered=held.unfiltered
            )
        self.search_cache.put(
            params, Held(state.version, state.rows, state.neighbours, state.dates, reach, state.unfiltered)
        )
        return state

    # -- the calibration's questions -----------------------------------------------------------

    def many(
        self, texts: Sequence[str], community: str | None, language_code: str | None = None
    ) -> Iterator[list[ChunkResult]]:
        """Each text's candidates in first-stage order, asked as a question in ``community`` is
        (``language_code``: the texts' language when it is not English, weighted as a question in
        it is), without steer or request weights: one embedding call for the batch, then one search
        each."""
        processed = [preprocess(t) for t in texts]
        vectors = self.embedder.embed_queries([p.normalized for p in processed])
        for p, vector in zip(processed, vectors, strict=True):
            expansion = expand(p.normalized)
            weights = language.FOREIGN_WEIGHTS if language_code not in (None, "en") else p.weights
            params = SearchParams(
                query_text=p.normalized,
                embedding=vector,
                expansion_text=" ".join(expansion) or None,
                compound_words=compound_words(p.normalized),
                vector_weight=weights[0],
                fts_weight=weights[1],
                fusion=self.default_fusion,
                community=community,
            )
            yield first_stage_order(
                self.backend.search(params), have_embedding=True, steer=[], steer_boost=1.0, authority=self.authority
            )

    # -- its parts -----------------------------------------------------------------------------

    def _replacements(
        self, found: list[ChunkResult], community: str, as_of: date | None, read: dict[str, DocumentDate] | None
    ) -> list[ChunkResult]:
        """Each superseded or amended candidate names what replaced it and when; as of a date, a
        replacement that came later does not count yet (in_force.py). The dates the search's call
        read (``read``), or one read, only when needed."""
        replacing = in_force.replacing_ids(found)
        if not replacing:
            return found
        dates = read if read is not None else self.backend.document_dates(community, replacing)
        return in_force.mark_replacements(found, dates, as_of)

    def _search(self, params: SearchParams) -> list[ChunkResult]:
        if not self.search_cache.enabled:
            return self.backend.search(params)
        # Read before searching: a change that lands during the search leaves the entry stale.
        version = self.backend.version(params.community)
        found = self.search_cache.get(params, version)
        if found is None:
            found = self.backend.search(params, min_version=version)
            self.search_cache.put(params, Held(version, found))
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
                # in this question's context, so its database calls are counted with the question's
                full_text_only = self._search_pool.submit(contextvars.copy_context().run, self._search, params)
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
