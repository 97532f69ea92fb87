"""The Docker image, built and run for real: the README's Docker section, line by line.

No Docker daemon and no image registry are reachable here, so the lines run with Debian's podman
(`docker` becomes `podman`, and the build uses the locally made `localhost/python:3.11-slim`:
`--pull=never`). `make test` installs both with scripts/install-podman.sh (root, as in CI); the
image's layers stay in podman's storage, so a run after the first rebuilds only what changed."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import socket
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import shell_blocks

ROOT = Path(__file__).resolve().parent.parent
BASE_IMAGE = "localhost/python:3.11-slim"
IMAGE = "arc-retrieval"
# `docker` as a shell function: podman, with the build kept off the network's image registries
# (the base image is local) and in Docker's image format (OCI drops the HEALTHCHECK).
DOCKER_IS_PODMAN = ('docker() { if [ "$1" = build ]; then shift; '
                    'podman build --pull=never --network host --format docker "$@"; else podman "$@"; fi; }\n')

pytestmark = pytest.mark.docker


def podman(*args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["podman", *args], capture_output=True, text=True, timeout=timeout, check=check)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def docker_section() -> list[str]:
    """The commands of the README's Docker section, continuation lines joined."""
    blocks = [block for block in shell_blocks() if block.section == "Docker"]
    assert len(blocks) == 1, "the README has one shell block under '## Docker'"
    return blocks[0].commands


README_TOKEN = "change-me-to-32-random-characters"  # the README's placeholder, replaced by a fresh token

class Walk:
    """The README's lines with this run's container, volume, port and token in place of the
    README's, so a run never meets another's (or a user's) container."""

    def __init__(self) -> None:
        suffix = uuid.uuid4().hex[:8]
        self.container = f"arc-test-{suffix}"
        self.volume = f"arc-test-data-{suffix}"
        self.port = free_port()
        self.token = f"token-{uuid.uuid4().hex}"  # at least 24 characters, as the worker requires

    def substitute(self, command: str) -> str:
        command = command.replace("arc-worker", self.container).replace("arc-data:/data", f"{self.volume}:/data")
        command = command.replace("-p 8080:8080", f"-p 127.0.0.1:{self.port}:8080")
        return command.replace("localhost:8080", f"localhost:{self.port}").replace(README_TOKEN, self.token)

    def run(self, command: str, timeout: float) -> subprocess.CompletedProcess:
        script = DOCKER_IS_PODMAN + "set -euo pipefail\n" + self.substitute(command)
        return subprocess.run(["bash", "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=timeout)

    def ask(self, query: str, token: str | None = None) -> tuple[int, dict]:
        """A question the README's way (curl), with another question or token."""
        out = subprocess.run(
            ["curl", "-s", "-w", "\n%{http_code}", f"http://localhost:{self.port}/webhook/arc-retrieval",
             "-H", f"X-ARC-Token: {self.token if token is None else token}",
             "-H", "Content-Type: application/json", "-d", json.dumps({"query": query})],
            capture_output=True, text=True, timeout=60, check=True).stdout
        body, _, status = out.rpartition("\n")
        return int(status), json.loads(body) if body.strip() else {}

    def cleanup(self) -> None:
        podman("rm", "-f", "-t", "0", self.container, check=False)
        podman("volume", "rm", "-f", self.volume, check=False)
        # Each build after a change leaves the previous image untagged (1 GB); its shared layers
        # stay, as the new image uses them.
        podman("image", "prune", "-f", check=False)


@pytest.fixture(scope="module")
def walk() -> Iterator[Walk]:
    if shutil.which("podman") is None or shutil.which("curl") is None:
        pytest.skip("podman (and curl) missing: `make test` installs podman as root (scripts/install-podman.sh)")
    if podman("image", "exists", BASE_IMAGE, check=False).returncode != 0:
        pytest.skip(f"{BASE_IMAGE} missing: `make test` makes it as root (scripts/install-podman.sh)")
    walk = Walk()
    yield walk
    walk.cleanup()


def test_the_readme_docker_section_builds_runs_answers_and_stops(walk: Walk):
    commands = docker_section()
    kinds = [shlex.split(c)[:2] for c in commands]
    assert kinds == [["docker", "build"], ["docker", "run"], ["until", "curl"], ["docker", "exec"],
                     ["curl", "-s"], ["docker", "stop"]], commands
    build, run, wait_ready, ingest, ask, stop = commands
    assert "-e ARC_API_TOKEN=" in run and ":/data" in run and f"X-ARC-Token: {README_TOKEN}" in ask

    built = walk.run(build, timeout=1800)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    started = walk.run(run, timeout=120)
    assert started.returncode == 0, started.stderr
    ready = walk.run(f"timeout 120 bash -c {shlex.quote(wait_ready)}", timeout=150)
    assert ready.returncode == 0, podman("logs", walk.container, check=False).stderr[-3000:]
    assert podman("healthcheck", "run", walk.container, check=False).returncode == 0  # the image's HEALTHCHECK

    loaded = walk.run(ingest, timeout=300)
    assert loaded.returncode == 0, loaded.stderr[-3000:]
    assert re.search(r"ingested 6 document\(s\), \d+ chunk", loaded.stdout), loaded.stdout
    answered = walk.run(ask, timeout=60)
    assert answered.returncode == 0, answered.stderr
    answer = json.loads(answered.stdout)
    assert answer["status"] == "success", answer
    assert answer["chunks"][0]["document_id"] == "design-guidelines-2024"
    assert "6 feet" in answer["context"] or "6 ft" in answer["context"] or "six feet" in answer["context"].lower()
    assert walk.ask("How tall can a backyard fence be?", token="wrong")[0] == 401

    stopped = walk.run(stop, timeout=60)
    assert stopped.returncode == 0, stopped.stderr
    state = json.loads(podman("inspect", walk.container).stdout)[0]["State"]
    assert state["Status"] == "exited" and state["ExitCode"] == 0, state
    logs = podman("logs", walk.container).stdout + podman("logs", walk.container).stderr
    assert "Traceback" not in logs and walk.token not in logs


def test_the_data_volume_keeps_the_knowledge_base(walk: Walk):
    """A new container on the same volume answers from what the first one loaded."""
    if podman("volume", "exists", walk.volume, check=False).returncode != 0:
        pytest.skip("needs the walk through above")
    podman("rm", walk.container)
    run = next(c for c in docker_section() if c.startswith("docker run"))
    assert walk.run(run, timeout=120).returncode == 0
    try:
        wait_ready = next(c for c in docker_section() if c.startswith("until "))
        assert walk.run(f"timeout 120 bash -c {shlex.quote(wait_ready)}", timeout=150).returncode == 0
        status, answer = walk.ask("Can I build a shed in my backyard?")
        assert status == 200 and answer["status"] == "success", answer
        assert {c["document_id"] for c in answer["chunks"]} & {"decision-2024-007", "design-guidelines-2024"}
    finally:
        podman("stop", "-t", "30", walk.container, check=False)


def test_the_image_refuses_to_listen_without_a_token(walk: Walk):
    if podman("image", "exists", IMAGE, check=False).returncode != 0:
        pytest.skip("needs the image the walk through builds")
    refused = podman("run", "--rm", IMAGE, timeout=120, check=False)
    assert refused.returncode == 1
    output = refused.stdout + refused.stderr
    assert "ARC_API_TOKEN" in output and "Traceback" not in output
