"""A private temporary folder that a killed process left (a restore's copy of the whole knowledge
base, the server's ready marker) goes at the next one's start (worker/scratch.py)."""

from __future__ import annotations

import os
import stat
import subprocess
import tempfile

from worker import scratch


def _dead_pid() -> int:
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


def test_a_folder_of_a_process_gone_is_removed_and_no_other(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = tmp_path / f"arc-restore-{_dead_pid()}-k1ll3d"
    dead.mkdir()
    (dead / "archive.dump").write_bytes(b"every row of the knowledge base")
    running = tmp_path / f"arc-restore-{os.getppid()}-alive"  # the process that started this test
    mine = tmp_path / f"arc-restore-{os.getpid()}-mine"
    unnamed = tmp_path / "arc-restore-03u5xnm7"  # made before folders carried their process: unknown
    other_kind = tmp_path / f"arc-ready-{_dead_pid()}-x"
    for kept in (running, mine, unnamed, other_kind):
        kept.mkdir()

    made = scratch.folder("arc-restore-")

    assert not dead.exists()
    assert running.exists() and mine.exists() and unnamed.exists() and other_kind.exists()
    assert made.parent == tmp_path and made.name.startswith(f"arc-restore-{os.getpid()}-")
    assert stat.S_IMODE(made.stat().st_mode) == 0o700


def test_the_scratch_folder_goes_on_the_way_out(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with scratch.scratch("arc-restore-") as folder:
        (folder / "archive.dump").write_bytes(b"x")
    assert list(tmp_path.iterdir()) == []
