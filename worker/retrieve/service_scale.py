"""A rerank service's score scale on one knowledge base, measured with the status calibration.

The calibration (``calibration.py``) asks the knowledge base the off-domain questions and its own
sentences; with a rerank service configured, each of those texts is also sent to the service with
the candidates the first stage found for it, one request each, a few in flight at once. The
median best score the status reads (``ServiceReranker.judged``: demotions count, boosts do not)
of the off-domain questions is the service's floor, of the sentences its match, and of the
sentences among the passages that do not hold them its near miss: the same three anchors as the
first-stage calibration (``confidence.py``), on the service's own score. A service that fails
meanwhile leaves the reason instead (``ServiceScale.failure``), never an exception.
"""

from __future__ import annotations

import logging
import statistics
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from ..models import ChunkResult
from .rerank import RerankFailed
from .rerank_services import ServiceReranker, ServiceScale
from .status import confidence as confidence_stage

log = logging.getLogger("arc.calibration")

# Why a service has no scale on a knowledge base whose measurement went through: a property of the
# service and these documents, so it is not measured again until the documents change.
NOT_SEPARATED = "the service scores the knowledge base's own sentences no higher than unrelated ones"
# Calibration requests to a rerank service in flight at once: some 160 a measurement, a few
# seconds' work for a hosted service this way, and room left in its pool for questions' requests.
SERVICE_REQUESTS_AT_ONCE = 4


@dataclass(frozen=True)
class Asked:
    """A calibration text and its first-stage candidates, for the rerank service to score."""

    text: str
    candidates: list[ChunkResult]


class Stopped(Exception):
    """The process is stopping: the measurement ends between two requests."""


def measure(
    service: ServiceReranker,
    outside: list[Asked],
    inside: list[Asked],
    version: int,
    reach: float,
    stopping: threading.Event,
) -> ServiceScale:
    """``service``'s scale from the off-domain questions (``outside``) and the knowledge base's
    own sentences (``inside``) with their candidates."""
    try:
        scored = _bests(service, outside + inside, stopping)
    except RerankFailed as exc:
        log.warning(
            "rerank service not calibrated; tried again later",
            extra={"service": service.service, "reason": str(exc)},
        )
        return ServiceScale(None, f"{exc} while calibrating")
    floor = statistics.median(b.relevance for b in scored[: len(outside)])
    matched = scored[len(outside) :]
    match = statistics.median(b.relevance for b in matched)
    if match <= floor:
        return ServiceScale(None, NOT_SEPARATED)
    near_miss = statistics.median(b.elsewhere for b in matched)
    return ServiceScale(confidence_stage.Calibration(version, floor, match, len(matched), near_miss, reach))


def log_fields(service: ServiceReranker, scale: ServiceScale) -> dict[str, object]:
    """What the calibration's log line says of the service's scale."""
    anchors = confidence_stage.anchors(scale.calibration)
    return {
        "reranker": service.identity,
        **{f"rerank_{k}": v for k, v in anchors.items()},
        "rerank_failure": scale.failure,
    }


def _bests(service: ServiceReranker, asked: list[Asked], stopping: threading.Event) -> list[confidence_stage.Best]:
    """Each text's best service score over its candidates, and its best among those that do not
    hold it; a few requests in flight at once, the first failure ending them all."""

    failed: list[RerankFailed] = []  # the first failure: no request starts after it

    def best(one: Asked) -> confidence_stage.Best:
        if stopping.is_set():
            raise Stopped
        if failed:
            raise RerankFailed(str(failed[0]))
        try:
            scores = service.judged(one.text, one.candidates)
        except RerankFailed as exc:
            failed.append(exc)
            raise
        passages = {c.id: c.content for c in one.candidates}
        others = [score for id_, score in scores.items() if not confidence_stage.quotes(passages[id_], one.text)]
        return confidence_stage.Best(max(scores.values(), default=0.0), max(others, default=0.0))

    pool = ThreadPoolExecutor(SERVICE_REQUESTS_AT_ONCE, thread_name_prefix="arc-calibration-rerank")
    try:
        return list(pool.map(best, asked))
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
