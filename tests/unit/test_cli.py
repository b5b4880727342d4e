from __future__ import annotations

import json

import pytest

from contextual_retrieval_core.app.cli import build_parser, main


def _subcommands() -> list[str]:
    parser = build_parser()
    action = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    return list(action.choices)


@pytest.mark.parametrize("command", _subcommands())
def test_every_subcommand_has_help(command, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([command, "--help"])
    assert exit_info.value.code == 0
    assert command in capsys.readouterr().out


def test_no_command_prints_help_and_fails(capsys):
    assert main([]) == 2
    assert "eval" in capsys.readouterr().out


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


def test_programming_errors_are_not_reported_as_usage_errors(monkeypatch):
    """Only input errors become "error:" and exit 2; a TypeError is a bug and propagates."""
    import contextual_retrieval_core.app.demo as demo

    def broken(**kwargs):
        raise TypeError("unexpected keyword")

    monkeypatch.setattr(demo, "run_demo", broken)
    with pytest.raises(TypeError, match="unexpected keyword"):
        main(["demo", "--offline"])


def test_eval_without_contexts_runs_plain_and_structural_configs(tiny_dataset, tmp_path, capsys):
    assert main(["eval", "--dataset", str(tiny_dataset), "--embedding-cache", "none", "--no-progress",
                 "--json", str(tmp_path / "r.json")]) == 0
    assert [c["name"] for c in json.loads((tmp_path / "r.json").read_text())["configs"]] == [
        "dense", "bm25", "hybrid", "structural-dense", "structural-bm25", "structural-hybrid"]


def test_eval_errors_name_the_fix(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("CONTEXTUAL_RETRIEVAL_DATASET", raising=False)
    assert main(["eval"]) == 2
    assert "pass --dataset DIR or set CONTEXTUAL_RETRIEVAL_DATASET" in capsys.readouterr().err
    assert main(["eval", "--dataset", str(tmp_path)]) == 2
    assert "codebase_chunks.json" in capsys.readouterr().err
