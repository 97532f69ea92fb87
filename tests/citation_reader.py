"""Reads a context's ``[SOURCE n]`` headers back into their facts, the way its readers are told to
(workflows/ prompts, the MCP search tool's description): for tests that check no fact is lost."""

from __future__ import annotations

import re
from dataclasses import dataclass

SECTION_SEPARATOR = " > "
_PAGES = re.compile(r"^pp?\. (\d+)(?:-(\d+))?$")


@dataclass(frozen=True)
class Facts:
    document: str
    binding: bool
    superseded_by: str | None
    section: str | None
    pages: tuple[int, int] | None
    amended_by: str | None  # "name [id]"


def read_compact(context: str) -> dict[int, Facts]:
    """``[DOCUMENT] name | binding[, superseded by X]`` holds for the ``[SOURCE n]`` lines below
    it; ``[SOURCE n] section | p. N | amended by ...``, where a section path starting ``…`` stands
    for the path of the SOURCE above without its last part."""
    found: dict[int, Facts] = {}
    document: tuple[str, bool, str | None] | None = None
    above: str | None = None
    for line in context.split("\n"):
        if line.startswith("[DOCUMENT] "):
            name, _, status = line[len("[DOCUMENT] "):].rpartition(" | ")
            binding, _, superseded = status.partition(", superseded by ")
            assert binding in ("binding", "not binding"), line
            document, above = (name, binding == "binding", superseded or None), None
            continue
        label = re.match(r"^\[SOURCE (\d+)\] ?", line)
        if not label:
            continue
        assert document is not None, f"{line!r} has no [DOCUMENT] line above it"
        section = pages = amended = None
        for part in line[label.end():].split(" | ") if line[label.end():] else []:
            if (page := _PAGES.match(part)):
                pages = (int(page[1]), int(page[2] or page[1]))
            elif part.startswith("amended by "):
                amended = part[len("amended by "):]
            else:
                assert section is None and pages is None and amended is None, line
                section = part
        if section and section.startswith("…" + SECTION_SEPARATOR):
            assert above, f"{line!r} continues no section"
            parent = above.split(SECTION_SEPARATOR)[:-1]
            section = SECTION_SEPARATOR.join([*parent, *section.split(SECTION_SEPARATOR)[1:]])
        above = section
        found[int(label[1])] = Facts(document[0], document[1], document[2], section, pages, amended)
    return found


def read_full(context: str) -> dict[int, Facts]:
    """The labelled lines of ``"citations": "full"``."""
    found: dict[int, Facts] = {}
    for block in context.split("\n---\n"):
        head, _, _ = block.partition("\nContent:\n")
        lines = head.split("\n")
        n = int(re.match(r"^\[SOURCE (\d+)\]$", lines[0])[1])  # type: ignore[index]
        fields = dict(line.split(": ", 1) for line in lines[1:])
        binding = fields["Binding"]
        superseded = re.search(r"\(superseded by (.*?)\)", binding)
        amended = re.search(r"\(this section was amended by (.*)\)$", binding)
        pages = fields.get("Pages") or fields.get("Page")
        first, _, last = pages.partition("-") if pages else ("", "", "")
        found[n] = Facts(fields["Document"], binding.startswith("yes"), superseded[1] if superseded else None,
                         fields.get("Section"), (int(first), int(last or first)) if pages else None,
                         amended[1] if amended else None)
    return found
