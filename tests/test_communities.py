"""Several communities in one knowledge base (sql/030, 031): every chunk carries its community,
both legs of hybrid_search read one community inside the SQL, and BM25 statistics are kept per
community, so loading one community never moves another's ranking. An existing single-community
database upgrades in place. test_the_command_line_takes_a_community runs the README's
`ingest --community` and `documents list --community` commands."""

from __future__ import annotations

import random
import re
from pathlib import Path

import psycopg
import pytest

from worker.ingest.ingestor import Ingestor, ingest_sample_corpus
from worker.models import DocumentFields
from worker.store import sqlfiles
from worker.store.database import Database
from tests.helpers import hollow_and_ridge, query_log_written

QUESTIONS = ("can I build a fence", "pergola height limit", "how many board members", "paint colour approval",
             "pets", "architectural review committee meeting")
SEARCH = ("select id, round(bm25_score::numeric, 9), round(vector_score::numeric, 9), round(fused_score::numeric, 9) "
          "from hybrid_search(query_text => %(q)s, query_embedding => %(e)s::vector, match_count => 20, "
          "community => %(c)s)")


def _ranking(conn, embedder, community: str | None) -> dict[str, list[tuple]]:
    found = {}
    for q in QUESTIONS:
        vector = "[" + ",".join(f"{x:.7g}" for x in embedder.embed_query(q)) + "]"
        found[q] = conn.execute(SEARCH, {"q": q, "e": vector, "c": community}).fetchall()
    return found


def _communities_of(conn, ids) -> set[str]:
    return {r[0] for r in conn.execute("select distinct community from knowledge_chunks where id = any(%s)",
                                       (list(ids),))}


def assert_statistics_exact_per_community(conn) -> None:
    """Each community's N, total length and document frequencies equal a recount of its chunks."""
    stored = {(c, t): df for c, t, df in conn.execute("select community, lexeme, df from bm25_terms")}
    counted = {(c, t): df for c, t, df in conn.execute(
        "select community, t.lexeme, count(*) from knowledge_chunks, unnest(fts) t group by 1, 2")}
    assert stored == counted
    corpus = {c: (n, total) for c, n, total in conn.execute(
        "select community, n_docs, total_length from bm25_corpus where n_docs > 0")}
    recount = {c: (n, total) for c, n, total in conn.execute(
        "select community, count(*), sum(fts_length) from knowledge_chunks group by 1")}
    assert corpus == recount


def test_loading_a_community_never_moves_anothers_ranking(database_factory, embedder):
    url = database_factory("communities")
    db = Database(url)
    db.migrate(embedder.dim)
    ingestor = Ingestor(db, embedder)
    ingest_sample_corpus(ingestor, community="cedar-hollow")
    with psycopg.connect(url) as conn:
        before = _ranking(conn, embedder, "cedar-hollow")
        alone = _ranking(conn, embedder, None)  # one community: the field may be left out
        stats_before = conn.execute("select * from bm25_corpus where community = 'cedar-hollow'").fetchone()
    assert alone == before and any(before.values())

    # A sister association with the very same documents (the worst case for shared statistics:
    # every word's df and N would double) and one more document of its own.
    ingest_sample_corpus(ingestor, community="cedar-ridge")
    ingestor.write([ingestor.prepare_text(_markdown("Fences and pergolas at Cedar Ridge need a permit."),
                                          DocumentFields(document_id="ridge-notice", name="Notice",
                                                         document_type="other"))],
                   community="cedar-ridge")

    with psycopg.connect(url) as conn:
        assert _ranking(conn, embedder, "cedar-hollow") == before
        assert conn.execute("select * from bm25_corpus where community = 'cedar-hollow'").fetchone() == stats_before
        ridge = _ranking(conn, embedder, "cedar-ridge")
        for q in QUESTIONS:
            assert _communities_of(conn, [r[0] for r in before[q]]) == {"cedar-hollow"}
            assert _communities_of(conn, [r[0] for r in ridge[q]]) == {"cedar-ridge"}
        assert_statistics_exact_per_community(conn)
        # the same document id in two communities: two documents
        assert conn.execute("select count(distinct community) from knowledge_chunks "
                            "where document_id = 'design-guidelines-2024'").fetchone()[0] == 2

        with pytest.raises(psycopg.errors.InvalidParameterValue, match="community is required"):
            conn.execute("select * from hybrid_search(query_text => 'fence')")
        conn.rollback()
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="no such community"):
            conn.execute("select * from hybrid_search(query_text => 'fence', community => 'nowhere')")
        conn.rollback()

        # the version moves per community: a load of one leaves the other's cached searches valid
        hollow = conn.execute("select knowledge_base_version('cedar-hollow')").fetchone()[0]
        ridge_version = conn.execute("select knowledge_base_version('cedar-ridge')").fetchone()[0]
    ingestor.write([ingestor.prepare_text(_markdown("Another notice about hedges."),
                                          DocumentFields(document_id="ridge-hedges", name="Hedges",
                                                         document_type="other"))], community="cedar-ridge")
    with psycopg.connect(url) as conn:
        assert conn.execute("select knowledge_base_version('cedar-hollow')").fetchone()[0] == hollow
        assert conn.execute("select knowledge_base_version('cedar-ridge')").fetchone()[0] > ridge_version

        # deleting one community's copy of a document leaves the other's alone
        conn.execute("delete from knowledge_chunks where community = 'cedar-ridge'")
        conn.commit()
        assert _ranking(conn, embedder, "cedar-hollow") == before
        assert_statistics_exact_per_community(conn)
        assert _ranking(conn, embedder, None) == before  # one community holds chunks again
    db.close()


def _markdown(text: str):
    from worker.ingest.readers import parse_markdown

    return parse_markdown(text)


def _old_schema(url: str, dim: int) -> None:
    """A database as the release before communities left it: its migrations (up to 014), as its
    `db sql` printed them (tests/data/), each applied and recorded."""
    previous = (Path(__file__).parent / "data" / "db_sql_d80a21c_1536.sql").read_text()
    files = re.split(r"^-- ===== (\d{3}_\w+)\.sql =====\n", sqlfiles.render(previous, dim), flags=re.M)[1:]
    with psycopg.connect(url) as conn:
        conn.execute(sqlfiles.query("create_migrations_table"))
        for name, text in zip(files[::2], files[1::2]):
            conn.execute(text)
            conn.execute(sqlfiles.query("record_migration"), {"name": name, "checksum": "d80a21c"})
        conn.commit()


def test_a_single_community_database_upgrades_in_place(database_factory, embedder):
    url = database_factory("upgrade")
    _old_schema(url, embedder.dim)
    pick = random.Random(7)
    words = "fence pergola roof paint colour board meeting pets hedge permit review shed pool".split()
    rows = []
    for doc in range(12):
        for i in range(5):
            text = " ".join(pick.choices(words, k=pick.randint(5, 30)))
            rows.append((f"doc-{doc}", f"Doc {doc}", "ccr", i, text, 10, embedder.embed([text])[0].tolist()))
    with psycopg.connect(url) as conn:
        with conn.cursor() as cur:
            cur.executemany("insert into knowledge_chunks (document_id, document_name, document_type, chunk_index, "
                            "content, token_count, embedding) values (%s, %s, %s, %s, %s, %s, %s::vector)",
                            [(*r[:6], str(r[6])) for r in rows])
        conn.commit()
        old = {}
        for q in QUESTIONS:
            vector = "[" + ",".join(f"{x:.7g}" for x in embedder.embed_query(q)) + "]"
            old[q] = conn.execute("select id, bm25_score, vector_score, fused_score from hybrid_search("
                                  "query_text => %s, query_embedding => %s::vector, match_count => 20)",
                                  (q, vector)).fetchall()
        ids_before = conn.execute("select id from knowledge_chunks order by id").fetchall()

    db = Database(url)
    applied = db.migrate(embedder.dim)
    assert "functions/hybrid_search" in applied and "030_communities" in applied and "014_bm25_lock_order" not in applied

    with psycopg.connect(url) as conn:
        assert conn.execute("select id from knowledge_chunks order by id").fetchall() == ids_before  # no re-ingest
        assert conn.execute("select distinct community from knowledge_chunks").fetchall() == [("default",)]
        for q in QUESTIONS:
            vector = "[" + ",".join(f"{x:.7g}" for x in embedder.embed_query(q)) + "]"
            new = conn.execute("select id, bm25_score, vector_score, fused_score from hybrid_search("
                               "query_text => %s, query_embedding => %s::vector, match_count => 20)",
                               (q, vector)).fetchall()
            assert [r[0] for r in new] == [r[0] for r in old[q]]
            assert [round(r[1] or 0, 9) for r in new] == [round(r[1] or 0, 9) for r in old[q]]
        assert_statistics_exact_per_community(conn)
    # the upgraded database takes a second community beside its 'default' one
    ingest_sample_corpus(Ingestor(db, embedder), community="cedar-hollow")
    with psycopg.connect(url) as conn:
        assert_statistics_exact_per_community(conn)
        vector = "[" + ",".join(f"{x:.7g}" for x in embedder.embed_query(QUESTIONS[0])) + "]"
        again = conn.execute("select id from hybrid_search(query_text => %s, query_embedding => %s::vector, "
                             "match_count => 20, community => 'default')", (QUESTIONS[0], vector)).fetchall()
        assert [r[0] for r in again] == [r[0] for r in old[QUESTIONS[0]]]
        # an admin pasting the whole SQL again (db sql) changes nothing: still per community
        conn.execute(sqlfiles.all_migrations_sql(embedder.dim))
        conn.commit()
        conn.execute("delete from knowledge_chunks where community = 'default' and document_id = 'doc-0'")
        conn.commit()
        assert_statistics_exact_per_community(conn)
        assert conn.execute("select count(*) from hybrid_search(query_text => 'fence', community => 'default')"
                            ).fetchone()[0] > 0
    db.close()


@pytest.fixture()
def two_communities(make_database, embedder, tmp_path):
    from tests.helpers import make_settings
    from worker.runtime import Runtime
    from worker.serve.app import create_app

    url = make_database("twocommunities")
    db = Database(url)
    db.migrate(embedder.dim)
    ingestor = Ingestor(db, embedder)
    ingest_sample_corpus(ingestor)  # an existing single-community knowledge base: 'default'
    settings = make_settings(tmp_path, url, api_token=ASK_TOKEN, ingest_token=ADMIN_TOKEN)
    client = create_app(runtime=Runtime(settings, db, embedder)).test_client()
    yield client, db, url, tmp_path
    db.close()


ASK_TOKEN, ADMIN_TOKEN = "ask-ask-ask-ask-ask-ask-1", "admin-admin-admin-admin-1"
ASK = {"X-ARC-Token": ASK_TOKEN}
ADMIN = {"X-ARC-Token": ADMIN_TOKEN}


def test_the_webhooks_take_a_community_and_refuse_an_ambiguous_or_unknown_one(two_communities):
    client, db, _, _ = two_communities
    # one community: today's requests work unchanged
    one = client.post("/webhook/arc-retrieval", json={"query": "fence height"}, headers=ASK)
    assert one.status_code == 200 and one.get_json()["community"] == "default"

    added = client.post("/webhook/arc-ingest", headers=ADMIN, json={
        "community": "ridge", "document_type": "ccr", "document_id": "design-guidelines-2024",
        "text": "# Ridge rules\n\n## Fences\n\nAt Cedar Ridge fences may be 4 feet."})
    assert added.status_code == 200 and added.get_json()["community"] == "ridge"
    bad = client.post("/webhook/arc-ingest", headers=ADMIN, json={
        "community": "Ridge Estates!", "document_type": "ccr", "text": "x"})
    assert bad.status_code == 422 and bad.get_json()["field"] == "community"

    missing = client.post("/webhook/arc-retrieval", json={"query": "fence height"}, headers=ASK)
    assert missing.status_code == 400 and missing.get_json()["field"] == "community"
    assert "community" in missing.get_json()["message"]
    unknown = client.post("/webhook/arc-retrieval", json={"query": "fence height", "community": "nowhere"},
                          headers=ASK)
    assert unknown.status_code == 404 and unknown.get_json()["field"] == "community"

    ridge = client.post("/webhook/arc-retrieval", json={"query": "fence height", "community": "ridge"}, headers=ASK)
    assert ridge.status_code == 200 and ridge.get_json()["community"] == "ridge"
    assert {c["content"] for c in ridge.get_json()["chunks"]} == {"At Cedar Ridge fences may be 4 feet."}
    hollow = client.post("/webhook/arc-retrieval", json={"query": "fence height", "community": "default"},
                         headers=ASK)
    assert "4 feet" not in hollow.get_json()["context"] and hollow.get_json()["chunks"]
    # a chat's metadata names the community
    chat = client.post("/webhook/arc-retrieval", json={"chatInput": "fence height", "sessionId": "s",
                                                       "metadata": {"community": "ridge"}}, headers=ASK)
    assert chat.status_code == 200 and chat.get_json()["community"] == "ridge"
    assert query_log_written(client)
    with psycopg.connect(db.url) as conn:
        logged = conn.execute("select community, count(*) from query_log group by 1 order by 1").fetchall()
        assert logged == [("default", 2), ("ridge", 2)]
        mix = conn.execute("select community, queries from retrieval_source_mix_by_community order by 1").fetchall()
        assert mix == [("default", 2), ("ridge", 2)]

    # the documents API: one community's documents; the same id in two communities is two documents
    listed = client.get("/webhook/arc-documents?community=ridge", headers=ADMIN)
    assert [d["document_id"] for d in listed.get_json()["documents"]] == ["design-guidelines-2024"]
    assert client.get("/webhook/arc-documents", headers=ADMIN).status_code == 400
    assert client.get("/webhook/arc-documents?community=nowhere", headers=ADMIN).status_code == 404
    shown = client.get("/webhook/arc-documents/design-guidelines-2024?community=ridge", headers=ADMIN)
    assert shown.get_json()["document"]["chunks"] == 1
    gone = client.delete("/webhook/arc-documents/design-guidelines-2024?community=ridge", headers=ADMIN)
    assert gone.status_code == 200 and gone.get_json()["deleted_chunks"] == 1
    # ridge is empty again: one community, so the field may be left out once more
    again = client.get("/webhook/arc-documents", headers=ADMIN)
    assert "design-guidelines-2024" in {d["document_id"] for d in again.get_json()["documents"]}


def test_the_command_line_takes_a_community(two_communities, monkeypatch):
    from click.testing import CliRunner

    from worker.cli import main

    _, _, url, tmp_path = two_communities
    monkeypatch.setenv("DATABASE_URL", url)
    monkeypatch.setenv("ARC_DATA_DIR", str(tmp_path))
    notice = tmp_path / "notice.md"
    notice.write_text("# Ridge notice\n\nPool hours at Cedar Ridge are 8 to 8.")
    run = CliRunner().invoke(main, ["ingest", str(notice), "--document-type", "other", "--community", "ridge"])
    assert run.exit_code == 0 and "into community ridge" in run.output, run.output
    listed = CliRunner().invoke(main, ["documents", "list"])
    assert listed.exit_code != 0 and "--community" in listed.output
    listed = CliRunner().invoke(main, ["documents", "list", "--community", "ridge"])
    assert listed.exit_code == 0 and "notice" in listed.output and "design-guidelines" not in listed.output
    unknown = CliRunner().invoke(main, ["documents", "show", "notice", "--community", "nowhere"])
    assert unknown.exit_code != 0 and "nowhere" in unknown.output
    ambiguous = CliRunner().invoke(main, ["ingest", str(notice), "--document-type", "other"])
    assert ambiguous.exit_code != 0 and "community" in ambiguous.output
    deleted = CliRunner().invoke(main, ["documents", "delete", "notice", "--community", "ridge"])
    assert deleted.exit_code == 0, deleted.output


RIDGE_TOKEN = "ridge-only-secret-0001-000"
BOTH_TOKEN = "both-communities-secret-1"


def test_a_token_limited_to_communities_gets_403_and_nothing_of_another(make_database, embedder, tmp_path):
    from tests.helpers import make_settings
    from worker.config import Settings
    from worker.runtime import Runtime
    from worker.serve.app import create_app

    db = hollow_and_ridge(make_database, embedder, "scoped", "# Ridge\n\n## Fences\n\nAt Cedar Ridge fences may be 4 feet.")
    url = db.url
    from worker.community_grants import CommunityGrant

    # write@: the ingest and delete below are refused for the other community, not for the scope
    tokens = f"write@ridge:{RIDGE_TOKEN}; hollow, ridge:{BOTH_TOKEN}"
    assert Settings.from_env({"ARC_COMMUNITY_TOKENS": tokens}).auth.community_tokens == {
        RIDGE_TOKEN: CommunityGrant(communities=("ridge",), write=True),
        BOTH_TOKEN: CommunityGrant(communities=("hollow", "ridge"))}
    from worker.config import ConfigError

    with pytest.raises(ConfigError, match="at least 24"):  # as long as the other tokens must be
        Settings.from_env({"ARC_COMMUNITY_TOKENS": "ridge:sixteen-chars-ok"})
    settings = make_settings(tmp_path, url, api_token=ASK_TOKEN, ingest_token=ADMIN_TOKEN, community_tokens=tokens)
    client = create_app(runtime=Runtime(settings, db, embedder)).test_client()
    ridge_only = {"X-ARC-Token": RIDGE_TOKEN}

    # its one community needs no naming; another community is refused before anything is read
    own = client.post("/webhook/arc-retrieval", json={"query": "fence height"}, headers=ridge_only)
    assert own.status_code == 200 and own.get_json()["community"] == "ridge"
    refused = client.post("/webhook/arc-retrieval", json={"query": "fence height", "community": "hollow"},
                          headers=ridge_only)
    assert refused.status_code == 403 and refused.get_json()["field"] == "community"
    assert "chunks" not in refused.get_json() and "fence" not in refused.get_data(as_text=True).lower()
    # an unknown community is no different from another one: 403, not a 404 that tells it apart
    assert client.post("/webhook/arc-retrieval", json={"query": "x", "community": "nowhere"},
                       headers=ridge_only).status_code == 403
    # the documents API and the ingest webhook likewise
    assert client.get("/webhook/arc-documents?community=hollow", headers=ridge_only).status_code == 403
    assert client.delete("/webhook/arc-documents/design-guidelines-2024?community=hollow",
                         headers=ridge_only).status_code == 403
    assert client.post("/webhook/arc-ingest", headers=ridge_only, json={
        "community": "hollow", "document_type": "ccr", "text": "# x\n\nOverwritten."}).status_code == 403
    listed = client.get("/webhook/arc-documents", headers=ridge_only)
    assert [d["document_id"] for d in listed.get_json()["documents"]] == ["ridge-ccrs"]
    with psycopg.connect(url) as conn:
        assert conn.execute("select count(*) from knowledge_chunks where community = 'hollow' "
                            "and document_id = 'design-guidelines-2024'").fetchone()[0] > 0

    # a token for two must name one; the full tokens still reach every community
    both = {"X-ARC-Token": BOTH_TOKEN}
    assert client.post("/webhook/arc-retrieval", json={"query": "fence"}, headers=both).status_code == 400
    assert client.post("/webhook/arc-retrieval", json={"query": "fence", "community": "hollow"},
                       headers=both).status_code == 200
    assert client.post("/webhook/arc-retrieval", json={"query": "fence", "community": "hollow"},
                       headers=ASK).status_code == 200
    assert client.post("/webhook/arc-retrieval", json={"query": "fence"},
                       headers={"X-ARC-Token": "guess-guess-guess-guess"}).status_code == 401
    db.close()


def test_the_vocabulary_reads_the_question_s_community(database_factory, embedder):
    """The compounds' spelling reads the question's community (bm25_terms by community, 032): one
    association writes "back yard", its sister "backyard"; each question is spelled its own
    community's way."""
    from worker.store.postgres_search import PostgresBackend

    url = database_factory("vocabulary")
    db = Database(url)
    db.migrate(embedder.dim)
    ingestor = Ingestor(db, embedder)
    for community, text in (("cedar-hollow", "A shed in the back yard needs approval."),
                            ("cedar-ridge", "A shed in the backyard needs approval. Backyard fences too.")):
        ingestor.write([ingestor.prepare_text(_markdown(text),
                                              DocumentFields(document_id="rules", name="Rules",
                                                             document_type="other"))], community=community)
    backend = PostgresBackend(db)
    words = ["a", "shed", "in", "the", "backyard"]
    assert backend.compound_spellings(words, "cedar-hollow") == ["back", "yard"]
    assert backend.compound_spellings(words, "cedar-ridge") == []
    assert backend.compound_spellings(words) == []  # every community: "backyard" is written somewhere
    # the same function over Supabase's RPC route (the stand-in runs it by its named arguments)
    from tests.postgrest_standin import PostgrestStandin
    from worker.store.supabase_search import SupabaseBackend

    with PostgrestStandin(url) as server:
        rpc = SupabaseBackend(server.url, server.api_key)
        assert rpc.compound_spellings(words, "cedar-hollow") == ["back", "yard"]
        assert rpc.compound_spellings(words, "cedar-ridge") == []
    db.close()


def test_the_status_calibration_runs_on_a_knowledge_base_of_several_communities(database_factory, embedder):
    """hybrid_search refuses a search naming no community when there are several: the calibration
    (which asks the knowledge base's own sentences back) names one, and answers keep calibrating."""
    from worker.models import RetrievalRequest
    from worker.retrieve.pipeline import Retriever
    from worker.store.postgres_search import PostgresBackend
    from worker.retrieve.search_cache import SearchCache

    url = database_factory("calibration")
    db = Database(url)
    db.migrate(embedder.dim)
    ingestor = Ingestor(db, embedder)
    ingest_sample_corpus(ingestor, community="hollow")
    ingest_sample_corpus(ingestor, community="ridge")
    retriever = Retriever(embedder=embedder, backend=PostgresBackend(db), reranker=None,
                          search_cache=SearchCache(), calibrate=True)
    try:
        calibration = retriever.calibrate_now()
        assert calibration is not None and calibration.floor < calibration.match
        answer = retriever.answer(RetrievalRequest(query="how tall can a fence be", community="ridge"))
        assert answer.confidence["calibrated"] and answer.community == "ridge"
    finally:
        retriever.stop_calibration()
        db.close()


def test_each_community_is_calibrated_on_its_own_documents(database_factory, embedder):
    """Two communities, two score scales: one holds the sample's documents, the other a page of
    short rules. Each question's status is measured against its own community's calibration, the
    one it would get alone in a database of its own (one calibration for all was measured on one
    community and applied to every other)."""
    from worker.ingest.ingestor import Ingestor, ingest_sample_corpus
    from worker.ingest.readers import parse_text
    from worker.models import RetrievalRequest
    from worker.retrieve.pipeline import Retriever
    from worker.store.postgres_search import PostgresBackend
    from worker.retrieve.search_cache import SearchCache

    rules = [f"# Dock Rule {i}\n\n{text}" for i, text in enumerate([
            "Boats may be tied to the community dock for no more than four hours at a time.",
            "Kayaks and canoes are stored on the racks beside the boat house, never on the lawn.",
            "Fishing from the dock is allowed from sunrise until ten o'clock at night.",
            "Jet skis may not be launched from the community ramp on weekends or holidays.",
            "Children under twelve must wear a life jacket whenever they are on the dock.",
            "Fuel, oil and paint must not be poured or stored anywhere on the dock.",
            "Guests may use the dock only when the member who invited them is present.",
            "The dock closes when the lake level warning flag is raised by the marina office."], 1)]

    def calibrations(*communities: str) -> dict:
        db = Database(database_factory("calibration-" + "-".join(communities)))
        db.migrate(embedder.dim)
        ingestor = Ingestor(db, embedder)
        for community in communities:
            if community == "hollow":
                ingest_sample_corpus(ingestor, community="hollow")
            else:
                ingestor.write([ingestor.prepare_text(parse_text(rule),
                                                      DocumentFields(document_id=f"dock-rule-{i}",
                                                                     name=f"Dock Rule {i}", document_type="other"))
                                for i, rule in enumerate(rules, 1)], community="lakeside")
        retriever = Retriever(embedder=embedder, backend=PostgresBackend(db), reranker=None,
                              search_cache=SearchCache(), calibrate=True)
        try:
            retriever.calibrate_now()
            answers = {c: retriever.answer(RetrievalRequest(query="how long can I tie my boat to the dock",
                                                            community=c)).confidence for c in communities}
            return {c: (retriever.calibrations[c], answers[c]) for c in communities}
        finally:
            retriever.stop_calibration()
            db.close()

    together = calibrations("lakeside", "hollow")  # the sample's chunks take other ids than alone
    alone = {**calibrations("hollow"), **calibrations("lakeside")}
    assert together["hollow"][0].match != together["lakeside"][0].match
    for community, (calibration, confidence) in together.items():
        assert (calibration.floor, calibration.match) == pytest.approx((alone[community][0].floor,
                                                                       alone[community][0].match), abs=1e-6)
        assert confidence["floor"] == pytest.approx(calibration.floor, abs=1e-4)
        assert confidence["score"] == pytest.approx(alone[community][1]["score"], abs=1e-4)


def test_a_process_start_measures_only_the_communities_whose_calibration_is_missing_or_stale(make_database,
                                                                                              embedder):
    """A serving process reads the stored calibrations as it starts (gunicorn's post_worker_init);
    it measures in the background only the communities with none stored at their version, and a
    second process finds nothing left to measure."""
    from worker.retrieve.pipeline import Retriever
    from worker.store.postgres_search import PostgresBackend
    from worker.retrieve.search_cache import SearchCache
    from worker.store.calibrations import PostgresCalibrations

    db = hollow_and_ridge(make_database, embedder, "start", "# Ridge\n\n## Fences\n\nAt Cedar Ridge fences may be 4 feet.")

    def measured_at_start() -> set[str]:
        retriever = Retriever(embedder=embedder, backend=PostgresBackend(db), reranker=None,
                              search_cache=SearchCache(), calibrate=True)
        try:
            retriever.prepare_calibrations()
            retriever.calibrator.wait(timeout=120)
            return set(retriever.calibrations)  # measured here (a one-line community has no usable scale: None)
        finally:
            retriever.close()

    try:
        assert measured_at_start() == {"hollow", "ridge"}
        assert PostgresCalibrations(db).stale(embedder.model) == []
        assert measured_at_start() == set()
    finally:
        db.close()
