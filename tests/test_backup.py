"""Backups: `arc-retrieval backup FILE` and `restore FILE [--replace]` (worker/store/backup.py).

A restore into an empty knowledge base answers every question as the original did (the sample
corpus on both targets, the embedded Postgres 18 and Supabase's PostgreSQL 15; one hoa-dev
community); a non-empty one, a truncated or a foreign file is refused with one line and nothing
changes; a backup runs while questions are answered; and a backup or restore killed at any
point leaves the knowledge base as it was and the file whole or absent. The README's commands
under "Backups and upgrades" run here too (test_the_readme_commands_back_up_and_restore).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psycopg
import pytest

from tests.helpers import make_settings
from worker.models import RetrievalRequest
from worker.service.caller import LOCAL
from worker.runtime import Runtime
from worker.service.knowledge import KnowledgeService
from worker.store import backup
from worker.store.database import Database

ROOT = Path(__file__).resolve().parent.parent
SAMPLE_QUESTIONS = ROOT / "worker" / "sample_corpus" / "questions.jsonl"
HOA_DEV = ROOT.parent / "shared" / "datasets" / "hoa-dev"
if not HOA_DEV.is_dir():
    HOA_DEV = Path("/work/shared/datasets/hoa-dev")
CLI = [sys.executable, "-m", "worker.cli"]


def _questions(path: Path, community: str | None = None) -> list[str]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r["question"] for r in rows if community is None or r.get("community") == community]


def _rounded(value):
    """Scores to 9 digits: a sum over rows in another physical order can move the last bit."""
    if isinstance(value, float):
        return round(value, 9)
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value


def _answers(url: str, embedder, tmp: Path, questions: list[str]) -> list[dict]:
    """Each question's answer (status, chunks in order, scores, context), without what differs
    between two runs of one database (timings, request id)."""
    db = Database(url)
    knowledge = KnowledgeService(Runtime(make_settings(tmp, url), db, embedder))
    try:
        return [
            _rounded(
                knowledge.ask(RetrievalRequest(query=q), caller=LOCAL, record=False).model_dump(
                    exclude={"timings_ms", "request_id", "debug"}
                )
            )
            for q in questions
        ]
    finally:
        knowledge.close()
        db.close()


def _loaded(url: str, embedder, tmp: Path, load) -> None:
    db = Database(url)
    db.migrate(embedder.dim)
    knowledge = KnowledgeService(Runtime(make_settings(tmp, url), db, embedder))
    try:
        load(knowledge)
        knowledge.prepare_calibrations()
    finally:
        knowledge.close()
        db.close()


def _fingerprint(url: str) -> dict[str, int | str]:
    """What the knowledge base holds: rows per table and a digest of the chunks."""
    with psycopg.connect(url) as conn:
        found: dict[str, int | str] = dict(backup.stored_rows(conn))
        row = conn.execute(
            "select md5(string_agg(id::text || content || embedding::text, ',' order by id)) from knowledge_chunks"
        ).fetchone()
        found["chunks_md5"] = str(row[0]) if row else ""
    return found


def test_a_restore_answers_the_sample_questions_as_the_original(database_factory, embedder, tmp_path):
    source, target = database_factory("bk_src"), database_factory("bk_dst")
    _loaded(source, embedder, tmp_path, lambda k: k.ingest_sample(caller=LOCAL))
    questions = _questions(SAMPLE_QUESTIONS)
    before = _answers(source, embedder, tmp_path, questions)
    header = backup.write_backup(source, tmp_path / "kb.arcbackup")
    assert header.rows["knowledge_chunks"] > 0 and header.rows["status_calibrations"] > 0
    Database(target).migrate(embedder.dim)  # the empty knowledge base a started worker has
    backup.restore_backup(target, backup.read_backup(tmp_path / "kb.arcbackup"), replace=False)
    Database(target).migrate(embedder.dim)
    after = _answers(target, embedder, tmp_path, questions)
    assert len(after) == len(questions) > 5
    for question, old, new in zip(questions, before, after, strict=True):
        assert new == old, question
    assert _fingerprint(target) == _fingerprint(source)


def test_a_backup_of_the_embedded_database_restores_into_postgres_15(make_database, pg15_server, embedder, tmp_path):
    """From the embedded PostgreSQL 18 to Supabase's PostgreSQL 15 (a keeper moving to Supabase):
    the archive pg_dump 18 writes, run as statements the older server knows."""
    import uuid

    from tests.helpers import database_url as _database_url

    source = make_database("bk_to15")
    name = f"bk15_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg15_server, autocommit=True) as conn:
        conn.execute(f'create database "{name}"')
    target = _database_url(pg15_server, name)
    _loaded(source, embedder, tmp_path, lambda k: k.ingest_sample(caller=LOCAL))
    questions = _questions(SAMPLE_QUESTIONS)
    before = _answers(source, embedder, tmp_path, questions)
    backup.write_backup(source, tmp_path / "to15.arcbackup")
    backup.restore_backup(target, backup.read_backup(tmp_path / "to15.arcbackup"), replace=False)
    Database(target).migrate(embedder.dim)
    assert _answers(target, embedder, tmp_path, questions) == before


@pytest.mark.skipif(not (HOA_DEV / "timbers" / "manifest.json").is_file(), reason=f"hoa-dev not found at {HOA_DEV}")
def test_a_restore_answers_a_hoa_dev_community_as_the_original(make_database, embedder, tmp_path):
    source, target = make_database("bk_timbers"), make_database("bk_timbers_dst")
    _loaded(source, embedder, tmp_path, lambda k: k.ingest_manifest(HOA_DEV / "timbers", community="timbers", caller=LOCAL))
    questions = _questions(HOA_DEV / "questions.jsonl", "timbers")
    before = _answers(source, embedder, tmp_path, questions)
    backup.write_backup(source, tmp_path / "timbers.arcbackup")
    backup.restore_backup(target, backup.read_backup(tmp_path / "timbers.arcbackup"), replace=False)
    Database(target).migrate(embedder.dim)
    after = _answers(target, embedder, tmp_path, questions)
    assert len(questions) >= 10
    for question, old, new in zip(questions, before, after, strict=True):
        assert new == old, question


# -- refusals: one line, nothing changed -------------------------------------------------------


@pytest.fixture(scope="module")
def sample_backup(make_database, embedder, tmp_path_factory) -> tuple[str, Path]:
    """A database holding the sample corpus and a backup of it."""
    tmp = tmp_path_factory.mktemp("backup")
    url = make_database("bk_sample")
    _loaded(url, embedder, tmp, lambda k: k.ingest_sample(caller=LOCAL))
    path = tmp / "sample.arcbackup"
    backup.write_backup(url, path)
    return url, path


def _cli(args: list[str], url: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*CLI, *args], capture_output=True, text=True, cwd=ROOT, timeout=300,
        env={**os.environ, "DATABASE_URL": url, **env},
    )


def _one_line_error(result: subprocess.CompletedProcess) -> str:
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_restore_refuses_a_knowledge_base_that_holds_data_unless_replace(sample_backup, make_database, embedder, tmp_path):
    _, path = sample_backup
    target = make_database("bk_full")
    Database(target).migrate(embedder.dim)
    with psycopg.connect(target) as conn:
        conn.execute("insert into query_log (query, status) values ('a question', 'success')")
    before = _fingerprint(target)
    line = _one_line_error(_cli(["restore", str(path)], target))
    assert "not empty" in line and "--replace" in line
    assert _fingerprint(target) == before
    done = _cli(["restore", str(path), "--replace"], target)
    assert done.returncode == 0, done.stderr
    assert "replaced" in done.stdout
    assert _fingerprint(target) == _fingerprint(sample_backup[0])


@pytest.mark.parametrize("damage", ["truncated", "foreign", "flipped", "trailer only"])
def test_a_damaged_or_foreign_file_is_refused_and_changes_nothing(sample_backup, make_database, embedder, tmp_path, damage):
    _, path = sample_backup
    data = path.read_bytes()
    bad = tmp_path / "bad.arcbackup"
    if damage == "truncated":
        bad.write_bytes(data[: len(data) * 2 // 3])
    elif damage == "foreign":
        bad.write_bytes(b"PGDMP" + data[5:])
    elif damage == "flipped":
        middle = len(data) // 2
        bad.write_bytes(data[:middle] + bytes([data[middle] ^ 1]) + data[middle + 1 :])
    else:
        bad.write_bytes(data[: len(backup.MAGIC)] + data[-backup.TRAILER_SIZE :])
    target = make_database("bk_bad")  # bare: a refused restore must not even migrate it
    line = _one_line_error(_cli(["restore", str(bad), "--replace"], target))
    assert re.search(r"not an arc-retrieval backup|incomplete|damaged", line), line
    with psycopg.connect(target) as conn:
        assert conn.execute("select to_regclass('public.knowledge_chunks')").fetchone()[0] is None


# -- while the worker serves -------------------------------------------------------------------


def test_questions_are_answered_while_a_backup_runs(sample_backup, embedder, tmp_path):
    url, _ = sample_backup
    questions = _questions(SAMPLE_QUESTIONS)
    db = Database(url, statement_timeout_ms=5000)
    knowledge = KnowledgeService(Runtime(make_settings(tmp_path, url), db, embedder))
    done = threading.Event()
    headers: list[backup.BackupHeader] = []
    errors: list[BaseException] = []

    def backups() -> None:
        try:
            for n in range(3):
                headers.append(backup.write_backup(url, tmp_path / f"while-{n}.arcbackup"))
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            done.set()

    slowest, answered = 0.0, 0
    try:
        knowledge.ask(RetrievalRequest(query=questions[0]), caller=LOCAL, record=False)  # warm: model and pool
        threading.Thread(target=backups, daemon=True).start()
        while not done.is_set() or answered < 10:
            started = time.monotonic()
            answer = knowledge.ask(RetrievalRequest(query=questions[answered % len(questions)]), caller=LOCAL)  # logged: a write
            slowest = max(slowest, time.monotonic() - started)
            assert answer.status in ("success", "low_confidence", "no_results")
            answered += 1
    finally:
        knowledge.close()
        db.close()
    assert not errors and len(headers) == 3
    assert slowest < 2.0, f"an answer took {slowest:.2f} s while a backup ran"
    # each backup is one snapshot: its header's counts are what its archive holds
    for n, header in enumerate(headers):
        assert backup.read_backup(tmp_path / f"while-{n}.arcbackup").header == header


def test_a_serving_worker_answers_from_the_restored_knowledge_base(sample_backup, make_database, embedder, tmp_path):
    """A restore --replace under a worker that keeps its pool, statements and caches: its next
    answers come from the restored chunks (new tables, new functions, versions moved on)."""
    _source, path = sample_backup
    target = make_database("bk_serving")
    _loaded(target, embedder, tmp_path, lambda k: k.ingest_sample(caller=LOCAL))
    question = _questions(SAMPLE_QUESTIONS)[0]
    db = Database(target)
    knowledge = KnowledgeService(Runtime(make_settings(tmp_path, target), db, embedder))
    try:
        first = knowledge.ask(RetrievalRequest(query=question), caller=LOCAL, record=False)
        with psycopg.connect(target, autocommit=True) as conn:  # the restore must replace this
            conn.execute("update knowledge_chunks set content = content || ' (edited)' where id = %s",
                         (first.chunks[0].id,))
        edited = knowledge.ask(RetrievalRequest(query=question), caller=LOCAL, record=False)
        assert any(c.content.endswith("(edited)") for c in edited.chunks)
        done = _cli(["restore", str(path), "--replace"], target)
        assert done.returncode == 0, done.stderr
        after = knowledge.ask(RetrievalRequest(query=question), caller=LOCAL, record=False)
    finally:
        knowledge.close()
        db.close()
    assert after.status == first.status
    assert not any(c.content.endswith("(edited)") for c in after.chunks)
    assert [c.id for c in after.chunks] == [c.id for c in first.chunks]


def test_a_restore_undone_by_a_deadlock_is_run_again(sample_backup, make_database, embedder, tmp_path):
    """A serving worker's short transaction that holds a table the restore replaces and then asks
    for the writers' lock the restore holds: a deadlock, which Postgres breaks by undoing the
    restore (it waited first). The restore is run again once that transaction is through."""
    _, path = sample_backup
    target = make_database("bk_deadlock")
    _loaded(target, embedder, tmp_path, lambda k: k.ingest_sample(community="other", caller=LOCAL))
    holder = psycopg.connect(target)
    holder.execute("lock table query_log in access share mode")  # held, as a read of the log holds it
    outcome: dict[str, object] = {}

    def restore() -> None:
        try:
            outcome["report"] = backup.restore_backup(target, backup.read_backup(path), replace=True)
        except backup.BackupError as exc:
            outcome["error"] = str(exc)

    thread = threading.Thread(target=restore)
    thread.start()
    with psycopg.connect(target, autocommit=True) as watch:
        deadline = time.monotonic() + 60
        while not watch.execute("select count(*) from pg_locks l join pg_class c on c.oid = l.relation "
                                "where not l.granted and c.relname = 'query_log'").fetchone()[0]:
            assert thread.is_alive() and time.monotonic() < deadline, outcome
            time.sleep(0.02)
    # now the holder asks for what the restore holds: Postgres undoes one of the two
    holder.execute("select pg_advisory_xact_lock(hashtext('arc-retrieval:writes'))")
    holder.commit()
    holder.close()
    thread.join(120)
    assert "error" not in outcome, outcome
    header = backup.read_backup(path).header
    with psycopg.connect(target) as conn:  # the backup's knowledge base, the one replaced gone
        assert conn.execute("select count(*) from knowledge_chunks").fetchone()[0] == header.rows["knowledge_chunks"]
        assert not conn.execute("select 1 from knowledge_chunks where community = 'other'").fetchone()


# -- killed mid-way -----------------------------------------------------------------------------


def _killed_at(args: list[str], url: str, step: str | None, tmp_path: Path, after: float = 0.0,
               tmpdir: Path | None = None) -> None:
    """Run the command, wait until it reaches ``step`` (or ``after`` seconds), SIGKILL it and
    every process it started (pg_dump, pg_restore). ``tmpdir``: its temporary directory."""
    flag = tmp_path / f"reached-{step}"
    env = {**os.environ, "DATABASE_URL": url} | ({"TMPDIR": str(tmpdir)} if tmpdir else {})
    if step:
        env |= {"ARC_BACKUP_PAUSE_AT": step, "ARC_BACKUP_PAUSE_FLAG": str(flag)}
    process = subprocess.Popen([*CLI, *args], cwd=ROOT, env=env, start_new_session=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    if step:
        while not flag.exists():
            assert process.poll() is None, process.stderr.read() if process.stderr else ""
            assert time.monotonic() < deadline, f"never reached {step}"
            time.sleep(0.02)
    else:
        time.sleep(after)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()


@pytest.mark.parametrize("step,after", [("backup-written", 0), ("backup-synced", 0), (None, 1.0), (None, 1.6)])
def test_a_backup_killed_mid_way_leaves_the_previous_file_whole(sample_backup, tmp_path, step, after):
    url, path = sample_backup
    target = tmp_path / "nightly.arcbackup"
    target.write_bytes(path.read_bytes())
    _killed_at(["backup", str(target)], url, step, tmp_path, after=after)
    if step is not None:
        assert target.read_bytes() == path.read_bytes()
    backup.read_backup(target)  # the previous file, or (a timed kill after the rename) the new one, whole
    partials = list(tmp_path.glob(".nightly.arcbackup.partial-*"))
    if step == "backup-written":  # the archive without its trailer: refused, never taken for a backup
        with pytest.raises(backup.BackupError, match="incomplete"):
            backup.read_backup(partials[0])
    elif step == "backup-synced":  # whole, only not renamed yet
        backup.read_backup(partials[0])
    fresh = tmp_path / "fresh.arcbackup"
    _killed_at(["backup", str(fresh)], url, step, tmp_path, after=after)
    assert not fresh.exists() or backup.read_backup(fresh).header.rows
    backup.write_backup(url, target)  # the next backup removes what killed runs left
    assert not list(tmp_path.glob(".nightly.arcbackup.partial-*"))


@pytest.mark.parametrize("step,after", [("restore-loaded", 0), ("restore-before-commit", 0), (None, 2.0), (None, 3.0)])
def test_a_restore_killed_mid_way_leaves_the_knowledge_base_as_it_was(
    sample_backup, make_database, embedder, tmp_path, step, after, monkeypatch
):
    source, path = sample_backup
    target = make_database("bk_kill")
    _loaded(target, embedder, tmp_path, lambda k: k.ingest_sample(community="other", caller=LOCAL))
    before = _fingerprint(target)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    _killed_at(["restore", str(path), "--replace"], target, step, tmp_path, after=after, tmpdir=scratch)
    time.sleep(0.5)  # the server notices the lost connection and rolls back
    found = _fingerprint(target)
    if step is not None:  # killed holding its copy of the archive, which it could not remove
        assert [p.name for p in scratch.glob("arc-restore-*/archive.dump")], list(scratch.iterdir())
    if step is None and found == _fingerprint(source):
        return  # the timed kill came after the commit: the whole backup, which is also whole
    assert found == before
    # the next restore removes the copy the killed one left
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    backup.restore_backup(target, backup.read_backup(path), replace=True)
    assert list(scratch.iterdir()) == []


# -- the README's commands, on the embedded database --------------------------------------------


def _readme_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("\n## Backups and upgrades\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"<!-- docs: tests/test_backup.py runs these -->\n```sh\n(.*?)```", section, re.S)
    assert block, "the README's backup block is missing its marker"
    return [line for line in block[1].splitlines() if line.strip() and not line.startswith("#")]


def test_the_readme_commands_back_up_and_restore(tmp_path, worker_process):
    """The README's block, as written, on an embedded database: back up, then restore the
    backup into a fresh data directory and over the full one (--replace)."""
    commands = _readme_commands()
    assert any(" backup " in c for c in commands) and any(" restore " in c for c in commands)
    base = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "ARC_DATA_DIR", "XDG_RUNTIME_DIR")}
    venv_bin = str(Path(sys.executable).parent)

    def run(line: str, data_dir: Path) -> subprocess.CompletedProcess:
        argv = shlex.split(line.replace(".venv/bin/", venv_bin + "/"))
        return subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=300,
                              env={**base, "ARC_DATA_DIR": str(data_dir)})

    tmp_path.chmod(0o755)  # as root the server runs as the user pgserver, which must reach the folders
    first, second = tmp_path / "first", tmp_path / "second"
    loaded = run(".venv/bin/arc-retrieval ingest --sample", first)
    assert loaded.returncode == 0, loaded.stderr
    for line in commands:
        result = run(line, first if " backup " in line else second)
        assert result.returncode == 0, f"{line}: {result.stderr}"
    listed = run(".venv/bin/arc-retrieval documents list", second)
    assert listed.returncode == 0 and "design-guidelines-2024" in listed.stdout, listed.stderr


def test_the_keepers_confirmations_and_the_chats_votes_come_back(database_factory, embedder, tmp_path):
    """Hours of a keeper's work: a backup holds the confirmations (still resolved to their
    passages after the restore) and the votes."""
    from worker.service.confirmations import ConfirmationService, ConfirmRequest, FeedbackRequest

    source, target = database_factory("bk_conf_src"), database_factory("bk_conf_dst")
    _loaded(source, embedder, tmp_path, lambda k: k.ingest_sample(caller=LOCAL))
    db = Database(source)
    knowledge = KnowledgeService(Runtime(make_settings(tmp_path, source), db, embedder))
    try:
        answer = knowledge.ask(RetrievalRequest(query="How tall can a backyard fence be?"), caller=LOCAL,
                               request_id="vote-for-backup")
        confirmations = ConfirmationService(knowledge)
        confirmations.confirm(ConfirmRequest(query="How tall can a backyard fence be?",
                                             chunk_id=answer.chunks[0].id), LOCAL)
        confirmations.confirm(ConfirmRequest(query="What day is trash pickup?", answer="none"), LOCAL)
        confirmations.vote(FeedbackRequest(request_id="vote-for-backup", helpful=True, source=1), LOCAL)
        before = [(c.query, c.state, c.answer) for c in confirmations.list(None, LOCAL, candidates=False)]
    finally:
        knowledge.close()
        db.close()
    backup.write_backup(source, tmp_path / "conf.arcbackup")
    Database(target).migrate(embedder.dim)
    backup.restore_backup(target, backup.read_backup(tmp_path / "conf.arcbackup"), replace=False)
    restored = _fingerprint(target)
    assert restored == _fingerprint(source)
    assert restored["answer_confirmations"] == 2 and restored["answer_feedback"] == 1
    db = Database(target)
    knowledge = KnowledgeService(Runtime(make_settings(tmp_path, target), db, embedder))
    try:
        after = [(c.query, c.state, c.answer) for c in ConfirmationService(knowledge).list(None, LOCAL,
                                                                                             candidates=False)]
    finally:
        knowledge.close()
        db.close()
    assert after == before and all(state == "confirmed" for _, state, _ in after), after
