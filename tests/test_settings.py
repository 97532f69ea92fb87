"""Every setting is checked at start: a bad value is one line naming the variable, never a
traceback or a worker that answers 500; ``serve`` listens where ARC_BIND says."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

ROOT = Path(__file__).resolve().parent.parent


def cli(*args: str, env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if not k.startswith("ARC_") and k != "DATABASE_URL"}
    full.update(env)
    return subprocess.run([sys.executable, "-m", "worker.cli", *args], env=full, capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


@pytest.mark.parametrize("variable,value", [
    ("ARC_POOL_SIZE", "-3"), ("ARC_LOG_LEVEL", "LOUD"), ("ARC_STATEMENT_TIMEOUT_MS", "0"),
    ("ARC_WRITE_LOCK_WAIT", "0"),
    ("ARC_MAX_CONCURRENT", "0"), ("EMBEDDING_TIMEOUT", "-1"), ("ARC_RATE_LIMIT", "fast"),
    ("ARC_EMBEDDING_THREADS", "-1"), ("ARC_OCR", "maybe"), ("ARC_OCR_LANGUAGE", "eng;rm"),
])
def test_a_bad_setting_is_one_line_naming_it(variable, value, tmp_path):
    result = cli("serve", env={"ARC_DATA_DIR": str(tmp_path), variable: value})
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines and variable in lines[-1] and "Traceback" not in result.stderr, result.stderr


@pytest.mark.parametrize("variable,value", [("WEB_CONCURRENCY", "many"), ("ARC_THREADS", "0"),
                                            ("ARC_BIND", "nowhere")])
def test_bad_gunicorn_variables_are_one_line_too(variable, value, tmp_path):
    result = cli("serve", env={"ARC_DATA_DIR": str(tmp_path), variable: value})
    assert result.returncode != 0
    assert variable in result.stderr and "Traceback" not in result.stderr, result.stderr


def test_serve_listens_where_arc_bind_says(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARC_") and k != "DATABASE_URL"}
    env.update({"ARC_DATA_DIR": str(tmp_path), "ARC_BIND": f"127.0.0.1:{port}", "WEB_CONCURRENCY": "1"})
    process = subprocess.Popen([sys.executable, "-m", "worker.cli", "serve"], env=env, cwd=ROOT,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                if requests.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                time.sleep(0.3)
        else:
            pytest.fail("serve did not listen on ARC_BIND")
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=60)


def test_embedding_threads_change_the_speed_not_the_vectors(embedder):
    """The server's one onnxruntime thread per process (ARC_EMBEDDING_THREADS) gives the same
    vectors as a thread per core."""
    import numpy as np

    from worker.config import Settings
    from worker.embeddings import build_embedder

    settings = Settings.from_env({"ARC_EMBEDDING_THREADS": "1"})
    assert settings.embedding_threads == 1
    single = build_embedder(settings)
    assert single._session.get_session_options().intra_op_num_threads == 1
    texts = ["Fences may not exceed six feet.", "Who approves exterior paint colours?"]
    np.testing.assert_allclose(single.embed(texts), embedder.embed(texts), atol=1e-5)
