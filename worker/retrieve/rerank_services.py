"""Stage 4 with a rerank service: Cohere, Jina, Voyage, Hugging Face TEI or Infinity.

Each question's over-retrieved candidates go to the service in one request, in the service's
own documented shape (:data:`SHAPES`), and its relevance scores order them, with the same
authority adjustments, cache, time budget, bounded pool and failure path as the LLM reranker
(:mod:`worker.retrieve.rerank`): a service that is down, slow, refuses the key, rate-limits or
answers something else leaves the first-stage order and says why in a ``reranker skipped:``
warning, within ``timeout`` seconds.

The service's score also decides the answer's status (:func:`verdict`, called from the rerank
stage of :mod:`worker.retrieve.pipeline`): its best score, read as a 0..1 probability (Cohere,
Jina and Voyage reply with one; TEI and Infinity too unless asked for raw scores) or as a raw
logit put through a sigmoid (``RERANK_SCORE=logit``), is placed on the service's own scale on
this knowledge base, measured with the status calibration (:mod:`worker.retrieve.calibration`
asks the service the same off-domain questions and own sentences over their first-stage
candidates, :meth:`ServiceReranker.judged`), and cut where the first-stage confidence is
(``confidence.SUCCESS_AT``, ``NO_RESULTS_BELOW``). Without that scale (calibration off, a
knowledge base too small, the service failing while it was measured) the best score is cut at the
fixed ``RERANK_SUCCESS_SCORE`` and ``RERANK_NO_RESULTS_SCORE``.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Any, Literal, TypeGuard
from urllib.parse import urlsplit

import httpx
from cachetools import TTLCache

from ..errors import ProvidersBusy
from ..models import ChunkResult
from ..tokens import default_counter
from .authority import Adjustments
from .executor import BoundedExecutor
from .rerank import CachedReranker, RerankFailed
from .rerank_prompt import Score
from .status.confidence import DEFAULT_CUTS, DEFAULT_THRESHOLDS, Calibration, Confidence, StatusCuts, anchors, decide

log = logging.getLogger("arc.rerank")

ScoreKind = Literal["probability", "logit"]
Status = Literal["success", "low_confidence", "no_results"]
# A Retry-After longer than this is read as this: one odd header must not turn reranking off for hours.
MAX_PAUSE_SECONDS = 300.0


@dataclass(frozen=True)
class WireShape:
    """One service's rerank request and reply, as its documentation gives them."""

    name: str  # as warnings and the README say it
    path: str  # appended to RERANK_BASE_URL
    documents: str  # the request's list of passages
    results: str | None  # the reply's list of results (None: the reply is the list)
    score: str  # a result's score field
    limit: str | None = None  # the request's "return this many" field
    model: Literal["always", "if_set", "never"] = "always"
    raw_scores: bool = False  # the request says whether it wants raw logits
    fixed: dict[str, Any] = field(default_factory=dict)  # fields always sent as they are
    max_documents: int = 40  # passages per request


SHAPES: dict[str, WireShape] = {
    # POST {base}/v2/rerank {model, query, documents, top_n}
    #   -> {id, results: [{index, relevance_score}], meta}
    "cohere": WireShape("Cohere", "/v2/rerank", "documents", "results", "relevance_score", limit="top_n"),
    # POST {base}/v1/rerank {model, query, documents, top_n, return_documents} -> {model, usage, results}
    "jina": WireShape(
        "Jina",
        "/v1/rerank",
        "documents",
        "results",
        "relevance_score",
        limit="top_n",
        fixed={"return_documents": False},
    ),
    # POST {base}/v1/rerank {query, documents, model, top_k, truncation} -> {object, data, model, usage}
    "voyage": WireShape(
        "Voyage", "/v1/rerank", "documents", "data", "relevance_score", limit="top_k", fixed={"truncation": True}
    ),
    # POST {base}/rerank {query, texts, raw_scores, truncate} -> [{index, score}]; the server serves
    # one model and refuses more texts than its --max-client-batch-size, 32 unless raised.
    "tei": WireShape(
        "TEI",
        "/rerank",
        "texts",
        None,
        "score",
        model="never",
        raw_scores=True,
        fixed={"truncate": True},
        max_documents=32,
    ),
    # POST {base}/rerank {model, query, documents, top_n, raw_scores} -> {object, results, model, usage, id}
    "infinity": WireShape(
        "Infinity", "/rerank", "documents", "results", "relevance_score", limit="top_n", model="if_set", raw_scores=True
    ),
}


@dataclass(frozen=True)
class ScoreScale:
    """How a service's raw score reads as a 0..1 relevance, and the cuts the status takes on it."""

    kind: ScoreKind = "probability"
    success_at: float = 0.5
    no_results_below: float = 0.05

    def relevance(self, raw: float) -> float:
        if self.kind == "logit":
            return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, raw))))
        return min(1.0, max(0.0, raw))

    def status(self, best: float) -> Status:
        if best < self.no_results_below:
            return "no_results"
        return "low_confidence" if best < self.success_at else "success"


@dataclass(frozen=True)
class ServiceScale:
    """A service's score scale on one knowledge base, as the status calibration measured it: the
    calibration (floor, match, near miss of the score the status reads), or why there is none."""

    calibration: Calibration | None
    failure: str | None = None  # why it could not be measured (None with a calibration)


@dataclass(frozen=True)
class Verdict:
    """The status a rerank service's best score sets, that score, and the scale it was read on
    (``confidence``: the calibrated one; None: the fixed cuts, ``warning`` saying why when a
    calibration was wanted)."""

    status: Status
    score: float
    confidence: Confidence | None = None
    warning: str | None = None

    def public(self, first_stage: Confidence) -> dict[str, object]:
        """The answer's ``confidence`` keys when this verdict set the status: the service scale's
        score and anchors (empty on the fixed cuts), the best first-stage relevance, and the
        first-stage confidence in full under ``first_stage``."""
        if self.confidence is not None:
            scale = self.confidence.public()
        else:
            scale = {"score": None, "calibrated": False, **anchors(None), "top": None, "kb_version": None}
        return {**scale, "relevance": first_stage.public()["relevance"], "first_stage": first_stage.public()}


class ServiceReranker(CachedReranker):
    """Scores a question's candidates with a rerank service, one request per question."""

    # a cross-encoder's probabilities and the first-stage scale do not mix
    unscored_last = True

    def __init__(
        self,
        service: str,
        base_url: str,
        *,
        api_key: str | None = None,
        model: str | None = None,
        timeout: float = 5.0,
        scale: ScoreScale = ScoreScale(),
        guard_top: int = 5,
        guard_min: float = 0.5,
        adjustments: Adjustments | None = None,
        cache_ttl: float = 300.0,
        chunk_token_cap: int = 400,
        calibrated: bool = True,
    ):
        self.service = service
        # measure the service's scale with the status calibration (False: the fixed cuts always)
        self.calibrated = calibrated
        self.shape = SHAPES[service]
        self.url = base_url.rstrip("/") + self.shape.path
        self.model = model
        self.timeout = timeout
        self.scale = scale
        self.guard_top = guard_top
        self.guard_min = guard_min
        self.adjustments = adjustments or Adjustments()
        self.chunk_token_cap = chunk_token_cap
        self.max_candidates = self.shape.max_documents
        headers = {"Accept": "application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        # One keep-alive pool: a question's request reuses a connection instead of a new handshake.
        self._http = httpx.Client(
            headers=headers,
            timeout=timeout,
            follow_redirects=False,
            limits=httpx.Limits(max_connections=8, max_keepalive_connections=8),
        )
        self._cache: TTLCache = TTLCache(maxsize=1024, ttl=cache_ttl)
        self._lock = threading.Lock()
        self._pool = BoundedExecutor(f"{self.shape.name} rerank", workers=8, queue=16)
        self._paused_until = 0.0  # after a 429 with Retry-After: not asked again before this
        self._tokens = default_counter()

    def close(self) -> None:
        self._pool.shutdown()
        self._http.close()

    def _cache_key(self, question: str, pool: list[ChunkResult]) -> tuple[Any, ...]:
        return (self.service, self.model, question, tuple(c.id for c in pool))

    def _new_usage(self) -> dict[str, int]:
        return {"rerank_requests": 0}

    def _log_extra(self) -> dict[str, str]:
        return {"service": self.service}

    @property
    def identity(self) -> str:
        """What the service's score scale depends on, naming its stored calibration: the service,
        its model, how its score is read, and its address (a TEI or Infinity server serves the
        model it was started with; the address's user and password, if any, are left out)."""
        url = urlsplit(self.url)
        where = f"{url.hostname or ''}{f':{url.port}' if url.port else ''}{url.path}"
        return f"rerank {self.service} {self.model or '(served model)'} {self.scale.kind} at {where}"

    def status_score(self, chunk: ChunkResult, score: float) -> float:
        """The score the status reads for a passage. Demotions count (a superseded or amended
        passage is no longer the rule) and boosts do not: a weak passage in a binding document
        does not make the answer more certain."""
        return score * min(1.0, self.adjustments.factor(chunk))

    def judged(self, question: str, pool: list[ChunkResult]) -> dict[int, float]:
        """``{chunk id: the score the status reads}`` for the first of ``pool`` (as many as a
        question sends), asked of the service now, bypassing the cache: the status calibration
        measures the service's scale with it. Raises :class:`RerankFailed`."""
        sent = pool[: self.max_candidates]
        if not sent:
            return {}
        scores, _ = self._score(question, sent, self._new_usage())
        return {c.id: self.status_score(c, scores[c.id].value) for c in sent if c.id in scores}

    def verdict(
        self,
        candidates: list[ChunkResult],
        scale: ServiceScale | None = None,
        cuts: StatusCuts = DEFAULT_CUTS,
    ) -> Verdict | None:
        """The status the best service score sets: on the service's calibrated ``scale`` with the
        confidence's ``cuts``, else on the fixed cuts (with a warning when ``scale`` says why
        there is no calibration)."""
        scores = [self.status_score(c, c.rerank_score) for c in candidates if c.rerank_score is not None]
        if not scores:
            return None
        best = max(scores)
        if scale is not None and scale.calibration is not None:
            confidence = decide(best, scale.calibration, cuts, DEFAULT_THRESHOLDS)
            return Verdict(confidence.status, round(best, 4), confidence)
        warning = None
        if scale is not None and scale.failure:
            warning = (
                f"rerank score uncalibrated: {scale.failure}; the status reads the {self.shape.name} score "
                f"on the fixed cuts (success from RERANK_SUCCESS_SCORE {self.scale.success_at:g}, "
                f"no_results below RERANK_NO_RESULTS_SCORE {self.scale.no_results_below:g})"
            )
        return Verdict(self.scale.status(best), round(best, 4), None, warning)

    # -- the request ---------------------------------------------------------------------------

    def body(self, question: str, pool: list[ChunkResult]) -> dict[str, Any]:
        shape = self.shape
        body: dict[str, Any] = {"query": question, shape.documents: [self.passage(c) for c in pool]}
        if shape.model == "always" or (shape.model == "if_set" and self.model):
            body["model"] = self.model
        if shape.limit:
            body[shape.limit] = len(pool)
        if shape.raw_scores:
            body["raw_scores"] = self.scale.kind == "logit"
        return {**body, **shape.fixed}

    def passage(self, chunk: ChunkResult) -> str:
        """What the service reads of a chunk: where it stands, then its text (capped: a
        cross-encoder reads a few hundred tokens and a hosted service bills them)."""
        heading = " > ".join(part for part in (chunk.document_name, chunk.section_path) if part)
        return f"{heading}\n{self._tokens.truncate(chunk.content, self.chunk_token_cap)}"

    def _score(
        self, question: str, pool: list[ChunkResult], usage: dict[str, int]
    ) -> tuple[dict[int, Score], list[str]]:
        name = self.shape.name
        left = self._paused_until - time.monotonic()
        if left > 0:
            raise RerankFailed(f"{name} asked to wait (HTTP 429); not asked again for {math.ceil(left)} s")
        deadline = time.monotonic() + self.timeout
        try:
            future = self._pool.submit(self._post, self.body(question, pool), deadline)
        except ProvidersBusy as exc:
            raise RerankFailed(str(exc)) from None
        try:
            response = future.result(timeout=max(0.0, deadline - time.monotonic()))
        except FutureTimeout:
            future.cancel()  # still queued: never sent
            raise RerankFailed(f"no reply from {name} within {self.timeout:g} s") from None
        usage["rerank_requests"] = 1
        self._check_status(response)
        raw = self._parse(response, len(pool))
        warnings = []
        if self.scale.kind == "probability" and any(not 0.0 <= value <= 1.0 for value in raw.values()):
            warnings.append(f"{name} scored outside 0..1: if its scores are raw logits, set RERANK_SCORE=logit")
        scores = {pool[i].id: Score(round(self.scale.relevance(value), 6), None) for i, value in raw.items()}
        return scores, warnings

    def _post(self, body: dict[str, Any], deadline: float) -> httpx.Response:
        # A call started late (queued behind others) gets only what is left of the budget.
        remaining = deadline - time.monotonic()
        name = self.shape.name
        if remaining <= 0:
            raise RerankFailed(f"no reply from {name} within {self.timeout:g} s")
        try:
            return self._http.post(self.url, json=body, timeout=remaining)
        except httpx.TimeoutException:
            raise RerankFailed(f"no reply from {name} within {self.timeout:g} s") from None
        except httpx.HTTPError as exc:
            raise RerankFailed(f"{name} could not be reached ({type(exc).__name__})") from None

    def _check_status(self, response: httpx.Response) -> None:
        name, code = self.shape.name, response.status_code
        if code == 200:
            return
        log.warning(
            "rerank service error", extra={"service": self.service, "status": code, "body": response.text[:300]}
        )
        if code in (401, 403):
            raise RerankFailed(f"{name} refused the key (HTTP {code}): check RERANK_API_KEY")
        if code == 429:
            pause = retry_after(response.headers.get("Retry-After"))
            if pause:
                self._paused_until = time.monotonic() + pause
                raise RerankFailed(f"{name} is rate-limiting (HTTP 429); not asked again for {math.ceil(pause)} s")
            raise RerankFailed(f"{name} is rate-limiting (HTTP 429)")
        raise RerankFailed(f"{name} answered HTTP {code}")

    def _parse(self, response: httpx.Response, sent: int) -> dict[int, float]:
        """``{position in the request: raw score}`` for every passage sent, or :class:`RerankFailed`."""
        name, shape = self.shape.name, self.shape
        try:
            reply = response.json()
        except ValueError:
            raise RerankFailed(f"{name}'s reply is not JSON") from None
        if shape.results is None:
            items = reply
        else:
            items = reply.get(shape.results) if isinstance(reply, dict) else None
        if not isinstance(items, list):
            where = "a list" if shape.results is None else f"a {shape.results!r} list"
            raise RerankFailed(f"{name}'s reply is not {where} of scores")
        scores: dict[int, float] = {}
        for item in items:
            index = item.get("index") if isinstance(item, dict) else None
            value = item.get(shape.score) if isinstance(item, dict) else None
            if not (
                _whole(index) and 0 <= index < sent and index not in scores and _number(value) and math.isfinite(value)
            ):
                raise RerankFailed(f"{name}'s reply holds a result that is not a passage's index and score")
            scores[index] = float(value)
        if len(scores) < sent:
            raise RerankFailed(f"{name} scored {len(scores)} of the {sent} passages sent")
        return scores


def _whole(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value: object) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def retry_after(value: str | None) -> float | None:
    """Seconds to wait from a Retry-After header (seconds or an HTTP date), capped; None if absent."""
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = parsedate_to_datetime(value).timestamp() - time.time()
        except (TypeError, ValueError, IndexError):
            return None
    if not math.isfinite(seconds):
        return None
    return min(max(seconds, 0.0), MAX_PAUSE_SECONDS)


def verdict(
    reranker: object,
    candidates: list[ChunkResult],
    scale: ServiceScale | None = None,
    cuts: StatusCuts = DEFAULT_CUTS,
) -> Verdict | None:
    """The status a rerank service sets for this answer, on its calibrated ``scale`` when there is
    one; None for any other reranker (the LLM's scores order the list but the first-stage
    relevance keeps the status)."""
    return reranker.verdict(candidates, scale, cuts) if isinstance(reranker, ServiceReranker) else None
