"""The command line over a real database: db init/sql, ingest of Markdown, text and PDF files."""

from __future__ import annotations

from click.testing import CliRunner

from worker.cli import main
from tests.helpers import make_pdf


def test_db_commands_and_file_ingest(make_database, tmp_path, monkeypatch):
    url = make_database("cli")
    monkeypatch.setenv("DATABASE_URL", url)
    monkeypatch.setenv("ARC_DATA_DIR", str(tmp_path))
    runner = CliRunner()
    first = runner.invoke(main, ["db", "init"])
    assert first.exit_code == 0 and "003_bm25" in first.output, first.output
    again = runner.invoke(main, ["db", "init"])
    assert again.exit_code == 0 and "up to date" in again.output and "vector(384)" in again.output, again.output
    sql = runner.invoke(main, ["db", "sql", "--dim", "1536"])
    assert "create table if not exists knowledge_chunks" in sql.output and "vector(1536)" in sql.output

    pdf = tmp_path / "rules.pdf"
    pdf.write_bytes(make_pdf([["ARTICLE VII USE RESTRICTIONS", "7.1 Fences", "No fence shall exceed 6 feet in height."],
                              ["7.2 Sheds", "One storage shed is allowed on each lot."]]))
    text = tmp_path / "letter.txt"
    text.write_text("DECISION\nThe shed request at 12 Aspen Lane is denied.\n")
    result = runner.invoke(main, ["ingest", str(pdf), "--document-type", "ccr", "--binding"])
    assert result.exit_code == 0, result.output
    result = runner.invoke(main, ["ingest", str(text), "--document-type", "response_letter", "--not-binding",
                                  "--name", "Letter 12 Aspen"])
    assert result.exit_code == 0, result.output
    bad = runner.invoke(main, ["ingest", str(text), "--document-type", "memo"])
    assert bad.exit_code != 0 and "memo" in bad.output

    import psycopg

    with psycopg.connect(url) as conn:
        rows = conn.execute("select document_id, section_path, page_number, is_binding from knowledge_chunks "
                            "order by document_id, chunk_index").fetchall()
    assert ("rules", "ARTICLE VII USE RESTRICTIONS > 7.1 Fences", 1, True) in rows, rows
    assert ("rules", "ARTICLE VII USE RESTRICTIONS > 7.2 Sheds", 2, True) in rows
    assert ("letter", "DECISION", None, False) in rows

    answer = runner.invoke(main, ["ask", "How tall can a fence be?"])
    assert answer.exit_code == 0, answer.output
    import json

    # stderr (JSON log lines) shares the runner's output: decode the answer where it starts
    body, _ = json.JSONDecoder().raw_decode(answer.output, answer.output.index('{\n  "status"'))
    assert body["status"] != "no_results" and "No fence shall exceed 6 feet" in body["context"], body


def test_unreadable_files_are_one_clear_line_and_store_nothing(make_database, tmp_path, monkeypatch):
    import io

    import psycopg
    from pypdf import PdfReader, PdfWriter

    url = make_database("cli_bad")
    monkeypatch.setenv("DATABASE_URL", url)
    monkeypatch.setenv("ARC_DATA_DIR", str(tmp_path))
    corrupt = tmp_path / "corrupt.pdf"
    corrupt.write_bytes(make_pdf([["Rules", "No fence over 6 feet."]])[:200])
    encrypted = tmp_path / "locked.pdf"
    writer = PdfWriter()
    for page in PdfReader(io.BytesIO(make_pdf([["Rules", "No fence over 6 feet."]]))).pages:
        writer.add_page(page)
    writer.encrypt("secret")
    with encrypted.open("wb") as fh:
        writer.write(fh)
    latin1 = tmp_path / "notice.txt"
    latin1.write_bytes("Caf\xe9 rules: no parking.".encode("latin-1"))
    runner = CliRunner()
    for path, message in [(corrupt, "not a readable PDF"), (encrypted, "encrypted"), (latin1, "not UTF-8")]:
        result = runner.invoke(main, ["ingest", str(path), "--document-type", "other"])
        assert result.exit_code != 0 and message in result.output, result.output
        assert "Traceback" not in result.output and result.exception is None or isinstance(result.exception, SystemExit)
    with psycopg.connect(url) as conn:
        assert conn.execute("select count(*) from knowledge_chunks").fetchone()[0] == 0


def test_ingest_help_names_every_format_it_reads():
    """`ingest --help` is where a newcomer looks first: every suffix the readers take is named."""
    from worker.ingest.readers import TEXT_SUFFIXES

    shown = CliRunner().invoke(main, ["ingest", "--help"], terminal_width=200).output
    for suffix in [*TEXT_SUFFIXES, ".pdf", ".docx", "corpus.jsonl", "manifest.json"]:
        assert suffix in shown, f"ingest --help does not name {suffix}"
    assert "Word" in shown and "HTML" in shown and "OCR" in shown


def test_ingest_from_the_command_line_keeps_the_configured_page_limit(make_database, tmp_path, monkeypatch):
    """ARC_MAX_PAGES bounds every way in, not the uploads alone: an admin who lowers (or raises)
    it for the server gets the same from `arc-retrieval ingest`."""
    import psycopg

    url = make_database("cli_limits")
    monkeypatch.setenv("DATABASE_URL", url)
    monkeypatch.setenv("ARC_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("ARC_MAX_PAGES", "2")
    long = tmp_path / "long.pdf"
    long.write_bytes(make_pdf([[f"Page {n}", "No fence over 6 feet."] for n in range(3)]))
    result = CliRunner().invoke(main, ["ingest", str(long), "--document-type", "ccr"])
    assert result.exit_code != 0 and "3 pages" in result.output and "ARC_MAX_PAGES" in result.output, result.output
    assert "Traceback" not in result.output
    with psycopg.connect(url) as conn:
        assert conn.execute("select count(*) from knowledge_chunks").fetchone()[0] == 0


def test_the_same_file_under_another_name_is_refused_unless_asked(make_database, tmp_path, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", make_database("cli_duplicate"))
    monkeypatch.setenv("ARC_DATA_DIR", str(tmp_path))
    text = "# Hedge Rules\n\nHedges along the street may grow to 4 feet at most.\n"
    (tmp_path / "hedges.md").write_text(text)
    (tmp_path / "hedges-copy.md").write_text(text)
    runner = CliRunner()
    first = runner.invoke(main, ["ingest", str(tmp_path / "hedges.md"), "--document-type", "other"])
    assert first.exit_code == 0, first.output
    copy = runner.invoke(main, ["ingest", str(tmp_path / "hedges-copy.md"), "--document-type", "other"])
    assert copy.exit_code != 0 and "'hedges'" in copy.output, copy.output
    assert "--allow-duplicate" in copy.output
    assert "Traceback" not in copy.output
    asked = runner.invoke(main, ["ingest", str(tmp_path / "hedges-copy.md"), "--document-type", "other",
                                 "--allow-duplicate"])
    assert asked.exit_code == 0, asked.output
