"""The one gate (worker/serve/gate.py) and the service's own scope check.

Every door turns a request into a ``Caller``; the knowledge-base service checks each community
it reads or changes against that caller itself, so a door that forgot a check still cannot hand
out another community's documents. Here the service is called directly, as a careless door
would, and a new route gets the gate without asking for it.
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from flask import Blueprint, jsonify

from tests.helpers import make_settings
from worker.errors import CommunityForbidden, WriteForbidden
from worker.ingest.ingestor import Ingestor, ingest_sample_corpus
from worker.ingest.readers import parse_formatted
from worker.models import DocumentFields, RetrievalRequest
from worker.runtime import Runtime
from worker.serve.app import create_app
from worker.serve.gate import ACCESS, STRICTEST, Access, door
from worker.serve.guards import DOORS, caller
from worker.service.caller import LOCAL, Caller
from worker.service.knowledge import KnowledgeService
from worker.store.database import Database

ALPHA_ONLY = Caller("token:alpha", communities=("alpha",), write=True)
ALPHA_READER = Caller("token:alpha-reader", communities=("alpha",), write=False)
BETA_TEXT = "# Beta pools\n\nPools in the beta community must be fenced five feet high."
ADMIN = "gate-admin-token-0123456789abcdef"


@pytest.fixture(scope="module")
def two_communities(make_database, embedder, tmp_path_factory) -> Iterator[Runtime]:
    """The sample corpus in ``alpha``, one small document in ``beta``."""
    url = make_database("gate")
    db = Database(url)
    db.migrate(embedder.dim)
    ingestor = Ingestor(db, embedder)
    ingest_sample_corpus(ingestor, community="alpha")
    beta = ingestor.prepare_text(
        parse_formatted(BETA_TEXT, "markdown"), DocumentFields(document_id="beta-pools", document_type="other")
    )
    ingestor.write([beta], community="beta")
    yield Runtime(make_settings(tmp_path_factory.mktemp("data"), url), db, embedder)
    db.close()


def _query_log_rows(runtime: Runtime) -> int:
    with psycopg.connect(runtime.db.url) as conn:
        return conn.execute("select count(*) from query_log").fetchone()[0]


def test_the_service_refuses_a_caller_of_alpha_asking_for_beta(two_communities):
    service = KnowledgeService(two_communities)
    before = _query_log_rows(two_communities)
    with pytest.raises(CommunityForbidden):
        service.ask(RetrievalRequest(query="How high must a pool fence be?", community="beta"), caller=ALPHA_ONLY)
    assert _query_log_rows(two_communities) == before  # refused before anything was read or recorded
    with pytest.raises(CommunityForbidden):
        service.community("beta", caller=ALPHA_ONLY)
    with pytest.raises(CommunityForbidden):
        service.list_documents("beta", caller=ALPHA_ONLY)
    with pytest.raises(CommunityForbidden):
        service.show("beta-pools", "beta", caller=ALPHA_ONLY)
    with pytest.raises(CommunityForbidden):
        service.delete("beta-pools", "beta", caller=ALPHA_ONLY)
    with pytest.raises(CommunityForbidden):  # a door's own store function cannot write there either
        service.ingest(lambda scoped: scoped.write([], community="beta"), caller=ALPHA_ONLY)
    with pytest.raises(WriteForbidden):
        service.delete("ccrs", "alpha", caller=ALPHA_READER)
    with psycopg.connect(two_communities.db.url) as conn:
        assert conn.execute("select count(*) from knowledge_chunks where community = 'beta'").fetchone()[0] > 0
        assert conn.execute("select count(*) from knowledge_chunks where document_id = 'ccrs'").fetchone()[0] > 0
    service.close()


def test_a_caller_of_one_community_is_answered_from_it_unnamed(two_communities):
    service = KnowledgeService(two_communities)
    answer = service.ask(RetrievalRequest(query="How tall can a backyard fence be?"), caller=ALPHA_ONLY, record=False)
    assert answer.community == "alpha"
    assert all(chunk.document_id != "beta-pools" for chunk in answer.chunks)
    assert service.community(None, caller=ALPHA_ONLY) == "alpha"
    assert {d.document_id for d in service.list_documents("beta", caller=LOCAL)} == {"beta-pools"}
    service.close()


def _app(runtime: Runtime, tmp_path, **overrides):
    settings = make_settings(tmp_path, runtime.db.url, **overrides)
    app = create_app(runtime=Runtime(settings, runtime.db, runtime.embedder))
    app.config["TESTING"] = True
    return app


def test_every_route_declares_its_access(two_communities, tmp_path):
    """No route of the worker falls to the strictest door by default: each says what it asks."""
    app = _app(two_communities, tmp_path)
    declared = app.extensions[DOORS]
    for rule in app.url_map.iter_rules():
        view = app.view_functions[rule.endpoint]
        blueprint = rule.endpoint.rpartition(".")[0]
        access = getattr(view, ACCESS, None) or declared.get(rule.endpoint) or declared.get(blueprint)
        assert isinstance(access, Access), rule.rule


def test_a_new_route_gets_the_gate_without_asking(two_communities, tmp_path):
    """A blueprint added later: undeclared, it is the admin token's and writes; declared as a
    community-scoped read, a community token reads its own community through it and the
    service refuses another."""
    app = _app(
        two_communities,
        tmp_path,
        api_token=ADMIN,
        ingest_token=ADMIN,
        community_tokens="alpha:alpha-reader-token-0123456789",
    )
    extra = Blueprint("extra", __name__)

    @extra.get("/webhook/arc-undeclared")
    def undeclared():
        return jsonify(who=caller().who)

    @extra.get("/webhook/arc-scoped")
    @door(Access("admin", scoped=True))
    def scoped():
        from flask import request

        from worker.serve.services import services

        community = services().knowledge.community(request.args.get("community"), caller=caller())
        return jsonify(community=community)

    app.register_blueprint(extra)
    client = app.test_client()
    admin, reader = {"X-ARC-Token": ADMIN}, {"X-ARC-Token": "alpha-reader-token-0123456789"}
    assert STRICTEST.token == "admin" and STRICTEST.write
    assert client.get("/webhook/arc-undeclared").status_code == 401
    assert client.get("/webhook/arc-undeclared", headers=reader).status_code == 401
    assert client.get("/webhook/arc-undeclared", headers=admin).status_code == 200
    assert client.get("/webhook/arc-scoped", headers=reader).get_json() == {"community": "alpha"}
    refused = client.get("/webhook/arc-scoped?community=beta", headers=reader)
    assert refused.status_code == 403 and refused.get_json()["field"] == "community"
    assert client.get("/webhook/arc-scoped?community=beta", headers=admin).get_json() == {"community": "beta"}


def test_a_door_without_the_token_a_route_asks_for_opens_nothing(tmp_path):
    """MCP's gate knows the API token only: a route asking for the admin token through it is
    closed, never open; ops routes are open while ARC_OPS_TOKEN is unset."""
    from worker.serve.gate import OPS, Gate, Knock, Refused
    from worker.serve.security import FailedAuthGuard, RateLimiter

    settings = make_settings(tmp_path, "postgresql://nobody@127.0.0.1:1/none", api_token=ADMIN)
    gate = Gate(settings, tokens={"api": ADMIN}, limiter=RateLimiter(0), auth_guard=FailedAuthGuard(0))
    knock = Knock(route="/x", headers={"X-ARC-Token": ADMIN}, address="127.0.0.1")
    with pytest.raises(Refused) as refused:
        gate.caller(Access("admin", write=True), knock)
    assert refused.value.status == 403 and refused.value.reason == "closed"
    assert gate.caller(Access("api"), knock).communities is None
    assert gate.caller(OPS, Knock(route="/metrics", headers={}, address="127.0.0.1")).who == "addr:127.0.0.1"


def test_a_method_a_door_does_not_take_is_refused_after_its_token_check(sample_runtime, tmp_path):
    """n8n's credential test sends a GET to the question webhook: a wrong token must hear 401 there
    (the token is refused), a right one 405 (the token opens the door, the method does not)."""
    token = "ask-token-0123456789abcdefgh"
    app = create_app(runtime=Runtime(make_settings(tmp_path, sample_runtime.db.url, api_token=token),
                                     sample_runtime.db, sample_runtime.embedder))
    client = app.test_client()
    wrong = client.get("/webhook/arc-retrieval", headers={"X-ARC-Token": "not-the-token-0123456789"})
    assert wrong.status_code == 401 and wrong.get_json()["error"] == "unauthorized"
    assert client.get("/webhook/arc-retrieval", headers={"X-ARC-Token": token}).status_code == 405
    assert client.get("/webhook/arc-no-such-door").status_code == 404
