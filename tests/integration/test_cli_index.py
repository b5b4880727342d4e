"""`contextual-retrieval index` and `query` end to end: the real local embedder, real Chroma and BM25,
and Claude through the SDK against the loopback fake server (a rerun must make no request)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from contextual_retrieval_core.app.cli import main
from tests.fakes.anthropic_server import FakeAnthropicServer

REPO = Path(__file__).resolve().parents[2]
#: a few of this repository's own files (small, to keep the local embedder's work short)
REPO_FILES = ["search/ranked.py", "generators/prompts.py", "dense/vectors.py", "_sdk.py"]


pytestmark = pytest.mark.usefixtures("offline_env")


@pytest.fixture()
def repo_copy(tmp_path) -> Path:
    folder = tmp_path / "core"
    folder.mkdir()
    for name in REPO_FILES:
        shutil.copy(REPO / "contextual_retrieval_core" / name, folder / Path(name).name)
    (folder / "notes.md").write_text(
        "# Release notes\n\n## 0.1.0\n\nFirst release: contextual embeddings, contextual BM25 and rank fusion.\n",
        encoding="utf-8")
    return folder


def run_index(folder: Path, index: Path, tmp_path: Path, *extra: str) -> dict:
    out = tmp_path / "report.json"
    assert main(["index", str(folder), "--index-dir", str(index), "--no-progress", "--json", str(out), *extra]) == 0
    return json.loads(out.read_text())


def test_index_and_query_this_repositorys_files(repo_copy, tmp_path, capsys):
    index = tmp_path / "ix"
    first = run_index(repo_copy, index, tmp_path)
    printed = capsys.readouterr().out
    assert first["files_new"] == len(REPO_FILES) + 1 and first["chunks_total"] > 10
    # every chunk embedded, the long ones as more than one row (windows, the default)
    assert first["embedded"] > first["chunks_total"] and first["contexts"]["generator"] == "structural (no LLM)"
    assert "files: 5 new, 0 changed, 0 unchanged, 0 removed" in printed
    assert f"embeddings: {first['embedded']} computed, 0 from the cache" in printed
    assert "no LLM: contexts are structural" in printed and "contextual-retrieval query" in printed

    assert main(["query", str(index), "fuse named ranked lists of sources and rerank the hits", "-k", "3"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith('3 results for "fuse named ranked lists')
    first_hit = printed.split("\n1. ")[1].split("\n")[0]
    assert first_hit.startswith("core/ranked.py:") and "score" in first_hit and "dense" in first_hit
    assert "context: From core/ranked.py" in printed and "   | " in printed

    assert main(["query", str(index), "which environment variable holds the API key", "-k", "2", "--json"]) == 0
    hits = json.loads(capsys.readouterr().out)
    assert len(hits) == 2 and hits[0]["path"] == "core/_sdk.py"
    assert {"context", "text", "score", "ranks", "start_line", "end_line"} <= set(hits[0])
    source = (repo_copy / "_sdk.py").read_text().splitlines()
    assert hits[0]["text"].splitlines()[0].strip() == source[hits[0]["start_line"] - 1].strip()

    second = run_index(repo_copy, index, tmp_path)
    assert (second["files_unchanged"], second["files_new"], second["files_changed"]) == (5, 0, 0)
    assert second["embedded"] == 0 and second["contexts"] is None
    assert "contexts: nothing to situate (no generation requests)" in capsys.readouterr().out


def test_claude_contexts_rerun_makes_no_request(repo_copy, tmp_path, monkeypatch, capsys):
    with FakeAnthropicServer() as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", server.api_key)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        index = tmp_path / "ix"

        def messages() -> int:
            return len([r for r in server.requests if r.path == "/v1/messages"])

        first = run_index(repo_copy, index, tmp_path)
        assert first["contexts"]["generator"] == "anthropic" and first["contexts"]["model"] == "claude-haiku-4-5"
        assert first["contexts"]["generated"] == first["chunks_total"] == messages()
        assert "requests:" in capsys.readouterr().out  # the cost and cache report
        hit = json.loads(_query_json(index, "fuse named ranked lists", capsys))[0]
        header, claude = hit["context"].split("\n", 1)  # the structural header, then Claude's (the fake's)
        assert header.startswith("From ") and claude.startswith("This chunk is from the document beginning")

        before = messages()
        second = run_index(repo_copy, index, tmp_path)
        assert messages() == before  # no generation request
        assert second["embedded"] == 0 and second["contexts"] is None and second["files_unchanged"] == 5

        # one changed file: only its chunks are situated and embedded again
        (repo_copy / "notes.md").write_text("# Release notes\n\n## 0.2.0\n\nThe demo and the index CLI.\n")
        third = run_index(repo_copy, index, tmp_path)
        assert third["files_changed"] == 1 and third["files_unchanged"] == 4
        assert messages() - before == third["contexts"]["generated"] == third["chunks_added"] == 1
        assert third["contexts"]["store_hits"] == 0 and third["embedded"] == 1

        # an index built with Claude keeps its contexts when the key is gone: no silent downgrade
        monkeypatch.delenv("ANTHROPIC_API_KEY")
        assert main(["index", str(repo_copy), "--index-dir", str(index), "--no-progress"]) == 2
        assert "ANTHROPIC_API_KEY is not set" in capsys.readouterr().err


def _query_json(index: Path, question: str, capsys) -> str:
    capsys.readouterr()
    assert main(["query", str(index), question, "--json", "-k", "1"]) == 0
    return capsys.readouterr().out


def test_cli_errors_name_the_fix(tmp_path, capsys):
    assert main(["index", str(tmp_path / "missing"), "--index-dir", str(tmp_path / "ix")]) == 2
    assert "does not exist; pass existing files or folders" in capsys.readouterr().err

    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["index", str(empty), "--index-dir", str(tmp_path / "ix"), "--no-progress"]) == 2
    assert "nothing to index under" in capsys.readouterr().err

    assert main(["query", str(tmp_path), "anything"]) == 2
    assert "build one with: contextual-retrieval index" in capsys.readouterr().err

    (tmp_path / "keep.txt").write_text("precious")
    assert main(["index", str(empty), "--index-dir", str(tmp_path), "--rebuild"]) == 2
    assert "refusing to rebuild in it" in capsys.readouterr().err and (tmp_path / "keep.txt").exists()

    assert main(["index", str(empty), "--index-dir", str(tmp_path / "ix"), "--embedder", "voyage"]) == 2
    assert "VOYAGE_API_KEY" in capsys.readouterr().err


def test_rebuild_starts_over(tmp_path, capsys):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.md").write_text("# A\n\nThe staging server restarts nightly at two.\n")
    index = tmp_path / "ix"
    run_index(folder, index, tmp_path)
    again = run_index(folder, index, tmp_path, "--rebuild")
    assert again["files_new"] == 1 and again["chunks_total"] == 1
    assert (again["embedded"], again["embedding_cache_hits"]) == (0, 1)  # the cache survives a rebuild


def test_index_check_reads_every_byte_names_the_damage_and_index_repairs_it(tmp_path, capsys):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.md").write_text("# A\n\nThe staging server restarts nightly at two.\n", encoding="utf-8")
    (folder / "b.md").write_text("# B\n\nBackups are kept for ninety days.\n", encoding="utf-8")
    index = tmp_path / "ix"
    run_index(folder, index, tmp_path)
    capsys.readouterr()
    assert main(["index", "--check", "--index-dir", str(index)]) == 0
    assert "2 chunks in 2 files" in capsys.readouterr().out
    version = index / json.loads((index / "manifest.json").read_text())["bm25"]
    rows = version / "vectors.npy"
    data = bytearray(rows.read_bytes())
    data[-8:] = bytes(8)  # the last two floats of the last row: no size changes, one vector does
    rows.write_bytes(bytes(data))
    assert main(["index", "--check", "--index-dir", str(index)]) == 2
    err = capsys.readouterr().err
    assert f"{rows} is damaged" in err and "checksum" in err and "re-run `contextual-retrieval index" in err
    again = run_index(folder, index, tmp_path)
    assert "the index was damaged" in again["note"] and again["embedded"] == 0  # repaired from the embedding cache
    assert main(["index", "--check", "--index-dir", str(index)]) == 0
    assert main(["index", "--index-dir", str(index)]) == 2
    assert "pass the files or folders to index" in capsys.readouterr().err
