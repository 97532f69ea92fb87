"""The eval harness end to end on a tiny BEIR-layout dataset written here."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from click.testing import CliRunner

from worker.cli import main
from worker.ingest.ingestor import SAMPLE_DIR

# Each test starts the worker (or the eval command) in a process with its own Postgres and model.
pytestmark = pytest.mark.usefixtures("worker_process")

ROOT = Path(__file__).resolve().parent.parent

DOCS = {
    "d1": ("Fences", "Rear yard fences may not exceed six feet in height."),
    "d2": ("Sheds", "One shed is allowed per lot, at most 120 square feet."),
    "d3": ("Paint", "Exterior paint colours come from the approved palette."),
    "d4": ("Solar", "Solar panels are permitted on any roof plane."),
    "d5": ("Parking", "Boats and trailers may not be parked in driveways."),
}
QUERIES = {"q1": ("How tall can a fence be?", "d1"), "q2": ("Can I install solar panels?", "d4"),
           "q3": ("Which colours may I paint my house?", "d3")}


def test_eval_command_writes_results(tmp_path, monkeypatch):
    data = tmp_path / "tiny"
    (data / "qrels").mkdir(parents=True)
    (data / "corpus.jsonl").write_text("\n".join(json.dumps({"_id": k, "title": t, "text": x})
                                                 for k, (t, x) in DOCS.items()))
    (data / "queries.jsonl").write_text("\n".join(json.dumps({"_id": k, "text": q}) for k, (q, _) in QUERIES.items()))
    (data / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" +
                                             "".join(f"{k}\t{d}\t1\n" for k, (_, d) in QUERIES.items()))
    monkeypatch.setenv("ARC_DATA_DIR", str(tmp_path / "arc"))
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["eval", str(data), "--out", str(out), "--modes",
                                       "bm25s,dense,vector,fts,hybrid-weighted,hybrid-rrf,default"])
    assert result.exit_code == 0, result.output
    results = json.loads((out / "results.json").read_text())
    assert set(results) == {"bm25s", "dense", "vector", "fts", "hybrid-weighted", "hybrid-rrf", "default"}
    for row in results.values():
        assert {"ndcg@10", "recall@5", "recall@20", "mrr@10", "p50_ms", "p95_ms"} <= set(row)
    assert results["default"]["mrr@10"] == 1.0 and results["default"]["candidates_recall"] == 1.0
    assert (out / "chart.png").stat().st_size > 1000 and "| default |" in (out / "results.md").read_text()
    # the second run reuses the cached corpus embeddings
    assert list((tmp_path / "arc" / "cache").glob("corpus-*.npy"))
    bad = CliRunner().invoke(main, ["eval", str(data), "--out", str(out), "--modes", "magic"])
    assert bad.exit_code != 0 and "unknown mode" in bad.output


def write_beir(folder, documents: int) -> None:
    (folder / "qrels").mkdir(parents=True)
    words = "fence shed paint solar parking roof gutter siding deck patio window door".split()
    (folder / "corpus.jsonl").write_text("\n".join(
        json.dumps({"_id": f"d{i}", "title": f"Rule {i}",
                    "text": " ".join(words[(i + k) % len(words)] for k in range(60)) + f" number {i}."})
        for i in range(documents)))
    (folder / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "How tall can a fence be?"}))
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")


@pytest.mark.parametrize("kind", ["beir", "answers"])
def test_eval_stopped_with_sigterm_stops_its_database_and_removes_its_folder(kind, tmp_path):
    if kind == "beir":
        dataset = tmp_path / "big"
        write_beir(dataset, 3000)  # embedding it takes long enough to stop the run midway
    else:
        dataset = SAMPLE_DIR
    data_dir = tmp_path / "arc"
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARC_") and k != "DATABASE_URL"}
    env["ARC_DATA_DIR"] = str(data_dir)
    process = subprocess.Popen([sys.executable, "-m", "worker.cli", "eval", str(dataset), "--out",
                                str(tmp_path / "out")], env=env, cwd=ROOT, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        postmaster = []
        while time.monotonic() < deadline and process.poll() is None and not postmaster:
            postmaster = list(data_dir.glob("*-*/pgdata/postmaster.pid"))
            time.sleep(0.1)
        assert postmaster, "the evaluation's database never started"
        postgres_pid = None
        while postgres_pid is None and time.monotonic() < deadline:
            try:
                postgres_pid = int(postmaster[0].read_text().split()[0])
            except (OSError, ValueError, IndexError):
                time.sleep(0.05)  # written while the server starts
        time.sleep(0.2)
        assert process.poll() is None, "the evaluation ended before it could be stopped"
        os.kill(process.pid, signal.SIGTERM)
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    stderr = process.stderr.read()
    assert "Traceback" not in stderr, stderr
    deadline = time.monotonic() + 10
    while psutil.pid_exists(postgres_pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not psutil.pid_exists(postgres_pid), "the evaluation's Postgres is still running"
    assert not list(data_dir.glob("eval-*")) and not list(data_dir.glob("answers-*")), list(data_dir.iterdir())


def test_eval_stopped_while_its_database_starts_leaves_no_server(tmp_path):
    dataset = tmp_path / "small"
    write_beir(dataset, 50)
    data_dir = tmp_path / "arc"
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARC_") and k != "DATABASE_URL"}
    env["ARC_DATA_DIR"] = str(data_dir)
    process = subprocess.Popen([sys.executable, "-m", "worker.cli", "eval", str(dataset), "--out",
                                str(tmp_path / "out")], env=env, cwd=ROOT, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and process.poll() is None and not list(data_dir.glob("eval-*/pgdata")):
            time.sleep(0.02)
        os.kill(process.pid, signal.SIGTERM)  # initdb or the server's start is under way
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    deadline = time.monotonic() + 15

    def servers() -> list[psutil.Process]:
        found = []
        for p in psutil.process_iter(["cmdline"]):
            if any(str(data_dir) in part for part in (p.info["cmdline"] or [])):
                found.append(p)
        return found

    while servers() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not servers(), "a Postgres of the stopped evaluation is still running"
    assert "Traceback" not in process.stderr.read()
