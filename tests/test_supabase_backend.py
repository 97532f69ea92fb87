"""The Supabase backend through the real ``supabase`` client against a local stand-in for
PostgREST's RPC route that runs the same SQL function in the embedded Postgres."""

from __future__ import annotations

import pytest

from tests.postgrest_standin import PostgrestStandin
from worker.errors import DatabaseUnavailable
from worker.models import RetrievalRequest
from worker.retrieve.calibration import LocalCalibrations
from worker.retrieve.pipeline import Retriever
from worker.store.postgres_search import PostgresBackend
from worker.retrieve.search_cache import SearchCache
from worker.store.supabase_search import SupabaseBackend


@pytest.fixture(scope="module")
def postgrest(sample_runtime):
    with PostgrestStandin(sample_runtime.db.url) as server:
        yield server


def retriever(sample_runtime, backend):
    return Retriever(embedder=sample_runtime.embedder, backend=backend, reranker=None, search_cache=SearchCache())


@pytest.mark.parametrize("query", ["What is the maximum fence height allowed?",
                                   "According to the guidelines, which paint colours can I use?",
                                   "Can I put solar panels on the roof?"])
def test_same_answers_as_the_direct_backend(sample_runtime, postgrest, query):
    supabase = SupabaseBackend(postgrest.url, postgrest.api_key)
    direct = retriever(sample_runtime, PostgresBackend(sample_runtime.db)).answer(RetrievalRequest(query=query))
    via_rpc = retriever(sample_runtime, supabase).answer(RetrievalRequest(query=query))
    assert [c.id for c in via_rpc.chunks] == [c.id for c in direct.chunks]
    for a, b in zip(direct.chunks, via_rpc.chunks):
        assert a.fused_score == pytest.approx(b.fused_score, abs=1e-6)
        assert a.vector_score == pytest.approx(b.vector_score, abs=1e-6)
    assert via_rpc.context == direct.context and via_rpc.status == direct.status
    assert postgrest.calls[-1][0] in ("arc_answer", "chunk_neighbours")
    assert any(name == "arc_answer" for name, _ in postgrest.calls)  # the search and its reads, one call


def test_full_text_only_call_omits_the_vector(sample_runtime, postgrest):
    supabase = SupabaseBackend(postgrest.url, postgrest.api_key)
    from worker.store.search import SearchParams

    results = supabase.search(SearchParams(query_text="fence height", embedding=None))
    assert results and all(r.vector_score is None for r in results)
    assert "query_embedding" not in postgrest.calls[-1][1]


def test_row_cap_and_error_body(sample_runtime):
    with PostgrestStandin(sample_runtime.db.url, max_rows=2) as capped:
        supabase = SupabaseBackend(capped.url, capped.api_key)
        with sample_runtime.db.connect() as conn:
            chunk_id = conn.execute("select id from knowledge_chunks where document_id = 'ccrs' and chunk_index = 3"
                                    ).fetchone()[0]
        assert len(supabase.neighbours(chunk_id, 5)) == 2
        from worker.store.search import SearchParams

        with pytest.raises(DatabaseUnavailable, match="match_count must be between 1 and 1000"):
            supabase.search(SearchParams(query_text="fence", embedding=None, match_count=5000))


def test_calibrates_through_rpc_as_the_direct_backend_does(sample_runtime, postgrest):
    # A worker on Supabase reads only through RPC functions: its status calibration takes the
    # knowledge base's sample from arc_calibration_chunks (sql/034) and must land on the same
    # floor, match and near miss as a direct connection, not on the fixed thresholds.
    supabase = Retriever(embedder=sample_runtime.embedder, reranker=None, calibrate=True,
                         backend=SupabaseBackend(postgrest.url, postgrest.api_key))
    direct = retriever(sample_runtime, PostgresBackend(sample_runtime.db))
    direct.calibrator.store = LocalCalibrations(direct.backend)  # measured here, not read from the table
    try:
        via_rpc = supabase.calibrate_now("default")
        assert via_rpc is not None
        assert via_rpc.anchors() == direct.calibrate_now("default").anchors()
        assert any(name == "arc_calibration_chunks" for name, _ in postgrest.calls)
        assert any(name == "arc_store_status_calibration" for name, _ in postgrest.calls)
        answer = supabase.answer(RetrievalRequest(query="What is the maximum fence height allowed?"))
        assert answer.confidence["calibrated"] is True
    finally:
        supabase.close()
        direct.close()


def test_a_worker_on_supabase_reads_the_stored_calibration_through_rpc(sample_runtime, postgrest):
    first = Retriever(embedder=sample_runtime.embedder, reranker=None, calibrate=True,
                      backend=SupabaseBackend(postgrest.url, postgrest.api_key))
    second = Retriever(embedder=sample_runtime.embedder, reranker=None, calibrate=True,
                       backend=SupabaseBackend(postgrest.url, postgrest.api_key))
    try:
        measured = first.calibrate_now("default")
        postgrest.calls.clear()
        answer = second.answer(RetrievalRequest(query="What is the maximum fence height allowed?"))
        called = {name for name, _ in postgrest.calls}
        # the stored calibration comes with the search (arc_answer), nothing is measured again
        assert "arc_answer" in called and "arc_calibration_chunks" not in called
        assert "arc_status_calibration" not in called
        assert answer.confidence["calibrated"] is True and answer.confidence["floor"] == round(measured.floor, 4)
    finally:
        first.close()
        second.close()


def test_a_worker_on_supabase_takes_the_keepers_confirmations(sample_runtime, postgrest):
    from worker.retrieve.preprocess import preprocess
    from worker.service.build import build_confirmations
    from worker.store.confirmations import ConfirmationStore, NewConfirmation

    embedder = sample_runtime.embedder
    store = ConfirmationStore(sample_runtime.db)
    with sample_runtime.db.connect() as conn:
        fence = conn.execute("select id from knowledge_chunks where content like %s order by id limit 1",
                             ("%Rear Yard and side yard fences may not exceed 6 feet%",)).fetchone()[0]
    question = "What is the maximum fence height allowed?"
    made = store.add(NewConfirmation("default", question, "passage",
                                     embedder.embed_query(preprocess(question).normalized), embedder.model,
                                     store.chunk("default", fence)))
    supabase = SupabaseBackend(postgrest.url, postgrest.api_key)
    on_supabase = Retriever(embedder=embedder, reranker=None, backend=supabase,
                            confirmations=build_confirmations(sample_runtime, supabase))
    try:
        postgrest.calls.clear()
        answer = on_supabase.answer(RetrievalRequest(query=question))
        assert answer.confirmed is not None and answer.confirmed.id == made
        assert answer.confidence["decided_on"] == "confirmed" and answer.chunks[0].id == fence
        assert "arc_confirmations" in {name for name, _ in postgrest.calls}  # read through the RPC route
    finally:
        on_supabase.close()
        store.delete(made, "default")
