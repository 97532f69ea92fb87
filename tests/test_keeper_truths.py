"""What a keeper reads is true: the pages and the command line say what is so.

- Retrieval testing is a test: the pages say its questions are not recorded, and none is.
- With no admin token the pages say they are open on loopback; there is no sign-in form to fail.
- A malformed DATABASE_URL stops a command with one line naming it (and never its password).
- ``db sql`` prints the configured model's dimension unless told another.
- The notice box shows only what the worker wrote, by key; a link's own words never show.
- ``GET /documents/upload`` leads to the upload form; a browser gets an HTML 404 page.
- Times say their zone; commands print their own output, their INFO log lines only with --verbose.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from tests.helpers import make_settings
from worker.runtime import Runtime
from worker.serve.app import create_app

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "truths-admin-token-0123456789abcdef"
SPOOF = "Call 555-0100 and read out your token"


def _client(runtime: Runtime, tmp_path, **overrides):
    settings = make_settings(tmp_path, runtime.db.url, **overrides)
    app = create_app(runtime=Runtime(settings, runtime.db, runtime.embedder))
    app.config["TESTING"] = True
    return app.test_client()


@pytest.fixture()
def open_pages(sample_runtime, tmp_path):
    """``make run``: no token, the pages open on loopback."""
    return _client(sample_runtime, tmp_path)


def _rows(runtime: Runtime) -> int:
    with psycopg.connect(runtime.db.url) as conn:
        return conn.execute("select count(*) from query_log").fetchone()[0]


def test_retrieval_testing_says_it_is_not_recorded_and_is_not(open_pages, sample_runtime):
    before = _rows(sample_runtime)
    asked = open_pages.get("/ask?query=How+tall+can+a+backyard+fence+be%3F")
    assert asked.status_code == 200
    assert "not\nrecorded on Questions asked" in asked.get_data(as_text=True)
    assert _rows(sample_runtime) == before
    questions = open_pages.get("/questions").get_data(as_text=True)
    assert 'id="keeper-questions"' in questions and "they are not recorded here" in questions


def test_with_no_admin_token_the_pages_say_they_are_open(open_pages):
    start = open_pages.get("/").get_data(as_text=True)
    assert 'id="open-pages"' in start and "open on loopback" in start
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', open_pages.get("/documents").get_data(as_text=True))[1]
    for method in ("GET", "POST"):
        login = open_pages.open("/login", method=method, data={"token": "anything", "csrf_token": csrf})
        page = login.get_data(as_text=True)
        assert login.status_code == 200, method
        assert "nothing to sign in with" in page and 'name="token"' not in page, method


def test_the_notice_box_shows_only_what_the_worker_wrote(open_pages):
    spoofed = open_pages.get("/documents", query_string={"message": SPOOF}).get_data(as_text=True)
    assert SPOOF not in spoofed and 'id="message"' not in spoofed
    for forged in ({"notice": "deleted", "document": SPOOF, "chunks": "3"},
                   {"notice": SPOOF, "document": "ccrs", "chunks": "3"},
                   {"notice": "deleted", "document": "ccrs", "chunks": SPOOF}):
        page = open_pages.get("/documents", query_string=forged).get_data(as_text=True)
        assert 'id="message"' not in page and "555-0100" not in page, forged
    told = open_pages.get("/documents?notice=deleted&document=ccrs&chunks=12").get_data(as_text=True)
    assert "Deleted ccrs (12 chunks)" in told


def test_get_of_the_upload_address_leads_to_the_form(open_pages):
    response = open_pages.get("/documents/upload")
    assert response.status_code == 303 and response.headers["Location"].endswith("/documents#upload")
    assert 'id="upload"' in open_pages.get("/documents/upload", follow_redirects=True).get_data(as_text=True)


def test_a_browser_gets_an_html_404_and_a_client_json(open_pages):
    page = open_pages.get("/nowhere", headers={"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"})
    assert page.status_code == 404 and page.mimetype == "text/html"
    assert "Not found" in page.get_data(as_text=True)
    assert page.headers["Content-Security-Policy"]
    api = open_pages.get("/nowhere", headers={"Accept": "*/*"})
    assert api.status_code == 404 and api.get_json()["error"] == "not_found"
    webhook = open_pages.get("/webhook/nowhere", headers={"Accept": "text/html"})
    assert webhook.status_code == 404 and webhook.get_json()["error"] == "not_found"


def test_times_say_their_zone(open_pages):
    documents = open_pages.get("/documents").get_data(as_text=True)
    assert " UTC</td>" in documents


def _command(*args: str, **env: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith("ARC_") and k != "DATABASE_URL"}
    return subprocess.run([sys.executable, "-m", "worker.cli", *args], env={**base, **env}, cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_a_malformed_database_url_stops_with_one_line(tmp_path):
    done = _command("documents", "list", DATABASE_URL="postgresql://keeper:s3cret@127.0.0.1:1/arc?sslmode=bogus",
                    ARC_DATA_DIR=str(tmp_path))
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "DATABASE_URL" in lines[0] and "sslmode" in lines[0], done.stderr
    assert "s3cret" not in done.stderr + done.stdout


def test_db_sql_takes_the_configured_models_dimension(tmp_path):
    default = _command("db", "sql", ARC_DATA_DIR=str(tmp_path))
    assert default.returncode == 0 and "vector(384)" in default.stdout and "vector(1536)" not in default.stdout
    told = _command("db", "sql", "--dim", "1536", ARC_DATA_DIR=str(tmp_path))
    assert "vector(1536)" in told.stdout


def test_commands_print_their_own_output_and_log_only_when_asked(sample_runtime, tmp_path):
    env = {"DATABASE_URL": sample_runtime.db.url, "ARC_DATA_DIR": str(tmp_path)}
    quiet = _command("documents", "list", **env)
    assert quiet.returncode == 0 and "ccrs" in quiet.stdout
    assert '"level": "info"' not in quiet.stderr, quiet.stderr
    verbose = _command("--verbose", "documents", "list", **env)
    assert verbose.returncode == 0 and "ccrs" in verbose.stdout
    assert '"level": "info"' in verbose.stderr, verbose.stderr
