"""Hostile input and hostile neighbours: every case a security review found that made
the worker stop answering or answer 500, through the real app and a real database. Each
malformed body is a 4xx naming the problem and stores nothing; each adversarial document gets a
4xx or finishes in bounded time; failed authentication never locks out the right token."""

from __future__ import annotations

import io
import logging
import subprocess
import sys
import threading
import time
import zipfile

import pytest

from tests.helpers import make_settings
from tests.helpers import SCANNED_LINES, needs_tesseract, scanned_page
from worker.config import ConfigError, Settings
from worker.ingest.ocr import Ocr
from worker.runtime import Runtime
from worker.serve.app import create_app
from worker.store.database import Database
from tests.helpers import docx_of

RETRIEVE_TOKEN = "retrieve-" + "r" * 24
INGEST_TOKEN = "ingest-" + "i" * 24
OPS_TOKEN = "ops-" + "o" * 24
ASK = {"X-ARC-Token": RETRIEVE_TOKEN}
ADMIN = {"X-ARC-Token": INGEST_TOKEN}


class CountingOcr(Ocr):
    """The real OCR, counting the documents it was asked to read."""

    calls: list[int] = []

    def read_pages(self, path, numbers, budget=None):
        CountingOcr.calls.append(len(numbers))
        return super().read_pages(path, numbers, budget)


@pytest.fixture(scope="module")
def hostile(make_database, embedder, tmp_path_factory):
    url = make_database("hostile")
    db = Database(url)
    db.migrate(embedder.dim)
    settings = make_settings(tmp_path_factory.mktemp("d"), url, api_token=RETRIEVE_TOKEN, ingest_token=INGEST_TOKEN,
                             max_pages=5, max_ocr_pages=1, max_nesting=100, max_xml_elements=50_000,
                             auth_failures_per_minute=10, ops_token=OPS_TOKEN, max_concurrent=1, max_queue=0,
                             queue_timeout=0.5)
    app = create_app(runtime=Runtime(settings, db, embedder))
    app.extensions["arc"].knowledge.ingestor.ocr = CountingOcr()
    yield app, db
    db.close()


def chunk_count(db) -> int:
    with db.connect() as conn:
        return conn.execute("select count(*) from knowledge_chunks").fetchone()[0]


def upload(client, filename: str, content: bytes, **fields):
    return client.post("/webhook/arc-ingest", headers=ADMIN, content_type="multipart/form-data",
                       data={"document_type": "other", **fields, "file": (io.BytesIO(content), filename)})


def refused_naming(response, status: int, *words: str) -> None:
    body = response.get_json()
    assert response.status_code == status, body
    assert all(w.lower() in body["message"].lower() for w in words), body


# --- patterns that backtracked: run in a child so that a regression is a timeout, not a hang ----

@pytest.mark.parametrize("text, suffix", [
    ("# a" + " " * 20_000 + "b", ".md"),            # the heading pattern: 10 s at 2,000 spaces before
    ("x" + " " * 200_000 + "y", ".md"),             # the <br> pattern: quadratic in a line's spaces
    ("## T" + " <br" * 50_000, ".md"),              # many unclosed breaks
    ("Section 1 " + "Aa " * 100_000 + "\n" + " " * 100_000 + "x", ".txt"),  # run-in sections, text headings
    ("| a " * 50_000 + "\f" + "page 1 " * 50_000, ".txt"),  # table rows, page furniture
], ids=["heading-spaces", "br-spaces", "br-open", "text-sections", "text-tables"])
def test_lines_that_backtracked_parse_in_linear_time(text, suffix, tmp_path):
    path = tmp_path / f"attack{suffix}"
    path.write_text(text)
    code = f"from worker.ingest.readers import read_path; from pathlib import Path; read_path(Path({str(path)!r}))"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=30)


def test_a_heading_keeps_its_name_without_closing_hashes():
    from worker.ingest.readers import parse_markdown

    parsed = parse_markdown("# Title\n## Fences ##\ntext\n##   Gates   \nmore\n## ARTICLE V<br>  Control\nx")
    assert [b.section for b in parsed.blocks] == [("Fences",), ("Gates",), ("ARTICLE V Control",)]


# --- malformed bodies ------------------------------------------------------------------------

@pytest.mark.parametrize("route", ["/webhook/arc-retrieval", "/webhook/arc-ingest"])
def test_json_nested_50000_deep_is_a_400(hostile, route):
    app, db = hostile
    before = chunk_count(db)
    body = '{"query": ' + "[" * 50_000 + "]" * 50_000 + "}"
    r = app.test_client().post(route, headers={**ASK, **ADMIN} if "ingest" in route else ASK, data=body,
                               content_type="application/json")
    refused_naming(r, 400, "nests", "deep")
    assert r.get_json()["field"] == "body"
    assert chunk_count(db) == before


def test_3000_nested_divs_are_a_422_by_json_and_by_upload(hostile):
    app, db = hostile
    before = chunk_count(db)
    page = "<div>" * 3000 + "deep text" + "</div>" * 3000
    client = app.test_client()
    r = client.post("/webhook/arc-ingest", headers=ADMIN, json={"text": page, "format": "html",
                                                                 "document_type": "other"})
    refused_naming(r, 422, "nested", "ARC_MAX_NESTING")
    refused_naming(upload(client, "deep.html", page.encode()), 422, "nested")
    assert chunk_count(db) == before


def test_nul_bytes_in_an_uploaded_file_or_its_name_are_a_422(hostile):
    app, db = hostile
    before = chunk_count(db)
    client = app.test_client()
    refused_naming(upload(client, "rules.md", b"# Rules\n\nNo \x00 here.\n"), 422, "NUL")
    r = upload(client, "ru\x00les.md", b"# Rules\n\nPets on leashes.\n")
    refused_naming(r, 422, "file name")
    assert r.get_json()["field"] == "file"
    assert chunk_count(db) == before


def test_javascript_links_are_not_stored(hostile):
    app, db = hostile
    page = ('<h1>Pool</h1><p>Read <a href=" JavaScript:alert(document.cookie)">the rules</a> and '
            '<a href="https://example.org/pool">the hours</a>. <img src="data:image/png;base64,AAAA" alt="map"></p>')
    r = app.test_client().post("/webhook/arc-ingest", headers=ADMIN,
                               json={"text": page, "format": "html", "document_type": "other", "document_id": "js"})
    assert r.status_code == 200, r.get_json()
    with db.connect() as conn:
        text = " ".join(row[0] for row in conn.execute("select content from knowledge_chunks where document_id='js'"))
    assert "the rules" in text and "https://example.org/pool" in text and "map" in text
    assert "javascript" not in text.lower() and "data:" not in text


# --- Word files ------------------------------------------------------------------------------

_plain = io.BytesIO()
with zipfile.ZipFile(_plain, "w") as _archive:
    _archive.writestr("notes.txt", "not a Word file")
ZIP_WITHOUT_DOCUMENT = _plain.getvalue()
PARAGRAPH = "<w:p><w:r><w:t>{}</w:t></w:r></w:p>"
LAUGHS = ('<!DOCTYPE lolz [<!ENTITY lol "lol">' + "".join(
    f'<!ENTITY lol{i} "{("&lol" + (str(i - 1) if i > 1 else "") + ";") * 10}">' for i in range(1, 10)) + "]>")


@pytest.mark.parametrize("name, content, words", [
    ("nested", docx_of("<w:tbl><w:tr><w:tc>" * 5000 + PARAGRAPH.format("x") + "</w:tc></w:tr></w:tbl>" * 5000),
     ("deep", "ARC_MAX_NESTING")),
    ("laughs", docx_of(PARAGRAPH.format("&lol9;"), prolog=LAUGHS), ("DTD",)),
    ("broken-xml", docx_of("", document="<w:document><w:body><w:p>"), ("not a readable Word",)),
    ("not-a-zip", b"PK\x03\x04" + b"\x00" * 200, ("not a readable Word",)),
    ("no-document", ZIP_WITHOUT_DOCUMENT, ("no word/document.xml",)),
    ("many-elements", docx_of(PARAGRAPH.format("a") * 20_000), ("ARC_MAX_XML_ELEMENTS",)),
], ids=lambda v: v if isinstance(v, str) else "")
def test_hostile_word_files_are_a_422_and_store_nothing(hostile, name, content, words):
    app, db = hostile
    before = chunk_count(db)
    refused_naming(upload(app.test_client(), f"{name}.docx", content), 422, *words)
    assert chunk_count(db) == before


def test_word_conversion_runs_in_a_child_bounded_in_time(tmp_path):
    """What passes the structural checks still cannot hold the process: the converter's time
    and memory are the child's limits (here 1 s for a file mammoth needs far longer on)."""
    from worker.ingest.bounds import ReadLimits
    from worker.ingest.readers import read_path

    path = tmp_path / "slow.docx"
    path.write_bytes(docx_of(PARAGRAPH.format("a") * 30_000))
    with pytest.raises(ValueError, match="ARC_CONVERT_TIMEOUT"):
        read_path(path, limits=ReadLimits(convert_seconds=1.0))


def outline_document(path, levels: int) -> None:
    """A Word file whose list nests ``levels`` deep: flat paragraphs in its XML (each names its
    level), ``levels`` nested <ol>s once converted."""
    import docx
    from docx.oxml import parse_xml
    from docx.oxml.ns import nsdecls

    document = docx.Document()
    numbering = document.part.numbering_part.element
    levels_xml = "".join(f'<w:lvl w:ilvl="{i}"><w:start w:val="1"/><w:numFmt w:val="decimal"/>'
                         f'<w:lvlText w:val="%{i + 1}."/></w:lvl>' for i in range(levels))
    numbering.insert(0, parse_xml(f'<w:abstractNum {nsdecls("w")} w:abstractNumId="90">{levels_xml}</w:abstractNum>'))
    numbering.append(parse_xml(f'<w:num {nsdecls("w")} w:numId="90"><w:abstractNumId w:val="90"/></w:num>'))
    for level in range(levels):
        numbered = document.add_paragraph(f"Rule at level {level}.")._p.get_or_add_pPr().get_or_add_numPr()
        numbered.get_or_add_numId().val = 90
        numbered.get_or_add_ilvl().val = level
    document.save(path)


def test_a_word_files_converted_nesting_is_held_to_the_configured_limit(tmp_path):
    """The Word file's XML passes a limit of 9 (its deepest part, the theme, is 9 deep), but its
    list converts to 10 nested elements: the configured limit applies to that as well, not 100."""
    from worker.ingest.bounds import ReadLimits
    from worker.ingest.readers import read_path

    path = tmp_path / "outline.docx"
    outline_document(path, 5)
    assert "Rule at level 4." in " ".join(b.text for b in read_path(path).blocks)
    with pytest.raises(ValueError, match="Word file's lists and tables nested over 9 .*ARC_MAX_NESTING"):
        read_path(path, limits=ReadLimits(max_nesting=9))


def converter_children() -> list:
    import psutil

    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            if "worker.ingest.convert_child" in child.cmdline():
                found.append(child)
        except psutil.ZombieProcess:
            found.append(child)  # killed but never waited for
        except psutil.NoSuchProcess:
            pass
    return found


class ClientGone(Exception):
    """Not a ValueError: what a cancel check may raise when the socket it asks has gone bad."""


def gone_badly() -> bool:
    raise ClientGone("the connection was reset")


@pytest.mark.parametrize("ending", ["signal", "cancel-check"])
def test_no_converter_child_outlives_a_read_that_ends_another_way(tmp_path, ending):
    """gunicorn aborts a worker past its timeout with SIGABRT, whose handler raises SystemExit;
    Ctrl-C on the command line raises KeyboardInterrupt; a cancel check may fail with an OSError.
    Whatever ends the read, the converter child is killed and reaped, not left running."""
    import signal

    from worker.ingest.bounds import Budget, ReadLimits
    from worker.ingest.readers import read_path

    path = tmp_path / "slow.docx"
    path.write_bytes(docx_of(PARAGRAPH.format("a") * 30_000))
    limits = ReadLimits(convert_seconds=60.0)
    previous = signal.signal(signal.SIGALRM, lambda *_: sys.exit(1))
    try:
        if ending == "signal":
            signal.setitimer(signal.ITIMER_REAL, 1.0)
            with pytest.raises(SystemExit):
                read_path(path, limits=limits)
        else:
            with pytest.raises(ClientGone):
                read_path(path, limits=limits, budget=Budget(gone=gone_badly))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert converter_children() == []


def test_html_conversion_runs_in_a_child_bounded_in_time():
    """BeautifulSoup and markdownify spend about 0.3 ms an element: a page of 5 million
    characters (what the JSON body allows) is converted in the same bounded child."""
    from worker.ingest.bounds import ReadLimits
    from worker.ingest.readers import parse_formatted

    with pytest.raises(ValueError, match="HTML page took over 1 s"):
        parse_formatted("<p>para</p>" * 100_000, "html", ReadLimits(convert_seconds=1.0))
    parsed = parse_formatted("<h1>Pool</h1><h2>Hours</h2><p>Open at 7 am.</p>", "html")
    assert [(b.section, b.text) for b in parsed.blocks] == [(("Hours",), "Open at 7 am.")]


def test_the_nesting_scan_runs_in_the_bounded_child_not_in_the_serving_process():
    """html_too_deep is pure Python (HTMLParser): on a page of 5 million characters it held the
    calling interpreter for seconds before the child even started. It runs in the child, under
    the child's deadline, once."""
    from worker.ingest.bounds import ReadLimits
    from worker.ingest.readers import parse_formatted

    started = time.monotonic()
    with pytest.raises(ValueError, match="HTML page took over 1 s"):
        parse_formatted("<p>para <b>x</b></p>" * 250_000, "html", ReadLimits(convert_seconds=1.0))
    assert time.monotonic() - started < 4


# --- PDF pages and OCR -----------------------------------------------------------------------

def test_too_many_pages_is_a_422_before_any_page_is_read(hostile):
    from tests.helpers import make_pdf

    app, _db = hostile
    r = upload(app.test_client(), "long.pdf", make_pdf([[f"Page {n} text of the rules."] for n in range(6)]))
    refused_naming(r, 422, "6 pages", "ARC_MAX_PAGES")


@needs_tesseract
def test_too_many_scanned_pages_is_a_422_without_running_ocr(hostile):
    from tests.helpers import joined

    app, _db = hostile
    CountingOcr.calls.clear()
    r = upload(app.test_client(), "scans.pdf", joined(scanned_page(SCANNED_LINES), scanned_page(SCANNED_LINES)))
    refused_naming(r, 422, "2 pages need OCR", "ARC_MAX_OCR_PAGES")
    assert CountingOcr.calls == []


@needs_tesseract
def test_ocr_waits_for_admission_instead_of_running_beside_it(hostile):
    """With the one slot taken (ARC_MAX_CONCURRENT=1, no queue), a scanned upload is refused
    with 429 before its pages are read, not after."""
    app, _db = hostile
    arc = app.extensions["arc"]
    CountingOcr.calls.clear()
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        with arc.knowledge.admission.slot():
            holding.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert holding.wait(5)
        r = upload(app.test_client(), "scan.pdf", scanned_page(SCANNED_LINES))
        assert r.status_code == 429 and r.headers["Retry-After"], r.get_json()
        assert CountingOcr.calls == []
    finally:
        release.set()
        holder.join(5)


# --- authentication --------------------------------------------------------------------------

def test_a_stranger_failing_authentication_never_locks_out_the_right_token(hostile, caplog):
    app, _db = hostile
    client = app.test_client()
    wrong = "wrong-" + "w" * 30
    with caplog.at_level(logging.WARNING, logger="arc.auth"):
        codes = [client.post("/webhook/arc-retrieval", headers={"X-ARC-Token": wrong},
                             json={"query": "pool hours"}).status_code for _ in range(30)]
    assert set(codes) <= {401, 429} and 429 in codes, "wrong tokens are still slowed down"
    r = client.post("/webhook/arc-retrieval", headers=ASK, json={"query": "pool hours"})
    assert r.status_code == 200, r.get_json()  # same address, right token: answered
    failures = [rec for rec in caplog.records if rec.getMessage() == "authentication failed"]
    assert len(failures) == 30
    assert all(wrong not in str(vars(rec)) for rec in failures)
    metrics = client.get("/metrics", headers={"X-ARC-Token": OPS_TOKEN}).get_data(as_text=True)
    assert 'arc_auth_failures_total{reason="wrong",route="/webhook/arc-retrieval"} 30.0' in metrics


def test_metrics_and_openapi_can_ask_for_a_token(hostile):
    app, _ = hostile
    client = app.test_client()
    client.environ_base["REMOTE_ADDR"] = "192.0.2.7"  # not the address the lock-out test used up
    for path in ("/metrics", "/openapi.json"):
        assert client.get(path).status_code == 401
        assert client.get(path, headers={"X-ARC-Token": RETRIEVE_TOKEN}).status_code == 401
        assert client.get(path, headers={"X-ARC-Token": OPS_TOKEN}).status_code == 200
    assert client.get("/healthz").status_code == 200  # probes carry no token


def test_the_retrieval_token_alone_cannot_ingest_or_delete(make_database, embedder, tmp_path):
    url = make_database("tok")
    db = Database(url)
    db.migrate(embedder.dim)
    try:
        only_api = create_app(runtime=Runtime(make_settings(tmp_path, url, api_token=RETRIEVE_TOKEN), db, embedder))
        client = only_api.test_client()
        r = client.post("/webhook/arc-ingest", headers=ASK, json={"text": "# A\n\nB c d.", "document_type": "other"})
        refused_naming(r, 403, "ARC_INGEST_TOKEN")
        assert client.delete("/webhook/arc-documents/anything", headers=ASK).status_code == 403
        shared = create_app(runtime=Runtime(make_settings(tmp_path, url, api_token=RETRIEVE_TOKEN,
                                                          ingest_with_api_token=True), db, embedder))
        r = shared.test_client().post("/webhook/arc-ingest", headers=ASK,
                                      json={"text": "# A\n\nB c d.", "document_type": "other"})
        assert r.status_code == 200, r.get_json()
    finally:
        db.close()


@pytest.mark.parametrize("var", ["ARC_API_TOKEN", "ARC_INGEST_TOKEN", "ARC_OPS_TOKEN"])
def test_short_tokens_are_refused_at_start_in_one_line(var):
    with pytest.raises(ConfigError) as refused:
        Settings.from_env({var: "x"})
    assert str(refused.value) == (f"invalid configuration: {var} is 1 characters; use at least 24 "
                                  "(e.g. openssl rand -hex 32)")
    assert Settings.from_env({var: "t" * 24})
