"""Amendments of named sections.

A recorded amendment usually replaces sections of a declaration, not the whole document
("Article VII, Section 4 shall hereby be deleted in its entirety and replaced with the
following"). An amending document names them (``--amends ccrs:"Article VII Section 4"`` or
``"amends"`` in a manifest); the chunks of those sections are marked with what amended them,
demoted like superseded content and labelled in the ``[SOURCE n]`` block. The marks are applied
whichever of the two documents is ingested first, and dropped when the amendment is deleted.
"""

from __future__ import annotations

from pydantic import ValidationError

from ..errors import IngestError
from ..models import Amendment


def parse_amends(value: str) -> Amendment:
    """``DOCUMENT_ID:SECTION[;SECTION...]``, as the CLI takes it."""
    document_id, _, sections = value.partition(":")
    try:
        return Amendment(document_id.strip(), tuple(s.strip() for s in sections.split(";") if s.strip()))
    except ValidationError as exc:
        problem = exc.errors()[0]
        raise IngestError(
            f"--amends: {problem['loc'][0]}: {problem['msg']} (give DOCUMENT_ID:SECTION[;SECTION...], got {value!r})"
        ) from None
