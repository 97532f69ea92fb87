"""The converter child of :mod:`worker.ingest.convert`: ``python -m worker.ingest.convert_child
FILE`` limits its own memory, CPU time and priority, then writes FILE's Markdown (a .docx, or
a .html page) to stdout; a file it cannot convert exits with ``UNREADABLE`` and one line on
stderr."""

from __future__ import annotations

import os
import resource
import sys
from pathlib import Path

from .bounds import ReadLimits
from .convert import UNREADABLE as _UNREADABLE


def _limit_self() -> None:
    memory = int(os.environ.get("CONVERTER_MEMORY_BYTES", "0"))
    cpu = int(os.environ.get("CONVERTER_CPU_SECONDS", "0"))
    if memory:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    if cpu:
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    os.nice(10)  # questions, served by the parent, come first on a busy machine


def main(argv: list[str]) -> int:
    _limit_self()
    from .readers.docx import docx_to_markdown
    from .readers.html import html_to_markdown

    path = Path(argv[0])
    defaults = ReadLimits()
    limits = ReadLimits(
        max_nesting=int(os.environ.get("CONVERTER_MAX_NESTING", defaults.max_nesting)),
        max_xml_elements=int(os.environ.get("CONVERTER_MAX_ELEMENTS", defaults.max_xml_elements)),
        max_unpacked_bytes=int(os.environ.get("CONVERTER_MAX_UNPACKED", defaults.max_unpacked_bytes)),
    )
    try:
        if path.suffix == ".html":
            markdown = html_to_markdown(path.read_text(encoding="utf-8"), limits.max_nesting)
        else:
            markdown = docx_to_markdown(path, limits)
    except MemoryError:
        return 1
    except ValueError as exc:  # the readers' own clear refusals
        print(str(exc), file=sys.stderr)
        return _UNREADABLE
    except RecursionError:
        print("nested too deeply to convert (ARC_MAX_NESTING)", file=sys.stderr)
        return _UNREADABLE
    except Exception as exc:  # any error: a damaged file fails in many ways inside mammoth
        print(
            f"not a readable {'HTML page' if path.suffix == '.html' else 'Word (.docx) file'} ({type(exc).__name__})",
            file=sys.stderr,
        )
        return _UNREADABLE
    sys.stdout.buffer.write(markdown.encode("utf-8"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
