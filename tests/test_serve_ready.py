"""`arc-retrieval serve` says once, when it answers, where it listens and which knowledge base it
serves: one line on stdout, not one per worker process or per restart, and no password."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from worker.store.database import Database
from worker.ingest.ingestor import Ingestor, ingest_sample_corpus

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def sample_database(make_database, embedder, name: str) -> str:
    url = make_database(name)
    db = Database(url)
    db.migrate(embedder.dim)
    ingest_sample_corpus(Ingestor(db, embedder))
    db.close()
    return url


def serve(url: str, tmp_path: Path, port: int, stdout: int) -> tuple[subprocess.Popen, object]:
    """``arc-retrieval serve`` with two worker processes, its stderr in ``tmp_path/stderr``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ARC_", "SUPABASE_", "OPENAI_"))}
    env.update(DATABASE_URL=url, ARC_DATA_DIR=str(tmp_path), WEB_CONCURRENCY="2")
    log = open(tmp_path / "stderr", "w")
    process = subprocess.Popen([sys.executable, "-m", "worker.cli", "serve", "--port", str(port)], cwd=ROOT, env=env,
                               stdout=stdout, stderr=log, text=True, start_new_session=True)
    return process, log


def test_serve_says_once_when_ready_where_it_listens_and_what_it_serves(make_database, embedder, tmp_path):
    url = sample_database(make_database, embedder, "ready")
    assert "postgres:@" in url
    port = free_port()
    process, log = serve(url.replace("postgres:@", "postgres:pw-not-to-print@", 1), tmp_path, port, subprocess.PIPE)
    try:
        ready, _, _ = select.select([process.stdout], [], [], 120)
        assert ready, "nothing printed within 120 s"
        line = process.stdout.readline()
        # printed when ready: the server answers at once
        assert requests.get(f"http://127.0.0.1:{port}/readyz", timeout=5).status_code == 200
        deadline = time.monotonic() + 60  # both workers up, so a second announcement would be out by now
        while (tmp_path / "stderr").read_text().count("database schema ready") < 2:
            assert time.monotonic() < deadline, (tmp_path / "stderr").read_text()[-2000:]
            time.sleep(0.2)
        time.sleep(1)
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        rest, _ = process.communicate(timeout=30)
        log.close()
    host = url.split("host=", 1)[1].split("&")[0]
    name = url.split("/")[3].split("?")[0]
    assert line == (f"arc-retrieval ready on http://127.0.0.1:{port} (POST /webhook/arc-retrieval): knowledge base "
                    f"6 document(s), 39 chunk(s) in Postgres postgres@{host}:5432/{name}; "
                    f"embeddings all-MiniLM-L6-v2, vector(384)\n")
    assert "arc-retrieval ready" not in rest and "pw-not-to-print" not in line + rest


def wait_ready(process: subprocess.Popen, port: int, tmp_path: Path) -> None:
    deadline = time.monotonic() + 120
    while True:
        assert process.poll() is None and time.monotonic() < deadline, (tmp_path / "stderr").read_text()[-2000:]
        try:
            if requests.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200:
                return
        except requests.RequestException:
            pass
        time.sleep(0.2)


def first_answer(url: str, tmp_path: Path) -> dict:
    """Start ``serve``, ask one question the moment it is ready, stop it."""
    port = free_port()
    process, log = serve(url, tmp_path, port, subprocess.DEVNULL)
    try:
        wait_ready(process, port, tmp_path)
        return requests.post(f"http://127.0.0.1:{port}/webhook/arc-retrieval",
                             json={"query": "What is the maximum fence height allowed?"}, timeout=60).json()
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.communicate(timeout=30)
        log.close()


def test_a_fresh_serve_answers_its_first_question_calibrated_and_so_does_a_restart(make_database, embedder,
                                                                                    tmp_path):
    """Nothing stored yet (documents loaded by a writer that did not measure): the first question
    is answered on the calibration, measured once and stored. After a restart the first question
    is answered on the stored one, read rather than measured again."""
    import psycopg

    url = sample_database(make_database, embedder, "calibrated_at_start")
    answer = first_answer(url, tmp_path)
    assert answer["status"] == "success" and answer["confidence"]["calibrated"] is True, answer["confidence"]
    with psycopg.connect(url, autocommit=True) as conn:
        floor, version = conn.execute("select floor, kb_version from status_calibrations").fetchone()
        assert floor == pytest.approx(answer["confidence"]["floor"], abs=1e-4)
        # a mark the restarted server can only have read: no measurement gives exactly this floor
        conn.execute("update status_calibrations set floor = 0.0123")
    again = first_answer(url, tmp_path)
    assert again["confidence"]["calibrated"] is True and again["confidence"]["floor"] == 0.0123
    assert again["confidence"]["kb_version"] == version
    assert "status calibrated" not in (tmp_path / "stderr").read_text()


def _forward(listener, unix_path: str) -> None:
    """A TCP port in front of the embedded Postgres's unix socket: the database "comes up" when
    this starts accepting."""
    import socket
    import threading

    def pipe(a, b) -> None:
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        finally:
            for s in (a, b):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    while True:
        try:
            client, _ = listener.accept()
        except OSError:
            return
        server = socket.socket(socket.AF_UNIX)
        server.connect(unix_path)
        for a, b in ((client, server), (server, client)):
            threading.Thread(target=pipe, args=(a, b), daemon=True).start()


def test_serve_waits_for_an_unreachable_database_and_says_ready_only_when_it_answers(
        make_database, embedder, tmp_path):
    import socket
    import threading

    url = sample_database(make_database, embedder, "late")
    host = url.split("host=", 1)[1].split("&")[0]
    name = url.split("/")[3].split("?")[0]
    db_port, port = free_port(), free_port()
    process, log = serve(f"postgresql://postgres:pw-not-to-print@127.0.0.1:{db_port}/{name}", tmp_path, port,
                         subprocess.PIPE)
    listener = socket.socket()
    try:
        deadline = time.monotonic() + 60
        while "waiting for the database" not in (tmp_path / "stderr").read_text():
            assert time.monotonic() < deadline and process.poll() is None, (tmp_path / "stderr").read_text()[-2000:]
            time.sleep(0.2)
        time.sleep(3)
        assert not select.select([process.stdout], [], [], 0)[0], "ready said before the database answered"
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", db_port))
        listener.listen(16)
        threading.Thread(target=_forward, args=(listener, f"{host}/.s.PGSQL.5432"), daemon=True).start()
        ready, _, _ = select.select([process.stdout], [], [], 60)
        assert ready, (tmp_path / "stderr").read_text()[-2000:]
        line = process.stdout.readline()
        assert requests.get(f"http://127.0.0.1:{port}/readyz", timeout=5).status_code == 200
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        rest, _ = process.communicate(timeout=30)
        log.close()
        listener.close()
    stderr = (tmp_path / "stderr").read_text()
    waiting = [entry for entry in stderr.splitlines() if "waiting for the database" in entry]
    assert len(waiting) == 1 and f"Postgres postgres@127.0.0.1:{db_port}/{name} (DATABASE_URL)" in waiting[0]
    assert line.startswith(f"arc-retrieval ready on http://127.0.0.1:{port} ") and "6 document(s)" in line, line
    assert "pw-not-to-print" not in stderr + line + rest and "Traceback" not in stderr
    assert stderr.count("error connecting") == 0, stderr[-2000:]  # no retry warnings while it waits


def test_an_unwritable_data_folder_is_one_line_naming_it(worker_process, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ARC_", "SUPABASE_", "OPENAI_", "DATABASE_"))}
    env["ARC_DATA_DIR"] = "/dev/null/arc"
    for command in (["serve", "--port", str(free_port())], ["ask", "How tall can a fence be?"]):
        done = subprocess.run([sys.executable, "-m", "worker.cli", *command], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=120)
        lines = [line for line in done.stderr.splitlines() if line.strip() and '"level"' not in line]
        assert done.returncode == 1 and len(lines) == 1, done.stderr[-2000:]
        assert "ARC_DATA_DIR /dev/null/arc" in lines[0] and "set ARC_DATA_DIR to a folder" in lines[0], lines
