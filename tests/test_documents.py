"""Managing the knowledge base: list documents, show one's chunks, delete one (chunks and BM25
statistics together; what it superseded becomes current again), from the CLI and the webhook."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from tests.helpers import make_settings
from tests.helpers import assert_statistics_exact
from worker.serve.app import create_app
from worker.cli import main
from worker.store.database import Database
from worker.ingest.ingestor import Ingestor, ingest_sample_corpus
from worker.ingest.readers import parse_markdown
from worker.models import DocumentFields
from worker.runtime import Runtime

ADMIN = {"X-ARC-Token": "admin-token-0123456789abcdef"}
ROUTE = "/webhook/arc-documents"


@pytest.fixture()
def managed(make_database, embedder, tmp_path):
    url = make_database("documents")
    db = Database(url)
    db.migrate(embedder.dim)
    ingestor = Ingestor(db, embedder)
    ingest_sample_corpus(ingestor)
    settings = make_settings(tmp_path, url, api_token="ask-token-0123456789abcdefgh", ingest_token="admin-token-0123456789abcdef")
    client = create_app(runtime=Runtime(settings, db, embedder)).test_client()
    yield client, db, ingestor, url
    db.close()


def test_list_show_and_delete_through_the_webhook(managed):
    client, db, _, _ = managed
    listed = client.get(ROUTE, headers=ADMIN)
    assert listed.status_code == 200
    documents = {d["document_id"]: d for d in listed.get_json()["documents"]}
    assert "design-guidelines-2024" in documents
    guidelines = documents["design-guidelines-2024"]
    assert guidelines["chunks"] > 0 and guidelines["document_type"] == "design_guidelines"
    assert guidelines["superseded_by"] is None and guidelines["ingested_at"]

    shown = client.get(f"{ROUTE}/design-guidelines-2024", headers=ADMIN).get_json()
    assert [c["chunk_index"] for c in shown["chunks"]] == list(range(guidelines["chunks"]))

    deleted = client.delete(f"{ROUTE}/design-guidelines-2024", headers=ADMIN)
    assert deleted.status_code == 200 and deleted.get_json()["deleted_chunks"] == guidelines["chunks"]
    assert client.get(f"{ROUTE}/design-guidelines-2024", headers=ADMIN).status_code == 404
    assert_statistics_exact(db)
    answer = client.post("/webhook/arc-retrieval", headers={"X-ARC-Token": "ask-token-0123456789abcdefgh"},
                         json={"query": "What colours can I paint my house?"}).get_json()
    assert all(c["document_id"] != "design-guidelines-2024" for c in answer["chunks"])


def test_the_webhook_refuses_bad_input_and_the_wrong_token(managed):
    client, _, _, _ = managed
    assert client.get(ROUTE).status_code == 401
    assert client.get(ROUTE, headers={"X-ARC-Token": "ask-token-0123456789abcdefgh"}).status_code == 401  # the retrieval token
    assert client.delete(f"{ROUTE}/x", headers={"X-ARC-Token": "ask-token-0123456789abcdefgh"}).status_code == 401
    missing = client.delete(f"{ROUTE}/no-such-document", headers=ADMIN)
    assert missing.status_code == 404 and missing.get_json()["field"] == "document_id"
    bad = client.delete(f"{ROUTE}/a b'; drop table knowledge_chunks;--", headers=ADMIN)
    assert bad.status_code == 422 and bad.get_json()["field"] == "document_id"


def test_deleting_the_newer_version_makes_the_older_current_again(managed):
    client, _db, ingestor, _ = managed
    newer = ingestor.prepare_text(parse_markdown("# Fences 2026\n\nFences may be 7 feet tall."),
                                  DocumentFields(document_id="fences-2026", document_type="design_guidelines",
                                                 supersedes="design-guidelines-2024"))
    ingestor.write([newer])
    listed = {d["document_id"]: d for d in client.get(ROUTE, headers=ADMIN).get_json()["documents"]}
    assert listed["design-guidelines-2024"]["superseded_by"] == "fences-2026"
    assert client.delete(f"{ROUTE}/fences-2026", headers=ADMIN).status_code == 200
    listed = {d["document_id"]: d for d in client.get(ROUTE, headers=ADMIN).get_json()["documents"]}
    assert listed["design-guidelines-2024"]["superseded_by"] is None


def test_an_unknown_supersession_id_is_a_clear_error_and_nothing_is_stored(managed, tmp_path, monkeypatch):
    client, _db, _, url = managed
    refused = client.post("/webhook/arc-ingest", headers=ADMIN, json={
        "text": "# Fences 2026\n\nFences may be 7 feet tall.", "document_type": "design_guidelines",
        "document_id": "fences-2026", "supersedes": "design-guidelines-2042"})
    body = refused.get_json()
    assert refused.status_code == 422 and body["field"] == "supersedes", body
    assert "no document 'design-guidelines-2042'" in body["message"]
    late = client.post("/webhook/arc-ingest", headers=ADMIN, json={
        "text": "# Fences 2019\n\nFences may be 5 feet tall.", "document_type": "design_guidelines",
        "document_id": "fences-2019", "superseded_by": "design-guidelines-2024"})
    assert late.status_code == 200, late.get_json()

    monkeypatch.setenv("DATABASE_URL", url)
    monkeypatch.setenv("ARC_DATA_DIR", str(tmp_path))
    notice = tmp_path / "fences.md"
    notice.write_text("# Fences 2026\n\nFences may be 7 feet tall.\n")
    cli = CliRunner().invoke(main, ["ingest", str(notice), "--document-type", "design_guidelines",
                                       "--supersedes", "design-guidelines-2042"])
    assert cli.exit_code != 0 and "supersedes: no document 'design-guidelines-2042'" in cli.output, cli.output
    assert "Traceback" not in cli.output
    listed = {d["document_id"]: d for d in client.get(ROUTE, headers=ADMIN).get_json()["documents"]}
    assert "fences-2026" not in listed and "fences" not in listed
    assert listed["fences-2019"]["superseded_by"] == "design-guidelines-2024"


def test_the_cli_lists_shows_deletes_and_ingests_under_a_chosen_id(managed, tmp_path, monkeypatch):
    _, db, _, url = managed
    monkeypatch.setenv("DATABASE_URL", url)
    monkeypatch.setenv("ARC_DATA_DIR", str(tmp_path))
    runner = CliRunner()
    notice = tmp_path / "pool.md"
    notice.write_text("# Pool Rules\n\nThe pool closes at 9 pm.\n")
    ingested = runner.invoke(main, ["ingest", str(notice), "--document-type", "other", "--document-id", "pool-2026"])
    assert ingested.exit_code == 0 and "document id: pool-2026" in ingested.output, ingested.output
    bad_id = runner.invoke(main, ["ingest", str(notice), "--document-type", "other", "--document-id", "pool 2026"])
    assert bad_id.exit_code != 0 and "--document-id" in bad_id.output

    listed = runner.invoke(main, ["documents", "list"])
    assert listed.exit_code == 0 and "pool-2026\tother\tyes\t-\t-\t1\t-\t" in listed.output, listed.output
    shown = runner.invoke(main, ["documents", "show", "pool-2026"])
    assert shown.exit_code == 0 and "The pool closes at 9 pm." in shown.output
    deleted = runner.invoke(main, ["documents", "delete", "pool-2026"])
    assert deleted.exit_code == 0 and "deleted pool-2026 (1 chunks)" in deleted.output
    again = runner.invoke(main, ["documents", "delete", "pool-2026"])
    assert again.exit_code != 0 and "no document 'pool-2026'" in again.output
    assert "Traceback" not in again.output
    assert_statistics_exact(db)


def test_a_folder_with_a_manifest_ingests_every_document_it_lists(managed, tmp_path, monkeypatch):
    import json

    _, _, _, url = managed
    monkeypatch.setenv("DATABASE_URL", url)
    monkeypatch.setenv("ARC_DATA_DIR", str(tmp_path / "data"))
    folder = tmp_path / "community"
    folder.mkdir()
    (folder / "pool.md").write_text("# Pool Rules\n\nThe pool closes at 9 pm.\n")
    (folder / "letter.txt").write_text("DECISION\nThe fence at 3 Elm Court is approved.\n")
    (folder / "manifest.json").write_text(json.dumps({"documents": [
        {"document_id": "pool-rules", "file": "pool.md", "name": "Pool Rules", "document_type": "other",
         "is_binding": True},
        {"document_id": "letter-3-elm", "file": "letter.txt", "name": "Letter 3 Elm", "document_type": "response_letter",
         "is_binding": False},
        # superseded by a document later in the list, and by one already stored
        {"document_id": "pool-rules-2019", "file": "pool.md", "document_type": "other", "superseded_by": "pool-2026"},
        {"document_id": "pool-2026", "file": "pool.md", "document_type": "other"},
        {"document_id": "old-guidelines", "file": "pool.md", "document_type": "other",
         "superseded_by": "design-guidelines-2024"}]}))
    result = CliRunner().invoke(main, ["ingest", str(folder)])
    assert result.exit_code == 0, result.output
    assert "document id: pool-rules" in result.output and "document id: letter-3-elm" in result.output
    listed = CliRunner().invoke(main, ["documents", "list"]).output
    assert "letter-3-elm\tresponse_letter\tno\t" in listed
    assert "pool-rules-2019\tother\tyes\tpool-2026\t" in listed, listed
    assert "old-guidelines\tother\tyes\tdesign-guidelines-2024\t" in listed, listed
    no_manifest = tmp_path / "empty"
    no_manifest.mkdir()
    refused = CliRunner().invoke(main, ["ingest", str(no_manifest)])
    assert refused.exit_code != 0 and "manifest.json" in refused.output
