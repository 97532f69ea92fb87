"""The status of a question in another language that the embedding model reads
(worker/retrieve/status/language_scale.py), on a real database with the real multilingual-e5-small.

The sample corpus (English) is embedded with e5 and calibrated as a serving worker does; the
calibration also measures the Spanish and French scales and stores them beside itself (sql/043).
Through the webhook a Spanish or French question whose answer is in an English passage is then
``success`` (on the English scale alone it read as unrelated and was held at ``low_confidence``), an unrelated
Spanish question is not, an English question is decided on the English scale as before, and a
question in a language without a scale of its own keeps the rule that it is never ``no_results``.
"""

from __future__ import annotations

from collections.abc import Sequence

import psycopg
import pytest

from tests.helpers import make_settings
from worker.embeddings import CachedEmbedder, E5Embedder
from worker.ingest.ingestor import Ingestor, ingest_sample_corpus
from worker.retrieve.status import confidence, language_scale
from worker.runtime import Runtime
from worker.store.database import Database
from worker.store.language_scales import LocalLanguageScales, StoredScale

FENCE_ES = "¿Qué altura puede tener la cerca de mi patio trasero?"
SHED_ES = "puedo construir un cobertizo en el patio de atras? de que tamaño"
EGG_ES = "¿cuánto tiempo hay que hervir un huevo para que la yema quede cremosa?"
FENCE_EN = "What's the max fence height allowed in my backyard??"
FENCE_FR = "quelle hauteur peut faire la clôture de ma cour arrière ?"
# Italian: no scale ships for it, so the English scale's rule holds (never no_results)
RECIPE_IT = "qual è la migliore ricetta della torta di mele per una domenica in famiglia"


@pytest.fixture(scope="module")
def e5_runtime(make_database, tmp_path_factory):
    embedder = CachedEmbedder(E5Embedder(threads=1))
    url = make_database("langscale")
    settings = make_settings(
        tmp_path_factory.mktemp("data"),
        url,
        embedding_provider="local",
        embedding_model="multilingual-e5-small",
        embedding_dim=384,
    )
    db = Database(url)
    db.migrate(embedder.dim)
    ingest_sample_corpus(Ingestor(db, embedder))
    yield Runtime(settings, db, embedder)
    db.close()


@pytest.fixture(scope="module")
def e5_client(e5_runtime):
    from worker.serve.app import create_app

    return create_app(runtime=e5_runtime).test_client()


def _ask(client, question: str) -> dict:
    response = client.post("/webhook/arc-retrieval", json={"query": question})
    assert response.status_code == 200, response.get_json()
    return response.get_json()


@pytest.mark.parametrize(("question", "code", "name"), [(FENCE_ES, "es", "Spanish"), (SHED_ES, "es", "Spanish"),
                                                         (FENCE_FR, "fr", "French")])
def test_a_question_in_another_language_answered_in_an_english_passage_is_success(e5_client, question, code, name):
    answer = _ask(e5_client, question)
    assert answer["status"] == "success", answer["confidence"]
    assert answer["confidence"]["language"] == code and answer["confidence"]["language_scale"] is True
    assert any(f"{name}'s own scale" in w for w in answer["warnings"])
    assert answer["message"] is None and answer["context"]
    # decided on the vector leg's cosine, on the Spanish scale (below the English one)
    assert answer["confidence"]["relevance"] == pytest.approx(
        max(c["vector_score"] for c in answer["chunks"]), abs=1e-4
    )


def test_an_unrelated_spanish_question_is_not_success(e5_client):
    answer = _ask(e5_client, EGG_ES)
    assert answer["status"] != "success", answer["confidence"]
    assert answer["confidence"]["language_scale"] is True


def test_the_spanish_scale_is_stored_beside_the_calibration(e5_client, e5_runtime):
    _ask(e5_client, FENCE_ES)
    with psycopg.connect(e5_runtime.db.url) as conn:
        english = conn.execute("select kb_version, floor from status_calibrations").fetchone()
        rows = conn.execute(
            "select language, kb_version, floor, match, near_miss, language_drop, pairs from status_language_scales"
        ).fetchall()
    assert sorted(r[0] for r in rows) == ["es", "fr"]
    for language, version, floor, match, near_miss, drop, pairs in rows:
        assert version == english[0] and pairs == 40
        assert 0 < drop < 0.2 and floor < near_miss <= match < 1


def test_a_calibration_stored_without_scales_gets_them_in_the_background(e5_client, e5_runtime):
    import threading

    from worker.serve.app import create_app

    _ask(e5_client, FENCE_ES)  # calibrated, with the scales
    with psycopg.connect(e5_runtime.db.url, autocommit=True) as conn:
        conn.execute("delete from status_language_scales")  # as a release that did not measure them left it
    client = create_app(runtime=e5_runtime).test_client()  # another process: nothing read yet
    before = _ask(client, FENCE_ES)
    assert before["confidence"]["language_scale"] is False and before["status"] == "low_confidence"
    for thread in [t for t in threading.enumerate() if t.name == "arc-language-scales"]:
        thread.join(timeout=300)
    after = _ask(client, FENCE_ES)
    assert after["confidence"]["language_scale"] is True and after["status"] == "success"
    with psycopg.connect(e5_runtime.db.url) as conn:
        assert conn.execute("select count(*) from status_language_scales").fetchone()[0] == 2


def test_an_english_question_keeps_the_english_scale(e5_client):
    answer = _ask(e5_client, FENCE_EN)
    assert answer["status"] == "success" and "language" not in answer["confidence"]
    assert answer["confidence"]["relevance"] == pytest.approx(max(c["relevance"] for c in answer["chunks"]), abs=1e-4)


def test_a_language_without_a_scale_is_never_no_results(e5_client):
    answer = _ask(e5_client, RECIPE_IT)
    assert answer["confidence"]["language"] == "it" and answer["confidence"]["language_scale"] is False
    assert answer["status"] == "low_confidence" and "measured on English sentences" in answer["message"]


# -- the measurement itself ---------------------------------------------------------------------


@pytest.mark.parametrize("code", ["es", "fr"])
def test_a_language_ships_both_files_line_for_line(code):
    assert code in language_scale.languages()
    off_domain, pairs = language_scale.questions(code)
    assert len(off_domain) == len(confidence.off_domain_questions()) and len(pairs) >= 40
    assert all(english and other and english != other for english, other in pairs)


def test_the_scale_is_the_floor_in_the_language_and_the_english_anchors_less_the_drop():
    off_domain, pairs = language_scale.questions("es")
    english_side = {e for e, _ in pairs}

    def ask(texts: Sequence[str], code: str) -> list[language_scale.Scored]:
        if code == "en":
            assert set(texts) == english_side
            return [language_scale.Scored(0.7, 0.6, vector=0.86) for _ in texts]
        if set(texts) == set(off_domain):
            return [language_scale.Scored(0.5, 0.5, vector=0.78) for _ in texts]
        return [language_scale.Scored(0.55, 0.5, vector=0.82) for _ in texts]

    asked = {
        **{q: language_scale.Scored(0.6, 0.6, vector=0.81) for q in confidence.off_domain_questions()},
        "Fences may not exceed six feet.": language_scale.Scored(0.9, 0.7, vector=0.90, vector_elsewhere=0.85),
        "Sheds need approval.": language_scale.Scored(0.9, 0.7, vector=0.88, vector_elsewhere=0.83),
    }
    english = language_scale.english_cosines(asked)
    assert english == language_scale.EnglishCosines(match=pytest.approx(0.89), near_miss=pytest.approx(0.84))
    (scale,) = language_scale.measure(ask, english, ["es"])
    assert scale.language == "es" and scale.floor == pytest.approx(0.78) and scale.drop == pytest.approx(0.04)
    assert scale.match == pytest.approx(0.85) and scale.near_miss == pytest.approx(0.80)
    decided = language_scale.calibration(scale, version=3, reach=confidence.NEAR_MISS_REACH)
    assert decided.floor == scale.floor and decided.version == 3


def test_a_store_without_a_database_keeps_the_newest_version_only():
    store = LocalLanguageScales()
    spanish = StoredScale("es", 0.78, 0.85, 0.8, 0.04, 40)
    store.put("default", "m", 2, [spanish])
    store.put("default", "m", 1, [StoredScale("es", 0.1, 0.2, 0.15, 0.0, 40)])
    assert store.read("default", "m", 2) == {"es": spanish} and store.read("default", "m", 1) == {}


def test_the_scales_go_through_supabase_rpc_as_through_postgres(sample_runtime):
    from tests.postgrest_standin import PostgrestStandin
    from worker.store.postgres_search import PostgresBackend
    from worker.store.supabase_search import SupabaseBackend
    from worker.store.language_scales import PostgresLanguageScales, RpcLanguageScales, beside

    spanish = StoredScale("es", 0.78, 0.85, 0.8, 0.04, 40)
    with PostgrestStandin(sample_runtime.db.url) as postgrest:
        via_rpc = beside(SupabaseBackend(postgrest.url, postgrest.api_key).calibration_store())
        assert isinstance(via_rpc, RpcLanguageScales)
        via_rpc.put("default", "rpc-model", 7, [spanish])
        via_rpc.put("default", "rpc-model", 6, [StoredScale("es", 0.1, 0.2, 0.15, 0.0, 40)])  # older: kept out
        assert {"arc_store_language_scale"} <= {name for name, _ in postgrest.calls}
        assert via_rpc.read("default", "rpc-model", 7) == {"es": spanish}
        assert via_rpc.read("default", "rpc-model", 6) == {}
    direct = beside(PostgresBackend(sample_runtime.db).calibration_store())
    assert isinstance(direct, PostgresLanguageScales)
    assert direct.read("default", "rpc-model", 7) == {"es": spanish}


def test_a_rerank_service_decides_a_spanish_question_and_it_is_never_no_results(e5_runtime, tmp_path):
    # The service's scale was measured with the knowledge base's English text, so it decides the
    # status (not the Spanish scale), and the rule for a language the scale was not measured in
    # holds: never no_results. The stand-in scores by shared words, so a Spanish question about an
    # English passage scores low on it.
    from tests.rerank_standins import RerankStandin
    from tests.helpers import RERANK_KEY as KEY, RERANK_MODEL as MODEL, service_app

    with RerankStandin("cohere", api_key=KEY, model=MODEL) as cohere:
        answer = service_app(e5_runtime, cohere, tmp_path).test_client().post(
            "/webhook/arc-retrieval", json={"query": FENCE_ES}).get_json()
    assert answer["confidence"]["decided_on"] == "rerank"
    assert answer["confidence"]["language"] == "es" and answer["confidence"]["language_scale"] is False
    assert not any("own scale" in w for w in answer["warnings"])
    assert answer["status"] != "no_results" and answer["context"]


def test_a_language_that_fails_to_measure_leaves_the_english_calibration(e5_runtime, monkeypatch):
    from worker.service.build import build_retriever

    def broken(language):
        raise ValueError(f"{language}: the two files differ in length")

    retriever = build_retriever(e5_runtime)
    try:
        with psycopg.connect(e5_runtime.db.url, autocommit=True) as conn:
            conn.execute("delete from status_calibrations")
        monkeypatch.setattr(language_scale, "questions", broken)
        measured = retriever.calibrator.current("default")
        assert measured is not None and measured.floor < measured.match
        reading = retriever.calibrator.store.read("default", retriever.calibrator.key)
        assert reading.fresh and reading.stored is not None and not reading.stored.too_small
    finally:
        retriever.close()
