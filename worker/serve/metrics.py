"""Prometheus metrics at ``/metrics``: one registry per app (no module-level state).

Under gunicorn each process has its own registry; scrape through a process-aware setup
(or one worker process) if exact totals matter.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

STAGE_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "arc_requests", "HTTP requests by route and status", ["route", "status"], registry=self.registry
        )
        self.latency = Histogram(
            "arc_request_seconds",
            "HTTP request latency by route",
            ["route"],
            buckets=STAGE_BUCKETS,
            registry=self.registry,
        )
        self.stages = Histogram(
            "arc_stage_seconds", "Pipeline stage latency", ["stage"], buckets=STAGE_BUCKETS, registry=self.registry
        )
        self.statuses = Counter("arc_answers", "Answers by status", ["status"], registry=self.registry)
        self.reranker_fallbacks = Counter(
            "arc_reranker_fallbacks", "Reranker skipped (timeout, error, bad reply)", registry=self.registry
        )
        self.auth_failures = Counter(
            "arc_auth_failures",
            "Failed authentications by route and reason (missing or wrong token)",
            ["route", "reason"],
            registry=self.registry,
        )
        self.ingest_cancelled = Counter(
            "arc_ingest_cancelled",
            "Documents whose reading stopped: the client left or ARC_READ_TIMEOUT passed",
            registry=self.registry,
        )
        self.embedding_fallbacks = Counter(
            "arc_embedding_fallbacks", "Answers served full-text only", registry=self.registry
        )
        self.confirmations = Counter(
            "arc_confirmations",
            "Answers the keeper confirmed, by answer (passage or none)",
            ["answer"],
            registry=self.registry,
        )
        self.feedback = Counter(
            "arc_feedback",
            "Votes from the chat on answers, by verdict (helpful or unhelpful)",
            ["verdict"],
            registry=self.registry,
        )

    def watch(self, collector: Callable[[], Iterator]) -> None:
        """Register a callable that yields metric families on each scrape (caches, pool)."""
        self.registry.register(_Callback(collector))

    def observe_answer(self, status: str, timings_ms: dict[str, float], warnings: list[str]) -> None:
        self.statuses.labels(status).inc()
        for stage, ms in timings_ms.items():
            if stage != "database_calls":  # a count, not a stage's time
                self.stages.labels(stage).observe(ms / 1000)
        if any(w.startswith("degraded:") for w in warnings):
            self.embedding_fallbacks.inc()
        if any(w.startswith("reranker skipped") for w in warnings):
            self.reranker_fallbacks.inc()

    def observe_cancelled_ingest(self) -> None:
        self.ingest_cancelled.inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)


class _Callback(Collector):
    def __init__(self, fn: Callable[[], Iterator]):
        self.fn = fn

    def collect(self) -> Iterator:
        yield from self.fn()


def cache_families(embedding_hits: int, embedding_misses: int, search_hits: int) -> Iterator:
    hits = CounterMetricFamily("arc_cache_hits", "Cache hits", labels=["cache"])
    hits.add_metric(["embedding"], embedding_hits)
    hits.add_metric(["search"], search_hits)
    yield hits
    misses = CounterMetricFamily("arc_cache_misses", "Cache misses", labels=["cache"])
    misses.add_metric(["embedding"], embedding_misses)
    yield misses


def pool_families(stats: dict[str, int]) -> Iterator:
    gauge = GaugeMetricFamily("arc_pool", "Connection pool state (psycopg_pool get_stats)", labels=["stat"])
    for key in ("pool_size", "pool_available", "requests_waiting", "pool_max"):
        if key in stats:
            gauge.add_metric([key], stats[key])
    yield gauge


def database_families(stats: list) -> Iterator:
    """Searches, failures, staleness and replay lag per database (worker/store/replicas.py)."""
    searches = CounterMetricFamily("arc_database_searches", "Searches by database", labels=["database"])
    errors = CounterMetricFamily(
        "arc_database_errors", "Failed searches by database (failed over)", labels=["database"]
    )
    behind = CounterMetricFamily(
        "arc_database_behind", "Questions that found a replica behind the primary", labels=["database"]
    )
    lag = GaugeMetricFamily(
        "arc_database_lag_seconds", "Replay lag Postgres reported at the last search", labels=["database"]
    )
    healthy = GaugeMetricFamily("arc_database_healthy", "1 while a database takes searches", labels=["database"])
    for s in stats:
        searches.add_metric([s.name], s.searches)
        errors.add_metric([s.name], s.errors)
        behind.add_metric([s.name], s.behind)
        lag.add_metric([s.name], s.lag_seconds)
        healthy.add_metric([s.name], 1.0 if s.healthy else 0.0)
    yield from (searches, errors, behind, lag, healthy)
