"""The keeper's pages: behind the admin token (a login form, the token never in a URL), CSRF on
every form, document text always escaped, HTML 4xx pages for bad input. The browser test at the
end drives Debian's headless Chromium through upload -> list -> a question -> delete against the
worker under gunicorn."""

from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import requests

from worker.serve.app import create_app

from tests.helpers import KEEPER_TOKEN as TOKEN, query_log_written
from tests.helpers import ROOT, csrf, free_port, make_settings, sign_in

HOSTILE = "# Pool rules\n\nThe pool closes at 9 pm. <script>window.pwned = 1</script> <img src=x onerror=\"window.pwned=2\">\n"


def test_the_start_page_names_the_models_the_settings_chose(keeper):
    sign_in(keeper)
    page = re.sub(r"\s+", " ", keeper.get("/").get_data(as_text=True))
    assert "Embeddings: all-MiniLM-L6-v2 (384 dims); reranker: none." in page, page


def test_pages_need_the_admin_token_and_it_never_shows_in_a_url(keeper):
    response = keeper.get("/documents")
    assert response.status_code == 302 and "/login" in response.headers["Location"]
    page = keeper.get("/login").get_data(as_text=True)
    wrong = keeper.post("/login", data={"token": "not-it", "csrf_token": csrf(page)})
    assert wrong.status_code == 401 and "not the admin token" in wrong.get_data(as_text=True)
    right = keeper.post("/login?next=/documents", data={"token": TOKEN, "csrf_token": csrf(page)})
    assert right.status_code == 302 and right.headers["Location"].endswith("/documents")
    assert TOKEN not in right.headers["Location"]
    listing = keeper.get("/documents")
    assert listing.status_code == 200 and "Design Guidelines" in listing.get_data(as_text=True)
    assert TOKEN not in listing.get_data(as_text=True)


def test_a_failed_sign_in_is_logged_and_counted_like_the_apis(keeper, caplog):
    """The keeper's sign-in is one more door: its failures reach the log and arc_auth_failures,
    and the right token still signs in after a stranger's wrong ones from the same address."""
    import logging

    page = keeper.get("/login").get_data(as_text=True)
    with caplog.at_level(logging.WARNING, logger="arc.auth"):
        for _ in range(3):
            assert keeper.post("/login", data={"token": "not-it", "csrf_token": csrf(page)}).status_code == 401
    failed = [r for r in caplog.records if r.getMessage() == "authentication failed"]
    assert len(failed) == 3 and all("not-it" not in str(r.__dict__) for r in failed)
    counted = keeper.application.extensions["arc"].metrics.auth_failures.labels("/login", "wrong")._value.get()
    assert counted == 3
    assert keeper.post("/login", data={"token": TOKEN, "csrf_token": csrf(page)}).status_code == 302


def test_login_goes_nowhere_but_this_site(keeper):
    page = keeper.get("/login").get_data(as_text=True)
    response = keeper.post("/login?next=//evil.example/x", data={"token": TOKEN, "csrf_token": csrf(page)})
    assert response.headers["Location"] == "/"


def test_every_form_needs_its_csrf_token(keeper):
    sign_in(keeper)
    for path, data in (("/ask", {"query": "fence height"}), ("/documents/ccrs/delete", {"confirm": "ccrs"}),
                       ("/logout", {})):
        response = keeper.post(path, data=data)
        assert response.status_code == 400, path
        assert "text/html" in response.headers["Content-Type"]
    assert "ccrs" in keeper.get("/documents").get_data(as_text=True)  # nothing was deleted


def test_document_text_is_shown_inert(keeper, sample_runtime):
    sign_in(keeper)
    page = keeper.get("/documents").get_data(as_text=True)
    from io import BytesIO

    response = keeper.post("/documents/upload", content_type="multipart/form-data", data={
        "csrf_token": csrf(page), "file": (BytesIO(HOSTILE.encode()), "pool-<b onmouseover=x>rules.md"),
        "document_type": "other", "is_binding": "true", "document_id": "pool-rules"})
    assert response.status_code == 303, response.get_data(as_text=True)
    job = response.headers["Location"]
    deadline = time.monotonic() + 120
    while keeper.get(f"{job}/status").get_json()["state"] == "running":
        assert time.monotonic() < deadline
        time.sleep(0.1)
    followed = keeper.get(job).get_data(as_text=True)  # the upload's page names the file, inert
    assert "Ingested Pool rules" in followed and "<b onmouseover" not in followed
    assert "pool-&lt;b onmouseover=x&gt;rules.md" in followed
    shown = keeper.get("/documents/pool-rules").get_data(as_text=True)
    assert "<script>window.pwned" not in shown and "&lt;script&gt;window.pwned" in shown
    assert "<img src=x" not in shown
    answered = keeper.post("/ask", data={"query": "When does the pool close?", "csrf_token": csrf(page)})
    text = answered.get_data(as_text=True)
    assert "<script>window.pwned" not in text and "pool closes at 9 pm" in text
    keeper.post("/documents/pool-rules/delete", data={"confirm": "pool-rules", "csrf_token": csrf(page)})


def test_bad_input_gets_an_html_4xx_page(keeper):
    sign_in(keeper)
    assert keeper.get("/documents?page=abc").status_code == 400
    missing = keeper.get("/documents/no-such-document")
    assert missing.status_code == 404 and "text/html" in missing.headers["Content-Type"]
    assert keeper.get("/questions?status=bogus").status_code == 400
    page = keeper.get("/ask").get_data(as_text=True)
    empty = keeper.post("/ask", data={"query": "   ", "csrf_token": csrf(page)})
    assert empty.status_code == 422 and "query" in empty.get_data(as_text=True)


def test_retrieval_testing_shows_the_answer_and_every_score(keeper):
    sign_in(keeper)
    page = keeper.get("/ask").get_data(as_text=True)
    text = keeper.post("/ask", data={"query": "How tall can my backyard fence be?", "csrf_token": csrf(page),
                                     "token_budget": "1500"}).get_data(as_text=True)
    assert 'id="status"' in text and "[SOURCE 1]" in text
    for label in ("vector", "BM25", "fused", "rerank", "final", "Timings"):
        assert label in text
    # the scale that decided: the calibrated score against its cuts, not the fixed 0.3 / 0.5
    assert "calibrated scale" in text and 'title="calibrated cut 0.5"' in text and 'title="calibrated cut 0.2"' in text
    assert "status threshold 0.3" not in text and "Uncalibrated" not in text


def test_retrieval_testing_uncalibrated_shows_the_fixed_cuts(sample_runtime, tmp_path):
    from worker.runtime import Runtime

    settings = make_settings(tmp_path, sample_runtime.db.url, api_token=TOKEN, ingest_token=TOKEN,
                             status_calibration=False)
    app = create_app(runtime=Runtime(settings, sample_runtime.db, sample_runtime.embedder))
    app.config["TESTING"] = True
    keeper = app.test_client()
    sign_in(keeper)
    page = keeper.get("/ask").get_data(as_text=True)
    text = keeper.post("/ask", data={"query": "How tall can my backyard fence be?",
                                     "csrf_token": csrf(page)}).get_data(as_text=True)
    assert "Uncalibrated" in text and 'title="status threshold 0.3"' in text and "calibrated cut" not in text


def test_questions_page_lists_the_log_by_status(keeper, client):
    client.post("/webhook/arc-retrieval", json={"query": "how long do i boil an egg"})
    assert query_log_written(client), "written off the answer's path"
    sign_in(keeper)
    text = keeper.get("/questions?status=no_results").get_data(as_text=True)
    assert "how long do i boil an egg" in text


# -- a real browser ---------------------------------------------------------------------------

CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")


@pytest.fixture(scope="module")
def browser():
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        pytest.skip("Chromium and ChromeDriver not installed (scripts/install-browser.sh, run by make test)")
    from selenium import webdriver

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--window-size=1400,1000"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # the console: CSP violations land there
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=str(CHROMEDRIVER)))
    # A click that navigates returns before the next page is there: look for elements until it is
    # (a loaded machine took longer than the first lookup after the delete's confirmation).
    driver.implicitly_wait(20)
    yield driver
    driver.quit()


@contextmanager
def serving(data: Path, workers: int) -> Iterator[str]:
    """``arc-retrieval serve`` with the keeper's tokens over a data folder of its own, until ready;
    its address. Stopped on leaving; its log never holds the token."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARC_") and k != "DATABASE_URL"}
    env.update({"ARC_DATA_DIR": str(data / "data"), "ARC_BIND": f"127.0.0.1:{port}", "WEB_CONCURRENCY": str(workers),
                "ARC_API_TOKEN": TOKEN, "ARC_INGEST_TOKEN": TOKEN, "ARC_RATE_LIMIT": "0"})
    log = (data / "worker.log").open("w")
    process = subprocess.Popen([sys.executable, "-m", "worker.cli", "serve"], env=env, cwd=ROOT, stdout=log,
                               stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        assert process.poll() is None and time.monotonic() < deadline, (data / "worker.log").read_text()[-2000:]
        try:
            if requests.get(f"{url}/readyz", timeout=2).ok:
                break
        except requests.RequestException:
            time.sleep(0.3)
    try:
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()
    assert TOKEN not in (data / "worker.log").read_text()


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    with serving(tmp_path_factory.mktemp("keeper"), workers=2) as url:
        yield url


def test_a_keeper_uploads_asks_and_deletes_in_a_browser(browser, served, tmp_path):
    from selenium.common.exceptions import NoAlertPresentException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    shots = Path(os.environ.get("ARC_SCREENSHOTS", tmp_path))
    shots.mkdir(parents=True, exist_ok=True)
    browser.get(f"{served}/")
    assert "/login" in browser.current_url
    browser.find_element(By.NAME, "token").send_keys(TOKEN)
    browser.find_element(By.ID, "sign-in").click()
    # the click returns before the redirect has landed: wait for the address, not just an element
    WebDriverWait(browser, 20).until(lambda b: "/login" not in b.current_url)
    assert browser.current_url.rstrip("/") == served and TOKEN not in browser.current_url

    # three pages, two of them scanned: the job page follows the OCR page by page
    from tests.helpers import make_pdf
    from tests.helpers import joined, scanned_page

    scanned = shutil.which("tesseract") is not None
    document = tmp_path / "hammock-rules.pdf"
    document.write_bytes(joined(make_pdf([["Hammock Rules", "Hammocks strung between two trees must come down "
                                           "between November and March.", "<script>window.pwned = 1</script>"]]),
                                *([scanned_page(["ARTICLE II SWINGS", "Swings hang from sturdy branches only."]),
                                   scanned_page(["ARTICLE III LANTERNS", "Lanterns go out at 11 pm."])]
                                  if scanned else [])))
    browser.get(f"{served}/documents")
    browser.find_element(By.NAME, "file").send_keys(str(document))
    browser.find_element(By.NAME, "document_id").send_keys("hammock-rules")
    browser.find_element(By.ID, "upload-button").click()  # no type chosen: the browser keeps the form
    assert browser.current_url == f"{served}/documents"
    Select(browser.find_element(By.NAME, "document_type")).select_by_visible_text("other")
    browser.find_element(By.ID, "upload-button").click()
    assert browser.find_element(By.ID, "job-progress").tag_name == "progress"
    seen, deadline = [], time.monotonic() + 300
    # what the page's script shows as it polls (asked of the page itself: find_elements would wait)
    look = ("var s = document.getElementById('job-stage'), b = document.getElementById('job-progress');"
            "return document.querySelector('#job-report, #job-error') ? 'ended' : s && b ? [s.textContent, b.value, b.max] : null")
    while (shown := browser.execute_script(look)) != "ended":
        if shown and shown not in seen:
            seen.append(shown)
            if "by OCR: page" in shown[0] and not any("by OCR: page" in text for text, _, _ in seen[:-1]):
                browser.save_screenshot(str(shots / "upload-progress.png"))
        assert time.monotonic() < deadline, seen
        time.sleep(0.1)
    report = browser.find_element(By.ID, "job-report").text
    assert "Ingested hammock-rules" in report and "replaced nothing" in report, report
    steps = browser.find_element(By.ID, "job-steps").text
    assert "Embedding:" in steps and "Stored" in steps, steps
    if scanned:  # the scanned pages went by one at a time
        assert "2 scanned pages read by OCR" in report and "Read 2 scanned pages by OCR" in steps, (report, steps)
        assert any("scanned pages by OCR: page" in text and maximum == 2 for text, _, maximum in seen), seen
    browser.save_screenshot(str(shots / "upload-report.png"))
    browser.find_element(By.LINK_TEXT, "Back to the documents").click()
    assert browser.find_element(By.CSS_SELECTOR, '[data-id="hammock-rules"]')  # waits for the list page
    browser.save_screenshot(str(shots / "documents.png"))

    browser.get(f"{served}/documents/hammock-rules")
    assert "<script>window.pwned = 1</script>" in browser.find_element(By.TAG_NAME, "pre").text
    assert browser.execute_script("return window.pwned === undefined")
    with pytest.raises(NoAlertPresentException):
        browser.switch_to.alert.text

    browser.get(f"{served}/ask")
    browser.find_element(By.NAME, "query").send_keys("When do hammocks have to come down?")
    browser.find_element(By.ID, "ask-button").click()
    assert browser.find_element(By.ID, "status").text in ("success", "low_confidence")
    assert "Hammocks strung between two trees" in browser.find_element(By.ID, "context").text
    browser.save_screenshot(str(shots / "retrieval-testing.png"))
    browser.get(browser.find_element(By.ID, "permalink").get_attribute("href"))  # the link asks it again
    assert "Hammocks strung between two trees" in browser.find_element(By.ID, "context").text
    assert browser.find_element(By.NAME, "query").get_attribute("value") == "When do hammocks have to come down?"

    browser.get(f"{served}/questions")
    browser.save_screenshot(str(shots / "questions.png"))

    browser.get(f"{served}/documents")
    row = browser.find_element(By.CSS_SELECTOR, 'form.delete[data-id="hammock-rules"] button')
    row.click()
    browser.switch_to.alert.accept()
    assert "Deleted hammock-rules" in browser.find_element(By.ID, "message").text
    assert 'data-id="hammock-rules"' not in browser.page_source
    # every script the pages ran came from their files: the Content-Security-Policy blocked nothing
    violations = [e["message"] for e in browser.get_log("browser")
                  if "Content Security Policy" in e["message"] or "violates" in e["message"]]
    assert not violations, violations


@pytest.fixture()
def two_communities(make_database, embedder, tmp_path):
    """A knowledge base of two communities and no default one (a page that loses the community
    is a 400 there), and the pages' client over it, signed in."""
    from worker.ingest.ingestor import Ingestor
    from worker.ingest.readers import parse_markdown
    from worker.models import DocumentFields
    from worker.runtime import Runtime
    from worker.store.database import Database

    db = Database(make_database("keepercommunities"))
    db.migrate(embedder.dim)
    ingestor = Ingestor(db, embedder)
    for community, doc in (("hollow", "hollow-rules"), ("ridge", "ridge-rules"), ("ridge", "ridge-fences")):
        ingestor.write([ingestor.prepare_text(parse_markdown(f"# {doc}\n\nFences need a permit."),
                                              DocumentFields(document_id=doc, name=doc, document_type="other"))],
                       community=community)
    app = create_app(runtime=Runtime(make_settings(tmp_path, db.url, api_token=TOKEN, ingest_token=TOKEN),
                                     db, embedder))
    app.config["TESTING"] = True
    client = app.test_client()
    sign_in(client)
    yield client
    db.close()


def test_the_pages_show_one_community_at_a_time(two_communities):
    """Several communities in one knowledge base (sql/030): the pages take ?community=, and name
    the field when a knowledge base without a default community leaves them guessing."""
    client = two_communities
    ridge = client.get("/documents?community=ridge").get_data(as_text=True)
    assert "ridge-rules" in ridge and "hollow-rules" not in ridge
    assert client.get("/documents/hollow-rules?community=ridge").status_code == 404
    assert client.get("/documents/hollow-rules?community=hollow").status_code == 200
    unnamed = client.get("/documents")  # the chooser, each community leading to its documents
    chooser = unnamed.get_data(as_text=True)
    assert unnamed.status_code == 200 and "Choose a community" in chooser
    assert "/documents?community=hollow" in chooser and "/documents?community=ridge" in chooser
    assert client.get("/documents?community=nowhere").status_code == 404


def _links(page: str) -> list[str]:
    """The pages' own links and form targets on a page (not the stylesheet, nor the API's, nor
    the header's choice of another community)."""
    from html import unescape

    page = re.sub(r'<form method="get".*?</form>', "", page, flags=re.S)
    found = [unescape(u) for u in re.findall(r'(?:href|action)="(/[^"]*)"', page)]
    return [u for u in found if not u.startswith(("/assets/", "/openapi.json", "/logout", "/login"))]


def test_links_between_the_pages_stay_in_the_community_chosen(two_communities):
    """From a community's documents list to a document, its delete, retrieval testing, the
    questions asked and back, every link and form keeps ?community= (without it each page of a
    knowledge base with no default community is a 400)."""
    from urllib.parse import parse_qs, urlsplit

    client = two_communities
    seen, queue = set(), ["/documents?community=ridge"]
    while queue:
        url = queue.pop()
        if url in seen:
            continue
        seen.add(url)
        response = client.get(url)
        assert response.status_code == 200, (url, response.get_data(as_text=True)[-500:])
        page = response.get_data(as_text=True)
        assert "hollow-rules" not in page, url
        for link in _links(page):
            assert parse_qs(urlsplit(link).query).get("community") == ["ridge"], (url, link)
            target = urlsplit(link).path
            if not (target == "/documents/upload" or target.endswith("/delete")):  # forms that post
                queue.append(link)
        for form in re.findall(r"<form[^>]*>.*?</form>", page, re.S):
            if 'method="post"' in form and "action=" not in form:  # posts to its own page's URL
                assert "community=ridge" in url, url
    assert {"/ask?community=ridge", "/questions?community=ridge",
            "/documents/ridge-rules?community=ridge"} <= seen
    upload = client.get("/documents?community=ridge").get_data(as_text=True)
    assert re.search(r'<form[^>]*id="upload".*?name="community" value="ridge"', upload, re.S)
    # a question asked of ridge is tested against ridge's documents
    page = client.get("/ask?community=ridge").get_data(as_text=True)
    asked = client.post("/ask?community=ridge", data={"query": "Do fences need a permit?", "csrf_token": csrf(page)})
    assert asked.status_code == 200 and "ridge-rules" in asked.get_data(as_text=True)
    # a delete goes back to ridge's list; the delete of its last document to a list that exists
    deleted = client.post("/documents/ridge-rules/delete?community=ridge",
                          data={"confirm": "ridge-rules", "csrf_token": csrf(page)})
    assert deleted.status_code == 302 and "community=ridge" in deleted.headers["Location"]
    listed = client.get(deleted.headers["Location"]).get_data(as_text=True)
    assert "Deleted ridge-rules" in listed and "ridge-fences" in listed
    last = client.post("/documents/ridge-fences/delete?community=ridge",
                       data={"confirm": "ridge-fences", "csrf_token": csrf(page)})
    after = client.get(last.headers["Location"])
    assert after.status_code == 200 and "ridge holds no documents now" in after.get_data(as_text=True)


def test_the_questions_asked_are_those_of_the_community_chosen(two_communities):
    """The query log is kept per community (sql/030); the questions page shows the chosen one's."""
    client = two_communities
    for community, question in (("hollow", "may hollow keep chickens"), ("ridge", "may ridge paint doors")):
        response = client.post("/webhook/arc-retrieval", json={"query": question, "community": community},
                               headers={"X-ARC-Token": TOKEN})
        assert response.status_code == 200, response.get_data(as_text=True)
    assert query_log_written(client), "written off the answer's path"
    ridge = client.get("/questions?community=ridge").get_data(as_text=True)
    assert "may ridge paint doors" in ridge and "may hollow keep chickens" not in ridge
    hollow = client.get("/questions?community=hollow").get_data(as_text=True)
    assert "may hollow keep chickens" in hollow and "may ridge paint doors" not in hollow


def test_closed_admin_routes_admit_nobody_to_the_pages(sample_runtime, tmp_path):
    """With only ARC_API_TOKEN set the admin routes are closed: no token, not even the
    marker that stands for "closed", signs anyone in."""
    settings = make_settings(tmp_path, sample_runtime.settings.database.database_url or sample_runtime.db.url,
                             api_token=TOKEN)
    client = create_app(runtime=type(sample_runtime)(settings, sample_runtime.db, sample_runtime.embedder)).test_client()
    for guess in ("\x00closed", TOKEN, ""):
        page = client.get("/login").get_data(as_text=True)
        response = client.post("/login", data={"token": guess, "csrf_token": csrf(page)})
        assert response.status_code == 401, repr(guess)
    assert client.get("/documents").status_code == 302  # still sent to the login form


def _session_secret_in_child(key_file: str, start: float, out) -> None:
    from worker.serve.pages import _session_secret

    while time.time() < start:  # every process reaches the empty data directory at once
        pass
    out.put(_session_secret(Path(key_file)))


def test_worker_processes_starting_together_share_one_session_secret(tmp_path):
    """gunicorn's workers start together; each kept its own key when it found the file missing,
    and a form one had signed was refused by the next as expired."""
    import multiprocessing

    context = multiprocessing.get_context("fork")
    out = context.Queue()
    start = time.time() + 0.5
    children = [context.Process(target=_session_secret_in_child, args=(str(tmp_path / "key"), start, out))
                for _ in range(8)]
    for child in children:
        child.start()
    secrets_seen = {out.get(timeout=30) for _ in children}
    for child in children:
        child.join()
    assert len(secrets_seen) == 1 and secrets_seen == {(tmp_path / "key").read_text().strip()}
    assert [p.name for p in tmp_path.iterdir()] == ["key"]


def test_signing_in_returns_to_the_page_asked_for_with_its_community(two_communities):
    client = two_communities
    client.post("/logout", data={"csrf_token": csrf(client.get("/documents?community=ridge").get_data(as_text=True))})
    sent = client.get("/documents?community=ridge")
    assert sent.status_code == 302
    page = client.get(sent.headers["Location"]).get_data(as_text=True)
    back = client.post(sent.headers["Location"], data={"token": TOKEN, "csrf_token": csrf(page)})
    assert back.status_code == 302 and back.headers["Location"] == "/documents?community=ridge"


def test_a_question_and_its_settings_are_a_link_that_asks_it(keeper):
    import html as html_lib
    from urllib.parse import parse_qs, urlsplit

    sign_in(keeper)
    page = keeper.get("/ask?query=How+tall+can+my+backyard+fence+be%3F&top_k=2&min_relevance=0.05"
                      "&vector_weight=0.3&include_superseded=on")
    text = page.get_data(as_text=True)
    assert page.status_code == 200 and 'id="status"' in text and "[SOURCE 1]" in text
    assert len(re.findall(r'<td class="final">', text)) <= 2  # top_k
    assert "weights vector 0.3 / full text 0.7" in text
    assert 'name="include_superseded" checked' in text and 'name="top_k" type="number" min="1" max="20"' in text
    link = html_lib.unescape(re.search(r'id="permalink"\s+href="([^"]+)"', text).group(1))
    assert parse_qs(urlsplit(link).query) == {"query": ["How tall can my backyard fence be?"], "top_k": ["2"],
                                              "min_relevance": ["0.05"], "vector_weight": ["0.3"],
                                              "include_superseded": ["on"]}
    assert keeper.get(link).get_data(as_text=True).count('<td class="final">') <= 2
    bad = keeper.get("/ask?query=fence&top_k=99")
    assert bad.status_code == 422 and "top_k" in bad.get_data(as_text=True)
    assert 'id="status"' not in keeper.get("/ask").get_data(as_text=True)  # no question: the empty form


def test_questions_asked_fold_long_ones_and_link_each_to_asking_it_again(keeper, client):
    import html as html_lib

    long_question = "Can I build a fence " + "and a shed " * 170 + "in my backyard?"
    for question in (long_question, "Do sheds need approval?"):
        assert client.post("/webhook/arc-retrieval", json={"query": question}).status_code == 200
    assert query_log_written(client), "written off the answer's path"
    sign_in(keeper)
    text = keeper.get("/questions").get_data(as_text=True)
    assert f"<summary>{long_question[:200]}&hellip;</summary>" in text
    again = [html_lib.unescape(h) for h in re.findall(r'<a class="rerun" href="([^"]+)"', text)]
    assert "/ask?query=Do+sheds+need+approval?" in again
    assert any(a.startswith("/ask?query=Can+I+build+a+fence") for a in again)
    asked_again = keeper.get("/ask?query=Do+sheds+need+approval?").get_data(as_text=True)
    assert 'id="status"' in asked_again and 'value="Do sheds need approval?"' in asked_again


def test_score_bars_stay_within_their_box(keeper, app):
    with app.test_request_context():
        bars = app.jinja_env.from_string('{% from "pages/_bars.html" import bar %}'
                                         '{{ bar(-0.579, "cosine") }}{{ bar(1.7, "fused") }}{{ bar(0.25, "x") }}')
        widths = re.findall(r"width: ([-\d.]+)%", bars.render())
    assert [float(w) for w in widths] == [0.0, 100.0, 25.0]


@pytest.mark.parametrize(("tokens", "says", "opens"), [
    ({"api_token": TOKEN}, "These pages are locked: only <code>ARC_API_TOKEN</code> is set", False),
    ({"api_token": TOKEN, "ingest_with_api_token": True}, "Sign in with the value of <code>ARC_API_TOKEN</code>",
     True),
    ({"api_token": "chatbot-token-0123456789abcdefgh", "ingest_token": TOKEN},
     "Sign in with the value of <code>ARC_INGEST_TOKEN</code>", True),
])
def test_the_login_page_says_up_front_which_token_opens_it(sample_runtime, tmp_path, tokens, says, opens):
    """The README's Dify/n8n setup sets only ARC_API_TOKEN: the page says so before a failed try."""
    settings = make_settings(tmp_path, sample_runtime.settings.database.database_url or sample_runtime.db.url,
                             **tokens)
    runtime = type(sample_runtime)(settings, sample_runtime.db, sample_runtime.embedder)
    client = create_app(runtime=runtime).test_client()
    page = client.get("/login").get_data(as_text=True)
    assert says in " ".join(page.split()), page
    signed = client.post("/login", data={"token": TOKEN, "csrf_token": csrf(page)})
    assert (signed.status_code == 302) is opens


@pytest.fixture(scope="module")
def served_communities(tmp_path_factory):
    """``arc-retrieval serve`` over a knowledge base of two communities and no default one."""
    with serving(tmp_path_factory.mktemp("communities"), workers=1) as url:
        for community, text in (("hollow", "# Hollow fences\n\nFences in the hollow may be four feet tall."),
                                ("ridge", "# Ridge fences\n\nFences on the ridge may be six feet tall.")):
            stored = requests.post(f"{url}/webhook/arc-ingest", headers={"X-ARC-Token": TOKEN}, timeout=120,
                                   json={"text": text, "document_type": "ccr", "community": community,
                                         "document_id": f"{community}-fences"})
            assert stored.status_code == 200, stored.text
        yield url


def test_a_keeper_of_two_communities_signs_in_to_the_chooser(browser, served_communities, tmp_path):
    """Sign in -> the chooser -> a community's documents -> retrieval testing -> questions asked,
    the community kept all the way."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    url = served_communities
    browser.delete_all_cookies()
    browser.get(f"{url}/")
    assert "/login" in browser.current_url
    browser.find_element(By.NAME, "token").send_keys(TOKEN)
    browser.find_element(By.ID, "sign-in").click()
    WebDriverWait(browser, 20).until(lambda b: "/login" not in b.current_url)
    table = browser.find_element(By.ID, "communities").text
    assert "hollow" in table and "ridge" in table, table
    browser.find_element(By.LINK_TEXT, "ridge").click()
    WebDriverWait(browser, 20).until(lambda b: "community=ridge" in b.current_url)
    browser.find_element(By.LINK_TEXT, "Documents").click()
    WebDriverWait(browser, 20).until(lambda b: "/documents" in b.current_url)
    assert "ridge-fences" in browser.page_source and "hollow-fences" not in browser.page_source
    browser.find_element(By.LINK_TEXT, "Retrieval testing").click()
    browser.find_element(By.NAME, "query").send_keys("How tall may a fence be?")
    browser.find_element(By.ID, "ask-button").click()
    context = browser.find_element(By.ID, "context").text
    assert "six feet" in context and "four feet" not in context, context
    browser.find_element(By.LINK_TEXT, "Questions asked").click()
    WebDriverWait(browser, 20).until(lambda b: "/questions" in b.current_url)
    assert "community=ridge" in browser.current_url
    assert "not recorded" in browser.find_element(By.ID, "keeper-questions").text


def test_a_keeper_confirms_from_questions_asked_and_from_a_document_in_a_browser(browser, served_communities):
    """A resident's question on Questions asked -> "SOURCE 1 answers it"; another -> "not in the
    documents"; a document's page -> a passage chosen for a typed question; Confirmed answers
    lists the three, in the community chosen all the way."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    url, keeper = served_communities, {"X-ARC-Token": TOKEN}
    stored = requests.post(f"{url}/webhook/arc-ingest", headers=keeper, timeout=120, json={
        "document_id": "ridge-garden", "document_type": "other", "name": "Garden rules", "community": "ridge",
        "text": "# Garden rules\n\n## Compost\n\nCompost bins must sit at least ten feet from every lot line.\n\n"
                "## Quiet hours\n\nQuiet hours run from 10 pm to 7 am every day."})
    assert stored.status_code == 200, stored.text
    compost = "How far from the lot line does my compost bin have to be?"
    helicopter = "May I land a helicopter in my back yard?"
    answered = requests.post(f"{url}/webhook/arc-retrieval", headers=keeper, timeout=60,
                             json={"query": compost, "community": "ridge"}).json()
    first = next(c for c in answered["chunks"] if c["source"] == 1)
    requests.post(f"{url}/webhook/arc-retrieval", headers=keeper, timeout=60,
                  json={"query": helicopter, "community": "ridge"}).raise_for_status()

    browser.delete_all_cookies()
    browser.get(f"{url}/login")
    browser.find_element(By.NAME, "token").send_keys(TOKEN)
    browser.find_element(By.ID, "sign-in").click()
    WebDriverWait(browser, 20).until(lambda b: "/login" not in b.current_url)

    def row(question: str):
        deadline = time.monotonic() + 30  # the query log is written in the background
        while True:
            browser.get(f"{url}/questions?community=ridge")
            found = browser.find_elements(By.XPATH, f'//table[@id="recent"]//tr[td[contains(., "{question}")]]')
            if found or time.monotonic() > deadline:
                assert found, browser.page_source[-2000:]
                found[0].find_element(By.CSS_SELECTOR, "td.confirm summary").click()
                return found[0]
            time.sleep(0.5)

    row(compost).find_element(By.XPATH, './/button[text()="SOURCE 1 answers it"]').click()
    WebDriverWait(browser, 20).until(lambda b: "/confirmations" in b.current_url)
    assert "community=ridge" in browser.current_url and "Confirmed #" in browser.page_source
    row(helicopter).find_element(By.XPATH, './/button[text()="not in the documents"]').click()
    WebDriverWait(browser, 20).until(lambda b: "/confirmations" in b.current_url)

    # from Questions asked to a document, the question carried; or a question typed on the document's page
    row(helicopter).find_element(By.CSS_SELECTOR, "a.choose").click()
    assert helicopter in browser.find_element(By.ID, "choosing").text
    browser.find_element(By.LINK_TEXT, "Garden rules").click()
    WebDriverWait(browser, 20).until(lambda b: "/documents/ridge-garden" in b.current_url)
    forms = browser.find_elements(By.CSS_SELECTOR, "form.choose")
    assert forms and all(f.find_element(By.NAME, "query").get_attribute("value") == helicopter for f in forms)
    quiet = next(f for f in browser.find_elements(By.CSS_SELECTOR, "section.chunk") if "Quiet hours run" in f.text)
    box = quiet.find_element(By.NAME, "query")
    box.clear()
    box.send_keys("When are quiet hours?")
    quiet.find_element(By.XPATH, './/button[text()="this passage answers it"]').click()
    WebDriverWait(browser, 20).until(lambda b: "/confirmations" in b.current_url)

    listed = requests.get(f"{url}/webhook/arc-confirm", params={"community": "ridge"}, headers=keeper,
                          timeout=30).json()["confirmations"]
    made = {c["query"]: c for c in listed}
    assert made[compost]["chunk_id"] == first["id"] and made[compost]["state"] == "confirmed"
    assert made[helicopter]["answer"] == "none"
    assert "Quiet hours run" in requests.get(f"{url}/webhook/arc-documents/ridge-garden", params={"community": "ridge"},
                                             headers=keeper, timeout=30).text
    assert made["When are quiet hours?"]["document_id"] == "ridge-garden"
    table = browser.find_element(By.ID, "confirmations").text
    assert compost in table and helicopter in table and "When are quiet hours?" in table
    for c in listed:
        requests.delete(f"{url}/webhook/arc-confirm/{c['id']}", headers=keeper, timeout=30).raise_for_status()


def test_a_confirmation_form_cannot_name_another_community_s_passage(two_communities):
    client = two_communities
    shown = client.get("/webhook/arc-documents", query_string={"community": "hollow"},
                       headers={"X-ARC-Token": TOKEN}).get_json()
    hollow_doc = shown["documents"][0]["document_id"]
    chunk = client.get(f"/webhook/arc-documents/{hollow_doc}", query_string={"community": "hollow"},
                       headers={"X-ARC-Token": TOKEN}).get_json()["chunks"][0]["id"]
    page = client.get("/confirmations?community=ridge").get_data(as_text=True)
    refused = client.post("/confirmations?community=ridge",
                          data={"csrf_token": csrf(page), "query": "a fence?", "chunk_id": str(chunk)})
    assert refused.status_code == 400 and "no chunk of community 'ridge'" in html.unescape(refused.get_data(as_text=True))
    listed = client.get("/webhook/arc-confirm", query_string={"community": "ridge"},
                        headers={"X-ARC-Token": TOKEN}).get_json()["confirmations"]
    assert listed == []


def test_a_community_is_deleted_from_its_documents_page(two_communities):
    """Among several communities, a community's documents page ends with its delete: the keeper
    types its name, and the pages go on with the communities left, saying what went."""
    client = two_communities
    # with several left the chooser says what went; a notice with words of its own is not shown
    chooser = client.get("/documents?notice=community_deleted&gone=elm&chunks=3").get_data(as_text=True)
    assert "Choose a community" in chooser and "Deleted the community elm (3 chunks)" in chooser
    forged = client.get("/documents?notice=community_deleted&gone=<b>x</b>&chunks=3").get_data(as_text=True)
    assert "Deleted the community" not in forged
    page = client.get("/documents?community=ridge").get_data(as_text=True)
    form = re.search(r'<form[^>]*id="delete-community".*?</form>', page, re.S)
    assert form and 'action="/communities/ridge/delete?community=ridge"' in form[0]
    # the wrong name, or none, deletes nothing
    for typed in ("", "hollow"):
        refused = client.post("/communities/ridge/delete", data={"confirm": typed, "csrf_token": csrf(page)})
        assert refused.status_code == 400 and "confirm" in refused.get_data(as_text=True)
    assert client.get("/documents?community=ridge").status_code == 200

    deleted = client.post("/communities/ridge/delete?community=ridge",
                          data={"confirm": "ridge", "csrf_token": csrf(page)})
    assert deleted.status_code == 302
    left = client.get(deleted.headers["Location"])  # hollow, the one left, with what went
    shown = left.get_data(as_text=True)
    assert left.status_code == 200 and "Deleted the community ridge (2 chunks) and everything kept of it" in shown
    assert "hollow-rules" in shown and 'id="delete-community"' not in shown  # one community: no delete offered
    assert client.get("/documents?community=ridge").status_code == 404
    again = client.post("/communities/ridge/delete", data={"confirm": "ridge", "csrf_token": csrf(page)})
    assert again.status_code == 404
