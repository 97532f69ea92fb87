"""ruff and mypy keep worker/ clean (their settings are in pyproject.toml; `make lint` also checks
the formatting). Skipped where the test dependencies ruff and mypy are not installed."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
RUFF = shutil.which("ruff", path=str(BIN)) or shutil.which("ruff")
MYPY = shutil.which("mypy", path=str(BIN)) or shutil.which("mypy")

needs_ruff = pytest.mark.skipif(RUFF is None, reason="ruff is a test dependency (pyproject.toml [test])")
needs_mypy = pytest.mark.skipif(MYPY is None, reason="mypy is a test dependency (pyproject.toml [test])")


def _run(*command: str | Path, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in command], cwd=cwd, capture_output=True, text=True, timeout=600)


@needs_ruff
def test_ruff_finds_nothing_in_worker():
    result = _run(RUFF, "check", "--no-cache", "worker")
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


@needs_mypy
def test_mypy_finds_nothing_in_worker():
    result = _run(MYPY)  # files = ["worker"], from pyproject.toml
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "Success" in result.stdout


@needs_ruff
def test_ruff_would_catch_a_finding(tmp_path):
    # The check must be able to fail: the project's settings on a file with a mutable default.
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / "bad.py").write_text("def f(items=[]):\n    return items\n")
    result = _run(RUFF, "check", "--no-cache", "bad.py", cwd=tmp_path)
    assert result.returncode != 0
    assert "B006" in result.stdout


@needs_mypy
def test_mypy_would_catch_an_error(tmp_path):
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / "bad.py").write_text("def f() -> int:\n    return 'one'\n")
    result = _run(MYPY, "--no-incremental", "bad.py", cwd=tmp_path)
    assert result.returncode != 0
    assert "return-value" in result.stdout
