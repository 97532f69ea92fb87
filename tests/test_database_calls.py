"""How many round trips to the database a plain question costs, counted on each backend.

Across a network every call is a round trip before any work (the worker beside n8n, the database
at Supabase), so the answer counts them (``timings_ms.database_calls``, ``debug.database_calls``)
and these tests fix the count for a plain question whose embedding is known: a change that adds
a call on the answer's path fails here.
"""

from __future__ import annotations

import pytest

from tests.postgrest_standin import PostgrestStandin
from worker.retrieve.pipeline import Retriever
from worker.store.postgres_search import PostgresBackend
from worker.retrieve.search_cache import SearchCache
from worker.store.supabase_search import SupabaseBackend

from worker.models import RetrievalRequest

QUESTION = "What is the maximum fence height allowed in the backyard?"
OTHER = "Can I build a shed in my backyard?"
# One call (arc_answer: the search, the community's version, the compounds' spellings, the stored
# status calibration, the confirmations' stamp) per question. The process's first question also
# reads the communities, once; and "backyard", which the documents spell "back yard", is searched
# again with that spelling the first time this process meets the word at this version. The same
# question again sends the cached result's version: one call, no search.
POSTGRES_CALLS = [3, 1, 1]
# The same through PostgREST's RPC route, one request each.
RPC_CALLS = [3, 1, 1]


@pytest.fixture(scope="module")
def postgrest(sample_runtime):
    with PostgrestStandin(sample_runtime.db.url) as server:
        yield server


def calls_for(sample_runtime, backend) -> list[int]:
    retriever = Retriever(embedder=sample_runtime.embedder, backend=backend, reranker=None,
                          search_cache=SearchCache(), calibrate=True)
    try:
        retriever.calibrate_now()
        asked = [retriever.answer(RetrievalRequest(query=q, debug=True)) for q in (QUESTION, OTHER, QUESTION)]
    finally:
        retriever.close()
    for answer in asked:
        assert answer.timings_ms["database_calls"] == answer.debug["database_calls"]
    return [int(a.timings_ms["database_calls"]) for a in asked]


def test_a_plain_question_on_postgres(sample_runtime):
    assert calls_for(sample_runtime, PostgresBackend(sample_runtime.db)) == POSTGRES_CALLS


def test_a_plain_question_through_supabase_rpc(sample_runtime, postgrest):
    supabase = SupabaseBackend(postgrest.url, postgrest.api_key)
    before = len(postgrest.calls)
    assert calls_for(sample_runtime, supabase) == RPC_CALLS
    assert len(postgrest.calls) - before >= sum(RPC_CALLS), "the stand-in saw every counted call"


def test_the_webhook_says_its_count(client):
    answer = client.post("/webhook/arc-retrieval", json={"query": QUESTION}).get_json()
    calls = answer["timings_ms"]["database_calls"]
    assert isinstance(calls, int) and calls >= 1  # a count, written 1, not 1.0


def test_the_query_log_is_written_off_the_answers_path_and_kept_on_close(sample_runtime):
    from worker.service.caller import LOCAL
    from worker.service.knowledge import KnowledgeService
    from worker.runtime import Runtime

    knowledge = KnowledgeService(Runtime(sample_runtime.settings, sample_runtime.db, sample_runtime.embedder))
    questions = [f"{QUESTION} ({i})" for i in range(5)]
    try:
        for question in questions:
            answer = knowledge.ask(RetrievalRequest(query=question), caller=LOCAL)
            assert "database_calls" in answer.timings_ms
    finally:
        knowledge.close()  # a clean stop writes every queued row before it returns
    with sample_runtime.db.connect() as conn:
        logged = conn.execute("select query from query_log where query = any(%s)", (questions,)).fetchall()
    assert sorted(q for (q,) in logged) == sorted(questions)
