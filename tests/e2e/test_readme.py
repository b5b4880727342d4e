"""The README is short, in the order a user needs it, and its commands and code work as written.

- At most 200 lines; the two set-up commands (the main job, the tests) within the first 40.
- The main-job command runs in a fresh venv on a clean copy of the tracked files (network: the
  package registry only), and the demo shows a query plain retrieval misses and contextual finds;
  the same venv then runs the `eval` command shown here and the docs' "Index your own files" ones.
- The test command is what `.ci/run` runs last, after the strict docs build.
- The core in five lines and each quickstart run as pasted and print what the README says.
- Every relative link points at a file of the repository.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text(encoding="utf-8")
INDEXING = (REPO / "docs" / "indexing.md").read_text(encoding="utf-8")
ORDER = ["Set up and run", "The core in five lines", "LlamaIndex quickstart", "LangChain quickstart", "Results",
         "Documentation"]


def section(title: str) -> str:
    start = README.index(f"## {title}")
    end = README.find("\n## ", start + 1)
    return README[start : end if end > 0 else None]


def fenced(text: str) -> list[tuple[str, str]]:
    """(language, body) of each fenced block, in order."""
    return re.findall(r"^```(\w*)\n(.*?)^```", text, flags=re.S | re.M)


def blocks(text: str, lang: str) -> list[str]:
    return [body for language, body in fenced(text) if language == lang]


def setup_commands() -> tuple[str, str]:
    main_job, tests = blocks(section("Set up and run"), "bash")[:2]
    return main_job.strip(), tests.strip()


def test_readme_is_short_and_in_the_order_a_user_needs_it():
    lines = README.splitlines()
    assert len(lines) <= 200
    main_job, tests = setup_commands()
    assert lines.index(main_job) < 40 and lines.index(tests) < 40
    headings = [line[3:] for line in lines if line.startswith("## ")]
    assert headings == ORDER


def test_ci_lints_types_and_builds_the_docs_strictly_then_runs_the_readme_test_command():
    _, tests = setup_commands()
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8").strip().splitlines()
    assert ci[-1] == tests
    assert "pytest" in tests and "'.[dev]'" in tests
    checks = [i for i, line in enumerate(ci) if "mkdocs build --strict" in line and "ruff check ." in line and "&& mypy &&" in line]
    assert checks and checks[-1] < len(ci) - 1
    assert "ruff check ." in README and "`mypy`" in README


def test_relative_links_point_at_files_of_the_repository():
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README)
    relative = [link for link in links if not re.match(r"[a-z]+://", link)]
    assert relative
    for link in relative:
        assert (REPO / link).exists(), link


def test_the_core_in_five_lines_prints_what_its_comment_says(tmp_path):
    (code,) = blocks(section("The core in five lines"), "python")
    last = code.strip().splitlines()[-1]
    expected = last.split("#", 1)[1].strip()
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == expected


@pytest.mark.parametrize("title", ["LlamaIndex quickstart", "LangChain quickstart"])
def test_quickstart_runs_as_pasted_and_prints_what_the_readme_shows(title, tmp_path):
    found = fenced(section(title))
    at = next(i for i, (language, _) in enumerate(found) if language == "python")
    code, (_, expected) = found[at][1], found[at + 1]  # the code, then what it prints
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == expected.strip()


def readme_eval_command() -> str:
    """The `eval` command the README shows."""
    (command,) = [line for body in blocks(README, "bash") for line in body.splitlines()
                  if line.startswith("contextual-retrieval eval ")]
    return command


@pytest.mark.slow
def test_main_job_command_in_a_fresh_venv(tmp_path, tiny_dataset):
    """The README's install line, then the commands the README and the docs' "Index your own
    files" show (demo, eval with --plot, index, query) in that fresh venv, offline: the install
    line covers them all."""
    main_job, _ = setup_commands()
    clone = tmp_path / "clone"
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    for name in filter(None, tracked.split("\0")):
        source = REPO / name
        if source.is_file():
            (clone / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, clone / name)
    result = subprocess.run(["bash", "-c", main_job], cwd=clone, capture_output=True, text=True, timeout=1200)
    assert result.returncode == 0, (result.stdout[-2000:], result.stderr[-3000:])
    assert "vectors: embedded Chroma" in result.stdout
    assert re.search(r"plain retrieval missed and contextual retrieval found: Q\d", result.stdout), result.stdout[-2000:]

    venv_bin = clone / ".venv" / "bin"
    offline = {"PATH": f"{venv_bin}:/usr/bin:/bin", "HOME": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    # eval with --plot, as shown, on the tiny dataset in the cookbook's format (the whole cookbook
    # takes minutes): only the dataset paths differ from the README's line
    eval_command = readme_eval_command().replace("../shared/data/cookbook-codebase/contexts_claude-3-haiku.jsonl",
                                                 str(tiny_dataset / "contexts.jsonl"))
    eval_command = eval_command.replace("../shared/data/cookbook-codebase", str(tiny_dataset))
    assert "--plot eval.png" in eval_command and str(tiny_dataset) in eval_command
    commands = [eval_command]
    own_files = blocks(INDEXING, "bash")[0]
    commands += [line.split("  #")[0].strip() for line in own_files.strip().splitlines()]
    for command in commands:
        done = subprocess.run(["bash", "-c", command], cwd=clone, capture_output=True, text=True, timeout=1200, env=offline)
        assert done.returncode == 0, (command, done.stdout[-2000:], done.stderr[-3000:])
        assert "Traceback" not in done.stderr, (command, done.stderr[-3000:])
        if command.startswith("contextual-retrieval query"):
            assert "1. corpus/reports/acme-2023-q2.md" in done.stdout, done.stdout
    assert (clone / "eval.png").read_bytes()[:4] == b"\x89PNG"
    # passed: drop the clone and its venv (about 38,000 files), which every later pytest run would
    # otherwise spend seconds deleting from its old base temp folders; a failing run keeps them
    shutil.rmtree(clone, ignore_errors=True)
