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


def test_serve_listens_where_arc_bind_says(worker_process, tmp_path):
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
    assert settings.embedding.embedding_threads == 1
    single = build_embedder(settings)
    assert single._session.get_session_options().intra_op_num_threads == 1
    texts = ["Fences may not exceed six feet.", "Who approves exterior paint colours?"]
    np.testing.assert_allclose(single.embed(texts), embedder.embed(texts), atol=1e-5)


def test_every_setting_is_declared_once_in_its_group():
    """One way to declare a setting: a field of a group, named after its variable, described."""
    from worker.config import ENV_VARS, GROUP_OF, Settings

    assert len(ENV_VARS) == len(GROUP_OF) == len(set(ENV_VARS.values())) >= 66
    for group, info in Settings.model_fields.items():
        for name, field in info.annotation.model_fields.items():
            if field.validation_alias is None:
                continue  # derived from the others, not read from the environment
            assert name == field.validation_alias.lower().removeprefix("arc_"), (group, name)
            assert GROUP_OF[name] == group and field.description, name


def test_settings_are_read_into_their_groups_and_replaced_by_name(tmp_path):
    from worker.config import ConfigError, Settings

    settings = Settings.from_env({"ARC_MAX_CONCURRENT": "3", "ARC_SUCCESS_AT": "0.6"}, data_dir=tmp_path)
    assert (settings.limits.max_concurrent, settings.status.success_at) == (3, 0.6)
    assert settings.database.data_dir == tmp_path
    changed = settings.replace(max_concurrent=5, api_token="t" * 24)
    assert (changed.limits.max_concurrent, changed.auth.api_token, changed.status.success_at) == (5, "t" * 24, 0.6)
    assert settings.limits.max_concurrent == 3, "replace makes new settings"
    with pytest.raises(ConfigError, match="ARC_MAX_CONCURRENT: "):
        settings.replace(max_concurrent=0)  # validated again, named by its variable
    with pytest.raises(ConfigError, match="max_concurent: no such setting"):
        settings.replace(max_concurent=5)


def test_defaults_computed_from_other_settings():
    from worker.config import Settings
    from worker.embedding_models import LOCAL_MODEL, OPENAI_DIM, OPENAI_MODEL

    plain = Settings.from_env({})
    assert (plain.embedding.embedding_provider, plain.embedding.embedding_model) == ("local", LOCAL_MODEL)
    assert plain.reranking.reranker == "none" and not plain.embedding.embedding_from_key
    keyed = Settings.from_env({"OPENAI_API_KEY": "sk-test"})
    embedding = keyed.embedding
    assert (embedding.embedding_provider, embedding.embedding_model, embedding.embedding_dim) == (
        "openai", OPENAI_MODEL, OPENAI_DIM)
    assert embedding.embedding_from_key and keyed.reranking.reranker == "llm"
    local = keyed.with_local_embeddings()
    assert local.embedding.embedding_provider == "local" and local.reranking.reranker == "llm"
    assert local.embedding.embedding_from_key, "still the key's choice, kept by the runtime"
    chosen = Settings.from_env({"OPENAI_API_KEY": "sk-test", "EMBEDDING_PROVIDER": "local", "RERANKER": "none"})
    assert not chosen.embedding.embedding_from_key and chosen.reranking.reranker == "none"


def test_the_configuration_table_is_printed_by_the_module():
    result = subprocess.run([sys.executable, "-m", "worker.config"], capture_output=True, text=True, cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "| variable | default | meaning |"
    assert "| `ARC_MAX_CONCURRENT` | 8 | requests running the pipeline at once, per process |" in lines
    assert "| `ARC_DATA_DIR` | `.arc-data` | where the embedded database and the caches live |" in lines
