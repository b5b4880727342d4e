"""`contextual-retrieval index / remove / query` at the edges a newcomer meets: nested folders,
deleted files, skipped and oddly encoded files, closed pipes, library warnings, two runs at once,
a missing plotting extra. Real local embedder, real Chroma and BM25."""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path

import pytest

from contextual_retrieval_core.app.cli import build_parser, main
from contextual_retrieval_core.index.lock import folder_lock

pytestmark = pytest.mark.usefixtures("offline_env")


def notes(root: Path) -> Path:
    folder = root / "notes"
    folder.mkdir()
    (folder / "billing.md").write_text("# Billing\n\nRefunds are issued within 14 days of a written request.\n",
                                       encoding="utf-8")
    (folder / "deploy.txt").write_text("Scale the worker pool to five replicas before the launch.\n", encoding="utf-8")
    return folder


def index(folder: Path, ix: Path, *extra: str) -> int:
    return main(["index", str(folder), "--index-dir", str(ix), "--no-progress", *extra])


def report(tmp_path: Path, folder: Path, ix: Path, *extra: str) -> dict:
    out = tmp_path / "report.json"
    assert index(folder, ix, "--json", str(out), *extra) == 0
    return json.loads(out.read_text())


def test_index_refuses_its_own_folder_inside_the_indexed_paths(tmp_path, capsys):
    folder = notes(tmp_path)
    assert index(folder, folder / "contextual-index") == 2
    err = capsys.readouterr().err
    assert "would index itself; put the index elsewhere (--index-dir OUTSIDE)" in err and "Traceback" not in err
    assert not (folder / "contextual-index" / "manifest.json").exists()
    assert main(["index", str(tmp_path / "ix" / "sub"), "--index-dir", str(tmp_path / "ix")]) == 2
    assert "is inside the index folder" in capsys.readouterr().err


def test_remove_and_prune_missing_drop_deleted_files(tmp_path, capsys):
    folder = notes(tmp_path)
    other = tmp_path / "more"
    other.mkdir()
    (other / "faq.md").write_text("# FAQ\n\nThe office opens at nine.\n", encoding="utf-8")
    ix = tmp_path / "ix"
    report(tmp_path, folder, ix)
    report(tmp_path, other, ix)
    # a folder whose files were all deleted: `index` on it has nothing to do, `remove` drops it
    (other / "faq.md").unlink()
    assert main(["remove", str(other), "--index-dir", str(ix)]) == 0
    assert "removed 1 files" in capsys.readouterr().out
    manifest = json.loads((ix / "manifest.json").read_text())
    assert sorted(manifest["files"]) == ["notes/billing.md", "notes/deploy.txt"]
    assert main(["remove", str(other), "--index-dir", str(ix)]) == 2
    assert "nothing indexed in" in capsys.readouterr().err
    # --prune-missing drops files indexed from other paths that are gone
    (folder / "deploy.txt").unlink()
    third = tmp_path / "third"
    third.mkdir()
    (third / "x.md").write_text("# X\n\nA third folder.\n", encoding="utf-8")
    kept = report(tmp_path, third, ix)
    assert kept["files_removed"] == 0  # notes/deploy.txt was indexed from another path: kept
    pruned = report(tmp_path, third, ix, "--prune-missing")
    assert pruned["files_removed"] == 1 and pruned["chunks_removed"] == 1
    assert sorted(json.loads((ix / "manifest.json").read_text())["files"]) == ["notes/billing.md", "third/x.md"]
    capsys.readouterr()
    assert main(["query", str(ix), "worker pool replicas", "--json"]) == 0
    assert all(h["path"] != "notes/deploy.txt" for h in json.loads(capsys.readouterr().out))


def test_max_file_size_is_documented_and_skipped_files_are_named_with_their_reason(tmp_path, capsys):
    help_text = build_parser()._subparsers._group_actions[0].choices["index"].format_help()
    assert "--max-file-size MB" in help_text and "(default 1.0)" in help_text
    assert ".md" in help_text and ".py" in help_text and "cp1252" in help_text
    folder = notes(tmp_path)
    (folder / "big.txt").write_text("word " * 600, encoding="utf-8")  # 3 KB
    (folder / "data.txt").write_bytes(b"binary\x00content")
    (folder / "odd.txt").write_bytes(b"caf\xe9 \x81 au lait")  # not UTF-8, and 0x81 is undefined in cp1252
    got = report(tmp_path, folder, tmp_path / "ix", "--max-file-size", "0.002")
    reasons = {Path(s["path"]).name: s["reason"] for s in got["skipped"]}
    assert reasons["big.txt"] == "too large: 3.0 KB > 2.0 KB; raise --max-file-size to index it"
    assert reasons["data.txt"] == "binary (NUL bytes)"
    assert reasons["odd.txt"].startswith("undecodable: not UTF-8, UTF-16 or cp1252 (byte 0x81")
    assert got["files_skipped"] == 3 and got["files_new"] == 2
    printed = capsys.readouterr().out
    assert "3 skipped" in printed and f"skipped {folder / 'data.txt'}: binary (NUL bytes)" in printed


def test_nothing_to_index_says_what_was_found_and_skipped(tmp_path, capsys):
    folder = tmp_path / "dump"
    folder.mkdir()
    (folder / "huge.txt").write_bytes(b"x" * 1_200_000)
    (folder / "photo.jpg").write_bytes(b"\xff\xd8")
    assert index(folder, tmp_path / "ix") == 2
    err = capsys.readouterr().err
    assert "nothing to index under" in err and "huge.txt (too large: 1.2 MB > 1.0 MB" in err
    assert "1 files of other types, not indexed: .jpg (1)" in err and "index --help" in err


def test_latin1_and_utf16_files_are_decoded_by_the_stated_rule_and_named(tmp_path, capsys):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "menu.txt").write_bytes("Le café crème est servi à Noël.\n".encode("cp1252"))
    (folder / "wide.txt").write_bytes("Die Straße ist gesperrt.\n".encode("utf-16"))
    (folder / "plain.md").write_text("# Plain\n\nNothing special here.\n", encoding="utf-8")
    ix = tmp_path / "ix"
    got = report(tmp_path, folder, ix)
    assert {(d["path"], d["encoding"]) for d in got["decoded"]} == {("docs/menu.txt", "cp1252"), ("docs/wide.txt", "utf-16")}
    assert "docs/menu.txt: not UTF-8, read as cp1252" in capsys.readouterr().out
    assert main(["query", str(ix), "cafe creme noel", "--json", "-k", "1"]) == 0  # accents folded by BM25
    (hit,) = json.loads(capsys.readouterr().out)
    assert hit["path"] == "docs/menu.txt" and "café crème" in hit["text"] and "\ufffd" not in hit["text"]
    assert hit["ranks"]["bm25"] == 1


def test_library_warnings_become_one_line_with_run_totals(tmp_path, capsys):
    folder = tmp_path / "long"
    folder.mkdir()
    for i in range(3):
        (folder / f"f{i}.md").write_text(" ".join(f"term{i}x{j}" for j in range(700)), encoding="utf-8")
    out = tmp_path / "r.json"
    assert index(folder, tmp_path / "whole", "--chunk-chars", "4000") == 0  # the default embeds long texts whole
    assert "warnings:" not in capsys.readouterr().err
    assert index(folder, tmp_path / "ix", "--chunk-chars", "4000", "--no-windows", "--json", str(out)) == 0
    got = json.loads(out.read_text())
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("warnings:")]
    assert len(lines) == 1, err
    assert f"of {got['embedded']} texts embedded in this run were longer than all-MiniLM-L6-v2-onnx-int8's" in lines[0]
    truncated = int(lines[0].split("warnings: ")[1].split(" of ")[0])
    assert 0 < truncated <= got["embedded"]
    assert "UserWarning" not in err and "site-packages" not in err and "minilm.py" not in err


def test_a_second_index_run_waits_for_the_lock_or_says_why_it_stops(tmp_path, capsys):
    folder = notes(tmp_path)
    ix = tmp_path / "ix"
    with folder_lock(ix):
        assert index(folder, ix) == 2
        err = capsys.readouterr().err
        assert "is updating" in err and "--lock-wait SECONDS" in err
        assert not (ix / "manifest.json").exists()

    held = threading.Event()

    def hold_briefly():
        with folder_lock(ix):
            held.set()
            time.sleep(0.2)

    worker = threading.Thread(target=hold_briefly)
    worker.start()
    held.wait(10)
    assert index(folder, ix, "--lock-wait", "60") == 0  # waited for the holder, then indexed
    worker.join()
    assert (ix / "manifest.json").is_file()


def test_eval_plot_without_matplotlib_fails_before_any_work(tiny_dataset, monkeypatch, capsys):
    import contextual_retrieval_core.app.evaluation as evaluation

    def no_work(*args, **kwargs):
        raise AssertionError("eval did work before checking for matplotlib")

    monkeypatch.setattr(evaluation, "load_cookbook", no_work)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert main(["eval", "--dataset", str(tiny_dataset), "--plot", str(tiny_dataset / "p.png")]) == 2
    err = capsys.readouterr().err
    assert "--plot needs matplotlib" in err and "contextual-retrieval-kit[plot]" in err
