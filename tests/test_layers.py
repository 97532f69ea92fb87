"""The package's layers, checked by import-linter (the contracts are in pyproject.toml): imports
flow down the data's path (serve -> retrieve -> ingest -> store -> shared models and settings)
and no package's modules import each other in a circle."""

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


def test_a_circle_would_be_caught(tmp_path):
    # The contract must be able to fail: a copy of the package with one import pointing back up.
    copy = tmp_path / "worker"
    shutil.copytree(ROOT / "worker", copy, ignore=shutil.ignore_patterns("__pycache__", "sample_corpus", "assets"))
    models = copy / "models.py"
    models.write_text(models.read_text() + "\nfrom .retrieve import context  # noqa: E402,F401\n")
    (tmp_path / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    result = subprocess.run([lint, "--no-cache"], cwd=tmp_path, capture_output=True, text=True,
                            env={"PYTHONPATH": str(tmp_path), "PATH": str(Path(sys.executable).parent)})
    assert result.returncode != 0
    assert "BROKEN" in result.stdout
