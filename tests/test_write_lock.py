"""An ingest or delete queued behind a long load: every writer takes one write lock first
(sql/queries.sql lock_writes). Waiting for it is bounded by ARC_WRITE_LOCK_WAIT, not by the
statement timeout (which cut the wait at 5 s and answered a bare "database unavailable"); past
the bound the answer is a retriable 503 that says why, and nothing of the write is stored."""

from __future__ import annotations

import threading
import time

import psycopg
import pytest
from click.testing import CliRunner

from tests.helpers import make_settings
from worker.store import sqlfiles
from worker.serve.app import create_app
from worker.cli import main
from worker.store.database import Database
from worker.runtime import Runtime

ADMIN = {"X-ARC-Token": "admin-token-0123456789abcdef"}
DOC = {"text": "# Kayak Racks\n\nKayak racks must stand behind the house.", "document_type": "design_guidelines",
       "document_id": "kayak-racks"}


@pytest.fixture()
def writer(make_database, embedder, tmp_path):
    """The webhook over a database whose statements time out after 0.3 s and whose writers wait
    at most 1.5 s for the write lock; and a second connection, the long load, holding it."""
    url = make_database("writelock")
    db = Database(url, statement_timeout_ms=300, write_lock_wait=1.5)
    db.migrate(embedder.dim)
    settings = make_settings(tmp_path, url, ingest_token=ADMIN["X-ARC-Token"], statement_timeout_ms=300,
                             write_lock_wait=1.5)
    client = create_app(runtime=Runtime(settings, db, embedder)).test_client()
    with psycopg.connect(url) as load, psycopg.connect(url, autocommit=True) as watcher:
        yield client, db, load, watcher, url
    db.close()


def stored(db: Database) -> list[str]:
    with db.connect() as conn:
        return [r[0] for r in conn.execute("select distinct document_id from knowledge_chunks order by 1")]


def test_an_ingest_behind_a_load_waits_for_it_past_the_statement_timeout(writer):
    client, db, load, _watcher, _ = writer
    load.execute(sqlfiles.query("lock_writes"))
    released = threading.Timer(1.0, load.commit)  # the load ends after 1 s: over 3 statement timeouts
    started = time.monotonic()
    released.start()
    answer = client.post("/webhook/arc-ingest", headers=ADMIN, json=DOC)
    released.join()
    assert answer.status_code == 200, answer.get_json()
    assert time.monotonic() - started >= 0.9 and stored(db) == ["kayak-racks"]


def test_past_the_wait_the_answer_is_retriable_names_the_cause_and_stores_nothing(writer, tmp_path, monkeypatch):
    client, db, load, _watcher, url = writer
    load.execute(sqlfiles.query("lock_writes"))
    started = time.monotonic()
    answer = client.post("/webhook/arc-ingest", headers=ADMIN, json=DOC)
    body = answer.get_json()
    assert answer.status_code == 503 and body["error"] == "knowledge_base_busy", body
    assert answer.headers["Retry-After"] == "5"
    assert "another ingest or delete has been writing the knowledge base for over 1.5 s" in body["message"]
    assert "ARC_WRITE_LOCK_WAIT" in body["message"] and "not stored" in body["message"]
    assert 1.4 <= time.monotonic() - started < 5
    deleted = client.delete("/webhook/arc-documents/anything", headers=ADMIN)
    assert deleted.status_code == 503 and deleted.get_json()["error"] == "knowledge_base_busy"

    monkeypatch.setenv("DATABASE_URL", url)
    monkeypatch.setenv("ARC_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("ARC_WRITE_LOCK_WAIT", "0.5")
    (tmp_path / "kayak-racks.md").write_text(DOC["text"])
    cli = CliRunner().invoke(main, ["ingest", str(tmp_path / "kayak-racks.md"), "--document-type", "design_guidelines"])
    assert cli.exit_code == 1 and "Traceback" not in cli.output
    assert cli.output.strip().splitlines()[-1].startswith(
        "Error: another ingest or delete has been writing the knowledge base for over 0.5 s"), cli.output
    load.commit()
    assert stored(db) == []
    assert client.post("/webhook/arc-ingest", headers=ADMIN, json=DOC).status_code == 200
