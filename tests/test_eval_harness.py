"""The eval harness end to end on a tiny BEIR-layout dataset written here."""

from __future__ import annotations

import json

from click.testing import CliRunner

from worker.cli import main

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
