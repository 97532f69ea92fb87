"""A question in another language (worker/retrieve/language.py): never reported as "not in the
documents" because the worker cannot read it.

Identification is measured on hoa-dev's English questions (none may be taken for another
language) and on the Spanish set of benchmarks/language/ (every one is Spanish). Through the
webhook, MCP and Dify on the sample corpus with the default English-only model, a Spanish
question is answered ``low_confidence`` with a message that tells the agent to search again in
English and never to say the documents are silent, and a warning naming the language and what
to configure; an English question's answer is what it was.
"""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from worker.retrieve import language
from worker.retrieve.status.decision import NO_RESULTS_MESSAGE

ROOT = Path(__file__).resolve().parent.parent
HOA_DEV = ROOT.parent / "shared" / "datasets" / "hoa-dev" / "questions.jsonl"
SPANISH = ROOT / "benchmarks" / "language" / "questions-es.jsonl"
TOKEN = "language-secret-0123456789abcdef0123"
FENCE_ES = "¿Qué altura puede tener la cerca de mi patio trasero?"
EGG_ES = "¿cuánto tiempo hay que hervir un huevo para que la yema quede cremosa?"
FENCE_EN = "What's the max fence height allowed in my backyard??"


def _questions(path: Path) -> list[str]:
    return [
        json.loads(line)["question"] for line in path.read_text(encoding="utf-8").splitlines() if line.strip()
    ]


@pytest.mark.skipif(not HOA_DEV.exists(), reason="../shared/datasets/hoa-dev is not beside this checkout")
def test_no_english_hoa_dev_question_is_taken_for_another_language():
    taken = [(q, language.detect(q)) for q in _questions(HOA_DEV)]
    assert len(taken) >= 194
    assert [t for t in taken if t[1] is not None] == []


@pytest.mark.parametrize("code", ["es", "fr"])
def test_every_translated_question_is_in_its_language(code):
    questions = _questions(SPANISH.with_name(f"questions-{code}.jsonl"))
    assert len(questions) >= 40
    found = [language.detect(q) for q in questions]
    assert all(f is not None and f.code == code for f in found), [
        (q, f) for q, f in zip(questions, found) if f is None or f.code != code
    ]


@pytest.mark.parametrize(
    "question",
    [
        "HOA dues",
        "cuota HOA",
        "cerca",
        "airbnb?",
        "Section 4.2",
        "CC&Rs Article V",
        "ARC approval",
        "Is a 'quinceañera' party allowed in the clubhouse?",
        "rules for a piñata party in the park",
        "how do you say 'where is the bathroom' in french",
        "What's the HOA's policy on casitas?",
        # short English sentences the identifier alone takes for French, Spanish or Portuguese
        "Obesity raises life quality.",
        "What did Tesla establish following his Colorado experiments?",
        "Who do gurus control?",
        "Who was Frédéric Chopin?",
        "When did Augustus die?",
    ],
)
def test_english_and_too_short_to_tell_are_not_flagged(question):
    assert language.detect(question) is None


@pytest.mark.parametrize(
    ("question", "code"),
    [
        ("Qual a altura máxima da cerca?", "pt"),
        ("Quelle hauteur pour une clôture ?", "fr"),
        ("Wie hoch darf ein Zaun sein?", "de"),
        ("Tôi có thể xây hàng rào cao bao nhiêu?", "vi"),
        ("围栏可以多高？", "zh"),
        ("altura de la cerca", "es"),
        ("Posso pintar as paredes do muro da minha casa?", "pt"),
        ("Est-ce que je peux avoir des poules dans mon jardin ?", "fr"),
        ("Posso tenere le galline in giardino?", "it"),
    ],
)
def test_other_languages_are_named(question, code):
    found = language.detect(question)
    assert found is not None and found.code == code


def test_a_model_that_reads_the_language_leans_on_the_vector_leg():
    multilingual = language.read(FENCE_ES, "multilingual-e5-small")
    assert multilingual.readable and multilingual.weights((0.4, 0.6)) == language.FOREIGN_WEIGHTS
    assert multilingual.overrule("success", None) == ("success", None)
    status, message = multilingual.overrule("no_results", NO_RESULTS_MESSAGE)
    assert status == "low_confidence" and "measured on English sentences" in message
    assert "Spanish" in multilingual.warnings[0] and "vector leg" in multilingual.warnings[0]
    english = language.read(FENCE_EN, "all-MiniLM-L6-v2")
    assert english.weights((0.4, 0.6)) == (0.4, 0.6) and not english.warnings and english.public() == {}


def _assert_said_unread(status: str, message: str, warnings: list[str]) -> None:
    assert status == "low_confidence"
    assert "Spanish" in message and "Do not say the governing documents do not address it" in message
    assert message != NO_RESULTS_MESSAGE and "translated into English" in message
    said = [w for w in warnings if "Spanish (es)" in w]
    assert said and "EMBEDDING_MODEL=multilingual-e5-small" in said[0] and "reembed" in said[0]


@pytest.mark.parametrize("question", [FENCE_ES, EGG_ES])
def test_webhook_says_it_cannot_read_the_question(client, question):
    answer = client.post("/webhook/arc-retrieval", json={"query": question}).get_json()
    _assert_said_unread(answer["status"], answer["message"], answer["warnings"])
    assert answer["confidence"]["language"] == "es" and answer["confidence"]["language_readable"] is False


def test_webhook_english_answer_is_unchanged(client):
    answer = client.post("/webhook/arc-retrieval", json={"query": FENCE_EN}).get_json()
    assert answer["status"] == "success" and "language" not in answer["confidence"]
    assert not any("English only" in w for w in answer["warnings"])


def test_mcp_says_it_cannot_read_the_question(sample_runtime, tmp_path):
    from tests.helpers import server_env
    from worker.serve.mcp_server import SEARCH_TOOL

    params = StdioServerParameters(
        command=__import__("sys").executable,
        args=["-m", "worker.cli", "mcp"],
        env=server_env(sample_runtime.db.url, tmp_path),
        cwd=str(ROOT),
    )

    async def go():
        async with Client(params) as mcp:
            return await mcp.call_tool(SEARCH_TOOL, {"query": FENCE_ES})

    result = anyio.run(go)
    assert not result.is_error
    text = result.content[0].text
    assert text.startswith("status: low_confidence") and "Do not say the governing documents" in text
    data = result.structured_content
    _assert_said_unread(data["status"], data["message"], data["warnings"])


@pytest.fixture(scope="module")
def dify_client(sample_runtime):
    from worker.runtime import Runtime
    from worker.serve.app import create_app

    settings = sample_runtime.settings.replace(**{"api_token": TOKEN, "rate_limit": 0.0})
    return create_app(runtime=Runtime(settings, sample_runtime.db, sample_runtime.embedder)).test_client()


def _dify(client, query: str, threshold: float) -> list[dict]:
    body = {
        "knowledge_id": "all",
        "query": query,
        "retrieval_setting": {"top_k": 3, "score_threshold": threshold},
    }
    response = client.post("/retrieval", json=body, headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 200
    return response.get_json()["records"]


def test_dify_gets_the_notice_as_its_first_record_whatever_the_threshold(dify_client):
    for threshold in (0.0, 0.99):
        records = _dify(dify_client, FENCE_ES, threshold)
        assert records and records[0]["metadata"]["notice"] == "language_not_read"
        assert records[0]["metadata"]["language"] == "es"
        assert "Do not say the governing documents do not address it" in records[0]["content"]
    english = _dify(dify_client, FENCE_EN, 0.0)
    assert english and all("notice" not in r["metadata"] for r in english)


def test_the_keepers_retrieval_testing_page_says_it_too(sample_runtime, tmp_path):
    import html

    from tests.helpers import make_settings
    from tests.helpers import KEEPER_TOKEN as ADMIN, csrf
    from worker.serve.app import create_app

    settings = make_settings(tmp_path, sample_runtime.db.url, api_token=ADMIN, ingest_token=ADMIN)
    app = create_app(runtime=type(sample_runtime)(settings, sample_runtime.db, sample_runtime.embedder))
    app.config["TESTING"] = True
    keeper = app.test_client()
    login = keeper.get("/login").get_data(as_text=True)
    assert keeper.post("/login", data={"token": ADMIN, "csrf_token": csrf(login)}).status_code == 302
    page = keeper.get("/ask").get_data(as_text=True)
    shown = html.unescape(
        keeper.post("/ask", data={"query": FENCE_ES, "csrf_token": csrf(page)}).get_data(as_text=True)
    )
    assert "low_confidence" in shown and "Do not say the governing documents do not address it" in shown
    assert "EMBEDDING_MODEL=multilingual-e5-small" in shown
