"""A key set for the reranker never switches the embedding model of a knowledge base built with
the local one: the start says it keeps the local model; only EMBEDDING_PROVIDER switches."""

from __future__ import annotations

import logging

import pytest

from worker.config import Settings
from worker.errors import SchemaMismatch
from worker.models import RetrievalRequest
from worker.runtime import open_runtime
from worker.service.build import build_retriever

NO_OPENAI = "http://127.0.0.1:9/v1"  # nothing listens: a call to it would fail the answer's embedding


def env(url: str, tmp_path, **more: str) -> dict[str, str]:
    return {"DATABASE_URL": url, "ARC_DATA_DIR": str(tmp_path), "OPENAI_API_KEY": "sk-test",
            "OPENAI_BASE_URL": NO_OPENAI, **more}


def test_a_reranker_key_keeps_the_local_model_of_a_local_knowledge_base(sample_runtime, tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="arc.runtime"):
        runtime = open_runtime(Settings.from_env(env(sample_runtime.db.url, tmp_path)))
    try:
        assert (runtime.embedder.model, runtime.embedder.dim) == ("all-MiniLM-L6-v2", 384)
        assert runtime.settings.reranking.reranker == "llm", "the key still serves the reranker"
        said = [r.getMessage() for r in caplog.records if "embeddings stay local" in r.getMessage()]
        assert len(said) == 1 and "EMBEDDING_PROVIDER=openai" in said[0] and "sk-test" not in said[0]
        answer = build_retriever(runtime).answer(RetrievalRequest(query="What is the maximum fence height?",
                                                                  rerank=False))
        assert answer.status == "success" and not any("degraded" in w for w in answer.warnings), answer.warnings
    finally:
        runtime.close()


def test_an_explicit_provider_is_obeyed_and_a_mismatch_is_said(sample_runtime, tmp_path):
    with pytest.raises(SchemaMismatch, match="vector\\(384\\)"):
        open_runtime(Settings.from_env(env(sample_runtime.db.url, tmp_path, EMBEDDING_PROVIDER="openai")))
    runtime = open_runtime(Settings.from_env(env(sample_runtime.db.url, tmp_path, EMBEDDING_PROVIDER="local")))
    try:
        assert runtime.embedder.dim == 384
    finally:
        runtime.close()


def test_a_new_knowledge_base_takes_the_keys_model(make_database, tmp_path):
    runtime = open_runtime(Settings.from_env(env(make_database("fresh_openai"), tmp_path)), migrate=False)
    try:
        assert (runtime.embedder.model, runtime.embedder.dim) == ("text-embedding-3-large", 1536)
    finally:
        runtime.close()
