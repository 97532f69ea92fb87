"""The docs keep up with the code. Every setting is in the README, every SQL file is described,
and a README that falls behind fails here: each command in its shell blocks runs (against a
worker started as `make run` starts it, in a folder holding the example files they name), or its
block says which test runs it; every environment variable, route, CLI flag, manifest key and
webhook field the README names exists, and what it says about the n8n workflows' retries is what
their JSON does."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from worker.cli import main as cli
from worker.config import ENV_VARS, configuration_table
from tests.helpers import shell_blocks

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
SAMPLE = ROOT / "worker" / "sample_corpus"


def words(command: str) -> list[str]:
    return shlex.split(command, comments=True)


def code_spans(text: str = README) -> list[str]:
    """Inline code, a span wrapped over lines joined again."""
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    return [re.sub(r"\s+", " ", span).strip() for span in re.findall(r"(?<!`)`([^`]+)`(?!`)", prose)]


def test_every_environment_variable_is_documented():
    reference = (ROOT / "docs" / "configuration.md").read_text()
    missing = [var for var in ENV_VARS if f"`{var}`" not in reference]
    assert not missing, f"undocumented settings: {missing}"


def test_the_configuration_reference_is_the_one_the_settings_print():
    """docs/configuration.md is `python -m worker.config --all`, every setting group by group."""
    from worker.config import configuration_reference

    reference = (ROOT / "docs" / "configuration.md").read_text()
    assert reference.rstrip("\n") == configuration_reference().rstrip("\n"), \
        "docs/configuration.md differs: write `python -m worker.config --all > docs/configuration.md`"


def test_the_configuration_table_is_the_one_the_settings_print():
    """README's table under "## Configuration" lists exactly the settings worker/config.py shows
    there, in their order, with their defaults and descriptions: paste `python -m worker.config`
    over it."""
    section = README.split("\n## Configuration\n", 1)[1].split("\n## ", 1)[0]
    table = [line for line in section.splitlines() if line.startswith("|")]
    expected = configuration_table().splitlines()
    assert [row.split(" | ")[0] for row in table] == [row.split(" | ")[0] for row in expected], \
        "the README's variables are not worker/config.py's: paste `python -m worker.config` over its table"
    for shown, declared in zip(table, expected, strict=True):
        assert shown == declared, "README's row differs from worker/config.py (python -m worker.config)"


def test_every_sql_file_is_described():
    """The README names every numbered file; docs/sql.md every function file."""
    for path in (ROOT / "sql").glob("*.sql"):
        assert f"`{path.relative_to(ROOT)}`" in README, path.name
    sql_doc = (ROOT / "docs" / "sql.md").read_text()
    for path in (ROOT / "sql" / "functions").glob("*.sql"):
        assert f"`{path.relative_to(ROOT)}`" in sql_doc, path.name


def test_readme_commands_and_ci():
    assert "make run" in README and "make test" in README
    makefile = (ROOT / "Makefile").read_text()
    assert "\nrun:" in makefile and "\ntest:" in makefile
    assert "make test" in (ROOT / ".ci" / "run").read_text()


# --- every shell block runs, or says which test runs it ---------------------------------------

def test_every_shell_block_is_run_or_says_what_runs_it():
    makefile = (ROOT / "Makefile").read_text()
    for block in shell_blocks():
        if block.marker is None:
            continue
        if block.marker.startswith("make targets"):
            for command in block.commands:
                tool, target = words(command)[:2]
                assert tool == "make" and re.search(rf"^{re.escape(target)}:", makefile, re.M), command
        else:
            test_file = re.match(r"(tests/test_\w+\.py) runs these", block.marker)
            assert test_file and (ROOT / test_file[1]).is_file(), f"unknown marker: {block.marker}"
            assert "README" in (ROOT / test_file[1]).read_text()


def test_commands_work_without_an_activated_virtualenv():
    """`arc-retrieval` is in .venv/bin, not on PATH: a command shown bare is "command not found"
    (inside the Docker image, where it is on PATH, `docker exec` runs it); a benchmark run by a
    bare `python` lacks the project's packages."""
    bare = []
    for block in shell_blocks():
        bare += [c for c in block.commands if re.match(r"^([A-Z_]+=\S+ )*arc-retrieval ", c)]
    for span in code_spans():
        if re.match(r"^([A-Z_]+=\S+ )*arc-retrieval \S+.*(--|/|\.)", span) or re.match(r"^python3? \S+\.py", span):
            bare.append(span)
    assert not bare, f"write these as .venv/bin/arc-retrieval ... or .venv/bin/python ...: {bare}"


def _cli_command(argv: list[str]) -> tuple[click.Command, list[str]]:
    command: click.Command = cli
    rest = list(argv)
    while isinstance(command, click.Group) and rest and rest[0] in command.commands:
        command = command.commands[rest.pop(0)]
    return command, rest


def _options(command: click.Command) -> set[str]:
    return {opt for p in command.params for opt in (*p.opts, *p.secondary_opts)} | {"--help"}


def _all_options(command: click.Command = cli) -> set[str]:
    found = _options(command)
    for sub in getattr(command, "commands", {}).values():
        found |= _all_options(sub)
    return found


def _arc_invocations() -> list[list[str]]:
    """The arguments of every arc-retrieval command the README shows, in blocks or inline."""
    found = []
    texts = [c for b in shell_blocks() for c in b.commands] + code_spans()
    for text in texts:
        for match in re.finditer(r"(?:^|(?<! -t)\s)(?:\.venv/bin/)?arc-retrieval\s+([^|;&]*)", text):
            try:
                found.append(shlex.split(match[1], comments=True))
            except ValueError:  # an unbalanced quote cut by the span: take the words as they are
                found.append(match[1].split())
    return found


def test_every_cli_command_and_flag_the_readme_names_exists():
    invocations = _arc_invocations()
    assert len(invocations) > 10
    for argv in invocations:
        command, rest = _cli_command(argv)
        assert command is not cli, f"no such command: arc-retrieval {' '.join(argv)}"
        flags = {w.split("=")[0] for w in rest if w.startswith("--")}
        assert flags <= _options(command), f"arc-retrieval {' '.join(argv)}: {flags - _options(command)}"
    # A flag named on its own in the text (`--force`, `--supersedes OLD_ID`) is one of some command's.
    every = _all_options()
    for span in code_spans():
        if re.match(r"--[a-z]", span):
            assert span.split()[0].split("=")[0] in every, span


def test_flags_of_the_benchmark_scripts_exist():
    for span in code_spans():
        for match in re.finditer(r"python (benchmarks/\w+\.py)((?: --?[\w-]+(?: [^-\s]\S*)*)*)", span):
            source = (ROOT / match[1]).read_text()
            for flag in re.findall(r"--[\w-]+", match[2]):
                assert f'"{flag}"' in source, f"{match[1]} has no {flag}"


# The README names a few variables that are not the worker's settings: what reads each.
NOT_SETTINGS = {
    "ARC_BIND": "worker/serve/gunicorn_conf.py", "WEB_CONCURRENCY": "worker/serve/gunicorn_conf.py",
    "ARC_THREADS": "worker/serve/gunicorn_conf.py",
    "ARC_WORKER_URL": "workflows/arc-retrieval-tool.json",  # n8n's environment, read by the workflows
    "ARC_COMMUNITY": "workflows/arc-retrieval-tool.json",  # n8n's environment: the community the tool asks
    "ARC_SCREENSHOTS": "tests/test_pages.py",  # where the browser test saves its screenshots
    "ARC_MCP_URL": "workflows/arc-mcp-chat-agent.json",
}
PLACEHOLDERS = {"OLD_ID", "NEW_ID"}  # metavars in `--supersedes OLD_ID`


def test_every_environment_variable_the_readme_names_is_read():
    named = {w for span in code_spans() for w in re.findall(r"\b[A-Z][A-Z0-9]*_[A-Z0-9_]+\b", span)}
    named |= {w for b in shell_blocks() for c in b.commands for w in re.findall(r"\b[A-Z][A-Z0-9]*_[A-Z0-9_]+(?==)", c)}
    for var in sorted(named - set(ENV_VARS) - PLACEHOLDERS):
        if var.startswith("N8N_"):
            continue  # n8n's own settings
        assert var in NOT_SETTINGS, f"the README names {var}, which nothing reads"
        assert var in (ROOT / NOT_SETTINGS[var]).read_text(), var


def test_every_route_the_readme_names_is_served(app):
    rules = [rule.rule for rule in app.url_map.iter_rules() if rule.endpoint != "static"]
    patterns = [re.compile("^" + re.sub(r"<[^>]+>", "[^/]+", rule) + "$") for rule in rules]
    named = set()
    for span in code_spans():
        named |= set(re.findall(
            r"^(?:GET |POST |DELETE )?(/(?:webhook/[\w./<>-]+|healthz|readyz|metrics|openapi\.json))", span))
    named |= set(re.findall(r"localhost:8080(/[\w./-]*)", README))
    named |= set(re.findall(r"(?:GET|POST|DELETE) (/[\w./<>-]+)", README))
    # n8n's chat URL, and PostgREST's route (Supabase's, which its stand-in serves in the tests)
    named = {n.rstrip(".") for n in named if not n.startswith(("/webhook/6f1c", "/rest/"))}
    assert named
    for route in named:
        assert any(p.match(route) for p in patterns), f"the README names {route}, which is not served"
    for rule in rules:  # and every route is in the README
        assert rule in README or re.sub(r"<[^>]+>", "<id>", rule) in README, rule


# --- keys and fields ----------------------------------------------------------------------------

def test_the_manifest_keys_the_readme_gives_are_the_real_ones():
    from worker.ingest.manifest import ManifestEntry

    line = next(line for line in README.split("\n\n") if "Manifest keys" in line)
    assert set(re.findall(r"`(\w+)`", line)) == set(ManifestEntry.model_fields)


def test_the_ingest_fields_the_readme_gives_are_the_real_ones():
    from worker.models import IngestRequest

    listed = re.findall(r'`\{("text", [^}]*)\}`', README)
    assert listed
    for fields in listed:
        assert set(re.findall(r'"(\w+)"', fields)) == set(IngestRequest.model_fields), fields


def test_the_webhook_table_lists_the_real_request_fields():
    from worker.models import RetrievalRequest

    section = README.split("## The webhook", 1)[1].split("\n## ", 1)[0]
    table = re.findall(r"^\| `(\w+)` \|", section, re.M)
    assert set(table) == set(RetrievalRequest.model_fields)


def test_the_document_ids_the_readme_shows_exist():
    """An id shown in a command (or the n8n delete example) is in the sample corpus, or an earlier
    command of the README stores it."""
    sample = {d["document_id"] for d in json.loads((SAMPLE / "manifest.json").read_text())["documents"]}
    stored = set(sample)
    for block in shell_blocks():
        for command in block.commands:
            argv = words(command)
            if "arc-retrieval" not in " ".join(argv[:1]) and "arc-retrieval" not in argv[:3]:
                continue
            for flag in ("--supersedes", "--superseded-by"):
                if flag in argv:
                    assert argv[argv.index(flag) + 1] in stored, command
            if "--amends" in argv:
                assert argv[argv.index("--amends") + 1].split(":")[0] in stored, command
            if "documents" in argv and argv[-2] in ("show", "delete"):
                assert argv[-1] in stored, command
            if "ingest" in argv and "--sample" not in argv:
                path = next(w for w in argv[argv.index("ingest") + 1:] if not w.startswith("-"))
                stored.add(argv[argv.index("--document-id") + 1] if "--document-id" in argv else Path(path).stem)
    for deleted in re.findall(r'"delete_document_id": "([\w-][\w.-]*)"', README):
        assert deleted in stored, deleted


# --- n8n: what the README says the workflows do is in their JSON --------------------------------

def _retrying_http_nodes() -> dict[str, dict]:
    nodes = {}
    for path in sorted((ROOT / "workflows").glob("*.json")):
        for node in json.loads(path.read_text())["nodes"]:
            if node["type"].endswith(".httpRequest") and node.get("retryOnFail"):
                nodes[node["name"]] = node
    return nodes


def test_the_readme_states_each_workflow_requests_retries_as_its_json_does():
    nodes = _retrying_http_nodes()
    assert nodes
    section = README.split("## Using it from n8n", 1)[1].split("\n## ", 1)[0]
    flat = re.sub(r"\s+", " ", section)
    for name, node in nodes.items():
        tries = node.get("maxTries", 3)
        assert f"*{name}* {tries} tries" in flat, f"the README should say *{name}* {tries} tries"
        wait = node.get("waitBetweenTries", 1000) / 1000
        assert f"{wait:g} s apart" in flat
    stated = re.findall(r"\*([\w ]+)\* (\d+) tries", flat)
    assert {n for n, _ in stated} == set(nodes), "the README names a retrying node the workflows lack"



NUMBER_WORDS = {1: "once", 2: "twice", 3: "three times", 4: "four times", 5: "five times", 6: "six times"}


def test_the_readme_states_how_often_the_workflows_wait_and_retry_a_busy_worker():
    """A 429/503 loops through a Wait node while `$runIndex < N` (N waits); the README says N, and
    says which requests do not loop (the file upload, which the caller sends again)."""
    section = re.sub(r"\s+", " ", README.split("## Using it from n8n", 1)[1].split("\n## ", 1)[0])
    for path in sorted((ROOT / "workflows").glob("*.json")):
        workflow = json.loads(path.read_text())
        loops = {int(n) for n in re.findall(r"\$runIndex < (\d+)", json.dumps(workflow))}
        if not loops:
            continue
        assert len(loops) == 1, path.name
        assert f"up to {NUMBER_WORDS[loops.pop()]}" in section, path.name
        successors = {name: {c["node"] for out in links["main"] for c in out}
                      for name, links in workflow["connections"].items()}
        busy = {n["name"] for n in workflow["nodes"] if "$runIndex" in json.dumps(n.get("parameters", {}))}
        for node in workflow["nodes"]:
            if node["type"].endswith(".httpRequest") and "upload" in node["name"].lower():
                loops_on_busy = bool(successors.get(node["name"], set()) & busy)
                assert ("no retry on 429" in section) != loops_on_busy, node["name"]

# --- the shell blocks, run ----------------------------------------------------------------------

INGEST_TOKEN = "docs-ingest-token-0123456789abcdef"


def _example_files(folder: Path) -> None:
    """The documents the README's examples name, made from the sample corpus (a PDF written by
    hand as tests/test_cli.py writes one)."""
    from tests.helpers import make_pdf

    guideline_lines = ["Cedar Hollow Design Guidelines", "Section 5 Fences",
                       "Rear yard fences may not exceed 6 feet in height.",
                       "Front yard fences may not exceed 3.5 feet and must be at least half open."]
    (folder / "guidelines.pdf").write_bytes(make_pdf([guideline_lines]))
    (folder / "fence-guide.pdf").write_bytes(make_pdf([["Fence guide", "Wood or vinyl fences only.",
                                                         "Chain link is not allowed in front yards."]]))
    # the next edition: the same guidelines, revised (the same text again would be refused as a duplicate)
    (folder / "guidelines-2025.md").write_text((SAMPLE / "design-guidelines-2024.md").read_text()
                                               .replace("2024", "2025"))
    (folder / "letter.txt").write_text((SAMPLE / "decision-2023-014-fence.md").read_text().replace("#", ""))
    (folder / "second-amendment.pdf").write_bytes(make_pdf([[
        "Second Amendment to the Declaration of Cedar Hollow",
        "Article VII Section 7.1 is amended: fences may not exceed 5 feet in height."]]))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def readme_worker(worker_process, tmp_path_factory) -> Iterator[tuple[Path, dict[str, str], int]]:
    """A folder with the example files, the environment, and a worker started as `make run`
    starts it (its recipe's arc-retrieval command), on a port of its own."""
    recipe = re.search(r"^run:.*\n\t\$\(ARC\) (.+)$", (ROOT / "Makefile").read_text(), re.M)
    assert recipe, "make run starts `$(ARC) ...`"
    folder = tmp_path_factory.mktemp("readme")
    (folder / ".venv").symlink_to(Path(sys.prefix))
    _example_files(folder)
    port = _free_port()
    env = {k: v for k, v in os.environ.items()
           if k not in ("DATABASE_URL", "OPENAI_API_KEY", "AZURE_OPENAI_API_KEY", "LLM_API_KEY", "PYTHONPATH")}
    env.update(ARC_DATA_DIR=str(folder / "data"), ARC_INGEST_TOKEN=INGEST_TOKEN, WEB_CONCURRENCY="1")
    arc = str(Path(sys.prefix) / "bin" / "arc-retrieval")
    server = subprocess.Popen([arc, *words(recipe[1]), "--port", str(port)], cwd=folder, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2).status == 200:
                    break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(server.stderr.read().decode(errors="replace")[-3000:])
                time.sleep(0.5)
        yield folder, env, port
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)


def test_every_unmarked_shell_block_runs(readme_worker):
    folder, env, port = readme_worker
    ran = 0
    for block in shell_blocks():
        if block.marker is not None:
            continue
        for command in block.commands:
            argv = words(command)
            for word in argv:  # every file an example names is one the test made
                if "@" in word:
                    word = word.split("@", 1)[1]
                if re.search(r"\.(pdf|md|txt|docx|html)$", word):
                    assert (folder / word).is_file(), f"{command}: make {word} in _example_files"
            script = "set -euo pipefail\n" + command.replace("localhost:8080", f"localhost:{port}")
            run = subprocess.run(["bash", "-c", script], cwd=folder, env=env, capture_output=True, text=True,
                                 timeout=300)
            assert run.returncode == 0, f"{command}\n{run.stdout[-2000:]}\n{run.stderr[-2000:]}"
            assert "Traceback" not in run.stdout + run.stderr, command
            assert "note:" not in run.stderr, f"{command}: {run.stderr}"  # e.g. an amended section not found
            if argv[1:2] == ["ask"]:  # the answer's JSON, as the webhook gives it
                assert json.loads(run.stdout)["status"] == "success", run.stdout[-2000:]
            if argv[0] == "curl":
                answer = json.loads(run.stdout)
                assert "error" not in answer, f"{command}: {answer}"
                if "status" in answer and "/webhook/arc-retrieval" in command:
                    assert answer["status"] == "success", answer
            ran += 1
    assert ran >= 8


def test_the_readme_says_what_a_new_user_meets():
    """The claims about the pages' links and settings, the login, duplicates and start-up errors
    are the ones the code makes (each behaviour has its own test)."""
    from worker.serve.pages import ASK_FIELDS

    text = " ".join(README.split())
    assert "`GET /ask?query=...&top_k=...` asks it" in text
    for field in ("top_k", "min_relevance"):
        assert f"`{field}`" in text and field in ASK_FIELDS
    assert "`ARC_API_TOKEN` alone" in text and "the login page says so before anyone tries" in text
    assert "`--allow-duplicate`" in text and '`"allow_duplicate": true`' in text
    assert "waiting for the database at Postgres user@host:port/db (DATABASE_URL)" in text
    gunicorn_conf = (ROOT / "worker" / "serve" / "gunicorn_conf.py").read_text()
    assert "waiting for the database at {database_where(runtime)} (DATABASE_URL)" in gunicorn_conf
