"""An amendment of named sections: the amended chunks are marked and demoted, the [SOURCE n]
block says what amended them, a question about the rule brings the amendment's text, whichever
of the two a load lists first; an unknown amended id is refused; deleting the amendment makes the
section current again."""

from __future__ import annotations

import io

import pytest
from click.testing import CliRunner

from tests.helpers import make_settings
from worker.ingest.amendments import parse_amends
from worker.sections import amends, section_key
from worker.serve.app import create_app
from worker.cli import main
from worker.store.database import Database
from worker.errors import IngestError
from worker.ingest.ingestor import Ingestor
from worker.store.knowledge_base import delete_document
from worker.models import Amendment, DocumentFields
from worker.ingest.readers import parse_markdown
from worker.runtime import Runtime

DECLARATION = """# Declaration of Covenants

## ARTICLE VII Use Restrictions

### Section 4.

No animals, livestock or poultry of any kind shall be raised, bred or kept on any lot, except that
dogs, cats or other household pets may be kept provided they are not kept for commercial purposes.

### Section 5.

No trailer, boat or recreational vehicle shall be parked in front of the building line of any lot.

### Section 14.

Each owner shall landscape the front yard within nine months of closing.
"""

AMENDMENT = """# Second Amendment to the Declaration

Article VII, Section 4 of the Declaration is hereby deleted in its entirety and replaced with the
following: Up to four hens, and no roosters, may be kept in a backyard coop on any lot; no other
livestock or poultry shall be raised, bred or kept, and household pets may not be kept for
commercial purposes.
"""


def test_named_sections_match_whatever_their_numbering():
    assert section_key("Article VII, Section 4") == (("article", "7"), ("section", "4"))
    assert amends("Article 7 Section 4", "ARTICLE VII Use Restrictions > Section 4.")
    assert not amends("Article VII Section 4", "ARTICLE VII Use Restrictions > Section 14.")
    assert not amends("Article VII Section 4", "ARTICLE V Architectural Control > Section 4")
    assert amends("Article III Section 3.2", "ARTICLE III Assessments > 3.2 Annual dues")
    assert amends("Article VII", "ARTICLE VII Use Restrictions > Section 5.")  # a whole article
    assert parse_amends("ccrs:Article VII Section 4;Article VII Section 5") == Amendment(
        "ccrs", ("Article VII Section 4", "Article VII Section 5"))
    for bad in ("ccrs", "ccrs:", ":Section 4", "ccrs:the pets rule"):
        with pytest.raises(IngestError, match="--amends"):
            parse_amends(bad)


def write(ingestor: Ingestor, text: str, document_id: str, amended: tuple[Amendment, ...] = ()):
    return ingestor.write([ingestor.prepare_text(parse_markdown(text),
                                                 DocumentFields(document_id=document_id, document_type="ccr",
                                                                amends=amended))])


def marked(db: Database) -> dict[str, str | None]:
    with db.connect() as conn:
        rows = conn.execute("select section_path, metadata ->> 'amended_by' from knowledge_chunks "
                            "where document_id = 'ccrs' order by chunk_index").fetchall()
    return {path.rsplit(" > ", 1)[-1]: by for path, by in rows}


@pytest.mark.parametrize("amendment_first", [False, True])
def test_an_amended_section_is_marked_demoted_and_brings_its_amendment(make_database, embedder, tmp_path,
                                                                       amendment_first):
    url = make_database("amend")
    db = Database(url)
    db.migrate(embedder.dim)
    ingestor = Ingestor(db, embedder)
    pets = (Amendment("ccrs", ("Article VII Section 4",)),)
    if amendment_first:  # in one load (a folder's manifest), listed before what it amends
        report = ingestor.write([
            ingestor.prepare_text(parse_markdown(AMENDMENT),
                                  DocumentFields(document_id="second-amendment", document_type="ccr", amends=pets)),
            ingestor.prepare_text(parse_markdown(DECLARATION),
                                  DocumentFields(document_id="ccrs", document_type="ccr"))])
        assert report.amended_chunks == 1 and not report.notes
        write(ingestor, DECLARATION, "ccrs")  # a re-ingest of the declaration keeps the mark
    else:
        write(ingestor, DECLARATION, "ccrs")
        report = write(ingestor, AMENDMENT, "second-amendment", pets)
        assert report.amended_chunks == 1 and not report.notes
    assert marked(db) == {"Section 4.": "second-amendment", "Section 5.": None, "Section 14.": None}

    client = create_app(runtime=Runtime(make_settings(tmp_path, url), db, embedder)).test_client()
    answer = client.post("/webhook/arc-retrieval", json={"query": "Can I keep chickens on my lot?"}).get_json()
    order = [c["document_id"] for c in answer["chunks"]]
    old = next(c for c in answer["chunks"] if c["document_id"] == "ccrs" and "poultry" in c["content"])
    assert old["amended_by"] == "second-amendment"
    assert order.index("second-amendment") < answer["chunks"].index(old), order
    assert "Up to four hens" in answer["context"]
    assert "amended by Second Amendment to the Declaration [second-amendment]" in answer["context"]

    delete_document(db, "second-amendment")
    assert set(marked(db).values()) == {None}
    db.close()


def test_the_cli_takes_amends_and_says_when_a_section_matches_nothing(make_database, tmp_path, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", make_database("amendcli"))
    monkeypatch.setenv("ARC_DATA_DIR", str(tmp_path))
    (tmp_path / "ccrs.md").write_text(DECLARATION)
    (tmp_path / "amendment.md").write_text(AMENDMENT)
    runner = CliRunner()
    assert runner.invoke(main, ["ingest", str(tmp_path / "ccrs.md"), "--document-type", "ccr"]).exit_code == 0
    result = runner.invoke(main, ["ingest", str(tmp_path / "amendment.md"), "--document-type", "ccr",
                                  "--amends", "ccrs:Article VII Section 4;Article IX Section 2"])
    assert result.exit_code == 0, result.output
    assert "marked 1 chunk(s) of amended sections" in result.output
    assert "no section of it matches" in result.output and "Article IX Section 2" in result.output
    listed = runner.invoke(main, ["documents", "list"]).output.splitlines()
    assert next(line for line in listed if line.startswith("ccrs\t")).split("\t")[4] == "amendment"
    bad = runner.invoke(main, ["ingest", str(tmp_path / "amendment.md"), "--document-type", "ccr", "--amends", "ccrs"])
    assert bad.exit_code != 0 and "--amends" in bad.output and "Traceback" not in bad.output


def test_amends_naming_an_unknown_document_is_a_clear_error_and_nothing_is_stored(make_database, embedder,
                                                                                   tmp_path, monkeypatch):
    url = make_database("amendunknown")
    monkeypatch.setenv("DATABASE_URL", url)
    monkeypatch.setenv("ARC_DATA_DIR", str(tmp_path))
    (tmp_path / "ccrs.md").write_text(DECLARATION)
    (tmp_path / "amendment.md").write_text(AMENDMENT)
    runner = CliRunner()
    assert runner.invoke(main, ["ingest", str(tmp_path / "ccrs.md"), "--document-type", "ccr"]).exit_code == 0
    result = runner.invoke(main, ["ingest", str(tmp_path / "amendment.md"), "--document-type", "ccr",
                                  "--amends", "ccr:Article VII Section 4"])  # a typo of "ccrs"
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert result.output.strip().splitlines()[-1] == (
        "Error: amends: no document 'ccr' in the knowledge base (ingest it first, or both in one folder's manifest)")
    listed = [line.split("\t")[0] for line in runner.invoke(main, ["documents", "list"]).output.splitlines()[1:]]
    assert "amendment" not in listed and "ccrs" in listed
    db = Database(url)
    client = create_app(runtime=Runtime(make_settings(tmp_path, url), db, embedder)).test_client()
    refused = client.post("/webhook/arc-ingest", json={
        "text": AMENDMENT, "document_type": "ccr", "document_id": "second-amendment",
        "amends": [{"document_id": "ccr", "sections": ["Article VII Section 4"]}]})
    assert refused.status_code == 422 and refused.get_json()["field"] == "amends", refused.get_json()
    assert "no document 'ccr'" in refused.get_json()["message"]
    assert set(marked(db).values()) == {None}
    with db.connect() as conn:
        assert conn.execute("select count(*) from knowledge_chunks where document_id <> 'ccrs'").fetchone() == (0,)
    db.close()


def test_the_ingest_webhook_takes_amends(make_database, embedder, tmp_path):
    url = make_database("amendhook")
    db = Database(url)
    db.migrate(embedder.dim)
    client = create_app(runtime=Runtime(make_settings(tmp_path, url), db, embedder)).test_client()
    post = lambda body: client.post("/webhook/arc-ingest", json={"document_type": "ccr", **body})  # noqa: E731
    assert post({"text": DECLARATION, "document_id": "ccrs"}).status_code == 200
    bad = post({"text": AMENDMENT, "document_id": "second-amendment",
                "amends": [{"document_id": "ccrs", "sections": ["the pets rule"]}]})
    assert bad.status_code == 422 and bad.get_json()["field"] == "amends.0.sections", bad.get_json()
    done = post({"text": AMENDMENT, "document_id": "second-amendment",
                 "amends": [{"document_id": "ccrs", "sections": ["Article VII Section 4", "Article IX"]}]})
    body = done.get_json()
    assert done.status_code == 200 and body["amended_chunks"] == 1, body
    assert any("Article IX" in note for note in body["notes"])
    assert marked(db)["Section 4."] == "second-amendment"
    # an amendment usually comes as a file (a scanned PDF): a form upload takes amends as JSON text
    upload = lambda amends: client.post(  # noqa: E731
        "/webhook/arc-ingest", content_type="multipart/form-data",
        data={"document_type": "ccr", "document_id": "third-amendment", "amends": amends,
              "allow_duplicate": "true",  # the second amendment's text again, under an id of its own
              "file": (io.BytesIO(AMENDMENT.replace("second", "third").encode()), "third.md")})
    for bad, field in (("ccrs:Article VII Section 4", "amends"), ('{"document_id": "ccrs"}', "amends"),
                       ('[{"document_id": "ccrs", "sections": ["the pets rule"]}]', "amends.0.sections")):
        refused = upload(bad)
        assert refused.status_code == 422 and refused.get_json()["field"] == field, (bad, refused.get_json())
    uploaded = upload('[{"document_id": "ccrs", "sections": ["Article VII Section 4"]}]')
    assert uploaded.status_code == 200 and uploaded.get_json()["amended_chunks"] == 1, uploaded.get_json()
    assert marked(db)["Section 4."] == "third-amendment"
    db.close()


def test_a_whole_document_supersedes_another_whichever_comes_first(make_database, embedder):
    db = Database(make_database("supersede"))
    db.migrate(embedder.dim)
    ingestor = Ingestor(db, embedder)

    def put(document_id: str, **links: str):
        return ingestor.write([ingestor.prepare_text(parse_markdown(DECLARATION),
                                                     DocumentFields(document_id=document_id, document_type="ccr",
                                                                    **links))])

    def superseded_by(document_id: str) -> set[str | None]:
        with db.connect() as conn:
            return {r[0] for r in conn.execute("select superseded_by from knowledge_chunks where document_id = %s",
                                               (document_id,)).fetchall()}

    # A mistyped or not-yet-stored id is an error naming the flag, and nothing is stored.
    with pytest.raises(IngestError, match="supersedes: no document 'ccrs-1982'.*--superseded-by ccrs-2024"):
        put("ccrs-2024", supersedes="ccrs-1982")
    assert superseded_by("ccrs-2024") == set()
    with pytest.raises(IngestError, match="superseded_by: no document 'ccrs-2024'"):
        put("ccrs-1982", superseded_by="ccrs-2024")
    assert superseded_by("ccrs-1982") == set()

    with pytest.raises(IngestError, match="superseded_by: a document cannot supersede itself"):
        put("ccrs-1982", superseded_by="ccrs-1982")

    # Newer first, then the older one names its successor.
    put("ccrs-2024")
    put("ccrs-1982", superseded_by="ccrs-2024")
    assert superseded_by("ccrs-1982") == {"ccrs-2024"}
    put("ccrs-1982")  # re-ingested: still superseded
    assert superseded_by("ccrs-1982") == {"ccrs-2024"}
    delete_document(db, "ccrs-2024")
    assert superseded_by("ccrs-1982") == {None}

    # Older first, then the newer one names what it replaces.
    put("ccrs-2024", supersedes="ccrs-1982")
    assert superseded_by("ccrs-1982") == {"ccrs-2024"}
    delete_document(db, "ccrs-1982")
    put("ccrs-1982")  # the newer one still declares it: marked again on its return
    assert superseded_by("ccrs-1982") == {"ccrs-2024"}
    delete_document(db, "ccrs-2024")
    put("ccrs-1982")  # the declaration left with the deleted document
    assert superseded_by("ccrs-1982") == {None}

    # In one load (a manifest) the order does not matter.
    delete_document(db, "ccrs-1982")
    ingestor.write([ingestor.prepare_text(parse_markdown(DECLARATION),
                                          DocumentFields(document_id=i, document_type="ccr", supersedes=s))
                    for i, s in (("ccrs-2024", "ccrs-1982"), ("ccrs-1982", None))])
    assert superseded_by("ccrs-1982") == {"ccrs-2024"}
    db.close()
