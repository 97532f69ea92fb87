"""A folder's ``manifest.json``: which files make up a community's knowledge base, and how.

The format of ``worker/sample_corpus/manifest.json`` (and of the hoa-dev evaluation set)::

    {"community": "...", "documents": [{"file", "document_id", "name"?, "document_type",
                                         "is_binding"?, "supersedes"?, "superseded_by"?,
                                         "amends"?: [{"document_id", "sections": [...]}],
                                         "effective_date"?: "YYYY-MM-DD"}]}

``file`` is relative to the manifest's folder.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import IngestError
from ..models import Amendment, DocumentFields, DocumentType, IsoDate

MANIFEST_NAME = "manifest.json"


class ManifestEntry(BaseModel):
    model_config = ConfigDict(extra="ignore")

    file: str = Field(min_length=1)
    document_id: str = Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9._:-]+$")
    name: str | None = None
    document_type: DocumentType
    is_binding: bool = True
    supersedes: str | None = None
    superseded_by: str | None = None
    amends: list[Amendment] = Field(default_factory=list)
    effective_date: IsoDate | None = None

    def document_fields(self) -> DocumentFields:
        """What the entry says of its document (``allow_duplicate`` is the whole load's)."""
        return DocumentFields.of(self)


class Manifest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    community: str | None = None
    documents: list[ManifestEntry] = Field(min_length=1)
    folder: Path = Path(".")

    def path_of(self, entry: ManifestEntry) -> Path:
        return self.folder / entry.file


def load_manifest(path: Path) -> Manifest:
    """Read and check a manifest (a file, or a folder holding ``manifest.json``)."""
    path = Path(path)
    if path.is_dir():
        path = path / MANIFEST_NAME
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        manifest = Manifest.model_validate({**data, "folder": path.parent})
    except FileNotFoundError:
        raise IngestError(f"{path}: no such manifest") from None
    except (ValueError, ValidationError) as exc:
        first = exc.errors()[0] if isinstance(exc, ValidationError) else None
        where = ".".join(str(p) for p in first["loc"]) + ": " + first["msg"] if first else str(exc)
        raise IngestError(f"{path.name}: {where}") from None
    missing = [e.file for e in manifest.documents if not manifest.path_of(e).is_file()]
    if missing:
        raise IngestError(f"{path.name}: listed file(s) not found: {', '.join(missing)}")
    return manifest
