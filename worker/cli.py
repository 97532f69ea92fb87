"""``arc-retrieval``: the command line over the same pieces the webhook uses."""

from __future__ import annotations

import json
import sys
from datetime import date
from pathlib import Path

import click
import psycopg

from .config import ConfigError, Settings, data_dir_error
from .document_types import DOCUMENT_TYPES
from .errors import ArcError
from .service.caller import LOCAL


def _settings() -> Settings:
    try:
        return Settings.from_env()
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None


def _runtime(settings: Settings, *, migrate: bool = True):
    from .errors import DatabaseUnavailable
    from .runtime import open_runtime
    from .store.embedded import exit_on_signals

    exit_on_signals()
    try:
        runtime = open_runtime(settings, migrate=False)  # migrated below, where failing is one line
    except ArcError as exc:
        raise click.ClickException(str(exc)) from None
    except OSError as exc:  # the embedded database's folder
        raise click.ClickException(data_dir_error(settings.database.data_dir, exc)) from None
    if migrate:
        # the server starts without its database and waits for it; a command has nothing to wait for
        runtime.schema_ready = False
        try:
            runtime.ensure_schema()
        except DatabaseUnavailable as exc:
            runtime.close()
            raise click.ClickException(_unreachable(exc.__cause__ or exc)) from None
        except ArcError as exc:
            runtime.close()
            raise click.ClickException(str(exc)) from None
    return runtime


def _unreachable(exc: BaseException) -> str:
    reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return f"database unreachable (DATABASE_URL): {reason}"


class _Commands(click.Group):
    """A database that goes away mid-command is one line naming DATABASE_URL, not a traceback."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except psycopg.OperationalError as exc:
            raise click.ClickException(_unreachable(exc)) from None


# The commands that run a server: their INFO lines are the server's log, shown as they come.
SERVING = ("serve", "mcp")


@click.group(cls=_Commands)
@click.version_option(package_name="arc-retrieval")
@click.option("--verbose", "-v", is_flag=True, help="Show the INFO log lines on stderr too (ARC_LOG_LEVEL alike).")
def main(verbose: bool) -> None:
    """Hybrid retrieval over governing documents, for n8n agents."""
    import os

    from .logs import configure_logging

    # A command prints its own output; its INFO lines only when asked (warnings always).
    quiet = not verbose and not os.environ.get("ARC_LOG_LEVEL")
    serving = click.get_current_context().invoked_subcommand in SERVING
    configure_logging("WARNING" if quiet and not serving else None)


@main.group()
def db() -> None:
    """Schema: apply migrations or print them for Supabase."""


@db.command("init")
def db_init() -> None:
    """Apply pending migrations (idempotent) and check the embedding size."""
    settings = _settings()
    runtime = _runtime(settings, migrate=False)  # migrate here, so the report says what this run applied
    try:
        for db in runtime.databases.all():  # each database of a split knowledge base alike
            db.check_dimension(runtime.embedder.model, runtime.embedder.dim)
            applied = db.migrate(runtime.embedder.dim)
            where = f" in {runtime.databases.name(db)}" if runtime.databases.split else ""
            click.echo(f"migrations applied{where}: {', '.join(applied) if applied else 'none (up to date)'}")
        click.echo(f"embedding: {runtime.embedder.model}, vector({runtime.embedder.dim})")
    except ArcError as exc:
        raise click.ClickException(str(exc)) from None
    except psycopg.OperationalError as exc:
        raise click.ClickException(_unreachable(exc)) from None
    finally:
        runtime.close()


@db.command("maintain")
@click.option("--force", is_flag=True, help="Rewrite every chunk's BM25 weights (after changing k1 or b).")
def db_maintain(force: bool) -> None:
    """Bring every chunk's BM25 weights up to date (ingestion does a bounded part of this), then
    vacuum the chunks and their postings (run it after a large load)."""
    from .store import bm25

    settings = _settings()
    runtime = _runtime(settings)
    try:
        for db in runtime.databases.all():  # each database of a split knowledge base alike
            where = f" in {runtime.databases.name(db)}" if runtime.databases.split else ""
            report = bm25.refresh(db, seconds=None, force=force)
            if report.stale < 0:
                raise click.ClickException(f"the BM25 refresh{where} stopped on a database error; run it again")
            click.echo(f"rewrote BM25 weights of {report.rewritten} chunks{where}; {report.stale} left")
            try:
                bm25.vacuum(db)
            except psycopg.Error as exc:
                failed = exc.diag.message_primary or type(exc).__name__
                raise click.ClickException(f"vacuum{where} failed: {failed}") from None
            click.echo(f"vacuumed knowledge_chunks and bm25_postings{where}")
    finally:
        runtime.close()


@db.command("sql")
@click.option(
    "--dim",
    type=click.IntRange(1, 2000),
    default=None,
    help="Embedding dimension (default: the configured model's, ARC_EMBEDDING_MODEL; 1536: "
    "text-embedding-3-large; 384: the local MiniLM).",
)
def db_sql(dim: int | None) -> None:
    """Print every migration in order, ready to paste into Supabase's SQL editor."""
    from .store.sqlfiles import all_migrations_sql

    click.echo(all_migrations_sql(dim if dim is not None else _settings().embedding.embedding_dim))


# -- backup, restore and the embedded server's upgrade --------------------------------------


def _database_for_backup(settings: Settings):
    """The knowledge base's URL (DATABASE_URL, or the embedded server, started here) and the
    embedded server to stop afterwards, if any."""
    from .runtime import database_url
    from .store.embedded import exit_on_signals

    exit_on_signals()
    try:
        return database_url(settings)
    except ArcError as exc:
        raise click.ClickException(str(exc)) from None
    except OSError as exc:
        raise click.ClickException(data_dir_error(settings.database.data_dir, exc)) from None


@main.command("backup")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
def backup_command(file: Path) -> None:
    """Write everything the knowledge base keeps to FILE (replaced whole, or not at all), while
    the worker serves."""
    from .store.backup import BackupError, write_backup

    url, embedded = _database_for_backup(_settings())
    try:
        header = write_backup(url, file)
    except BackupError as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        if embedded is not None:
            embedded.stop()
    click.echo(
        f"backed up {header.rows.get('knowledge_chunks', 0)} chunk(s) and "
        f"{sum(header.rows.values())} row(s) in all to {file} ({file.stat().st_size} bytes)"
    )


@main.command("restore")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--replace", is_flag=True, help="Replace a knowledge base that holds data (refused otherwise).")
def restore_command(file: Path, replace: bool) -> None:
    """Restore a backup FILE into the knowledge base, in one transaction: all of it or nothing."""
    from .store.backup import BackupError, read_backup, restore_backup
    from .store.database import Database

    try:
        backup = read_backup(file)  # a damaged file is refused before the database is touched
    except BackupError as exc:
        raise click.ClickException(str(exc)) from None
    url, embedded = _database_for_backup(_settings())
    try:
        report = restore_backup(url, backup, replace=replace)
        if backup.header.embedding_dim:
            Database(url).migrate(backup.header.embedding_dim)  # this release's schema over the restored one
    except BackupError as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        if embedded is not None:
            embedded.stop()
    click.echo(
        f"restored {report.rows.get('knowledge_chunks', 0)} chunk(s) from {file} "
        f"(taken {backup.header.created_at}){'; the previous knowledge base was replaced' if report.replaced else ''}"
    )


@db.command("upgrade")
@click.option(
    "--old-bindir",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    default=None,
    help="The bin folder of a PostgreSQL of the data directory's major version (default: the one "
    "recorded at its last start, or /usr/lib/postgresql/MAJOR/bin).",
)
def db_upgrade(old_bindir: Path | None) -> None:
    """Move the embedded database's data directory to this worker's PostgreSQL major version
    (dump with the old server, restore into a new directory); the old copy is kept."""
    from .store.upgrade import UpgradeError, upgrade_data_dir

    settings = _settings()
    if settings.database.database_url:
        raise click.ClickException("db upgrade moves the embedded database (ARC_DATA_DIR); DATABASE_URL is set")
    from .store.embedded import exit_on_signals

    exit_on_signals()
    try:
        report = upgrade_data_dir(settings.database.data_dir, old_bindir=old_bindir)
    except UpgradeError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(report.line())


@main.command()
@click.argument("paths", nargs=-1, required=False, type=click.Path(exists=True, path_type=Path))
@click.option(
    "--document-type",
    type=click.Choice(DOCUMENT_TYPES),
    default=None,
    help="Required for files, as on the ingest webhook: the type steers and filters answers, so it is "
    "never guessed (a folder's manifest.json gives each document's).",
)
@click.option("--binding/--not-binding", default=True, show_default=True)
@click.option(
    "--supersedes", metavar="DOCUMENT_ID", help="Mark this older, stored document as superseded by the new one."
)
@click.option(
    "--superseded-by",
    metavar="DOCUMENT_ID",
    help="Mark the new document as superseded by this newer, stored one (an older document ingested late).",
)
@click.option("--name", help="Document name (default: its first heading or file name).")
@click.option("--document-id", help="The id to store it under (default: from the file name); the same id replaces.")
@click.option(
    "--amends",
    "amends",
    multiple=True,
    metavar="DOCUMENT_ID:SECTION[;SECTION...]",
    help="Sections of another document this one amends, e.g. ccrs:'Article VII Section 4' (repeatable).",
)
@click.option(
    "--effective-date",
    metavar="YYYY-MM-DD",
    help="The date the document took effect (default: undated, in force from the beginning); "
    "questions asked with as_of read what was in force that day.",
)
@click.option("--sample", is_flag=True, help="Load the bundled Cedar Hollow sample corpus.")
@click.option(
    "--replace",
    is_flag=True,
    help="Replace a stored document of the same id that came from another file (the same file always updates).",
)
@click.option(
    "--allow-duplicate",
    is_flag=True,
    help="Store a document even when the same text is stored already under another id.",
)
@click.option(
    "--community",
    metavar="NAME",
    default=None,
    help="The community (association) the documents belong to; needed once the knowledge base holds several.",
)
def ingest(
    paths: tuple[Path, ...],
    document_type: str | None,
    binding: bool,
    supersedes: str | None,
    superseded_by: str | None,
    name: str | None,
    document_id: str | None,
    amends: tuple[str, ...],
    effective_date: str | None,
    sample: bool,
    replace: bool,
    allow_duplicate: bool,
    community: str | None,
) -> None:
    """Ingest documents: Markdown (.md, .markdown), text (.txt), PDF (.pdf; scanned pages read by
    OCR), Word (.docx), HTML (.html, .htm), or a BEIR corpus.jsonl; or a folder with a manifest.json
    (every document it lists, with its id, type and binding). Re-ingesting a file updates its
    document; another file under a stored id needs --replace."""
    from .ingest.amendments import parse_amends
    from .ingest.manifest import MANIFEST_NAME
    from .models import DocumentFields
    from .service.knowledge import KnowledgeService

    if not paths and not sample:
        raise click.UsageError("give PATHS or --sample")
    folders = [p for p in paths if p.is_dir()]
    if folders and (len(paths) > 1 or not (folders[0] / MANIFEST_NAME).is_file()):
        raise click.UsageError(f"a folder must hold a {MANIFEST_NAME} and come alone: {folders[0]}")
    if paths and not folders and document_type is None:
        raise click.UsageError(f"--document-type is required for a file: one of {', '.join(DOCUMENT_TYPES)}")
    settings = _settings()
    runtime = _runtime(settings)
    try:
        progress = sys.stderr.isatty()
        knowledge = KnowledgeService(runtime, progress=progress)
        click.get_current_context().call_on_close(knowledge.close)
        if sample:
            report = knowledge.ingest_sample(progress=progress, community=community, caller=LOCAL)
        elif folders:
            report = knowledge.ingest_manifest(
                folders[0],
                progress=progress,
                replace=replace,
                community=community,
                allow_duplicate=allow_duplicate,
                caller=LOCAL,
            )
        else:
            assert document_type is not None  # required above for files
            fields = DocumentFields(
                document_type=document_type,
                document_id=document_id,
                name=name,
                is_binding=binding,
                supersedes=supersedes,
                superseded_by=superseded_by,
                amends=tuple(parse_amends(a) for a in amends),
                effective_date=_effective_date(effective_date),
                allow_duplicate=allow_duplicate,
            )
            report = knowledge.ingest_files(
                paths, fields, progress=progress, replace=replace, community=community, caller=LOCAL
            )
        if report.ocr_pages:
            click.echo(
                f"read {report.ocr_pages} page(s) by OCR in {report.ocr_seconds:.0f} s "
                f"({report.ocr_seconds / report.ocr_pages:.1f} s per page)"
            )
        click.echo(
            f"ingested {report.documents} document(s), {report.chunks} chunk(s) into community "
            f"{report.community}; {report.replaced_line()}"
        )
        if len(report.document_ids) <= 50:
            for assigned in report.document_ids:
                click.echo(f"  document id: {assigned}")
        if report.amended_chunks:
            click.echo(f"marked {report.amended_chunks} chunk(s) of amended sections")
        for note in report.notes:
            click.echo(f"note: {note}", err=True)
    except ArcError as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        runtime.close()


def _effective_date(value: str | None, option: str = "--effective-date") -> date | None:
    """``--effective-date`` (or another date ``option``), read as every door reads ``effective_date``."""
    from pydantic import TypeAdapter, ValidationError

    from .models import IsoDate

    if value is None:
        return None
    try:
        return TypeAdapter(IsoDate).validate_python(value)
    except ValidationError as exc:
        message = exc.errors()[0]["msg"].removeprefix("Value error, ")
        raise click.BadParameter(message, param_hint=option) from None


@main.command()
def reembed() -> None:
    """Embed every chunk again with the configured model (EMBEDDING_MODEL), after switching
    between models of one size (all-MiniLM-L6-v2 and multilingual-e5-small); the chunks stay."""
    from .ingest.reembed import reembed as reembed_all

    settings = _settings()
    runtime = _runtime(settings, migrate=False)  # the start's model check refuses exactly this switch
    try:
        for db in runtime.databases.all():  # each database of a split knowledge base alike
            db.check_dimension(runtime.embedder.model, runtime.embedder.dim)
            db.migrate(runtime.embedder.dim)
            report = reembed_all(db, runtime.embedder, progress=sys.stderr.isatty())
            before = report.previous or "none"
            where = f" in {runtime.databases.name(db)}" if runtime.databases.split else ""
            click.echo(
                f"re-embedded {report.chunks} chunk(s){where} with {report.model} (before: {before}) "
                f"in {report.seconds:.0f} s"
            )
    except ArcError as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        runtime.close()


@main.group()
def documents() -> None:
    """The knowledge base's documents: list, show, delete."""


_COMMUNITY_OPTION = click.option(
    "--community", metavar="NAME", default=None, help="The community whose documents (needed once there are several)."
)


def _knowledge(runtime):
    """The knowledge-base service over ``runtime``; its retriever's background work stops when
    the command ends."""
    from .service.knowledge import KnowledgeService

    knowledge = KnowledgeService(runtime)
    click.get_current_context().call_on_close(knowledge.close)
    return knowledge


def _community(knowledge) -> str:
    """The --community a documents command names, checked as the webhook checks its field."""
    named = click.get_current_context().params.get("community")
    try:
        return knowledge.community(named, caller=LOCAL)
    except ArcError as exc:
        raise click.ClickException(str(exc).replace("community:", "--community:", 1)) from None


@documents.command("list")
@_COMMUNITY_OPTION
def documents_list(community: str | None) -> None:
    """Every document: id, type, binding, superseded or amended by, chunks, pages, ingested at, source file,
    name, and the date it took effect."""
    runtime = _runtime(_settings())
    try:
        knowledge = _knowledge(runtime)
        found = knowledge.list_documents(_community(knowledge), caller=LOCAL)
    finally:
        runtime.close()
    if not found:
        click.echo("the knowledge base is empty")
        return
    click.echo(
        "document_id\ttype\tbinding\tsuperseded_by\tamended_by\tchunks\tpages\tingested_at\tsource_file\tname\teffective_date"
    )
    for d in found:
        click.echo(
            "\t".join(
                str(v)
                for v in (
                    d.document_id,
                    d.document_type,
                    "yes" if d.is_binding else "no",
                    d.superseded_by or "-",
                    ",".join(d.amended_by) or "-",
                    d.chunks,
                    d.pages or "-",
                    d.ingested_at.isoformat(timespec="seconds"),
                    d.source_file or "-",
                    d.name,
                    d.effective_date or "-",
                )
            )
        )


@documents.command("show")
@click.argument("document_id")
@_COMMUNITY_OPTION
def documents_show(document_id: str, community: str | None) -> None:
    """One document's chunks, in order."""
    from .store.knowledge_base import UnknownDocument

    runtime = _runtime(_settings())
    try:
        knowledge = _knowledge(runtime)
        summary, chunks = knowledge.show(document_id, _community(knowledge), caller=LOCAL)
    except UnknownDocument:
        raise click.ClickException(f"no document {document_id!r} in the knowledge base") from None
    finally:
        runtime.close()
    click.echo(f"{summary.document_id}: {summary.name} ({summary.document_type}, {summary.chunks} chunks)")
    for c in chunks:
        page = f", page {c.page_number}" if c.page_number else ""
        click.echo(f"\n--- chunk {c.chunk_index} [{c.section_path or '-'}{page}, {c.token_count} tokens]\n{c.content}")


@documents.command("delete")
@click.argument("document_id")
@_COMMUNITY_OPTION
def documents_delete(document_id: str, community: str | None) -> None:
    """Delete a document with its chunks and BM25 statistics (documents it superseded are current again)."""
    from .store.knowledge_base import UnknownDocument

    runtime = _runtime(_settings())
    try:
        knowledge = _knowledge(runtime)
        deleted = knowledge.delete(document_id, _community(knowledge), caller=LOCAL)
    except UnknownDocument:
        raise click.ClickException(f"no document {document_id!r} in the knowledge base") from None
    finally:
        runtime.close()
    click.echo(f"deleted {document_id} ({deleted} chunks)")


@main.group()
def communities() -> None:
    """The knowledge base's communities: list, delete."""


@communities.command("list")
def communities_list() -> None:
    """Every community holding documents, with its chunk count."""
    runtime = _runtime(_settings())
    try:
        found = _knowledge(runtime).communities()
    except ArcError as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        runtime.close()
    if not found:
        click.echo("the knowledge base is empty")
        return
    click.echo("community\tchunks")
    for name, chunks in sorted(found.items()):
        click.echo(f"{name}\t{chunks}")


@communities.command("delete")
@click.argument("name")
@click.confirmation_option(
    "--yes", prompt="Delete the community and everything kept of it?", help="Delete without asking first."
)
def communities_delete(name: str) -> None:
    """Delete a community and everything kept of it, in one transaction: its documents and chunks,
    the keeper's confirmations, the chat's votes, the questions asked, its status calibrations,
    and its vector table and index."""
    runtime = _runtime(_settings())
    try:
        removed = _knowledge(runtime).delete_community(name, caller=LOCAL)
    except ArcError as exc:
        raise click.ClickException(str(exc).removeprefix("community: ")) from None
    finally:
        runtime.close()
    click.echo(f"deleted community {name}: " + ", ".join(f"{n} {kind}" for kind, n in removed.items()))


@main.command()
@click.argument("query")
@click.option("--rerank/--no-rerank", default=None)
@click.option("--community", metavar="NAME", default=None, help="The community to ask (needed once there are several).")
@click.option(
    "--as-of",
    "as_of",
    metavar="YYYY-MM-DD",
    help="Answer with what was in force that day (the webhook's as_of; docs/as-of.md).",
)
def ask(query: str, rerank: bool | None, community: str | None, as_of: str | None) -> None:
    """Run one question through the pipeline and print the JSON answer."""
    from .models import RetrievalRequest

    day = _effective_date(as_of, "--as-of")
    runtime = _runtime(_settings())
    try:
        # a developer's question: answered as the webhook's, not recorded as a resident's
        answer = _knowledge(runtime).ask(
            RetrievalRequest(query=query, rerank=rerank, community=community, as_of=day), caller=LOCAL, record=False
        )
        click.echo(json.dumps(answer.model_dump(mode="json"), indent=2))
    except ArcError as exc:
        raise click.ClickException(str(exc).replace("community:", "--community:", 1)) from None
    finally:
        runtime.close()


@main.command("eval")
@click.argument("dataset_dir", required=False, type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--qrels",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Judgements TSV (default: the first qrels/*.tsv).",
)
@click.option(
    "--modes",
    default="bm25s,dense,vector,fts,hybrid-weighted,hybrid-rrf,default",
    show_default=True,
    help="Comma-separated: bm25s, dense, vector, fts, hybrid-weighted, hybrid-rrf, default.",
)
@click.option("--out", type=click.Path(file_okay=False, path_type=Path))
@click.option("--rerank", is_flag=True, help="Rerank with the configured reranker (LLM or rerank service).")
@click.option("--limit", type=int, help="Only the first N judged queries (quick runs).")
@click.option(
    "--confirmed",
    is_flag=True,
    help="Replay the keeper's confirmed questions of --community as if unconfirmed (docs/confirmations.md).",
)
@click.option("--community", metavar="NAME", default=None, help="With --confirmed: the community whose questions.")
def eval_command(
    dataset_dir: Path | None,
    qrels: Path | None,
    modes: str,
    out: Path | None,
    rerank: bool,
    limit: int | None,
    confirmed: bool,
    community: str | None,
) -> None:
    """Measure retrieval quality; writes results.json, results.md, chart.png.

    DATASET_DIR is a BEIR-layout folder (ranking metrics per mode) or an answer dataset: a
    questions.jsonl beside community folders with a manifest.json each (what the agent receives,
    next to the n8n-default and hybrid top-5 anchors).
    """
    from .embeddings import CachedEmbedder, build_embedder
    from .evaluation.answers import is_answer_dataset
    from .evaluation.dataset import load_dataset
    from .evaluation.harness import ALL_MODES, evaluate, write_report
    from .service.build import build_reranker

    if confirmed:
        _eval_confirmed(community)
        return
    if dataset_dir is None or out is None:
        raise click.UsageError("give DATASET_DIR and --out (or --confirmed --community NAME)")
    command = "arc-retrieval eval " + " ".join(sys.argv[2:]) if len(sys.argv) > 2 else "arc-retrieval eval"
    if is_answer_dataset(dataset_dir):
        _eval_answers(dataset_dir, out, command)
        return

    from .store.embedded import exit_on_signals

    exit_on_signals()  # a stopped run still stops its database and removes its folder
    chosen = [m.strip() for m in modes.split(",") if m.strip()]
    unknown = [m for m in chosen if m not in ALL_MODES]
    if unknown:
        raise click.BadParameter(
            f"unknown mode(s) {', '.join(unknown)}; choose from {', '.join(ALL_MODES)}", param_hint="--modes"
        )
    settings = _settings()
    if rerank and settings.reranking.reranker == "none":
        raise click.UsageError("--rerank needs a reranker: an LLM key, or RERANKER=cohere|jina|voyage|tei|infinity")
    dataset = load_dataset(dataset_dir, qrels, limit)
    embedder = CachedEmbedder(build_embedder(settings), maxsize=100_000)
    reranker = build_reranker(settings) if rerank else None
    settings.database.data_dir.mkdir(parents=True, exist_ok=True)
    results = evaluate(
        dataset,
        chosen,
        embedder=embedder,
        data_dir=settings.database.data_dir.resolve(),
        reranker=reranker,
        rerank=rerank,
    )
    write_report(
        results, out, title=f"{dataset.name}: {len(dataset.queries)} queries, {embedder.model}", command=command
    )
    click.echo((out / "results.md").read_text())


# -- the keeper's confirmed answers (docs/confirmations.md) ---------------------------------------


def _confirmation_service(runtime):
    from .service.confirmations import ConfirmationService

    return ConfirmationService(_knowledge(runtime))


def _eval_confirmed(community: str | None) -> None:
    """The regression set from the keeper's own questions, through the current configuration."""
    from .service.confirmations import replay

    runtime = _runtime(_settings())
    try:
        report = replay(_confirmation_service(runtime), community)
    except ArcError as exc:
        raise click.ClickException(str(exc).replace("community:", "--community:", 1)) from None
    finally:
        runtime.close()
    passages = sum(1 for r in report.asked if r.answer == "passage")
    click.echo(
        f"{report.community}: {len(report.asked)} confirmed questions asked as if unconfirmed "
        f"({passages} answered by a passage, {len(report.asked) - passages} not in the documents; "
        f"{report.stale} stale left out)"
    )
    click.echo("| evidence | SOURCE 1 | status right |\n|---|---|---|")
    click.echo(f"| {report.share('evidence')} | {report.share('source_1')} | {report.share('status_right')} |")
    for r in report.asked:
        if not r.status_right or r.source_1 is False:
            click.echo(f"  #{r.id} {r.status}, SOURCE 1 {'yes' if r.source_1 else 'no'}: {r.query}")


@main.group()
def confirmations() -> None:
    """The keeper's confirmed answers, as the answer dataset's questions.jsonl."""


@confirmations.command("export")
@click.option("--community", metavar="NAME", default=None, help="The community (needed once there are several).")
def confirmations_export(community: str | None) -> None:
    """Print a community's valid confirmations as questions.jsonl lines."""
    from .service.confirmations import export_rows

    runtime = _runtime(_settings())
    try:
        for row in export_rows(_confirmation_service(runtime), community):
            click.echo(json.dumps(row, ensure_ascii=False))
    except ArcError as exc:
        raise click.ClickException(str(exc).replace("community:", "--community:", 1)) from None
    finally:
        runtime.close()


@confirmations.command("import")
@click.argument("questions", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--community", metavar="NAME", default=None, help="Confirm them all in this community (default: each row's)."
)
def confirmations_import(questions: Path, community: str | None) -> None:
    """Confirm the questions of a questions.jsonl: an answerable one by the chunk holding its
    evidence, an unanswerable or off-topic one as not in the documents."""
    from .evaluation.answers import normalise_for_match
    from .service.confirmations import DatasetRow, import_rows

    try:
        rows = [DatasetRow.model_validate_json(line) for line in questions.read_text().splitlines() if line.strip()]
    except ValueError as exc:
        raise click.ClickException(f"{questions}: {str(exc).splitlines()[0]}") from None
    if community is None:
        rows = [r for r in rows if r.community]
    runtime = _runtime(_settings())
    try:
        service = _confirmation_service(runtime)
        done, notes = import_rows(service, rows, community, normalise_for_match)
        for shard in service.knowledge.shards():  # the success cuts they fit, stored before exiting
            shard.retriever.calibrator.wait_refits()
    except ArcError as exc:
        raise click.ClickException(str(exc).replace("community:", "--community:", 1)) from None
    finally:
        runtime.close()
    for note in notes:
        click.echo(note, err=True)
    click.echo(f"confirmed {done} of {len(rows)} questions")


def _eval_answers(dataset_dir: Path, out: Path, command: str) -> None:
    from .embeddings import CachedEmbedder, build_embedder
    from .evaluation.answer_harness import evaluate_answers, write_answer_report
    from .evaluation.answers import load_answer_dataset

    settings = _settings()
    try:
        dataset = load_answer_dataset(dataset_dir)
    except (ValueError, KeyError) as exc:
        raise click.ClickException(f"{dataset_dir}: {exc}") from None
    from .store.embedded import exit_on_signals

    exit_on_signals()
    embedder = CachedEmbedder(build_embedder(settings), maxsize=100_000)
    settings.database.data_dir.mkdir(parents=True, exist_ok=True)
    try:
        results = evaluate_answers(
            dataset,
            settings=settings,
            embedder=embedder,
            data_dir=settings.database.data_dir.resolve(),
            progress=sys.stderr.isatty(),
        )
    except ArcError as exc:
        raise click.ClickException(str(exc)) from None
    write_answer_report(results, out, command=command)
    click.echo((out / "results.md").read_text())


@main.command()
@click.option("--host", default=None, help="Interface to listen on (default: ARC_BIND's, else 127.0.0.1).")
@click.option("--port", default=None, type=click.IntRange(1, 65535), help="Port (default: ARC_BIND's, else 8080).")
@click.option("--workers", default=None, type=int, help="gunicorn worker processes (default: WEB_CONCURRENCY or 2).")
@click.option("--load-sample", is_flag=True, help="Load the sample corpus if the knowledge base is empty.")
def serve(host: str | None, port: int | None, workers: int | None, load_sample: bool) -> None:
    """Serve the webhook with gunicorn (the embedded database starts with it)."""
    import os

    _settings()  # fail fast, with one line, on a bad configuration
    bind = None
    if host is not None or port is not None:
        default_host, _, default_port = (os.environ.get("ARC_BIND") or "127.0.0.1:8080").rpartition(":")
        bind = f"{host or default_host}:{port or default_port}"
    from .serve import gunicorn_conf  # noqa: F401  checks ARC_BIND, WEB_CONCURRENCY, ARC_THREADS before gunicorn reads them
    from .serve.server import run

    run(bind=bind, workers=workers, load_sample=load_sample)


@main.command()
@click.option("--http", "over_http", is_flag=True, help="Serve streamable HTTP at /mcp instead of stdio.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to listen on (--http).")
@click.option("--port", default=8090, show_default=True, type=click.IntRange(1, 65535), help="Port (--http).")
@click.option("--load-sample", is_flag=True, help="Load the sample corpus if the knowledge base is empty.")
def mcp(over_http: bool, host: str, port: int, load_sample: bool) -> None:
    """Serve the search as an MCP server (stdio for Claude Desktop, --http for n8n and others)."""
    from .serve.mcp_server import open_face, run_http, run_stdio

    settings = _settings()
    from .store.embedded import exit_on_signals

    exit_on_signals()
    try:
        face = open_face(settings, load_sample=load_sample)
    except ArcError as exc:
        raise click.ClickException(str(exc)) from None
    run_http(face, host, port) if over_http else run_stdio(face)


if __name__ == "__main__":
    main()
