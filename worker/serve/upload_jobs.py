"""The keeper's uploads as jobs: the upload's request saves the file, takes the admission slots an
ingest takes and answers at once; a thread of the same worker process reads, embeds and stores
the document, and the page it answered with follows it (reading, OCR page n of N, chunking,
embedding n of N chunks, storing) to the report or the error.

What the job has reached is told by the progress bars the ingest draws anyway (``logs.progress``:
the command line's bar, the log lines off a terminal), watched in the job's thread
(``logs.watching_progress``), and written to one small JSON file per job under
``ARC_DATA_DIR/uploads``: gunicorn's processes share that folder (as they share the session key
kept beside it), so the next poll may reach any of them. A job is the session's that started it:
its file keeps a hash of a random key held in that session's signed cookie, and its id is 24
random bytes. A failed ingest stores nothing: the ingestor replaces a document in one transaction.
A worker process that stops mid-ingest (a restart) takes its job with it, and its transaction is
rolled back; the job then reads as failed, not as running for ever. Job files are kept a day.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import re
import secrets
import shutil
import time
from collections.abc import MutableMapping
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import psycopg

from ..errors import ArcError
from ..ingest.bounds import Budget
from ..logs import watching_progress
from ..service.caller import Caller
from ..service.knowledge import DocumentInput, IngestReport, KnowledgeService, ScopedIngestor
from .webhooks import SavedUpload

log = logging.getLogger("arc.pages")

FOLDER = "uploads"
JOB_ID = re.compile(r"[A-Za-z0-9_-]{32}")  # secrets.token_urlsafe(24)
SESSION_KEY = "uploader"  # the session's own random key; job files keep its hash
KEEP_SECONDS = 24 * 3600
WRITE_EVERY = 0.25  # seconds between writes of a job's file while one stage goes on
NOTHING_STORED = "Nothing was stored: the knowledge base is as it was."
# The ingest's progress bars (worker/ingest: "OCR <file>", "embedding <what>", "storing <what>"),
# by the stage each stands for.
BARS = (("OCR ", "ocr"), ("embedding", "embedding"), ("storing", "storing"))
PUBLIC = (
    "id",
    "file",
    "community",
    "state",
    "stage",
    "done",
    "total",
    "unit",
    "message",
    "steps",
    "report",
    "error",
    "started",
    "updated",
)


class UploadJobs:
    def __init__(self, folder: Path):
        self.folder = folder

    @classmethod
    def under(cls, data_dir: Path) -> UploadJobs:
        return cls(Path(data_dir) / FOLDER)

    def create(
        self, session: MutableMapping[str, Any], *, file: str, community: str | None, pid: int | None = None
    ) -> UploadJob:
        """A new running job of ``session`` (given a key of its own if it has none yet)."""
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._sweep()
        if not session.get(SESSION_KEY):
            session[SESSION_KEY] = secrets.token_urlsafe(24)
        now = time.time()
        job = UploadJob(
            self,
            {
                "id": secrets.token_urlsafe(24),
                "owner": _owner(session[SESSION_KEY]),
                "pid": pid or os.getpid(),
                "file": file,
                "community": community,
                "state": "running",
                "stage": "queued",
                "done": 0,
                "total": 0,
                "unit": "",
                "message": f"{file} received",
                "steps": [],
                "report": None,
                "error": None,
                "started": now,
                "updated": now,
            },
        )
        job.save()
        return job

    def find(self, session: MutableMapping[str, Any], job_id: str) -> dict[str, Any] | None:
        """The job's state as its page shows it, if it is ``session``'s; else None (unknown, and
        another session's, alike)."""
        key = session.get(SESSION_KEY)
        if not key or not JOB_ID.fullmatch(job_id):
            return None
        try:
            state = json.loads((self.folder / f"{job_id}.json").read_text())
        except (OSError, ValueError):
            return None
        if not hmac.compare_digest(str(state.get("owner", "")), _owner(key)):
            return None
        if state["state"] == "running" and not _alive(state["pid"]):
            state.update(
                state="failed",
                error=f"The worker process reading {state['file']} stopped (a restart?) "
                f"before the ingest ended. {NOTHING_STORED} Upload it again.",
            )
        return {k: state[k] for k in PUBLIC}

    def _sweep(self) -> None:
        """Forget jobs (and half-written files) over a day old."""
        cutoff = time.time() - KEEP_SECONDS
        for path in self.folder.iterdir():
            try:
                if path.stat().st_mtime < cutoff:
                    path.unlink()
            except OSError:
                pass


class UploadJob:
    """One upload's ingest, run by :meth:`run` in its own thread and written down as it goes."""

    def __init__(self, jobs: UploadJobs, state: dict[str, Any]):
        self.jobs, self.state = jobs, state
        self.id: str = state["id"]
        self._stage_started = time.time()
        self._written, self._written_stage = 0.0, ""

    def run(
        self, knowledge: KnowledgeService, upload: SavedUpload, folder: Path, slots: ExitStack, caller: Caller
    ) -> None:
        """Read, embed and store ``upload`` (its file in ``folder``, removed at the end), holding
        the admission ``slots`` the request took for it until then."""

        def store(ingestor: ScopedIngestor) -> tuple[DocumentInput, IngestReport]:
            self.stage("reading")
            document = upload.read(ingestor, Budget(ingestor.limits.read_seconds))
            self.stage("chunked")  # told once reading and chunking are over (no bar of their own)
            return document, ingestor.write(
                [document], replace=upload.described.replace, community=upload.described.community
            )

        try:
            with slots, watching_progress(self.progress):
                document, report = knowledge.ingest(store, caller=caller, admitted=True)
        except ArcError as exc:  # what the webhook would answer with a 4xx or 503: said as it is
            self.fail(_on_the_page(exc))
        except psycopg.Error as exc:
            log.warning("keeper's upload: database error", extra={"error_type": type(exc).__name__})
            self.fail("The database failed while storing it (the error was logged).")
        except Exception as exc:  # logged by type only: a trace can carry document text
            log.error("keeper's upload failed", extra={"error_type": type(exc).__name__})
            self.fail("The ingest failed unexpectedly (the error was logged).")
        else:
            log.info(
                "document ingested",
                extra={
                    "document_id": document.document_id,
                    "community": report.community,
                    "chunks": report.chunks,
                    "replaced": list(report.replaced),
                    "via": "keeper's pages",
                },
            )
            self.finish(document, report)
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    # -- what the job has reached ----------------------------------------------------------------

    def progress(self, step: str, done: int, total: int, unit: str) -> None:
        """A progress bar's step (``logs.watching_progress``), as the stage it stands for."""
        stage = next((name for prefix, name in BARS if step.startswith(prefix)), None)
        if stage is None:
            return
        if stage == "ocr" and total and done >= total:
            self.stage("ocr", done, total, unit)
            self.stage("chunking")  # the last scanned page read: the text is chunked next
            return
        self.stage(stage, done, total, unit)

    def stage(self, stage: str, done: int = 0, total: int = 0, unit: str = "") -> None:
        state, now = self.state, time.time()
        if stage == "chunked":  # reading (and chunking) done: what follows is the embedding's bar
            if state["steps"]:
                state["message"] = state["steps"][-1]["label"] = (
                    f"Read and chunked {state['file']}" if state["stage"] == "reading" else f"Chunked {state['file']}"
                )
            self._end_step(now)
            self._write(force=True)
            return
        if stage != state["stage"]:
            self._end_step(now)
            state["steps"].append({"stage": stage, "label": "", "seconds": None})
            state["stage"], self._stage_started = stage, now
        state.update(done=done, total=total, unit=unit, message=self._label(stage, done, total))
        state["steps"][-1]["label"] = state["message"]
        self._write(force=stage != self._written_stage or (total > 0 and done >= total))

    def finish(self, document: DocumentInput, report: IngestReport) -> None:
        self._end_step(time.time())
        self.state.update(
            state="done",
            message=f"Ingested {document.name}",
            report={
                "document_id": document.document_id,
                "name": document.name,
                "community": report.community,
                "chunks": report.chunks,
                "replaced": report.replaced_line(),
                "replaced_chunks": report.replaced_chunks,
                "amended_chunks": report.amended_chunks,
                "notes": list(report.notes),
                "ocr_pages": report.ocr_pages,
                "ocr_seconds": round(report.ocr_seconds, 1),
                "seconds": round(time.time() - self.state["started"], 1),
            },
        )
        self._write(force=True)

    def fail(self, message: str) -> None:
        self._end_step(time.time())
        self.state.update(
            state="failed",
            error=f"{message.rstrip('. ')}. {NOTHING_STORED}",
            message=f"{self.state['file']} was not ingested",
        )
        self._write(force=True)

    def _label(self, stage: str, done: int, total: int) -> str:
        file = self.state["file"]
        if stage == "reading":
            return f"Reading {file}"
        if stage == "ocr":
            return (
                f"Reading scanned pages by OCR: page {min(done + 1, total)} of {total}"
                if done < total
                else f"Read {total} scanned page{'s' * (total != 1)} by OCR"
            )
        if stage == "chunking":
            return f"Chunking {file}"
        if stage == "embedding":
            return f"Embedding: {done} of {total} chunks"
        if stage == "storing":
            return f"Storing {total} chunks" if done < total else f"Stored {total} chunks"
        return stage

    def _end_step(self, now: float) -> None:
        steps = self.state["steps"]
        if steps and steps[-1]["seconds"] is None:
            steps[-1]["seconds"] = round(now - self._stage_started, 2)

    def _write(self, *, force: bool) -> None:
        if not force and time.monotonic() - self._written < WRITE_EVERY:
            return
        self._written_stage = self.state["stage"]
        try:
            self.save()
        except OSError as exc:  # the page falls behind; the ingest goes on
            log.warning("keeper's upload: job file not written", extra={"error_type": type(exc).__name__})

    def save(self) -> None:
        """Written whole and moved into place: a reader never sees half a file."""
        self.state["updated"] = time.time()
        self._written = time.monotonic()
        path = self.jobs.folder / f"{self.id}.json"
        draft = path.with_name(f".{self.id}.{os.getpid()}.tmp")
        draft.write_text(json.dumps(self.state))
        os.replace(draft, path)


def _owner(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def _alive(pid: int) -> bool:
    """Whether the worker process running a job is still there (on this host: the folder is
    shared by the processes of one server)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# What the upload form calls the fields an error names (the ingestor words them for the
# command line and the webhook).
DUPLICATE_CHECKBOX = '"Store it even if the same text is stored under another id" on the upload form'


def _on_the_page(exc: ArcError) -> str:
    """An ingest error as the keeper's page says it: a refused duplicate names the form's
    checkbox, not the command line's flag."""
    message = str(exc)
    if exc.field == "allow_duplicate":
        head, _, _ = message.partition(" or store both with ")
        return f"{head} or store both by ticking {DUPLICATE_CHECKBOX} and uploading it again"
    return message
