"""The keeper's upload runs as a job: the form's post starts the ingest in the worker and answers
at once with a page that follows it (reading, OCR page n of N, embedding, storing) and ends with
what was stored or the error; a failed ingest stores nothing. The job's status is kept where every
worker process reads it, for the session that started it only. (The browser test in
test_pages.py watches a scanned PDF's pages go by under gunicorn.)"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from io import BytesIO

import psycopg
import pytest

from worker.runtime import Runtime
from worker.serve.app import create_app
from worker.store import knowledge_base, sqlfiles
from worker.store.database import Database

from tests.helpers import make_settings
from tests.helpers import KEEPER_TOKEN as TOKEN, csrf, sign_in

JOB_PAGE = re.compile(r"^/documents/upload/(?P<job>[A-Za-z0-9_-]+)(\?.*)?$")
POOL = "# Pool Rules\n\n## Hours\n\nThe pool opens at 7 am and closes at 9 pm.\n\n## Guests\n\nTwo guests per household.\n"


def upload(client, filename: str, content: bytes, **fields: str):
    page = client.get("/documents").get_data(as_text=True)
    return client.post("/documents/upload", content_type="multipart/form-data", data={
        "csrf_token": csrf(page), "file": (BytesIO(content), filename), "document_type": "other",
        "is_binding": "true", **fields})


def started(response) -> str:
    """The job an upload's answer sends the browser to follow."""
    assert response.status_code == 303, response.get_data(as_text=True)[-800:]
    match = JOB_PAGE.match(response.headers["Location"])
    assert match, response.headers["Location"]
    return match["job"]


def status(client, job: str):
    return client.get(f"/documents/upload/{job}/status")


def finished(client, job: str, seconds: float = 120) -> dict:
    deadline = time.monotonic() + seconds
    while True:
        response = status(client, job)
        assert response.status_code == 200, response.get_data(as_text=True)
        body = response.get_json()
        if body["state"] != "running":
            return body
        assert time.monotonic() < deadline, body
        time.sleep(0.1)


def test_an_upload_is_a_job_that_shows_its_stages_and_ends_with_the_report(keeper):
    sign_in(keeper)
    job = started(upload(keeper, "pool-rules.md", POOL.encode(), document_id="pool-rules"))
    assert len(job) >= 32  # unguessable: 24 random bytes
    page = keeper.get(f"/documents/upload/{job}")
    assert page.status_code == 200
    text = page.get_data(as_text=True)
    assert 'id="job-progress"' in text and "pool-rules.md" in text

    done = finished(keeper, job)
    assert done["state"] == "done" and done["error"] is None, done
    report = done["report"]
    assert report["document_id"] == "pool-rules" and report["chunks"] >= 1
    assert report["replaced"] == "replaced nothing"
    stages = [step["stage"] for step in done["steps"]]
    assert stages[0] == "reading" and stages[-2:] == ["embedding", "storing"], done["steps"]
    embedding = next(step for step in done["steps"] if step["stage"] == "embedding")
    assert f"{report['chunks']} of {report['chunks']} chunks" in embedding["label"], embedding
    shown = keeper.get(f"/documents/upload/{job}").get_data(as_text=True)
    assert 'id="job-report"' in shown and f"{report['chunks']} chunk" in shown and "replaced nothing" in shown
    assert "pool-rules" in keeper.get("/documents").get_data(as_text=True)

    again = finished(keeper, started(upload(keeper, "pool-rules-2025.md", POOL.replace("9 pm", "10 pm").encode(),
                                            document_id="pool-rules", replace="true")))
    assert again["state"] == "done", again
    assert again["report"]["replaced"].startswith("replaced 1 stored document(s)"), again["report"]
    assert "10 pm" in keeper.get("/documents/pool-rules").get_data(as_text=True)
    keeper.post("/documents/pool-rules/delete", data={"confirm": "pool-rules", "csrf_token": csrf(shown)})


def test_the_status_is_for_the_session_that_started_the_job(keeper):
    sign_in(keeper)
    job = started(upload(keeper, "hours.md", b"# Gym Hours\n\nThe gym opens at 6 am.\n", document_id="gym-hours"))
    assert finished(keeper, job)["state"] == "done"

    stranger = keeper.application.test_client()
    refused = status(stranger, job)
    assert refused.status_code == 401 and refused.get_json()["error"] == "sign_in"
    assert stranger.get(f"/documents/upload/{job}").status_code == 302  # to the sign-in form

    other_keeper = keeper.application.test_client()
    sign_in(other_keeper)  # the right token, but not the session that uploaded
    assert status(other_keeper, job).status_code == 404
    assert other_keeper.get(f"/documents/upload/{job}").status_code == 404

    for unknown in ("A" * 32, "x", "..%2F..%2F.keeper-session-key"):  # the last: no route's (400)
        response = status(keeper, unknown)
        assert response.status_code in (404, 400 if "%" in unknown else 404), unknown
    assert status(keeper, job).get_json()["report"]["document_id"] == "gym-hours"
    keeper.post("/documents/gym-hours/delete",
                data={"confirm": "gym-hours", "csrf_token": csrf(keeper.get("/documents").get_data(as_text=True))})


def test_another_worker_process_answers_for_the_job(keeper, sample_runtime):
    """gunicorn runs several processes and the browser's next poll may reach any: the job's state
    is kept under ARC_DATA_DIR, which they share (as they share the session key)."""
    sign_in(keeper)
    job = started(upload(keeper, "bikes.md", b"# Bike Racks\n\nBikes go in the racks by the gate.\n",
                         document_id="bike-racks"))
    assert finished(keeper, job)["state"] == "done"
    settings = keeper.application.extensions["arc"].runtime.settings
    other = create_app(runtime=Runtime(settings, sample_runtime.db, sample_runtime.embedder)).test_client()
    other.set_cookie("session", keeper.get_cookie("session").value)
    answer = status(other, job)
    assert answer.status_code == 200 and answer.get_json()["report"]["document_id"] == "bike-racks"
    keeper.post("/documents/bike-racks/delete",
                data={"confirm": "bike-racks", "csrf_token": csrf(keeper.get("/documents").get_data(as_text=True))})


@pytest.fixture()
def locked(make_database, embedder, tmp_path):
    """The pages over a knowledge base holding fence-rules, whose writers wait at most 2 s for the
    write lock; and a second connection, a long load, that can hold it."""
    url = make_database("keeperupload")
    db = Database(url, write_lock_wait=2.0)
    db.migrate(embedder.dim)
    settings = make_settings(tmp_path, url, api_token=TOKEN, ingest_token=TOKEN, write_lock_wait=2.0)
    app = create_app(runtime=Runtime(settings, db, embedder))
    client = app.test_client()
    sign_in(client)
    assert finished(client, started(upload(client, "fence-rules.md", b"# Fence Rules\n\nFences stand 6 feet at most.\n",
                                           document_id="fence-rules")))["state"] == "done"
    with psycopg.connect(url) as load:
        yield client, db, load
    db.close()


def stored_text(db: Database) -> dict[str, str]:
    with db.connect() as conn:
        return {d: t for d, t in conn.execute(
            "select document_id, string_agg(content, ' ' order by chunk_index) from knowledge_chunks group by 1")}


def test_a_failing_ingest_ends_in_the_error_and_stores_nothing(locked):
    client, db, load = locked
    before = stored_text(db)
    load.execute(sqlfiles.query("lock_writes"))  # a long load holds the write lock past the wait
    job = started(upload(client, "fence-rules-2025.md", b"# Fence Rules\n\nFences stand 8 feet at most.\n",
                         document_id="fence-rules", replace="true"))
    seen = set()
    deadline = time.monotonic() + 60
    while (body := status(client, job).get_json())["state"] == "running":  # read, embedded, then waiting to store
        seen.add(body["stage"])
        assert time.monotonic() < deadline
        time.sleep(0.05)
    load.rollback()
    assert "storing" in seen, seen
    assert body["state"] == "failed" and body["report"] is None
    assert "another ingest or delete has been writing the knowledge base" in body["error"]
    assert "nothing was stored" in body["error"].lower()
    page = client.get(f"/documents/upload/{job}").get_data(as_text=True)
    assert 'id="job-error"' in page and "another ingest or delete" in page
    assert stored_text(db) == before  # the 6-feet version, whole

    broken = finished(client, started(upload(client, "minutes.pdf", b"%PDF-1.4\nnot a pdf at all",
                                             document_id="minutes")))
    assert broken["state"] == "failed" and "minutes.pdf" in broken["error"], broken
    assert stored_text(db) == before
    with pytest.raises(knowledge_base.UnknownDocument):
        knowledge_base.document_chunks(db, "minutes", "default")


def test_a_job_whose_worker_process_stopped_reads_as_failed(keeper, tmp_path):
    """A worker process restarted mid-ingest takes its job with it (its transaction is rolled
    back): the page says so rather than waiting for ever."""
    from worker.serve.upload_jobs import UploadJobs

    sign_in(keeper)
    keeper.get("/documents")
    owner = keeper.application.extensions["arc"].runtime.settings.database.data_dir
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    with keeper.session_transaction() as session:
        jobs = UploadJobs.under(owner)
        job = jobs.create(session, file="long-scan.pdf", community="default", pid=gone.pid)
    body = status(keeper, job.id).get_json()
    assert body["state"] == "failed" and "stopped" in body["error"] and "nothing was stored" in body["error"].lower()


def test_a_busy_worker_refuses_an_upload_at_once(sample_runtime, tmp_path):
    settings = make_settings(tmp_path, sample_runtime.settings.database.database_url or sample_runtime.db.url,
                             api_token=TOKEN, ingest_token=TOKEN, queue_timeout=0.2)
    app = create_app(runtime=Runtime(settings, sample_runtime.db, sample_runtime.embedder))
    client = app.test_client()
    sign_in(client)
    with app.extensions["arc"].knowledge.ingest_admission.slot():  # another document being read
        refused = upload(client, "late.md", b"# Late\n\nToo late.\n", document_id="late")
    assert refused.status_code == 429 and "text/html" in refused.headers["Content-Type"]
    assert "busy" in refused.get_data(as_text=True)
    assert not list((settings.database.data_dir / "uploads").glob("*.json"))


def test_the_upload_form_needs_its_csrf_token(keeper):
    sign_in(keeper)
    response = keeper.post("/documents/upload", content_type="multipart/form-data", data={
        "file": (BytesIO(POOL.encode()), "pool.md"), "document_type": "other"})
    assert response.status_code == 400 and "text/html" in response.headers["Content-Type"]


def test_the_type_is_chosen_never_preselected_and_a_duplicate_is_refused_naming_the_stored_id(keeper):
    sign_in(keeper)
    page = keeper.get("/documents").get_data(as_text=True)
    select = re.search(r'<select name="document_type"[^>]*>(.*?)</select>', page, re.S)
    assert select and "required" in select.group(0), page[-3000:]
    assert re.search(r'<option value="" selected disabled>choose a type</option>', select.group(1))
    assert 'name="allow_duplicate"' in page
    untyped = keeper.post("/documents/upload", content_type="multipart/form-data", data={
        "csrf_token": csrf(page), "file": (BytesIO(POOL.encode()), "pool.md"), "document_type": ""})
    assert untyped.status_code == 422 and "document_type" in untyped.get_data(as_text=True)
    text = "# Kayak Rules\n\nKayaks may be stored beside a house, out of view from the street.\n"
    assert finished(keeper, started(upload(keeper, "kayaks.md", text.encode())))["state"] == "done"
    copy = finished(keeper, started(upload(keeper, "kayaks-copy.md", text.encode())))
    assert copy["state"] == "failed" and "'kayaks'" in copy["error"], copy
    # the page names its own checkbox, not the command line's flag
    assert "Store it even if the same text is stored under another id" in copy["error"], copy
    assert "--allow-duplicate" not in copy["error"], copy
    asked = finished(keeper, started(upload(keeper, "kayaks-copy.md", text.encode(), allow_duplicate="true")))
    assert asked["state"] == "done", asked
