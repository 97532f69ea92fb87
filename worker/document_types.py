"""The kinds of governing document a community's knowledge base holds.

The one list: ``sql/002`` checks the same five and ``tests/test_knowledge_base.py`` keeps the two
in step.
"""

from __future__ import annotations

from typing import Literal, get_args

DocumentType = Literal["design_guidelines", "ccr", "response_letter", "application_form", "other"]
DOCUMENT_TYPES: tuple[str, ...] = get_args(DocumentType)
