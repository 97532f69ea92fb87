"""POST /webhook/arc-ingest, auth and rate limiting, through the real app and database."""

from __future__ import annotations

import io

import docx
import pytest

from tests.helpers import make_settings
from tests.helpers import make_pdf
from tests.helpers import rendered_break, word_document
from tests.helpers import SCANNED_LINES, needs_tesseract, scanned_page
from worker.serve.app import create_app
from worker.store.database import Database
from worker.runtime import Runtime
from worker.serve.security import RateLimiter, check_exposure, token_matches


@pytest.fixture(scope="module")
def secured(make_database, embedder, tmp_path_factory):
    url = make_database("ing")
    db = Database(url)
    db.migrate(embedder.dim)
    settings = make_settings(tmp_path_factory.mktemp("d"), url, api_token="retrieve-secret-0123456789abcdef",
                             ingest_token="ingest-secret-0123456789abcdef", rate_limit=1000)
    app = create_app(runtime=Runtime(settings, db, embedder))
    yield app.test_client(), db
    db.close()


NOTICE = "# Pool Rules\n\n## Hours\n\nThe community pool opens at 7 am and closes at 9 pm from May to September.\n"


def test_ingest_then_retrieve(secured):
    client, db = secured
    r = client.post("/webhook/arc-ingest", headers={"X-ARC-Token": "ingest-secret-0123456789abcdef"},
                    json={"text": NOTICE, "document_type": "other", "document_id": "pool-rules", "is_binding": False})
    assert r.status_code == 200, r.get_json()
    assert r.get_json()["chunks"] == 1 and r.get_json()["document_name"] == "Pool Rules"
    answer = client.post("/webhook/arc-retrieval", headers={"X-ARC-Token": "retrieve-secret-0123456789abcdef"},
                         json={"query": "When does the pool close?"}).get_json()
    assert answer["chunks"][0]["document_id"] == "pool-rules"
    # re-ingest replaces atomically; a file upload works the same way (asked to, as it replaces a text)
    r = client.post("/webhook/arc-ingest", headers={"X-ARC-Token": "ingest-secret-0123456789abcdef"},
                    data={"document_type": "other", "document_id": "pool-rules", "is_binding": "false",
                          "replace": "true",
                          "file": (io.BytesIO(NOTICE.replace("9 pm", "10 pm").encode()), "pool.md")},
                    content_type="multipart/form-data")
    assert r.status_code == 200 and r.get_json()["replaced_chunks"] == 1
    with db.connect() as conn:
        rows = conn.execute("select content from knowledge_chunks where document_id = 'pool-rules'").fetchall()
    assert len(rows) == 1 and "10 pm" in rows[0][0]


def test_an_html_page_ingests_with_its_headings_and_tables(secured):
    client, db = secured
    page = ("<html><body><nav>Home</nav><h1>Clubhouse Rules</h1><h2>Rental fees</h2><table><tr><th>Room</th>"
            "<th>Fee</th></tr><tr><td>Great hall</td><td>$150</td></tr></table><script>x=1</script></body></html>")
    r = client.post("/webhook/arc-ingest", headers={"X-ARC-Token": "ingest-secret-0123456789abcdef"},
                    data={"document_type": "other", "document_id": "clubhouse",
                          "file": (io.BytesIO(page.encode()), "clubhouse.html")},
                    content_type="multipart/form-data")
    assert r.status_code == 200, r.get_json()
    assert r.get_json()["document_name"] == "Clubhouse Rules"
    with db.connect() as conn:
        rows = conn.execute("select section_path, content from knowledge_chunks"
                            " where document_id = 'clubhouse'").fetchall()
    assert rows == [("Rental fees", "| Room | Fee |\n| --- | --- |\n| Great hall | $150 |")]
    empty = client.post("/webhook/arc-ingest", headers={"X-ARC-Token": "ingest-secret-0123456789abcdef"},
                        json={"text": "<script>x=1</script>", "format": "html", "document_type": "other",
                              "document_id": "nothing"})
    assert empty.status_code == 422 and "no text" in empty.get_json()["message"], empty.get_json()


@pytest.mark.parametrize("body,field", [
    ({"text": NOTICE, "document_type": "memo"}, "document_type"),
    ({"text": "", "document_type": "other"}, "text"),
    ({"text": NOTICE, "document_type": "other", "document_id": "a b'; drop table x;--"}, "document_id"),
    ({"document_type": "other"}, "text"),
])
def test_ingest_validation(secured, body, field):
    client, _ = secured
    r = client.post("/webhook/arc-ingest", headers={"X-ARC-Token": "ingest-secret-0123456789abcdef"}, json=body)
    assert r.status_code == 422 and r.get_json()["field"] == field


def test_a_form_upload_without_its_file_or_in_another_encoding_names_what_to_send(secured):
    client, _ = secured
    headers = {"X-ARC-Token": "ingest-secret-0123456789abcdef"}
    no_file = client.post("/webhook/arc-ingest", headers=headers, data={"document_type": "other"},
                          content_type="multipart/form-data")
    assert no_file.status_code == 422 and no_file.get_json()["field"] == "file", no_file.get_json()
    misnamed = client.post("/webhook/arc-ingest", headers=headers, content_type="multipart/form-data",
                           data={"document_type": "other", "upload": (io.BytesIO(NOTICE.encode()), "pool.md")})
    assert misnamed.status_code == 422 and misnamed.get_json()["field"] == "file"
    latin1 = client.post("/webhook/arc-ingest", headers=headers, content_type="multipart/form-data",
                         data={"document_type": "other", "file": (io.BytesIO("Café".encode("latin-1")), "c.md")})
    assert latin1.status_code == 422 and "UTF-8" in latin1.get_json()["message"]
    plain = client.post("/webhook/arc-ingest", headers=headers, data=NOTICE, content_type="text/markdown")
    assert plain.status_code == 415 and "form upload" in plain.get_json()["message"], plain.get_json()


def upload(client, filename: str, content: bytes, **fields):
    return client.post("/webhook/arc-ingest", headers={"X-ARC-Token": "ingest-secret-0123456789abcdef"},
                       content_type="multipart/form-data",
                       data={"document_type": "other", **fields, "file": (io.BytesIO(content), filename)})


def stored(db, document_id: str) -> list[tuple]:
    with db.connect() as conn:
        return conn.execute("select section_path, page_number, content, metadata->>'source_file'"
                            " from knowledge_chunks where document_id = %s order by chunk_index",
                            (document_id,)).fetchall()


def test_pdf_and_word_files_upload_as_the_cli_reads_them(secured, tmp_path):
    client, db = secured
    pdf = make_pdf([["ARTICLE 3 PETS", "3.1 Dogs must be leashed in common areas."],
                    ["ARTICLE 4 PARKING", "4.1 Boats may not be parked on the street overnight."]])
    r = upload(client, "Pet and Parking Rules.pdf", pdf)
    assert r.status_code == 200, r.get_json()
    # the id comes from the file name, as on the command line: an edited file replaces its old self
    assert r.get_json()["document_id"] == "pet-and-parking-rules"
    rows = stored(db, "pet-and-parking-rules")
    assert {row[3] for row in rows} == {"Pet and Parking Rules.pdf"}
    assert any(page == 2 and "Boats" in content for _, page, content, _ in rows), rows
    path = tmp_path / "guidelines.docx"
    word_document(path)
    r = upload(client, "guidelines.docx", path.read_bytes(), document_id="pinecrest-dg", is_binding="true")
    assert r.status_code == 200, r.get_json()
    assert any(content.startswith("| Zone | Maximum fence height |") for _, _, content, _ in stored(db, "pinecrest-dg"))
    # a form sends every field, empty when not filled in (as n8n's ingest workflow does): empty is unset
    r = upload(client, "Pet and Parking Rules.pdf", pdf, document_id="", name="", is_binding="", supersedes="",
               superseded_by="", format="")
    assert r.status_code == 200 and r.get_json()["replaced_chunks"] > 0, r.get_json()
    broken = upload(client, "broken.docx", b"PK\x03\x04 this is not really a zip")
    assert broken.status_code == 422 and broken.get_json()["field"] == "file", broken.get_json()
    assert "Word" in broken.get_json()["message"]
    assert stored(db, "broken") == []


def test_a_word_files_rules_are_cited_on_the_page_they_are_printed_on(secured, tmp_path):
    client, db = secured
    document = docx.Document()
    document.add_heading("Pool Rules", 0)
    document.add_paragraph("The pool opens at 9 am.")
    document.add_page_break()
    glass = document.add_paragraph("Glass containers are not allowed at the pool.")
    rendered_break(glass)  # the hard break's own page, recorded again: still page 2
    duty = document.add_paragraph(" until 6 pm, and swimmers follow their whistle.")
    rendered_break(duty, before_text="Lifeguards are on duty from noon")
    document.add_paragraph("Children under 12 must be accompanied by an adult.")
    path = tmp_path / "Pool Rules Word.docx"
    document.save(path)
    r = upload(client, path.name, path.read_bytes())
    assert r.status_code == 200, r.get_json()
    rows = stored(db, r.get_json()["document_id"])
    page = {phrase: [p for _, p, content, _ in rows if phrase in content] for phrase in
            ("9 am", "Glass", "Lifeguards", "Children")}
    # a paragraph Word carried over to the next page is cited where it starts, as in a PDF
    assert page == {"9 am": [1], "Glass": [2], "Lifeguards": [2], "Children": [3]}, rows
    answer = client.post("/webhook/arc-retrieval", headers={"X-ARC-Token": "retrieve-secret-0123456789abcdef"},
                         json={"query": "Are glass containers allowed at the pool?"}).get_json()
    cited = [c for c in answer["chunks"] if "Glass" in c["content"]]
    assert cited and cited[0]["page_number"] == 2, answer["chunks"]


@needs_tesseract
def test_a_scanned_pdf_upload_is_read_by_ocr(secured):
    client, db = secured
    r = upload(client, "animals.pdf", scanned_page(SCANNED_LINES), document_type="ccr")
    assert r.status_code == 200, r.get_json()
    assert any("poultry" in content for _, _, content, _ in stored(db, "animals"))


def test_uploads_have_their_own_size_limit(make_database, embedder, tmp_path):
    url = make_database("ing-limits")
    db = Database(url)
    db.migrate(embedder.dim)
    settings = make_settings(tmp_path, url, max_body_bytes=4096, max_upload_bytes=100_000)
    client = create_app(runtime=Runtime(settings, db, embedder)).test_client()
    try:
        notice = NOTICE + "\n".join(f"Rule {i}: guests must sign in at the front desk." for i in range(200))
        assert 4096 < len(notice) < 100_000
        r = client.post("/webhook/arc-ingest", content_type="multipart/form-data",
                        data={"document_type": "other", "file": (io.BytesIO(notice.encode()), "pool.md")})
        assert r.status_code == 200, r.get_json()
        big = client.post("/webhook/arc-ingest", content_type="multipart/form-data",
                          data={"document_type": "other", "file": (io.BytesIO(b"x" * 200_000), "big.md")})
        assert big.status_code == 413 and big.get_json()["field"] == "body"
        question = client.post("/webhook/arc-retrieval", json={"query": "pool " * 1000})
        assert question.status_code == 413  # the question's limit stays the small one
    finally:
        db.close()


def test_tokens_are_required_and_separate(secured):
    client, _ = secured
    assert client.post("/webhook/arc-retrieval", json={"query": "pool"}).status_code == 401
    wrong = client.post("/webhook/arc-retrieval", headers={"X-ARC-Token": "nope"}, json={"query": "pool"})
    assert wrong.status_code == 401 and wrong.get_json()["message"] == "unauthorized"
    # the retrieval token does not open ingestion
    assert client.post("/webhook/arc-ingest", headers={"X-ARC-Token": "retrieve-secret-0123456789abcdef"},
                       json={"text": NOTICE, "document_type": "other"}).status_code == 401
    assert client.get("/healthz").status_code == 200


def test_rate_limit_returns_429_with_retry_after(sample_runtime):
    settings = sample_runtime.settings.replace(**{"rate_limit": 1.0})
    client = create_app(runtime=Runtime(settings, sample_runtime.db, sample_runtime.embedder)).test_client()
    codes = [client.post("/webhook/arc-retrieval", json={"query": "fence"}) for _ in range(4)]
    assert [c.status_code for c in codes[:2]] == [200, 200]
    limited = codes[-1]
    assert limited.status_code == 429 and int(limited.headers["Retry-After"]) >= 1


def test_security_helpers():
    assert token_matches(None, None) and token_matches("a", "a") and not token_matches("a", "b")
    assert not token_matches("a", None)
    limiter = RateLimiter(rate=2)
    assert [limiter.acquire("c") == 0 for _ in range(5)] == [True, True, True, True, False]
    assert limiter.acquire("other") == 0
    check_exposure(["127.0.0.1", "::1", "localhost"], api_token=None, auth_disabled=False)
    check_exposure(["0.0.0.0"], api_token="t", auth_disabled=False)
    with pytest.raises(SystemExit, match="ARC_API_TOKEN"):
        check_exposure(["0.0.0.0"], api_token=None, auth_disabled=False)


def test_the_cli_and_the_webhook_agree_document_type_is_required_and_binding_the_default(
        secured, tmp_path, monkeypatch):
    """The type steers and filters answers: neither path guesses it (a CC&R stored as `other`
    would silently lose every question that names the CC&Rs). Binding is the default on both."""
    from click.testing import CliRunner

    from worker.cli import main

    client, db = secured
    refused = client.post("/webhook/arc-ingest", headers={"X-ARC-Token": "ingest-secret-0123456789abcdef"},
                          json={"text": NOTICE, "document_id": "typeless"})
    assert refused.status_code == 422 and refused.get_json()["field"] == "document_type"
    monkeypatch.setenv("DATABASE_URL", db.url)
    monkeypatch.setenv("ARC_DATA_DIR", str(tmp_path))
    (tmp_path / "typeless.md").write_text(NOTICE)
    runner = CliRunner()
    cli = runner.invoke(main, ["ingest", str(tmp_path / "typeless.md")])
    assert cli.exit_code == 2 and "--document-type" in cli.output and "Traceback" not in cli.output, cli.output
    assert "design_guidelines" in cli.output  # it says what to give
    with db.connect() as conn:
        assert conn.execute("select count(*) from knowledge_chunks where document_id = 'typeless'").fetchone()[0] == 0

    # the same text under two ids, on purpose: each path's own default is what is compared
    assert runner.invoke(main, ["ingest", str(tmp_path / "typeless.md"), "--document-type", "other",
                                "--document-id", "cli-default", "--allow-duplicate"]).exit_code == 0
    assert client.post("/webhook/arc-ingest", headers={"X-ARC-Token": "ingest-secret-0123456789abcdef"},
                       json={"text": NOTICE, "document_type": "other", "document_id": "webhook-default",
                             "allow_duplicate": True}).status_code == 200
    with db.connect() as conn:
        binding = dict(conn.execute("select document_id, bool_and(is_binding) from knowledge_chunks where "
                                    "document_id in ('cli-default', 'webhook-default') group by 1").fetchall())
    assert binding == {"cli-default": True, "webhook-default": True}
    for document_id in ("cli-default", "webhook-default"):
        client.delete(f"/webhook/arc-documents/{document_id}", headers={"X-ARC-Token": "ingest-secret-0123456789abcdef"})


def test_the_same_text_under_another_id_is_refused_naming_it_unless_asked(secured):
    client, _ = secured
    headers = {"X-ARC-Token": "ingest-secret-0123456789abcdef"}
    text = "# Boat Rules\n\nBoats and trailers may be parked in a driveway for 48 hours at most.\n"
    first = client.post("/webhook/arc-ingest", headers=headers,
                        json={"text": text, "document_type": "other", "document_id": "boats"})
    assert first.status_code == 200, first.get_json()
    again = client.post("/webhook/arc-ingest", headers=headers,
                        json={"text": text, "document_type": "other", "document_id": "boats-copy"})
    assert again.status_code == 422, again.get_json()
    assert again.get_json()["field"] == "allow_duplicate" and "'boats'" in again.get_json()["message"]
    assert client.post("/webhook/arc-ingest", headers=headers,  # the same id updates it, as before
                       json={"text": text, "document_type": "other", "document_id": "boats"}).status_code == 200
    upload = client.post("/webhook/arc-ingest", headers=headers, content_type="multipart/form-data",
                         data={"file": (io.BytesIO(text.encode()), "boats-2.md"), "document_type": "other"})
    assert upload.status_code == 422 and "'boats'" in upload.get_json()["message"], upload.get_json()
    asked = client.post("/webhook/arc-ingest", headers=headers,
                        json={"text": text, "document_type": "other", "document_id": "boats-copy",
                              "allow_duplicate": True})
    assert asked.status_code == 200, asked.get_json()
