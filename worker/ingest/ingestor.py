"""Ingestion: files -> chunks -> embeddings -> knowledge_chunks.

Each document is replaced atomically: one transaction takes the knowledge base's write lock,
deletes the old chunks and COPYs the new ones, so a crash midway leaves the previous version and
two concurrent ingests of one document end with exactly one version. Embeddings are computed
before the transaction opens, so it stays short.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

import numpy as np
from psycopg.types.json import Jsonb

from ..config import PROGRESS_LOG_SECONDS
from ..document_types import DOCUMENT_TYPES
from ..embeddings import Embedder
from ..errors import IngestError
from ..logs import progress as progress_of
from ..models import DOCUMENT_ID_PATTERN, Amendment, DocumentFields
from ..sections import amends
from ..store import bm25, communities, model_record, sqlfiles
from ..store.database import Database
from ..tokens import TokenCounter, default_counter
from . import effective_dates
from .bounds import DEFAULT_LIMITS, Budget, ReadLimits
from .chunking import Chunk, chunk_blocks
from .manifest import Manifest, load_manifest
from .ocr import DEFAULT_OCR, Ocr
from .readers import ParsedDocument, read_beir_corpus, read_path

log = logging.getLogger("arc.ingest")

# The longest chunk we make even when the model reads more: smaller chunks cite more precisely
# and keep the agent's token budget for several sources.
MAX_CHUNK_TOKENS = 400
MAX_DOCUMENT_ID = 200


@dataclass
class DocumentInput:
    document_id: str
    name: str
    document_type: str
    chunks: list[Chunk]
    is_binding: bool = True
    supersedes: str | None = None
    superseded_by: str | None = None
    amends: tuple[Amendment, ...] = ()
    effective_date: date | None = None  # None: undated, in force from the beginning
    metadata: dict = field(default_factory=dict)
    name_in_context: bool = True  # benchmark records name nothing but themselves
    id_given: bool = False  # the caller named the id (a text sent again under it updates it)
    ocr_pages: int = 0
    ocr_seconds: float = 0.0
    # False: refused when the community stores the same text under another id (the doors' default)
    allow_duplicate: bool = True

    def __post_init__(self) -> None:
        if self.document_type not in DOCUMENT_TYPES:
            raise IngestError(f"document_type must be one of {', '.join(DOCUMENT_TYPES)}")
        if not self.document_id or len(self.document_id) > MAX_DOCUMENT_ID or "\x00" in self.document_id:
            raise IngestError(f"document_id must be 1..{MAX_DOCUMENT_ID} characters")
        for field_name in ("supersedes", "superseded_by"):
            if getattr(self, field_name) == self.document_id:
                raise IngestError(f"{field_name}: a document cannot supersede itself", field_name)
        if not self.chunks:
            raise IngestError(f"{self.document_id}: no text found to ingest")
        if any(a.document_id == self.document_id for a in self.amends):
            raise IngestError("amends: a document cannot amend itself", "amends")


def embedding_texts(documents: Sequence[DocumentInput]) -> list[str]:
    """What the embedder reads for each chunk: the document's name and the section path give a
    short passage its context ("By-Laws > Article III Board of Directors > Section 1. Number")."""
    return [c.embedding_text(d.name if d.name_in_context else None) for d in documents for c in d.chunks]


@dataclass(frozen=True)
class IngestReport:
    documents: int
    chunks: int
    replaced_chunks: int
    document_ids: tuple[str, ...] = ()
    ocr_pages: int = 0
    ocr_seconds: float = 0.0
    amended_chunks: int = 0
    notes: tuple[str, ...] = ()  # what the admin should know: a section named that matched nothing
    replaced: tuple[str, ...] = ()  # the ids that held a document before this load
    community: str = ""  # the community the load went to

    def replaced_line(self) -> str:
        """What the load replaced, said the same way on every ingest path."""
        if not self.replaced:
            return "replaced nothing"
        more = len(self.replaced) - 20
        shown = ", ".join(self.replaced[:20]) + (f" and {more} more" if more > 0 else "")
        return f"replaced {len(self.replaced)} stored document(s) ({self.replaced_chunks} chunks): {shown}"


def slugify(text: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return slug[:MAX_DOCUMENT_ID] or "document"


class Ingestor:
    def __init__(
        self,
        db: Database,
        embedder: Embedder,
        counter: TokenCounter | None = None,
        ocr: Ocr = DEFAULT_OCR,
        limits: ReadLimits = DEFAULT_LIMITS,
    ):
        self.db = db
        self.limits = limits
        self.embedder = embedder
        self.counter = counter or default_counter()
        self.ocr = ocr

    @property
    def max_chunk_tokens(self) -> int:
        return min(self.embedder.max_tokens, MAX_CHUNK_TOKENS)

    def chunk(self, parsed: ParsedDocument) -> list[Chunk]:
        # The embedder's own tokenizer decides what fits its input.
        return chunk_blocks(parsed.blocks, self.embedder.count_tokens, self.max_chunk_tokens)

    def prepare_text(
        self,
        parsed: ParsedDocument,
        fields: DocumentFields,
        *,
        fallback_name: str = "document",
        metadata: dict | None = None,
    ) -> DocumentInput:
        """The document ``fields`` describe, chunked. Unnamed, it is named by its title (else
        ``fallback_name``); without an id, its id is made from that name."""
        name = fields.name or parsed.title or fallback_name
        return DocumentInput(
            document_id=fields.document_id or slugify(name),
            name=name,
            document_type=fields.document_type,
            chunks=self.chunk(parsed),
            is_binding=fields.is_binding,
            supersedes=fields.supersedes,
            superseded_by=fields.superseded_by,
            amends=fields.amends,
            effective_date=fields.effective_date,
            metadata=metadata or {},
            allow_duplicate=fields.allow_duplicate,
        )

    def prepare_file(
        self,
        path: Path,
        fields: DocumentFields,
        *,
        source_name: str | None = None,
        metadata: dict | None = None,
        budget: Budget | None = None,
    ) -> DocumentInput:
        """The file at ``path`` read and chunked as the document ``fields`` describe.
        ``source_name``: the file's own name when ``path`` is a copy of it (an upload);
        ``budget``: when to give up reading it (time, a caller that left)."""
        shown = source_name or path.name
        try:
            parsed = read_path(path, self.ocr, self.limits, budget)
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise IngestError(f"{shown}: {exc}", "file") from exc
        except RecursionError:  # a parser's own recursion on a crafted file (a PDF's object tree)
            raise IngestError(f"{shown}: nested too deeply to read", "file") from None
        stem = Path(shown).stem
        # The file name gives a stable id: re-ingesting an edited file replaces it even if its title changed.
        if not fields.document_id:
            fields = dataclasses.replace(fields, document_id=slugify(stem))
        metadata = {**(metadata or {}), "source_file": shown}
        if parsed.ocr_pages:
            metadata["ocr_pages"] = parsed.ocr_pages
        document = self.prepare_text(parsed, fields, fallback_name=stem, metadata=metadata)
        document.ocr_pages, document.ocr_seconds = parsed.ocr_pages, parsed.ocr_seconds
        return document

    def write(
        self,
        documents: Sequence[DocumentInput],
        embeddings: np.ndarray | None = None,
        *,
        progress: bool = False,
        batch_documents: int = 256,
        replace: bool = True,
        community: str | None = None,
    ) -> IngestReport:
        """Embed (unless given) and store documents, each replaced atomically, in ``community``
        (unnamed: the knowledge base's only one; an error when it holds several).

        ``replace=False`` (what the CLI, the webhook and a manifest pass unless asked to replace)
        refuses an id that holds a document from another source; re-ingesting the same file updates it.
        A document with ``allow_duplicate=False`` (the doors' default) is refused when its text is
        stored already under another id: its passages would fill the context twice."""
        community = communities.resolve_for_write(community, communities.list_communities(self.db))
        self.check_links(documents, community)  # before the embedding bill
        self.check_dates(documents, community)
        stored = self.stored_sources(documents, community)
        if not replace:
            refuse_clashes(documents, stored)
        self.refuse_duplicates([d for d in documents if not d.allow_duplicate], community)
        texts = embedding_texts(documents)
        what = _named(documents)
        log.info(
            f"ingesting {what}", extra={"document_ids": [d.document_id for d in documents][:20], "chunks": len(texts)}
        )
        if embeddings is None:
            embeddings = self.embed(texts, progress=progress, what=what)
        if len(embeddings) != len(texts):
            raise IngestError(f"{len(embeddings)} embeddings for {len(texts)} chunks")
        replaced = 0
        offset = 0
        marks = _Marks()
        bar = progress_of(
            len(texts), f"storing {what}", "chunk", terminal=progress, logger=log, every=PROGRESS_LOG_SECONDS
        )
        with self.db.connect() as conn:
            for start in range(0, len(documents), batch_documents):
                batch = documents[start : start + batch_documents]
                n = sum(len(d.chunks) for d in batch)
                replaced += self._write_batch(conn, batch, embeddings[offset : offset + n], marks, community)
                offset += n
                bar.update(n)
        bar.close()
        bm25.refresh(self.db, community=community)  # bounded, and never fails the load
        renewed = [d.document_id for d in documents if d.document_id in stored][:20]
        log.info(f"ingested {what}", extra={"documents": len(documents), "chunks": len(texts), "replaced": renewed})
        return IngestReport(
            len(documents),
            len(texts),
            replaced,
            tuple(d.document_id for d in documents),
            sum(d.ocr_pages for d in documents),
            sum(d.ocr_seconds for d in documents),
            marks.chunks,
            tuple(marks.notes),
            replaced=tuple(d.document_id for d in documents if d.document_id in stored),
            community=community,
        )

    def stored_sources(self, documents: Sequence[DocumentInput], community: str) -> dict[str, tuple[str, str | None]]:
        """Of these documents' ids, those stored already in ``community``: id -> (name, source file)."""
        with self.db.connect() as conn:
            rows = conn.execute(
                sqlfiles.query("stored_sources"), {"ids": [d.document_id for d in documents], "community": community}
            ).fetchall()
        return {document_id: (name, source) for document_id, name, source in rows}

    def refuse_duplicates(self, documents: Sequence[DocumentInput], community: str) -> None:
        """An error naming the stored document when one of these has the same text under another id."""
        if not documents:
            return
        firsts = [_md5(d.chunks[0].content) for d in documents]
        with self.db.connect() as conn:
            rows = conn.execute(
                sqlfiles.query("same_text_documents"),
                {"community": community, "ids": [d.document_id for d in documents], "firsts": firsts},
            ).fetchall()
        stored = {digest: (document_id, name) for document_id, name, digest in rows}
        for doc in documents:
            if (same := stored.get(_md5("\n".join(c.content for c in doc.chunks)))) is not None:
                raise IngestError(
                    f"{doc.name!r}: the same text is stored already as document_id {same[0]!r} ({same[1]!r}); "
                    f"delete that one, ingest under {same[0]!r} to replace it, or store both with "
                    "--allow-duplicate on the command line (\"allow_duplicate\": true on the webhook)",
                    "allow_duplicate",
                )

    def check_links(self, documents: Sequence[DocumentInput], community: str) -> None:
        """A document named by --supersedes, --superseded-by or --amends must be stored already or
        come in the same load: a mistyped id is an error, not a mark that never lands."""
        named = {d.document_id for d in documents}
        links = [
            (d, link, other)
            for d in documents
            for link, other in (
                ("supersedes", d.supersedes),
                ("superseded_by", d.superseded_by),
                *(("amends", a.document_id) for a in d.amends),
            )
            if other and other not in named
        ]
        if not links:
            return
        with self.db.connect() as conn:
            stored = {
                row[0]
                for row in conn.execute(
                    sqlfiles.query("stored_documents"),
                    {"ids": [other for _, _, other in links], "community": community},
                )
            }
        for doc, link, other in links:
            if other not in stored:
                hint = (
                    f"ingest it first, or ingest it later with --superseded-by {doc.document_id}"
                    if link == "supersedes"
                    else "ingest it first, or both in one folder's manifest"
                    if link == "amends"
                    else "ingest that document first"
                )
                raise IngestError(f"{link}: no document {other!r} in the knowledge base ({hint})", link)

    def check_dates(self, documents: Sequence[DocumentInput], community: str) -> None:
        """A document that supersedes or amends another cannot take effect before it (either of
        the two may be the one arriving): an error naming ``effective_date``."""
        if not any(d.effective_date for d in documents):
            return
        ids = [d.document_id for d in documents]
        linked = {other for d in documents for other in effective_dates.links_of(d)}
        with self.db.connect() as conn:
            stored = {
                row[0]: row[2]
                for row in conn.execute(
                    sqlfiles.query("document_dates"), {"ids": sorted(linked - set(ids)), "community": community}
                )
            }
            replacing = conn.execute(
                sqlfiles.query("documents_replacing"), {"ids": ids, "community": community}
            ).fetchall()
        dates = {**stored, **{d.document_id: d.effective_date for d in documents}}
        problem = effective_dates.first_misdated(documents, dates, [(r[0], r[1], r[2]) for r in replacing])
        if problem is not None:
            raise IngestError(f"effective_date: {problem}", "effective_date")

    def embed(self, texts: list[str], *, progress: bool = False, batch: int = 256, what: str = "") -> np.ndarray:
        out = np.zeros((len(texts), self.embedder.dim), dtype=np.float32)
        with progress_of(
            len(texts), f"embedding {what}".strip(), "chunk", terminal=progress, logger=log, every=PROGRESS_LOG_SECONDS
        ) as bar:
            for start in range(0, len(texts), batch):
                out[start : start + batch] = self.embedder.embed(texts[start : start + batch])
                bar.update(min(batch, len(texts) - start))
        return out

    def _write_batch(
        self, conn, documents: Sequence[DocumentInput], embeddings: np.ndarray, marks: _Marks, community: str
    ) -> int:
        replaced = 0
        with conn.transaction():
            self.db.lock_writes(conn)
            model_record.claim(conn, self.embedder.model, self.embedder.dim)  # never two models' vectors
            superseded: dict[str, str | None] = {}
            for doc in documents:
                superseded[doc.document_id] = doc.superseded_by or _superseding_document(
                    conn, doc.document_id, community
                )
                replaced += conn.execute(
                    sqlfiles.query("delete_document"), {"document_id": doc.document_id, "community": community}
                ).rowcount
            conn.execute(
                sqlfiles.query("bm25_seed_avgdl"),
                {
                    "sections": [c.section_path for d in documents for c in d.chunks],
                    "contents": [c.content for d in documents for c in d.chunks],
                    "community": community,
                },
            )
            row_index = 0
            with conn.cursor().copy(sqlfiles.query("copy_chunks")) as copy:
                for doc in documents:
                    for chunk in doc.chunks:
                        copy.write_row(
                            (
                                community,
                                doc.document_id,
                                doc.name,
                                doc.document_type,
                                chunk.section_path,
                                chunk.page_number,
                                chunk.chunk_index,
                                doc.is_binding,
                                superseded[doc.document_id],
                                chunk.content,
                                self.counter.count(chunk.content),
                                Jsonb(_chunk_metadata(doc, chunk.chunk_index)),
                                embeddings[row_index],
                            )
                        )
                        row_index += 1
            for doc in documents:
                if doc.supersedes:
                    conn.execute(
                        sqlfiles.query("mark_superseded"),
                        {"document_id": doc.supersedes, "superseded_by": doc.document_id, "community": community},
                    )
            for doc in documents:  # both ways: what this document amends, what amends it
                for amendment in doc.amends:
                    _mark_amended(conn, amendment, doc.document_id, doc.name, marks, community)
                for amending_id, amending_name, recorded in conn.execute(
                    sqlfiles.query("amendments_of"), {"document_id": doc.document_id, "community": community}
                ).fetchall():
                    for entry in recorded:
                        if entry.get("document_id") == doc.document_id:
                            _mark_amended(conn, Amendment(**entry), amending_id, amending_name, marks, community)
        return replaced


def _md5(text: str) -> str:
    return hashlib.md5(text.encode("utf-8"), usedforsecurity=False).hexdigest()


def _named(documents: Sequence[DocumentInput]) -> str:
    """What a load is, for its log lines: the document itself, or how many."""
    if len(documents) == 1:
        return f"{documents[0].name!r} ({documents[0].document_id})"
    return f"{len(documents)} documents"


def refuse_clashes(documents: Sequence[DocumentInput], stored: dict[str, tuple[str, str | None]]) -> None:
    """An id already holding a document from another source (letter.txt, then letter.pdf; a
    webhook text, then another) is an error unless the caller asks to replace: never a silent swap."""
    seen: dict[str, str | None] = {}
    for doc in documents:
        source = doc.metadata.get("source_file")
        if doc.document_id in seen and seen[doc.document_id] != source:
            raise IngestError(
                f"document_id {doc.document_id!r} is given to both {seen[doc.document_id]} and "
                f"{source} in this load: give one of them another document_id",
                "document_id",
            )
        seen[doc.document_id] = source
        if doc.document_id not in stored:
            continue
        name, stored_source = stored[doc.document_id]
        if source == stored_source and (source is not None or doc.id_given):
            continue  # the same file again, or a text sent again under the id its caller named: an update
        held = f"{name!r}" + (f" from {stored_source}" if stored_source else "")
        raise IngestError(
            f"document_id {doc.document_id!r} already holds {held}; ingest with another "
            "document_id, or replace it (--replace on the command line, also for a manifest; "
            "\"replace\": true on the webhook)",
            "document_id",
        )


@dataclass
class _Marks:
    chunks: int = 0
    notes: list[str] = field(default_factory=list)
    done: set[tuple[str, str, str]] = field(default_factory=set)  # (amended_by, document, section)


def _superseding_document(conn, document_id: str, community: str) -> str | None:
    row = conn.execute(
        sqlfiles.query("superseding_document"), {"document_id": document_id, "community": community}
    ).fetchone()
    return row[0] if row else None


def _chunk_metadata(doc: DocumentInput, chunk_index: int) -> dict:
    # Every chunk carries its document's effective date (090): the search hands it to the answer
    # and arc_in_force reads it. The first chunk records what the document amends, so the mark
    # can be applied when the amended document arrives later (amendments_of in sql/queries.sql).
    dated = {"effective_date": doc.effective_date.isoformat()} if doc.effective_date else {}
    if chunk_index != 0 or not (doc.amends or doc.supersedes):
        return {**doc.metadata, **dated} if dated else doc.metadata
    extra: dict = {"amends": [a.to_json() for a in doc.amends]} if doc.amends else {}
    if doc.supersedes:  # likewise for a whole document it supersedes (superseding_document)
        extra["supersedes"] = doc.supersedes
    return {**doc.metadata, **dated, **extra}


def _mark_amended(
    conn, amendment: Amendment, amended_by: str, amended_by_name: str, marks: _Marks, community: str
) -> None:
    rows = conn.execute(
        sqlfiles.query("document_sections"), {"document_id": amendment.document_id, "community": community}
    ).fetchall()
    if not rows:
        marks.notes.append(
            f"{amended_by} amends {amendment.document_id}, which is not in the knowledge base yet: "
            "its sections are marked when it is ingested"
        )
        return
    for section in amendment.sections:
        if (amended_by, amendment.document_id, section) in marks.done:
            continue  # both documents in one batch: marked from either side once
        marks.done.add((amended_by, amendment.document_id, section))
        ids = [chunk_id for chunk_id, path in rows if amends(section, path)]
        if not ids:
            marks.notes.append(
                f"{amended_by} amends {amendment.document_id} {section!r}, but no section of it matches that name"
            )
            continue
        conn.execute(
            sqlfiles.query("mark_amended"), {"ids": ids, "amended_by": amended_by, "amended_by_name": amended_by_name}
        )
        marks.chunks += len(ids)


def beir_documents(path: Path, limit: int | None = None) -> list[DocumentInput]:
    """A BEIR corpus as one chunk per record (benchmarks score whole records)."""
    docs = []
    for i, record in enumerate(read_beir_corpus(path)):
        if limit is not None and i >= limit:
            break
        chunk = Chunk(0, record.title.strip(), record.text.strip() or record.title, None)
        docs.append(
            DocumentInput(
                document_id=record.doc_id,
                name=record.title or record.doc_id,
                document_type="other",
                chunks=[chunk],
                is_binding=False,
                name_in_context=False,
            )
        )
    return docs


def ingest_paths(
    ingestor: Ingestor,
    paths: Iterable[Path],
    fields: DocumentFields,
    *,
    progress: bool,
    replace: bool = False,
    community: str | None = None,
) -> IngestReport:
    """Files (Markdown, text, HTML, PDF, Word, a BEIR corpus.jsonl) described alike by ``fields``;
    the fields that name one document (its name, id and amendments) only with a single file."""
    paths = list(paths)
    if fields.name and len(paths) > 1:
        raise IngestError("--name applies to a single file")
    if fields.document_id and len(paths) > 1:
        raise IngestError("--document-id applies to a single file")
    if fields.amends and len(paths) > 1:
        raise IngestError("--amends applies to a single file")
    if fields.document_id and not re.match(DOCUMENT_ID_PATTERN, fields.document_id):
        raise IngestError(f"--document-id: letters, digits and . _ : - only, got {fields.document_id!r}")
    documents: list[DocumentInput] = []
    for path in paths:
        if path.name.endswith(".jsonl"):
            documents.extend(beir_documents(path))
            continue
        documents.append(ingestor.prepare_file(path, fields))
    return ingestor.write(documents, progress=progress, replace=replace, community=community)


SAMPLE_DIR = Path(__file__).parent.parent / "sample_corpus"


def manifest_documents(ingestor: Ingestor, manifest: Manifest) -> list[DocumentInput]:
    """Every document a manifest lists, read and chunked (nothing stored yet)."""
    return [ingestor.prepare_file(manifest.path_of(entry), entry.document_fields()) for entry in manifest.documents]


def ingest_manifest(
    ingestor: Ingestor,
    path: Path,
    *,
    progress: bool = False,
    replace: bool = False,
    community: str | None = None,
    allow_duplicate: bool = True,
) -> IngestReport:
    """Ingest every document a ``manifest.json`` lists (a file or the folder holding it)."""
    documents = manifest_documents(ingestor, load_manifest(path))
    for document in documents:
        document.allow_duplicate = allow_duplicate
    return ingestor.write(documents, progress=progress, replace=replace, community=community)


def ingest_sample_corpus(ingestor: Ingestor, *, progress: bool = False, community: str | None = None) -> IngestReport:
    """Load the fictional Cedar Hollow documents listed in ``sample_corpus/manifest.json``."""
    return ingest_manifest(ingestor, SAMPLE_DIR, progress=progress, community=community)
