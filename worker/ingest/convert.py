"""Word conversion in a child process with its own memory and CPU limits.

mammoth builds the whole document (minidom, then its own tree, then HTML) in memory and in
pure Python: a 30 KB file unpacking to 10 MB of XML took 197 s and 1.6 GB, and its time grows
faster than its size. In a child, that cost is bounded by rlimits and a deadline, the child is
killed when the caller goes away, and the serving process's interpreter stays free for
questions. ``python -m worker.ingest.convert FILE`` writes the Markdown to stdout.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from .bounds import Budget, Cancelled, ReadLimits

_POLL_SECONDS = 0.1
# the exit code the child uses for "this file cannot be converted" (message on stderr)
_UNREADABLE = 3


def docx_markdown_bounded(path: Path, limits: ReadLimits, budget: Budget | None = None) -> str:
    """The Markdown of a .docx, converted in a child bounded by ``limits.convert_seconds`` and
    ``limits.convert_memory_bytes``; a ``ValueError`` naming the reason otherwise."""
    budget = budget or Budget(limits.read_seconds)
    env = {**os.environ, "ARC_CONVERT_MEMORY_BYTES": str(limits.convert_memory_bytes),
           "ARC_CONVERT_CPU_SECONDS": str(max(1, int(limits.convert_seconds) + 1))}
    child = subprocess.Popen([sys.executable, "-m", "worker.ingest.convert", str(path)], env=env,
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + limits.convert_seconds
    try:
        while True:
            try:
                out, err = child.communicate(timeout=_POLL_SECONDS)
                break
            except subprocess.TimeoutExpired:
                if time.monotonic() > deadline:
                    raise ValueError(f"converting the Word file took over {limits.convert_seconds:g} s "
                                     "(ARC_CONVERT_TIMEOUT): split it, or ingest its text") from None
                budget.check()
    except (ValueError, Cancelled):
        child.kill()
        child.communicate()
        raise
    if child.returncode == 0:
        return out.decode("utf-8")
    message = err.decode("utf-8", "replace").strip().splitlines()
    if child.returncode == _UNREADABLE and message:
        raise ValueError(message[-1][:300])
    # killed by its own limits: SIGKILL/SIGXCPU for CPU time, MemoryError for memory
    raise ValueError(f"the Word file could not be converted within {limits.convert_memory_bytes / 1e6:.0f} MB "
                     f"and {limits.convert_seconds:g} s (ARC_CONVERT_MEMORY_MB, ARC_CONVERT_TIMEOUT)")


def _limit_self() -> None:
    memory = int(os.environ.get("ARC_CONVERT_MEMORY_BYTES", "0"))
    cpu = int(os.environ.get("ARC_CONVERT_CPU_SECONDS", "0"))
    if memory:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    if cpu:
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))


def main(argv: list[str]) -> int:
    _limit_self()
    from .readers import docx_to_markdown

    try:
        markdown = docx_to_markdown(Path(argv[0]))
    except MemoryError:
        return 1
    except ValueError as exc:  # the readers' own clear refusals
        print(str(exc), file=sys.stderr)
        return _UNREADABLE
    except RecursionError:
        print("the Word file nests too deeply to convert (ARC_MAX_NESTING)", file=sys.stderr)
        return _UNREADABLE
    except Exception as exc:  # noqa: BLE001 - a damaged file fails in many ways inside mammoth
        print(f"not a readable Word (.docx) file ({type(exc).__name__})", file=sys.stderr)
        return _UNREADABLE
    sys.stdout.buffer.write(markdown.encode("utf-8"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
