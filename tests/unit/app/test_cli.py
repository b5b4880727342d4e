from __future__ import annotations

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


def test_programming_errors_are_not_reported_as_usage_errors(monkeypatch):
    """Only input errors become "error:" and exit 2; a TypeError is a bug and propagates."""
    import contextual_retrieval_core.app._demo as demo

    def broken(**kwargs):
        raise TypeError("unexpected keyword")

    monkeypatch.setattr(demo, "run_demo", broken)
    with pytest.raises(TypeError, match="unexpected keyword"):
        main(["demo", "--offline"])


def test_eval_errors_name_the_fix(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("CONTEXTUAL_RETRIEVAL_DATASET", raising=False)
    assert main(["eval"]) == 2
    assert "pass --dataset DIR or set CONTEXTUAL_RETRIEVAL_DATASET" in capsys.readouterr().err
    assert main(["eval", "--dataset", str(tmp_path)]) == 2
    assert "codebase_chunks.json" in capsys.readouterr().err


def test_help_shows_values_not_internal_names(capsys):
    from contextual_retrieval_core.generators.questions import DEFAULT_MAX_QUOTED_WORDS

    with pytest.raises(SystemExit):
        main(["eval", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert f"consecutive words of its chunk (default {DEFAULT_MAX_QUOTED_WORDS})" in text
    assert "DEFAULT_" not in text and "questions." not in text
