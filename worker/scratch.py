"""Private temporary folders (a restore's copy of the backup's archive, the server's ready marker)
that a killed process leaves behind no longer than the next one's start.

A process killed outright (SIGKILL, the out-of-memory killer) runs no cleanup, and a restore's
folder holds a copy of the whole knowledge base. So each folder is named after the process that
made it (``<prefix><pid>-<random>``), and making one first removes those of its kind whose
process is gone. A folder of a process still running, or of another user's, is left alone.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psutil


def sweep(prefix: str) -> list[Path]:
    """Remove the folders ``prefix`` names in the temporary directory whose process is gone; the
    ones removed."""
    removed = []
    for found in Path(tempfile.gettempdir()).glob(f"{prefix}*-*"):
        pid = found.name[len(prefix) :].split("-", 1)[0]
        if not pid.isdigit() or int(pid) == os.getpid() or psutil.pid_exists(int(pid)) or not found.is_dir():
            continue
        with contextlib.suppress(OSError):
            if found.stat().st_uid == os.getuid():
                shutil.rmtree(found)
                removed.append(found)
    return removed


def folder(prefix: str) -> Path:
    """A new private folder (mode 0700) named after this process, once dead processes' are gone;
    the caller removes it."""
    sweep(prefix)
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-"))


@contextlib.contextmanager
def scratch(prefix: str) -> Iterator[Path]:
    """:func:`folder`, removed with everything in it on the way out."""
    made = folder(prefix)
    try:
        yield made
    finally:
        shutil.rmtree(made, ignore_errors=True)
