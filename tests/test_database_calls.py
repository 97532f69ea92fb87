"""How many round trips to the database a plain question costs, counted on each backend.

Across a network every call is a round trip before any work (the worker beside n8n, the database
at Supabase), so the answer counts them (``timings_ms.database_calls``, ``debug.database_calls``)
and these tests fix the count for a plain question whose embedding is known: a change that adds
a call on the answer's path fails here. That holds too for a context that takes a chunk's
neighbour (the chunk is cut mid-sentence) and for a candidate an amendment rewrote (the answer
names the amendment and the day it took effect).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date

import pytest

from tests.postgrest_standin import PostgrestStandin
from worker.ingest.ingestor import Ingestor
from worker.ingest.readers import parse_markdown
from worker.models import Amendment, DocumentFields, RetrievalRequest
from worker.retrieve.pipeline import Retriever
from worker.retrieve.search_cache import SearchCache
from worker.store import database
from worker.store.database import Database
from worker.store.postgres_search import PostgresBackend
from worker.store.supabase_search import SupabaseBackend

QUESTION = "What is the maximum fence height allowed in the backyard?"
OTHER = "Can I build a shed in my backyard?"
# One call (arc_answer: the search with the compounds spelled the knowledge base's way, "backyard"
# as "back yard", the community's version, the stored status calibration, the confirmations'
# stamp) per question. The process's first question also reads the communities, once. The same
# question again sends the cached result's version: one call, no search.
POSTGRES_CALLS = [2, 1, 1]
# The same through PostgREST's RPC route, one request each.
RPC_CALLS = [2, 1, 1]
# Over read replicas, one more: the primary's version first (never stale: another process may have
# just ingested), then the call on a replica, which checks it has replayed that version itself.
REPLICA_CALLS = [3, 2, 2]


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


@pytest.fixture(autouse=True)
def unhurried_pool(monkeypatch):
    """A loaded machine can take seconds a question: the pool's liveness check for a connection
    that sat that long (database.py) is not what these tests count."""
    monkeypatch.setattr(database, "CHECK_AFTER_SECONDS", 3600.0)


def test_a_plain_question_on_postgres(sample_runtime):
    assert calls_for(sample_runtime, PostgresBackend(sample_runtime.db)) == POSTGRES_CALLS


def test_a_plain_question_through_supabase_rpc(sample_runtime, postgrest):
    supabase = SupabaseBackend(postgrest.url, postgrest.api_key)
    before = len(postgrest.calls)
    assert calls_for(sample_runtime, supabase) == RPC_CALLS
    assert len(postgrest.calls) - before >= sum(RPC_CALLS), "the stand-in saw every counted call"


def test_a_plain_question_over_read_replicas(sample_runtime):
    from worker.store.replicas import ReadReplicas

    replicas = ReadReplicas(sample_runtime.db, [sample_runtime.db])  # the primary as its own replica
    assert calls_for(sample_runtime, PostgresBackend(sample_runtime.db, replicas)) == REPLICA_CALLS
    assert replicas.stats[0].searches > 0 and replicas.primary_stats.searches == 0


def test_a_question_after_a_quiet_while_costs_one_call(elm, embedder, monkeypatch):
    """A quiet worker (a question every few seconds) lends connections that sat past the pool's
    check: the question's call goes without the check, so it still costs one round trip."""
    monkeypatch.setattr(database, "CHECK_AFTER_SECONDS", 0.0)  # every connection has sat too long
    asked = answers_in_elm(embedder, PostgresBackend(elm), [HENS, GATE, HENS])
    assert [int(a.timings_ms["database_calls"]) for a in asked][1:] == [1, 1]


def test_a_connection_that_broke_while_it_sat_costs_no_answer(elm, embedder, monkeypatch):
    """The unchecked connection lent to the question's call broke while it sat (the server ended
    it): the call, a read, is asked again on a checked one, and the question is answered."""
    import psycopg

    monkeypatch.setattr(database, "CHECK_AFTER_SECONDS", 0.0)
    retriever = Retriever(embedder=embedder, backend=PostgresBackend(elm), reranker=None, search_cache=SearchCache())
    try:
        first = retriever.answer(RetrievalRequest(query=HENS, community="elm"))
        with elm.connection() as conn:  # the pool's one connection
            pid = conn.info.backend_pid
        with psycopg.connect(elm.url, autocommit=True) as admin:
            admin.execute("select pg_terminate_backend(%s)", (pid,))
        again = retriever.answer(RetrievalRequest(query=HENS, community="elm"))
    finally:
        retriever.close()
    assert [c.id for c in again.chunks] == [c.id for c in first.chunks]
    assert int(again.timings_ms["database_calls"]) >= 2  # the broken statement, then the call again


def test_a_connection_the_pool_has_just_opened_is_lent_without_a_check(elm, embedder):
    """A connection opened for a caller while the others are busy was made moments ago: lending it
    costs no liveness check (a round trip across a network)."""
    from worker.store import calls

    db = Database(elm.url, pool_size=2)
    try:
        with db.connection() as busy:
            busy.execute("select 1")
            with calls.counted() as tally, db.connection() as opened:
                assert opened is not busy
        assert tally.calls == 0
    finally:
        db.close()


def test_the_webhook_says_its_count(client):
    answer = client.post("/webhook/arc-retrieval", json={"query": QUESTION}).get_json()
    calls = answer["timings_ms"]["database_calls"]
    assert isinstance(calls, int) and calls >= 1  # a count, written 1, not 1.0


def test_the_query_log_is_written_off_the_answers_path_and_kept_on_close(sample_runtime):
    from worker.runtime import Runtime
    from worker.service.caller import LOCAL
    from worker.service.knowledge import KnowledgeService

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


# One sentence longer than a chunk: its first chunk ends mid-sentence, so its neighbour follows it
# into the context.
POOL_GATE = "# Pool Rules\n\n## Gates\n\n" + "The gate of the community swimming pool enclosure " + ", ".join(
    f"must be kept closed and latched by every resident and guest entering through gate number {n}"
    for n in range(1, 61)
) + ".\n"
DECLARATION = """# Declaration

## Article VII Use Restrictions

### Section 4.

No animals, livestock or poultry of any kind shall be raised, bred or kept on any lot.
"""
AMENDMENT = """# First Amendment

Article VII, Section 4 of the Declaration is replaced: up to four hens may be kept in a coop.
"""


@pytest.fixture(scope="module")
def elm(make_database, embedder) -> Iterator[Database]:
    """Community "elm": the long pool-gate sentence, and a declaration whose Section 4 an
    amendment replaced."""
    db = Database(make_database("calls"), pool_size=1)  # one connection: no unused one checked when lent
    db.migrate(embedder.dim)
    ingestor = Ingestor(db, embedder)

    def doc(text: str, **fields):
        return ingestor.prepare_text(parse_markdown(text), DocumentFields(**fields))

    ingestor.write(
        [
            doc(POOL_GATE, document_id="pool-rules", document_type="other"),
            doc(DECLARATION, document_id="ccrs", document_type="ccr", effective_date=date(1990, 1, 1)),
            doc(
                AMENDMENT,
                document_id="first-amendment",
                document_type="ccr",
                effective_date=date(2005, 6, 1),
                amends=(Amendment("ccrs", ("Article VII Section 4",)),),
            ),
        ],
        community="elm",
    )
    yield db
    db.close()


def answers_in_elm(embedder, backend, questions: list[str]):
    retriever = Retriever(embedder=embedder, backend=backend, reranker=None, search_cache=SearchCache())
    try:
        return [retriever.answer(RetrievalRequest(query=q, community="elm", debug=True)) for q in questions]
    finally:
        retriever.close()


GATE = "Must the pool gate be kept closed and latched?"
HENS = "Can I keep poultry on my lot?"


@pytest.mark.parametrize("route", ["postgres", "rpc"])
def test_a_neighbour_and_an_amendments_date_come_with_the_one_call(elm, embedder, route):
    if route == "postgres":
        asked = answers_in_elm(embedder, PostgresBackend(elm), [HENS, GATE, HENS])
    else:
        with PostgrestStandin(elm.url) as server:
            asked = answers_in_elm(embedder, SupabaseBackend(server.url, server.api_key), [HENS, GATE, HENS])
    first, gate, again = asked
    in_context = [c for c in gate.chunks if c.source is not None]
    pool = sorted(c.chunk_index for c in in_context if c.document_id == "pool-rules")
    assert len(pool) >= 2 and pool == list(range(pool[0], pool[0] + len(pool))), "the cut chunk's neighbour is in"
    amended = [c for c in first.chunks if c.document_id == "ccrs" and c.source is not None]
    assert amended and all(c.replaced is not None and c.replaced.effective_date == date(2005, 6, 1) for c in amended)
    # (the process's first question also reads the communities, on a connection the pool checks
    # first); then one call each, the cached answer's too
    assert [int(a.timings_ms["database_calls"]) for a in asked][1:] == [1, 1]
    assert again.chunks[0].replaced == first.chunks[0].replaced


@pytest.mark.parametrize("route", ["postgres", "rpc"])
def test_a_question_as_of_a_date_costs_one_call(elm, embedder, route):
    """As of a date, the rules that lend an amended section's match across the date read the same
    search over every version: it comes with the call."""
    dated = [RetrievalRequest(query=HENS, community="elm", as_of=day, debug=True)
             for day in (date(2000, 1, 1), date(2010, 1, 1))]
    with PostgrestStandin(elm.url) as server:
        backend = PostgresBackend(elm) if route == "postgres" else SupabaseBackend(server.url, server.api_key)
        retriever = Retriever(embedder=embedder, backend=backend, reranker=None, search_cache=SearchCache())
        try:
            retriever.answer(RetrievalRequest(query=GATE, community="elm"))  # reads the communities
            before, after = (retriever.answer(request) for request in dated)
        finally:
            retriever.close()
    assert {c.document_id for c in before.chunks if c.source is not None} >= {"ccrs"}
    assert "first-amendment" not in {c.document_id for c in before.chunks if c.source is not None}
    assert "first-amendment" in {c.document_id for c in after.chunks if c.source is not None}
    assert [int(a.timings_ms["database_calls"]) for a in (before, after)] == [1, 1]


def test_a_caller_sized_context_after_a_default_one_reads_its_neighbours_in_its_call(elm, embedder):
    """The search cache holds the default context's neighbours (the best few candidates'); a
    context the caller sizes goes further down the ranking and reads every candidate's, in its one
    call, rather than one call per chunk the cached entry lacks."""
    from worker.retrieve.pipeline import ContextPolicy

    retriever = Retriever(embedder=embedder, backend=PostgresBackend(elm), reranker=None, search_cache=SearchCache(),
                          policy=ContextPolicy(neighbours_of=1, leg_top=0))
    try:
        asked = [retriever.answer(RetrievalRequest(query=GATE, community="elm", **more))
                 for more in ({}, {}, {"token_budget": 4000}, {"token_budget": 4000})]
    finally:
        retriever.close()
    sized = asked[2]
    assert sum(1 for c in sized.chunks if c.source is not None) > 2, "the budget took chunks past the first"
    # (the default context, its neighbours read for one candidate only here, may ask for more)
    assert [int(a.timings_ms["database_calls"]) for a in asked][2:] == [1, 1]


@pytest.mark.parametrize("route", ["postgres", "rpc"])
def test_a_carried_neighbours_own_neighbours_come_with_the_one_call(elm, embedder, route):
    """A context the caller sizes carries the sentences around each passage, a neighbour it added
    too: that neighbour's own neighbours come with the call, so no chunk costs one more."""
    sized = RetrievalRequest(query=GATE, community="elm", candidates=1, token_budget=2000, debug=True)
    retriever = None
    with PostgrestStandin(elm.url) as server:
        backend = PostgresBackend(elm) if route == "postgres" else SupabaseBackend(server.url, server.api_key)
        retriever = Retriever(embedder=embedder, backend=backend, reranker=None, search_cache=SearchCache())
        try:
            retriever.answer(RetrievalRequest(query=HENS, community="elm"))  # reads the communities
            answer = retriever.answer(sized)
        finally:
            retriever.close()
    ranked = {c.id for c in answer.chunks if c.vector_rank is not None or c.fts_rank is not None}
    added = [c for c in answer.chunks if c.source is not None and c.id not in ranked]
    assert added, "the context took a neighbour that is not a candidate"
    assert int(answer.timings_ms["database_calls"]) == 1
