"""No silent replacement: an id that holds a document from another source is refused with a
clear message unless the caller asks to replace, and every ingest path says what it replaced."""

from __future__ import annotations

import io
import json

import pytest
from click.testing import CliRunner

from tests.helpers import make_settings
from tests.helpers import make_pdf
from worker.cli import main
from worker.runtime import Runtime
from worker.serve.app import create_app
from worker.store.database import Database

HEADERS = {"X-ARC-Token": "ingest-secret-0123456789abcdef"}


def stored(url: str, document_id: str) -> list[tuple[str, str | None]]:
    with Database(url).connect() as conn:
        return conn.execute("select document_name, metadata->>'source_file' from knowledge_chunks "
                            "where document_id = %s order by chunk_index", (document_id,)).fetchall()


def test_the_cli_refuses_another_file_under_a_stored_id_unless_asked(make_database, tmp_path, monkeypatch):
    url = make_database("replace_cli")
    monkeypatch.setenv("DATABASE_URL", url)
    runner = CliRunner()
    letter = tmp_path / "letter.txt"
    letter.write_text("DECISION\nThe shed request at 12 Aspen Lane is denied.\n")
    letter_args = ["ingest", str(letter), "--document-type", "response_letter", "--name", "Shed decision"]
    first = runner.invoke(main, letter_args)
    assert first.exit_code == 0 and "replaced nothing" in first.output, first.output

    pdf = tmp_path / "letter.pdf"
    pdf.write_bytes(make_pdf([["NOTICE", "The pool opens on May 1."]]))
    clash = runner.invoke(main, ["ingest", str(pdf), "--document-type", "other", "--name", "Pool notice"])
    assert clash.exit_code == 1 and isinstance(clash.exception, SystemExit), clash.output
    said = clash.output.strip().splitlines()[-1]
    assert "'letter'" in said and "Shed decision" in said and "letter.txt" in said and "--replace" in said, said
    assert stored(url, "letter")[0] == ("Shed decision", "letter.txt"), "the stored document is untouched"

    letter.write_text("DECISION\nThe shed request at 12 Aspen Lane is approved.\n")
    update = runner.invoke(main, letter_args)
    assert update.exit_code == 0 and "replaced 1 stored document(s) (1 chunks): letter" in update.output, update.output

    replaced = runner.invoke(main, ["ingest", str(pdf), "--document-type", "other", "--name", "Pool notice",
                                    "--replace"])
    assert replaced.exit_code == 0 and "replaced 1 stored document(s)" in replaced.output, replaced.output
    assert stored(url, "letter")[0] == ("Pool notice", "letter.pdf")


def test_a_manifest_is_refused_on_a_clash_and_says_what_it_replaced(make_database, tmp_path, monkeypatch):
    url = make_database("replace_manifest")
    monkeypatch.setenv("DATABASE_URL", url)
    runner = CliRunner()
    (tmp_path / "other.md").write_text("# Other\n\nParking is free.\n")
    other = runner.invoke(main, ["ingest", str(tmp_path / "other.md"), "--document-type", "other",
                                 "--document-id", "rules"])
    assert other.exit_code == 0, other.output
    folder = tmp_path / "community"
    folder.mkdir()
    (folder / "rules.md").write_text("# Rules\n\nDogs must be leashed.\n")
    (folder / "manifest.json").write_text(json.dumps({"documents": [
        {"file": "rules.md", "document_id": "rules", "document_type": "other"}]}))
    clash = runner.invoke(main, ["ingest", str(folder)])
    assert clash.exit_code == 1 and "'rules'" in clash.output and "--replace" in clash.output, clash.output
    done = runner.invoke(main, ["ingest", str(folder), "--replace"])
    assert done.exit_code == 0 and "): rules" in done.output, done.output
    again = runner.invoke(main, ["ingest", str(folder)])  # the same files: an update
    assert again.exit_code == 0 and "replaced 1 stored document(s)" in again.output, again.output


@pytest.fixture(scope="module")
def ingest_client(make_database, embedder, tmp_path_factory):
    url = make_database("replace_hook")
    db = Database(url)
    db.migrate(embedder.dim)
    settings = make_settings(tmp_path_factory.mktemp("d"), url, api_token="retrieve-secret-0123456789abcdef",
                             ingest_token="ingest-secret-0123456789abcdef")
    yield create_app(runtime=Runtime(settings, db, embedder)).test_client()
    db.close()


def post(client, **body):
    return client.post("/webhook/arc-ingest", headers=HEADERS, json=body)


def upload(client, filename: str, content: bytes, **fields):
    return client.post("/webhook/arc-ingest", headers=HEADERS, content_type="multipart/form-data",
                       data={"document_type": "other", **fields, "file": (io.BytesIO(content), filename)})


def test_the_json_webhook_refuses_a_clash_unless_asked_and_says_what_it_replaced(ingest_client):
    first = post(ingest_client, text="Trash goes out on Monday.", document_type="other", document_id="trash")
    assert first.status_code == 200 and first.get_json()["replaced"] == [], first.get_json()
    # the same id named again: an update of that text, and said
    update = post(ingest_client, text="Trash goes out on Monday morning.", document_type="other", document_id="trash")
    assert update.status_code == 200 and update.get_json()["replaced"] == ["trash"], update.get_json()
    # an id only derived from a title, or a file under a text's id, is a clash
    for clash in (post(ingest_client, text="# Trash\n\nTrash goes out on Tuesday.", document_type="other"),
                  upload(ingest_client, "trash.md", b"# Trash\n\nTrash goes out on Friday.\n")):
        assert clash.status_code == 422, clash.get_json()
        error = json.dumps(clash.get_json())
        assert "document_id" in error and "'trash'" in error and "replace" in error, error
    done = post(ingest_client, text="# Trash\n\nTrash goes out on Tuesday.", document_type="other", replace=True)
    assert done.status_code == 200 and done.get_json()["replaced"] == ["trash"], done.get_json()


def test_a_json_text_without_an_id_a_name_or_a_title_is_refused(ingest_client):
    for _ in range(2):
        r = post(ingest_client, text="Quiet hours are 10 pm to 7 am.", document_type="other")
        assert r.status_code == 422 and "document_id" in json.dumps(r.get_json()), r.get_json()
    titled = post(ingest_client, text="# Quiet Hours\n\nQuiet hours are 10 pm to 7 am.", document_type="other")
    assert titled.status_code == 200 and titled.get_json()["document_id"] == "quiet-hours"


def test_a_form_upload_says_what_it_replaced_and_refuses_a_yes_no_field_that_is_neither(ingest_client):
    bad = upload(ingest_client, "pets.md", b"# Pets\n\nDogs on leash.\n", is_binding="maybe")
    assert bad.status_code == 422, bad.get_json()
    assert "is_binding" in json.dumps(bad.get_json()) and "maybe" in json.dumps(bad.get_json())
    assert upload(ingest_client, "pets.md", b"# Pets\n\nDogs on leash.\n").get_json()["replaced"] == []
    again = upload(ingest_client, "pets.md", b"# Pets\n\nDogs and cats on leash.\n", is_binding="no")
    assert again.status_code == 200 and again.get_json()["replaced"] == ["pets"], again.get_json()
    other = upload(ingest_client, "pets.txt", b"Pets must be registered.\n")
    assert other.status_code == 422 and "pets.md" in json.dumps(other.get_json()), other.get_json()
    asked = upload(ingest_client, "pets.txt", b"Pets must be registered.\n", replace="true")
    assert asked.status_code == 200 and asked.get_json()["replaced"] == ["pets"], asked.get_json()
