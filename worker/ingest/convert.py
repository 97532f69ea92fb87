"""Word conversion in a child process with its own memory and CPU limits.

mammoth builds the whole document (minidom, then its own tree, then HTML) in memory and in
pure Python: a 30 KB file unpacking to 10 MB of XML took 197 s and 1.6 GB, and its time grows
faster than its size. In a child, that cost is bounded by rlimits and a deadline, the child is
killed when the caller goes away, and the serving process's interpreter stays free for
questions. The structural checks run there too, once, before the converter (``check_docx``,
``html_too_deep``): they are pure Python and linear, but a 5 MB page still took the nesting scan
7 s, which in the serving process had neither deadline nor cancel. The child is
:mod:`worker.ingest.convert_child`.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from .bounds import Budget, ReadLimits, run_bounded

_POLL_SECONDS = 0.1
# the exit code the child uses for "this file cannot be converted" (message on stderr)
UNREADABLE = 3


def html_markdown_bounded(html: str, limits: ReadLimits, budget: Budget | None = None) -> str:
    """The Markdown of an HTML page, converted as a Word file is (BeautifulSoup and markdownify
    take about 0.3 ms an element: a 5 MB page would hold a serving process for minutes)."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="arc-html-") as folder:
        page = Path(folder) / "page.html"
        page.write_text(html, encoding="utf-8")
        return docx_markdown_bounded(page, limits, budget, what="HTML page")


def docx_markdown_bounded(path: Path, limits: ReadLimits, budget: Budget | None = None, what: str = "Word file") -> str:
    """The Markdown of a .docx (or .html), converted in a child bounded by
    ``limits.convert_seconds`` and ``limits.convert_memory_bytes``; a ``ValueError`` naming the
    reason otherwise."""
    budget = budget or Budget(limits.read_seconds)
    env = {
        **os.environ,
        "CONVERTER_MEMORY_BYTES": str(limits.convert_memory_bytes),
        "CONVERTER_CPU_SECONDS": str(max(1, int(limits.convert_seconds) + 1)),
        "CONVERTER_MAX_NESTING": str(limits.max_nesting),
        "CONVERTER_MAX_ELEMENTS": str(limits.max_xml_elements),
        "CONVERTER_MAX_UNPACKED": str(limits.max_unpacked_bytes),
    }
    done = run_bounded(
        [sys.executable, "-m", "worker.ingest.convert_child", str(path)],
        env=env,
        seconds=limits.convert_seconds,
        budget=budget,
        poll_seconds=_POLL_SECONDS,
        overtime=ValueError(
            f"converting the {what} took over {limits.convert_seconds:g} s "
            "(ARC_CONVERT_TIMEOUT): split it, or ingest its text"
        ),
    )
    if done.returncode == 0:
        return done.stdout.decode("utf-8")
    message = done.stderr.decode("utf-8", "replace").strip().splitlines()
    if done.returncode == UNREADABLE and message:
        raise ValueError(message[-1][:300])
    # killed by its own limits: SIGKILL/SIGXCPU for CPU time, MemoryError for memory
    raise ValueError(
        f"the {what} could not be converted within {limits.convert_memory_bytes / 1e6:.0f} MB "
        f"and {limits.convert_seconds:g} s (ARC_CONVERT_MEMORY_MB, ARC_CONVERT_TIMEOUT)"
    )
