"""The package's layers, checked by import-linter (the contracts are in pyproject.toml): imports
flow down the data's path (serve -> service -> retrieve -> ingest -> store -> shared models and
settings), the doors (serve/, cli.py) reach the pipeline, the ingestor and the query log only
through the knowledge-base service, and no package's modules import each other in a circle."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_import_contracts_are_kept():
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert lint, "import-linter is a test dependency (pyproject.toml [test])"
    result = subprocess.run([lint, "--no-cache"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout


def _lint_a_copy_with(tmp_path: Path, module: str, line: str) -> subprocess.CompletedProcess:
    """import-linter on a copy of the package with ``line`` added to ``module`` (a path in it)."""
    copy = tmp_path / "worker"
    shutil.copytree(ROOT / "worker", copy, ignore=shutil.ignore_patterns("__pycache__", "sample_corpus", "assets"))
    changed = copy / module
    changed.write_text(changed.read_text() + f"\n{line}  # noqa: E402,F401\n")
    (tmp_path / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    return subprocess.run([lint, "--no-cache"], cwd=tmp_path, capture_output=True, text=True,
                          env={"PYTHONPATH": str(tmp_path), "PATH": str(Path(sys.executable).parent)})


def test_a_circle_would_be_caught(tmp_path):
    # The contract must be able to fail: a copy of the package with one import pointing back up.
    result = _lint_a_copy_with(tmp_path, "models.py", "from .retrieve import context")
    assert result.returncode != 0
    assert "BROKEN" in result.stdout


def test_a_door_answering_on_its_own_would_be_caught(tmp_path):
    # A route that reached for the pipeline itself, past the service (which imports it, and may).
    result = _lint_a_copy_with(tmp_path, "serve/dify.py", "from ..retrieve.pipeline import Retriever")
    assert result.returncode != 0
    assert "The doors call the knowledge-base service BROKEN" in result.stdout
    assert "worker.serve.dify -> worker.retrieve.pipeline" in result.stdout
