"""The `eval` command and benchmarks/late_chunking.py end to end on the tiny dataset, through the
real offline model (the rest of their tests, which need no model, are in tests/unit)."""

from __future__ import annotations

import json
import shutil

from contextual_retrieval_core.app.cli import build_parser, main
from tests.scripts import load_script


def test_eval_writes_table_json_and_plot(tiny_dataset, tmp_path, capsys):
    out_json, out_png = tmp_path / "r.json", tmp_path / "r.png"
    code = main([
        "eval", "--dataset", str(tiny_dataset), "--contexts", str(tiny_dataset / "contexts.jsonl"),
        "--json", str(out_json), "--plot", str(out_png), "--embedding-cache", str(tmp_path / "c.sqlite3"),
        "--no-progress",
    ])
    assert code == 0
    printed = capsys.readouterr().out
    assert "contextual-hybrid" in printed and "Pass@20" in printed
    payload = json.loads(out_json.read_text())
    names = [c["name"] for c in payload["configs"]]
    assert names == ["dense", "bm25", "hybrid", "structural-dense", "structural-bm25", "structural-hybrid",
                     "contextual-dense", "contextual-bm25", "contextual-hybrid"]
    assert payload["elapsed_s"] > 0
    first = payload["configs"][0]
    assert set(first["pass_at"]) == {"5", "10", "20"} and set(first["recall_at"]) == {"5", "10", "20"}
    assert 0 <= first["mrr"] <= 100
    assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert payload["dataset"] == tiny_dataset.name  # the folder's name, never a machine path


def test_eval_dataset_from_the_environment_is_named_by_its_folder(tiny_dataset, tmp_path, monkeypatch):
    from contextual_retrieval_core.app.evaluation import DATASET_ENV

    monkeypatch.setenv(DATASET_ENV, str(tiny_dataset))
    assert main(["eval", "--embedding-cache", "none", "--no-progress", "--json", str(tmp_path / "r.json")]) == 0
    assert json.loads((tmp_path / "r.json").read_text())["dataset"] == tiny_dataset.name
    assert DATASET_ENV in build_parser()._subparsers._group_actions[0].choices["eval"].format_help()


def test_eval_without_contexts_runs_plain_and_structural_configs(tiny_dataset, tmp_path, capsys):
    assert main(["eval", "--dataset", str(tiny_dataset), "--embedding-cache", "none", "--no-progress",
                 "--json", str(tmp_path / "r.json")]) == 0
    assert [c["name"] for c in json.loads((tmp_path / "r.json").read_text())["configs"]] == [
        "dense", "bm25", "hybrid", "structural-dense", "structural-bm25", "structural-hybrid"]


def test_eval_dense_prf_reaches_the_searcher_and_the_json(tiny_dataset, tmp_path, offline_embedder):
    from contextual_retrieval_core.app.evaluation import evaluate, load_contexts_jsonl, load_cookbook

    ds = load_cookbook(tiny_dataset)
    contexts = load_contexts_jsonl(tiny_dataset / "contexts.jsonl", ds)
    out = tmp_path / "r.json"
    assert main(["eval", "--dataset", str(tiny_dataset), "--contexts", str(tiny_dataset / "contexts.jsonl"),
                 "--configs", "contextual-hybrid", "--dense-prf", "--json", str(out),
                 "--embedding-cache", "none", "--no-progress"]) == 0
    payload = json.loads(out.read_text())
    assert payload["dense_prf"] == 0.5
    (direct,) = evaluate(ds, offline_embedder, contexts, ["contextual-hybrid"], dense_prf=0.5)
    assert payload["configs"][0] == direct.to_json()  # the command ran the searcher with feedback
    assert main(["eval", "--dataset", str(tiny_dataset), "--contexts", str(tiny_dataset / "contexts.jsonl"),
                 "--configs", "contextual-hybrid", "--no-dense-prf", "--json", str(out),
                 "--embedding-cache", "none", "--no-progress"]) == 0
    payload = json.loads(out.read_text())
    (without,) = evaluate(ds, offline_embedder, contexts, ["contextual-hybrid"], dense_prf=0)
    assert payload["dense_prf"] == 0.0 and payload["configs"][0] == without.to_json()


def test_the_late_chunking_script_runs_end_to_end_on_a_tiny_dataset(tiny_dataset, tmp_path):
    bench = load_script("benchmarks/late_chunking.py")
    shutil.copy(tiny_dataset / "contexts.jsonl", tiny_dataset / "contexts_claude-3-haiku.jsonl")
    out = tmp_path / "late.json"
    assert bench.main(["--dataset", str(tiny_dataset), "--json", str(out), "--windows", "64"]) == 0
    data = json.loads(out.read_text())
    assert list(data["columns"]) == ["one-vector", "late-64"]
    assert [r["name"] for r in data["columns"]["late-64"].values()] == bench.CONFIGS
    assert set(data["adoption"]) == {"late-64"} and data["voyage-context-3"] is None
    chunks = data["limits"]["late-64"]["text_sets"]["chunks"]
    assert chunks["chunks"] == data["chunks"] and chunks["macro_windows"] >= chunks["documents"]
