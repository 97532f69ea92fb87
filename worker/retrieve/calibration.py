"""The status calibration's lifecycle: read the stored one, measure it when it is missing or stale,
store it (``sql/036_status_calibrations.sql``).

A calibration (what one is: ``confidence.py``) belongs to a community's documents at one version
and to one embedding model. It is measured when the knowledge base changes (the writer calls
:meth:`Calibrations.refresh` after an ingest or delete) and stored in the database, so every
process, replica host, the MCP server and the CLI read the same one and answer their first
question on it. A reader that finds it

* fresh: uses it;
* stale (the community's documents changed since, by a writer that did not measure, such as SQL
  by hand): uses it, one document more or less barely moves the scale, and measures the new one
  in the background;
* missing: measures it before answering, once: a question is never answered on the fixed cuts
  when a calibration can be had.

Many processes finding the same calibration missing or stale measure it once: each claims the
measurement in the database first, and the others wait for the row the claimant stores.

With a rerank service setting the status (``rerank_services.py``), the same measurement also asks
the service the same texts over their first-stage candidates, one request each, through the
reranker that answers questions (its wire shape, key and model), and stores the floor, match and
near miss of the score the status reads beside the first-stage ones, under the embedding model
and the service's identity: another service or model is another calibration. A service that fails
meanwhile leaves the first-stage scale stored with the reason (the service's status reads the
fixed ``RERANK_*`` cuts, with a warning), and the service's scale is measured again in the
background once :data:`SERVICE_RETRY_SECONDS` have passed.

A community whose keeper confirmed enough questions gets its own success cut, fitted on them
(``fitted_cut.py``) and stored in the calibration's row: fitted after each measurement (the
scale it is read on changed) and, in the background, after each change of the confirmations
(:meth:`Calibrations.refit`). The cut comes with the calibration a question reads, so every
process decides on it from its next question.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from ..store import language_scales as language_store
from ..store.calibrations import CalibrationStore, FittedCut, Reading, Stale, StoredCalibration, as_reading
from ..store.search import SearchBackend
from . import language, service_scale
from .first_stage import FirstStage
from .rerank_services import ServiceReranker, ServiceScale
from .service_scale import Asked
from .status import confidence as confidence_stage
from .status import fitted_cut, language_scale

log = logging.getLogger("arc.calibration")

# How long a claimed measurement keeps others waiting for it (a claimant that died frees it then),
# and how long a question waits for another process's measurement of a missing calibration.
CLAIM_LEASE_SECONDS = 120.0
WAIT_FOR_OTHERS_SECONDS = 60.0
_POLL_SECONDS = 0.25

TOO_SMALL_WARNING = (
    "uncalibrated: the knowledge base is too small to calibrate the status (fewer than 5 "
    "sentences to ask back); the status uses the fixed cuts on the best relevance"
)

# A rerank service's scale that could not be measured (the service failed meanwhile) is tried again
# this long after, in the background; meanwhile its status reads the fixed RERANK_* cuts.
SERVICE_RETRY_SECONDS = 600.0


@dataclass(frozen=True)
class Lookup:
    """The calibration a question is decided on (None: the fixed cuts), and why none when none;
    ``rerank``: the rerank service's scale (None: no service's scale is calibrated here)."""

    calibration: confidence_stage.Calibration | None
    warning: str | None = None
    rerank: ServiceScale | None = None


# A community's valid confirmed questions, each with whether it has an answer (a passage) or not.
Confirmed = Callable[[str], Sequence[tuple[str, bool]]]


class CalibrationStopped(Exception):
    pass


class Backlog:
    """Communities to work on in one background thread: ones added while it runs are worked in
    turn, and the thread ends when none is left (or ``stopping`` is set). A failure is logged with
    ``failure`` and the next community's work goes on."""

    def __init__(self, name: str, work: Callable[[str], object], stopping: threading.Event, failure: str):
        self.name = name
        self._work = work
        self._stopping = stopping
        self._failure = failure
        self._wanted: set[str] = set()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def add(self, communities: set[str]) -> None:
        with self._lock:
            self._wanted |= communities
            if self._stopping.is_set() or (self._thread is not None and self._thread.is_alive()):
                return
            self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
            self._thread.start()

    def wait(self, timeout: float | None = None) -> None:
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=timeout)

    def _run(self) -> None:
        while not self._stopping.is_set():
            with self._lock:
                if not self._wanted:
                    self._thread = None
                    return
                community = self._wanted.pop()
            try:
                self._work(community)
            except CalibrationStopped:
                return
            except Exception as exc:  # the database or the provider failed: the next reader tries again
                log.warning(self._failure, extra={"community": community, "reason": type(exc).__name__})


class LocalCalibrations:
    """A store held in this process only: for a backend without one (a stand-in in a test)."""

    def __init__(self, backend: SearchBackend):
        self.backend = backend
        self._rows: dict[tuple[str, str], StoredCalibration] = {}

    def read(self, community: str, model: str) -> Reading:
        return Reading(self._rows.get((community, model)), self.backend.version(community))

    def stale(self, model: str) -> list[Stale]:
        found = []
        for community in self.backend.communities():
            reading = self.read(community, model)
            if not reading.fresh:
                found.append(Stale(community, reading.current_version))
        return found

    def claim(self, community: str, model: str, version: int, lease_seconds: float) -> bool:
        return True

    def put(self, community: str, model: str, stored: StoredCalibration, measured_ms: int) -> None:
        held = self._rows.get((community, model))
        if held is None or held.kb_version <= stored.kb_version:
            fitted = held.fitted if held is not None and held.kb_version == stored.kb_version else None
            self._rows[(community, model)] = replace(stored, measured_at=datetime.now(UTC), fitted=fitted)

    def put_fit(self, community: str, model: str, version: int, fit: FittedCut | None) -> bool:
        held = self._rows.get((community, model))
        if held is None or held.kb_version != version:
            return False
        self._rows[(community, model)] = replace(held, fitted=fit)
        return True


def store_of(backend: SearchBackend) -> CalibrationStore:
    """The backend's database store of calibrations, or one local to this process."""
    make = getattr(backend, "calibration_store", None)
    return make() if make is not None else LocalCalibrations(backend)


class Calibrations:
    """Every community's calibration for one embedding model, as this process reads and measures it."""

    def __init__(
        self,
        *,
        embedder,
        backend: SearchBackend,
        first_stage: FirstStage,
        store: CalibrationStore | None = None,
        enabled: bool = True,
        questions: int = confidence_stage.CALIBRATION_QUESTIONS,
        reach: float = confidence_stage.NEAR_MISS_REACH,
        lease_seconds: float = CLAIM_LEASE_SECONDS,
        wait_seconds: float = WAIT_FOR_OTHERS_SECONDS,
        reranker: object = None,
        service_retry_seconds: float = SERVICE_RETRY_SECONDS,
        cuts: confidence_stage.StatusCuts = confidence_stage.DEFAULT_CUTS,
        confirmed: Confirmed | None = None,
    ):
        self.embedder = embedder
        # The rerank service whose scale is measured too (an LLM reranker sets no status: none).
        self.service = reranker if isinstance(reranker, ServiceReranker) and reranker.calibrated else None
        self.service_retry_seconds = service_retry_seconds
        self.backend = backend
        # The path a question takes to its candidates: the calibration asks the way a question is asked.
        self.first_stage = first_stage
        self.store = store if store is not None else store_of(backend)
        # The scales of questions in other languages, stored beside the calibrations (language_scale.py)
        self.language_store = language_store.beside(self.store)
        self._language_scales: dict[str, tuple[int, dict[str, language_store.StoredScale]]] = {}
        self._languages_tried: set[tuple[str, int]] = set()
        self.enabled = enabled
        self.questions = questions
        self.reach = reach
        self.lease_seconds = lease_seconds
        self.wait_seconds = wait_seconds
        # The configured cuts a fitted success cut is measured against, and the confirmed questions it is fitted on.
        self.cuts = cuts
        self.confirmed = confirmed
        # The last calibration this process read or measured per community (None: too small).
        self.known: dict[str, confidence_stage.Calibration | None] = {}
        self.known_service: dict[str, ServiceScale] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._locks_lock = threading.Lock()
        self._languages_lock = threading.Lock()
        self._stopping = threading.Event()
        self._measurements = Backlog(
            "arc-calibration",
            lambda community: self._remember(community, self.ensure(community)),
            self._stopping,
            "status calibration failed; the previous calibration stays",
        )
        self._refits = Backlog(
            "arc-fitted-cut", self.fit, self._stopping, "success cut not fitted; the stored one stays"
        )
        # A measurement still running when the interpreter exits stops between two searches
        # instead of being killed inside the embedding model.
        atexit.register(_stop, weakref.ref(self))

    @property
    def model(self) -> str:
        return str(self.embedder.model)

    @property
    def key(self) -> str:
        """What the stored calibration is kept under: the embedding model, and the rerank
        service's identity when its scale is measured too."""
        return self.model if self.service is None else f"{self.model} + {self.service.identity}"

    # -- reading -------------------------------------------------------------------------------

    def for_question(self, community: str, stored_row: dict[str, Any] | None = None) -> Lookup:
        """The calibration ``community``'s question is decided on: stored, or measured now when
        none is stored (a stale one answers while the new one is measured in the background).
        ``stored_row``: the stored row as the question's one call read it (no read here)."""
        if not self.enabled:
            return Lookup(None)
        try:
            reading = self.store.read(community, self.key) if stored_row is None else as_reading(stored_row)
        except Exception:  # the database is unreachable: the search reports it; keep what was read
            found = self._lookup(self.known.get(community), community in self.known)
            return replace(found, rerank=self.known_service.get(community, self._unmeasured("read")))
        if reading.stored is None:
            try:
                stored = self.ensure(community)
            except Exception as exc:  # the provider failed mid-measurement: the fixed cuts, this once
                log.warning("status calibration failed", extra={"community": community, "reason": type(exc).__name__})
                return Lookup(None, rerank=self._unmeasured("measured"))
        else:
            stored = reading.stored
            if not self._settled(reading):
                self.in_background({community})
        return self._remember(community, stored)

    def _remember(self, community: str, stored: StoredCalibration | None) -> Lookup:
        if stored is None:  # nothing could be measured (the database went away mid-measurement)
            return Lookup(None, rerank=self._unmeasured("measured"))
        calibration = self._calibration(stored)
        self.known[community] = calibration
        found = self._lookup(calibration, True)
        if self.service is None:
            return found
        self.known_service[community] = self._service_scale(stored)
        return replace(found, rerank=self.known_service[community])

    @staticmethod
    def _lookup(calibration: confidence_stage.Calibration | None, measured: bool) -> Lookup:
        return Lookup(calibration, TOO_SMALL_WARNING if measured and calibration is None else None)

    def _unmeasured(self, what: str) -> ServiceScale | None:
        if self.service is None:
            return None
        return ServiceScale(None, f"the status calibration could not be {what}")

    def _service_scale(self, stored: StoredCalibration) -> ServiceScale:
        """The rerank service's scale as stored, or why there is none."""
        if stored.too_small:
            return ServiceScale(None, "the knowledge base is too small to calibrate")
        if stored.rerank_floor is None or stored.rerank_match is None:
            return ServiceScale(None, stored.rerank_failure or "the service's scale was not measured")
        return ServiceScale(
            confidence_stage.Calibration(
                version=stored.kb_version,
                floor=stored.rerank_floor,
                match=stored.rerank_match,
                questions=stored.questions,
                near_miss=stored.rerank_near_miss,
                reach=self.reach,
            )
        )

    def _settled(self, reading: Reading) -> bool:
        """Fresh, and not holding a rerank service's scale that failed and is due for another try."""
        stored = reading.stored
        if not reading.fresh or stored is None:
            return False
        if self.service is None or not stored.rerank_failure or stored.measured_at is None:
            return True
        if stored.rerank_failure == service_scale.NOT_SEPARATED:  # the same again until the documents change
            return True
        age = (datetime.now(UTC) - stored.measured_at).total_seconds()
        return age < self.service_retry_seconds

    def _calibration(self, stored: StoredCalibration) -> confidence_stage.Calibration | None:
        if stored.too_small or stored.floor is None or stored.match is None:
            return None
        return confidence_stage.Calibration(
            version=stored.kb_version,
            floor=stored.floor,
            match=stored.match,
            questions=stored.questions,
            near_miss=stored.near_miss,
            reach=self.reach,
            success_at=stored.fitted.success_at if stored.fitted is not None and stored.fitted.in_force else None,
        )

    # -- the success cut the confirmed questions fit (fitted_cut.py) ------------------------------

    def fit(self, community: str) -> FittedCut | None:
        """Fit ``community``'s success cut on its valid confirmed questions now and store it with
        its calibration (cleared when they are too few); the fit, or None."""
        if not self.enabled:
            return None
        stored = self.ensure(community)
        if stored is None:
            return None
        found = self._fit_on(community, stored)
        self._remember(community, replace(stored, fitted=found))
        return found

    def refit(self, community: str) -> None:
        """After the community's confirmations changed: :meth:`fit` in the background."""
        if self.enabled and self.confirmed is not None:
            self._refits.add({community})

    def wait_refits(self, timeout: float | None = None) -> None:
        """Until the background fits end (tests, and a CLI that confirmed before it exits)."""
        self._refits.wait(timeout)

    def _fit_on(
        self, community: str, stored: StoredCalibration, asked: dict[str, language_scale.Scored] | None = None
    ) -> FittedCut | None:
        """The fit on the calibration ``stored``, stored with it when it differs from what is there;
        ``asked``: texts the measurement just scored (its off-domain questions are not asked again)."""
        calibration = self._calibration(stored)
        found = None
        if calibration is not None and self.confirmed is not None:
            confirmed = list(self.confirmed(community))
            answerable = sum(has_answer for _, has_answer in confirmed)
            if fitted_cut.enough(answerable, len(confirmed) - answerable):
                scored = self.scored([query for query, _ in confirmed], community)
                points = [
                    fitted_cut.Point(calibration.confidence(s.relevance), has_answer)
                    for s, (_, has_answer) in zip(scored, confirmed, strict=True)
                ]
                off_domain = confidence_stage.off_domain_questions()
                known = dict(asked or {})
                missing = [q for q in off_domain if q not in known]
                if missing:
                    known.update(zip(missing, self.scored(missing, community), strict=True))
                elsewhere = [fitted_cut.Point(calibration.confidence(known[q].relevance), False) for q in off_domain]
                found = fitted_cut.fit(points, self.cuts.success_at, self.cuts.no_results_below, elsewhere)
        if found != stored.fitted:
            self.store.put_fit(community, self.key, stored.kb_version, found)
            log.info(
                "success cut fitted" if found else "success cut cleared",
                extra={"community": community, "kb_version": stored.kb_version, **_fit_fields(found)},
            )
        return found

    # -- measuring -----------------------------------------------------------------------------

    def ensure(self, community: str) -> StoredCalibration | None:
        """``community``'s calibration at its current version: read, or measured and stored by this
        process or (waited for) by another that claimed it first."""
        with self._lock_for(community):
            reading = self.store.read(community, self.key)
            if self._settled(reading):
                return reading.stored
            version = reading.current_version
            if not self.store.claim(community, self.key, version, self.lease_seconds):
                deadline = time.monotonic() + self.wait_seconds
                while time.monotonic() < deadline and not self._stopping.is_set():
                    time.sleep(_POLL_SECONDS)
                    reading = self.store.read(community, self.key)
                    if reading.stored is not None and reading.stored.kb_version >= version:
                        return reading.stored
            return self._measure_and_store(community, version)

    def current(self, community: str) -> confidence_stage.Calibration | None:
        """``community``'s calibration at its current version, read or measured before returning."""
        return self._remember(community, self.ensure(community)).calibration

    def refresh(self) -> dict[str, confidence_stage.Calibration | None]:
        """After a write: measure, before returning, every community whose calibration is now
        missing or stale (only the communities the write changed are)."""
        if not self.enabled:
            return {}
        measured = {}
        for stale in self.store.stale(self.key):
            measured[stale.community] = self.current(stale.community)
        return measured

    def measure_all(self) -> dict[str, confidence_stage.Calibration | None]:
        """Every community's calibration at its current version, measured where needed."""
        return {community: self.current(community) for community in self.backend.communities()}

    def prepare(self) -> None:
        """At a process's start: measure in the background whatever is missing or stale (every
        community whose documents changed without a measurement); the rest is read as asked."""
        if not self.enabled:
            return
        try:
            stale = self.store.stale(self.key)
        except Exception as exc:  # the database is not up yet: the first question measures it
            log.warning("status calibration not read", extra={"reason": type(exc).__name__})
            return
        if stale:
            self.in_background({s.community for s in stale})

    def in_background(self, communities: set[str]) -> None:
        self._measurements.add(communities)

    def wait(self, timeout: float | None = None) -> None:
        """Until the background measurements end (tests and the start hooks' callers)."""
        self._measurements.wait(timeout)

    def stop(self) -> None:
        self._stopping.set()
        self.wait(timeout=5)
        self.wait_refits(timeout=5)

    def _lock_for(self, community: str) -> threading.Lock:
        with self._locks_lock:
            return self._locks.setdefault(community, threading.Lock())

    def _calibrate(
        self, community: str, version: int
    ) -> tuple[confidence_stage.Calibration | None, dict[str, language_scale.Scored], list[list[Asked]]]:
        """The calibration measured now, the scores of every text it asked, and each call's texts
        with their candidates (the off-domain questions', then the sentences')."""
        chunks = self.backend.calibration_chunks(self.questions * 2, community)
        scores: dict[str, language_scale.Scored] = {}
        asked: list[list[Asked]] = []

        def best(texts: Sequence[str]) -> list[confidence_stage.Best]:
            found = self.scored(texts, community, asked=asked)
            scores.update(zip(texts, found, strict=True))
            return list(found)

        return confidence_stage.calibrate(best, chunks, version, self.questions, self.reach), scores, asked

    def _measure_and_store(self, community: str, version: int) -> StoredCalibration:
        started = time.perf_counter()
        found, scores, asked = self._calibrate(community, version)
        if found is not None:  # stored before the calibration: a reader of it finds them
            try:
                self._measure_languages(community, version, scores)
            except CalibrationStopped:
                raise
            except Exception as exc:  # the English calibration stands; the scales are measured later
                log.warning(
                    "language scales not measured", extra={"community": community, "reason": type(exc).__name__}
                )
        stored = (
            StoredCalibration(version, None, None, None, 0, too_small=True)
            if found is None
            else StoredCalibration(version, found.floor, found.match, found.near_miss, found.questions)
        )
        service = None
        if found is not None and self.service is not None:
            outside, inside = asked
            try:
                service = service_scale.measure(self.service, outside, inside, version, self.reach, self._stopping)
            except service_scale.Stopped:
                raise CalibrationStopped from None
        if service is not None and service.calibration is not None:
            scale = service.calibration
            stored = replace(
                stored, rerank_floor=scale.floor, rerank_match=scale.match, rerank_near_miss=scale.near_miss
            )
        elif service is not None:
            stored = replace(stored, rerank_failure=service.failure)
        ms = round((time.perf_counter() - started) * 1000)
        self.store.put(community, self.key, stored, ms)
        if found is not None and self.confirmed is not None:  # the fit belongs to the scale just measured
            stored = replace(stored, fitted=self._fit_on(community, stored, scores))
        log.info(
            "status calibrated",
            extra={
                "community": community,
                "kb_version": version,
                "ms": ms,
                "embedding_model": self.model,
                **confidence_stage.anchors(found),
                **(service_scale.log_fields(self.service, service) if self.service and service else {}),
            },
        )
        return stored

    def best_relevances(self, texts: Sequence[str], community: str | None = None) -> list[confidence_stage.Best]:
        """Each text's best first-stage relevance in ``community``, by the same path a question
        takes, and its best among the passages that do not hold it (its near miss)."""
        return list(self.scored(texts, community))

    def scored(
        self,
        texts: Sequence[str],
        community: str | None = None,
        language_code: str | None = None,
        asked: list[list[Asked]] | None = None,
    ) -> list[language_scale.Scored]:
        """:meth:`best_relevances`, with the same for the vector leg alone; ``language_code``: the
        texts' language when it is not English (asked as a question in it is); ``asked`` gains
        the texts with their candidates (for the rerank service's scale)."""
        kept: list[Asked] | None = None
        if asked is not None:
            kept = []
            asked.append(kept)
        best = []
        searched = self.first_stage.many(texts, community, language_code)
        for text in texts:
            if self._stopping.is_set():
                raise CalibrationStopped
            found = next(searched)
            if kept is not None:
                kept.append(Asked(text, found))
            elsewhere = [c for c in found if not confidence_stage.quotes(c.content, text)]
            best.append(
                language_scale.Scored(
                    relevance=max((c.relevance for c in found), default=0.0),
                    elsewhere=max((c.relevance for c in elsewhere), default=0.0),
                    vector=max((c.vector_score or 0.0 for c in found), default=0.0),
                    vector_elsewhere=max((c.vector_score or 0.0 for c in elsewhere), default=0.0),
                )
            )
        return best

    # -- questions in other languages (language_scale.py) -------------------------------------

    def _measure_languages(self, community: str, version: int, asked: dict[str, language_scale.Scored]) -> None:
        """With a model that reads other languages: each shipped language's scale, stored."""
        if self.model in language.ENGLISH_ONLY_MODELS:
            return
        english = language_scale.english_cosines(asked)
        if english is None:
            return
        scales = language_scale.measure(lambda texts, code: self.scored(texts, community, code), english)
        if scales:
            self.language_store.put(community, self.model, version, scales)
            log.info(
                "language scales measured",
                extra={
                    "community": community,
                    "kb_version": version,
                    "scales": {
                        s.language: {
                            "floor": round(s.floor, 4),
                            "match": round(s.match, 4),
                            "near_miss": round(s.near_miss, 4),
                            "drop": round(s.drop, 4),
                        }
                        for s in scales
                    },
                },
            )

    def _languages_missing(self, community: str, version: int) -> None:
        """A calibration stored without language scales (by a release that did not measure them):
        measure them in the background, once per process and version."""
        if self.model in language.ENGLISH_ONLY_MODELS or not language_scale.languages() or self._stopping.is_set():
            return
        with self._languages_lock:
            if (community, version) in self._languages_tried:
                return
            self._languages_tried.add((community, version))
        threading.Thread(
            target=self._measure_languages_alone, args=(community, version), name="arc-language-scales", daemon=True
        ).start()

    def _measure_languages_alone(self, community: str, version: int) -> None:
        try:
            found, scores, _ = self._calibrate(community, version)
            if found is not None:
                self._measure_languages(community, version, scores)
        except CalibrationStopped:
            return
        except Exception as exc:  # the database or the provider failed: the old rule stays meanwhile
            log.warning("language scales not measured", extra={"community": community, "reason": type(exc).__name__})

    def for_language(
        self, community: str, reading: language.Reading, lookup: Lookup | None
    ) -> confidence_stage.Calibration | None:
        """The scale a question in another language that the model reads is decided on: its
        language's, measured with ``lookup``'s calibration; None for English, an unread language,
        a language without one, or no calibration."""
        calibration = lookup.calibration if lookup is not None else None
        if calibration is None or reading.language is None or not reading.readable:
            return None
        held = self._language_scales.get(community)
        if held is None or held[0] != calibration.version:
            try:
                scales = self.language_store.read(community, self.model, calibration.version)
            except Exception:  # the database is unreachable: the search reports it
                return None
            if not scales:  # none stored at this version: measured in the background, read next time
                self._languages_missing(community, calibration.version)
                return None
            held = (calibration.version, scales)
            self._language_scales[community] = held
        scale = held[1].get(reading.language.code)
        return None if scale is None else language_scale.calibration(scale, calibration.version, self.reach)


def _fit_fields(fit: FittedCut | None) -> dict[str, object]:
    if fit is None:
        return {}
    return {
        "success_at": round(fit.success_at, 4),
        "answerable": fit.answerable,
        "unanswerable": fit.unanswerable,
        "loo_accuracy": round(fit.loo_accuracy, 3),
        "configured_accuracy": round(fit.configured_accuracy, 3),
        "gained": fit.gained,
        "lost": fit.lost,
        "in_force": fit.in_force,
    }


def _stop(ref: weakref.ref) -> None:
    calibrations = ref()
    if calibrations is not None:
        calibrations.stop()
