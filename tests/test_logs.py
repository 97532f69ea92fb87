"""Logs a person can follow: one INFO line per question, ingest lines that name the document and
report progress off a terminal, and an empty knowledge base said at start, in /readyz and in the
answer."""

from __future__ import annotations

import io
import json
import logging
from types import SimpleNamespace

import pytest

from tests.helpers import make_settings
from worker.ingest.ingestor import Ingestor
from worker.ingest.readers import parse_markdown
from worker.logs import JsonFormatter
from worker.models import DocumentFields
from worker.runtime import Runtime
from worker.serve import gunicorn_conf
from worker.serve.app import create_app
from worker.store.database import Database
from worker.store.knowledge_base import EMPTY_WARNING

TOKEN = "retrieve-secret-4f1c-0123456789abcdef"


@pytest.fixture()
def json_lines():
    """What the worker's JSON log handler writes, as parsed lines (formatted where they are
    emitted, so the request id is there)."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.addHandler(handler)
    level = root.level
    root.setLevel(logging.INFO)
    yield lambda: [json.loads(line) for line in stream.getvalue().splitlines() if line.strip()]
    root.removeHandler(handler)
    root.setLevel(level)


def test_one_info_line_per_question_without_the_token(sample_runtime, tmp_path, json_lines):
    settings = make_settings(tmp_path, sample_runtime.db.url, api_token=TOKEN)
    client = create_app(runtime=Runtime(settings, sample_runtime.db, sample_runtime.embedder)).test_client()
    r = client.post("/webhook/arc-retrieval", headers={"X-ARC-Token": TOKEN, "X-Request-ID": "req-fence-1"},
                    json={"query": "What is the maximum fence height?"})
    assert r.status_code == 200
    answer = r.get_json()
    lines = [e for e in json_lines() if e["logger"] == "arc.webhook"]
    assert len(lines) == 1, lines
    line = lines[0]
    assert line["level"] == "info" and line["request_id"] == "req-fence-1"
    assert (line["status"], line["best_score"], line["chunks"], line["context_tokens"]) == (
        answer["status"], answer["best_score"], len(answer["chunks"]), answer["context_tokens"])
    assert line["ms"] > 0 and answer["status"] in line["msg"]
    everything = json.dumps(json_lines())
    assert TOKEN not in everything and "maximum fence height" not in everything


def test_an_ingest_names_its_document_and_reports_progress_off_a_terminal(make_database, embedder, json_lines):
    db = Database(make_database("logs_ingest"))
    db.migrate(embedder.dim)
    ingestor = Ingestor(db, embedder)
    text = "# Pool Rules\n\n" + "\n\n".join(f"## Rule {i}\n\nRule {i} of the pool applies." for i in range(5))
    ingestor.write([ingestor.prepare_text(parse_markdown(text),
                                          DocumentFields(document_id="pool-rules",
                                                         document_type="other"))], progress=False)
    said = [e["msg"] for e in json_lines() if e["logger"] == "arc.ingest"]
    assert any(m.startswith("embedding 'Pool Rules' (pool-rules): 5/5 chunks") for m in said), said
    assert any(m.startswith("storing 'Pool Rules' (pool-rules): 5/5 chunks") for m in said), said
    assert any(m.startswith("ingested 'Pool Rules' (pool-rules)") for m in said), said
    db.close()


def test_an_empty_knowledge_base_is_said_at_start_in_readyz_and_in_the_answer(make_database, embedder, tmp_path,
                                                                             monkeypatch, json_lines):
    url = make_database("logs_empty")
    db = Database(url)
    db.migrate(embedder.dim)
    client = create_app(runtime=Runtime(make_settings(tmp_path, url), db, embedder)).test_client()
    ready = client.get("/readyz").get_json()
    assert ready["status"] == "ready" and ready["knowledge_base_empty"] is True and ready["warning"] == EMPTY_WARNING
    answer = client.post("/webhook/arc-retrieval", json={"query": "Can I build a fence?"}).get_json()
    assert answer.get("status") == "no_results" and EMPTY_WARNING in answer["warnings"], answer

    monkeypatch.setenv("DATABASE_URL", url)
    monkeypatch.setenv("ARC_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("ARC_LOAD_SAMPLE", raising=False)
    gunicorn_conf.on_starting(SimpleNamespace(cfg=SimpleNamespace(bind=["127.0.0.1:8080"])))
    assert [e for e in json_lines() if e["level"] == "warning" and e["msg"] == EMPTY_WARNING]

    Ingestor(db, embedder).write([Ingestor(db, embedder).prepare_text(
        parse_markdown("# Fences\n\nFences may be 6 feet high."),
        DocumentFields(document_id="fences", document_type="other"))])
    ready = client.get("/readyz").get_json()
    assert ready["knowledge_base_empty"] is False and "warning" not in ready
    db.close()


def test_a_library_that_lowers_its_own_level_writes_nothing_below_the_level_asked(capsys):
    """bm25s sets DEBUG on its logger when imported (the evaluation's anchors import it late):
    `arc-retrieval eval` printed its debug lines although the command asked for warnings only."""
    from worker.logs import configure_logging

    root = logging.getLogger()
    saved_handlers, saved_level = root.handlers[:], root.level
    root.handlers[:] = []
    try:
        configure_logging("WARNING")
        chatty = logging.getLogger("a-library")
        chatty.setLevel(logging.DEBUG)
        chatty.debug("building an index")
        chatty.warning("something to see")
        written = capsys.readouterr().err
    finally:
        root.handlers[:], root.level = saved_handlers, saved_level
    assert "something to see" in written and "building an index" not in written, written
