"""Provider calls are bounded: a full queue is a clear 503 with Retry-After, and no embedding or
LLM call outlives its request's budget by more than a second (no retries behind its back, no
queued call sent after its request gave up)."""

from __future__ import annotations

import threading
import time

import pytest

from tests.openai_standin import OpenAIStandin
from worker.serve.app import create_app
from worker.embeddings import CachedEmbedder, OpenAIEmbedder
from worker.errors import ProvidersBusy
from worker.retrieve.executor import BoundedExecutor
from worker.retrieve.pipeline import Retriever
from worker.retrieve.rerank import LLMReranker
from worker.runtime import Runtime
from worker.store.postgres_search import PostgresBackend

ROUTE = "/webhook/arc-retrieval"


def test_a_full_pool_refuses_at_once_and_frees_its_slots():
    pool = BoundedExecutor("test", workers=1, queue=1)
    release = threading.Event()
    running = [pool.submit(release.wait, 5), pool.submit(release.wait, 5)]
    with pytest.raises(ProvidersBusy):
        pool.submit(release.wait, 5)
    assert pool.in_flight == 2
    release.set()
    for future in running:
        future.result(timeout=5)
    deadline = time.monotonic() + 2
    while pool.in_flight and time.monotonic() < deadline:
        time.sleep(0.01)
    assert pool.in_flight == 0 and pool.submit(lambda: 1).result(timeout=2) == 1
    pool.shutdown()


def slow_provider_app(sample_runtime, standin: OpenAIStandin, *, timeout: float):
    settings = sample_runtime.settings.replace(**{
        "openai_api_key": standin.api_key, "openai_base_url": standin.base_url, "embedding_provider": "openai",
        "embedding_model": "text-embedding-3-large", "embedding_dim": 384, "embedding_timeout": timeout})
    slow = CachedEmbedder(OpenAIEmbedder(settings))  # the production client: 3 retries by default
    retriever = Retriever(embedder=slow, backend=PostgresBackend(sample_runtime.db), reranker=None,
                          embedding_timeout=timeout)
    app = create_app(runtime=Runtime(settings, sample_runtime.db, slow), retriever=retriever)
    return app.test_client(), retriever


def test_a_question_embedding_call_ends_with_its_request(sample_runtime):
    with OpenAIStandin() as standin:
        standin.reset(delay=3.0)
        client, retriever = slow_provider_app(sample_runtime, standin, timeout=1.0)
        answer = client.post(ROUTE, json={"query": "How tall can a fence be?"}).get_json()
        assert any(w.startswith("degraded:") for w in answer["warnings"])
        answered = time.monotonic()
        while retriever.first_stage._embed_pool.in_flight and time.monotonic() < answered + 5:
            time.sleep(0.05)
        # The call was given the request's second and no retry: it ended with the request.
        assert time.monotonic() - answered < 1.0
        time.sleep(3.5)
        embedding_calls = [r for r in standin.requests if r.path == "/v1/embeddings"]
        assert len(embedding_calls) == 1, len(embedding_calls)
        retriever.close()


def test_a_slow_provider_with_a_full_queue_gets_a_503_with_retry_after(sample_runtime):
    with OpenAIStandin() as standin:
        standin.reset(delay=2.0)
        client, retriever = slow_provider_app(sample_runtime, standin, timeout=1.5)
        retriever.first_stage._embed_pool = BoundedExecutor("embedding", workers=1, queue=0)
        hold = threading.Thread(target=client.post, args=(ROUTE,), kwargs={"json": {"query": "first question"}})
        hold.start()
        time.sleep(0.3)  # the first question's embedding call holds the only slot
        refused = client.post(ROUTE, json={"query": "a second question"})
        hold.join(timeout=10)
        assert refused.status_code == 503
        assert refused.get_json()["error"] == "providers_busy"
        assert refused.headers["Retry-After"] == "2"
        retriever.close()


def test_queued_llm_batches_are_not_sent_after_the_rerank_gave_up(sample_runtime):
    import openai

    with OpenAIStandin() as standin:
        standin.reset(delay=2.0)
        client = openai.OpenAI(api_key=standin.api_key, base_url=standin.base_url, max_retries=0)
        reranker = LLMReranker(client, "gpt-4o", timeout=1.0, batch_size=2)
        reranker._pool = BoundedExecutor("LLM", workers=1, queue=10)
        retriever = Retriever(embedder=sample_runtime.embedder, backend=PostgresBackend(sample_runtime.db),
                              reranker=reranker)
        from worker.models import RetrievalRequest

        answer = retriever.answer(RetrievalRequest(query="How tall can a fence be?", rerank=True))
        assert any(w.startswith("reranker skipped") for w in answer.warnings)
        time.sleep(3.0)
        chat_calls = [r for r in standin.requests if r.path == "/v1/chat/completions"]
        # One batch was sent; the rest were still queued when the second ran out, and were dropped.
        assert len(chat_calls) == 1, len(chat_calls)
        retriever.close()


class CountingBackend(PostgresBackend):
    """Counts the searches run without an embedding (the full-text leg alone), by either way in."""

    def __init__(self, db):
        super().__init__(db)
        self.full_text_only = 0

    def search(self, params, min_version=None):
        self.full_text_only += params.embedding is None
        return super().search(params, min_version)

    def answer(self, params, call):  # a question's one call runs the search too
        self.full_text_only += params.embedding is None
        return super().answer(params, call)


def test_a_healthy_remote_provider_costs_one_search_and_a_silent_one_no_extra_time(sample_runtime):
    with OpenAIStandin() as standin:
        settings = sample_runtime.settings.replace(**{
            "openai_api_key": standin.api_key, "openai_base_url": standin.base_url,
            "embedding_provider": "openai", "embedding_model": "text-embedding-3-large", "embedding_dim": 384})
        backend = CountingBackend(sample_runtime.db)
        from worker.models import RetrievalRequest
        from worker.retrieve.search_cache import SearchCache

        retriever = Retriever(embedder=CachedEmbedder(OpenAIEmbedder(settings)), backend=backend, reranker=None,
                              embedding_timeout=2.0, search_cache=SearchCache(ttl_seconds=0))
        standin.reset(delay=0.3)  # a remote provider on a normal day
        for n, question in enumerate(["How tall can a fence be?", "Can I paint my door red?", "Where do boats go?"]):
            answer = retriever.answer(RetrievalRequest(query=question))
            assert not answer.warnings or not any(w.startswith("degraded") for w in answer.warnings)
        assert backend.full_text_only == 0  # no full-text search run for nothing beside each embedding

        standin.reset(delay=5.0)  # silent: the full-text leg was started before the deadline
        started = time.monotonic()
        answer = retriever.answer(RetrievalRequest(query="Are sheds allowed?"))
        assert time.monotonic() - started < 2.0 + 0.5
        assert any(w.startswith("degraded:") for w in answer.warnings) and answer.chunks
        assert backend.full_text_only == 1  # started before the deadline, and the answer's
        assert answer.timings_ms["search"] < 50
        retriever.close()
