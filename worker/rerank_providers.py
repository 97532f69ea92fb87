"""The rerank services the worker speaks (worker/retrieve/rerank_services.py), and for the hosted
ones the address and model used when ``RERANK_BASE_URL`` / ``RERANK_MODEL`` are not set."""

from __future__ import annotations

from typing import Literal, get_args

RerankService = Literal["cohere", "jina", "voyage", "tei", "infinity"]
RERANK_SERVICES: tuple[str, ...] = get_args(RerankService)
HOSTED_RERANKERS: dict[str, tuple[str, str]] = {
    "cohere": ("https://api.cohere.com", "rerank-v3.5"),
    "jina": ("https://api.jina.ai", "jina-reranker-v2-base-multilingual"),
    "voyage": ("https://api.voyageai.com", "rerank-2.5"),
}
