"""What an admin sees and removes: the documents of the knowledge base, their chunks, and
deleting one (its chunks and, through the triggers, its BM25 statistics, in one transaction)."""

from __future__ import annotations

from ..models import DEFAULT_COMMUNITY, DocumentChunk, DocumentSummary
from . import sqlfiles
from .database import Database
from .rows import one_row


class UnknownDocument(LookupError):
    pass


def list_documents(db: Database, community: str = DEFAULT_COMMUNITY) -> list[DocumentSummary]:
    with db.connect() as conn:
        rows = conn.execute(sqlfiles.query("list_documents"), {"document_id": None, "community": community}).fetchall()
    return [_summary(row) for row in rows]


def document_chunks(
    db: Database, document_id: str, community: str = DEFAULT_COMMUNITY
) -> tuple[DocumentSummary, list[DocumentChunk]]:
    named = {"document_id": document_id, "community": community}
    with db.connect() as conn:
        summary = conn.execute(sqlfiles.query("list_documents"), named).fetchone()
        if summary is None:
            raise UnknownDocument(document_id)
        rows = conn.execute(sqlfiles.query("document_chunks"), named).fetchall()
    return _summary(summary), [
        DocumentChunk(id=r[0], chunk_index=r[1], section_path=r[2], page_number=r[3], token_count=r[4], content=r[5])
        for r in rows
    ]


def delete_document(db: Database, document_id: str, community: str = DEFAULT_COMMUNITY) -> int:
    """Delete a document under the write lock ingestion takes; documents it
    superseded, or whose sections it amended, become current again. Returns the number of chunks deleted."""
    with db.connect() as conn, conn.transaction():
        db.lock_writes(conn)
        named = {"document_id": document_id, "community": community}
        deleted = conn.execute(sqlfiles.query("delete_document"), named).rowcount
        if deleted == 0:
            raise UnknownDocument(document_id)
        conn.execute(sqlfiles.query("release_superseded"), named)
        conn.execute(sqlfiles.query("release_amended"), named)
    return deleted


def _summary(row) -> DocumentSummary:
    return DocumentSummary(
        document_id=row[0],
        name=row[1],
        document_type=row[2],
        is_binding=row[3],
        superseded_by=row[4],
        chunks=row[5],
        pages=row[6],
        ingested_at=row[7],
        source_file=row[8],
        amended_by=sorted(row[9].split(",")) if row[9] else [],
        effective_date=row[10],
    )


EMPTY_WARNING = (
    "the knowledge base is empty: no document has been ingested "
    "(arc-retrieval ingest PATHS, the ingest webhook, or serve --load-sample)"
)


def is_empty(db: Database) -> bool | None:
    """Whether no chunk is stored; None when the database does not answer (it says so elsewhere)."""
    try:
        with db.connection() as conn:
            return bool(one_row(conn.execute(sqlfiles.query("knowledge_base_empty")))[0])
    except Exception:  # unreachable or not migrated yet: not this check's to report
        return None
