"""The operators' routes, named once: the ops blueprint serves them, the OpenAPI document and
the Host rule (probes reach a container by its address) name them."""

from __future__ import annotations

HEALTH_ROUTE = "/healthz"
READY_ROUTE = "/readyz"
METRICS_ROUTE = "/metrics"
OPENAPI_ROUTE = "/openapi.json"
