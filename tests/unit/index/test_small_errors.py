"""The small damaged-file cases of issue 43, each a clear error naming the file and the fix:
a manifest's format_version and weights."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from contextual_retrieval_core.index.manifest import MANIFEST_NAME, IndexDamagedError, IndexManifest

GOOD = {"format": "contextual-retrieval/index", "format_version": 1, "embedder": {"kind": "local", "model": "m"},
        "generator": {"name": "structural"}, "chunk_chars": 800, "weights": [0.8, 0.2], "files": {}}


def write_manifest(folder: Path, **changes: Any) -> Path:
    data = {**GOOD, **changes}
    (folder / MANIFEST_NAME).write_text(json.dumps(data), encoding="utf-8")
    return folder / MANIFEST_NAME


@pytest.mark.parametrize("version", ["1", 1.0, None, True, [1]])
def test_a_manifest_format_version_that_is_not_an_integer_names_the_file_and_the_fix(tmp_path: Path, version: Any) -> None:
    file = write_manifest(tmp_path, format_version=version)
    with pytest.raises(IndexDamagedError, match="format_version must be an integer") as caught:
        IndexManifest.read(tmp_path)
    assert str(file) in str(caught.value) and "--rebuild" in str(caught.value)


@pytest.mark.parametrize("weights", [[1, -1], [float("nan"), 0.2], [0.8, float("inf")], [0, 0], [0.0, 0.0],
                                     [0.8], [0.8, 0.2, 0.1], ["0.8", "0.2"], [True, False], "0.8,0.2", {"dense": 1}])
def test_manifest_weights_must_be_two_finite_numbers_at_least_zero_not_both_zero(tmp_path: Path, weights: Any) -> None:
    (tmp_path / MANIFEST_NAME).write_text(json.dumps({**GOOD, "weights": weights}), encoding="utf-8")  # NaN as JSON's NaN
    with pytest.raises(IndexDamagedError, match="weights must be two finite numbers >= 0, not both 0") as caught:
        IndexManifest.read(tmp_path)
    assert str(tmp_path / MANIFEST_NAME) in str(caught.value) and "--rebuild" in str(caught.value)


@pytest.mark.parametrize("weights", [[0.8, 0.2], [1, 0], [0, 1], [2, 3]])
def test_good_manifest_weights_are_read_as_floats(tmp_path: Path, weights: list[float]) -> None:
    write_manifest(tmp_path, weights=weights)
    assert IndexManifest.read(tmp_path).weights == [float(w) for w in weights]


@pytest.mark.parametrize("weights", [None, []])
def test_a_manifest_without_weights_leaves_them_to_the_query(tmp_path: Path, weights: Any) -> None:
    write_manifest(tmp_path, weights=weights)
    assert IndexManifest.read(tmp_path).weights == []


# -- eval's corpus: a folder that gives no chunk says which files were left out, why, and how to include them


def test_eval_names_a_file_over_the_size_limit_and_how_to_include_it(tmp_path: Path) -> None:
    from contextual_retrieval_core.app.question_eval import load_corpus

    (tmp_path / "huge.txt").write_text(("word " * 1000 + "\n") * 250, encoding="utf-8")  # 1.25 MB
    with pytest.raises(ValueError, match="no text to chunk") as caught:
        load_corpus(tmp_path)
    text = str(caught.value)
    assert f"{tmp_path / 'huge.txt'} (too large: 1.3 MB > 1.0 MB)" in text
    assert "--max-file-size MB --index-dir DIR) and pass DIR to eval" in text and "raise --max-file-size" not in text


def test_eval_names_binary_and_whitespace_only_files(tmp_path: Path) -> None:
    from contextual_retrieval_core.app.question_eval import load_corpus

    (tmp_path / "a.txt").write_bytes(b"abc\x00def" * 10)
    (tmp_path / "blank.md").write_text("  \n\n\t \n", encoding="utf-8")
    (tmp_path / "photo.png").write_bytes(b"\x89PNG\r\n")
    with pytest.raises(ValueError, match="no text to chunk") as caught:
        load_corpus(tmp_path)
    text = str(caught.value)
    assert f"{tmp_path / 'a.txt'} (binary (NUL bytes))" in text and "binary files are not read" in text
    assert f"{tmp_path / 'blank.md'} (empty (whitespace only))" in text
    assert "1 file of types eval does not read: .png (1)" in text


def test_eval_of_a_folder_with_no_text_files_says_what_it_found(tmp_path: Path) -> None:
    from contextual_retrieval_core.app.question_eval import load_corpus

    (tmp_path / "photo.png").write_bytes(b"\x89PNG\r\n")
    with pytest.raises(ValueError, match=r"no text to chunk; 1 file of types eval does not read: \.png \(1\); pass a folder"):
        load_corpus(tmp_path)


def test_files_left_out_beside_files_with_text_do_not_stop_eval(tmp_path: Path) -> None:
    from contextual_retrieval_core.app.question_eval import load_corpus

    (tmp_path / "blank.md").write_text(" \n", encoding="utf-8")
    (tmp_path / "notes.md").write_text("# Refunds\n\nRefunds are issued within 14 days.\n", encoding="utf-8")
    assert [d.id for d in load_corpus(tmp_path).documents] == [f"{tmp_path.name}/notes.md"]


def test_an_empty_file_is_indexed_with_no_chunks_and_the_report_says_why(tmp_path):
    from contextual_retrieval_core.index.contextual_index import ContextualIndex
    from tests.notes_corpus import CountingEmbedder, make_corpus

    folder = make_corpus(tmp_path)
    (folder / "blank.md").write_text("  \n\n\t\n", encoding="utf-8")
    report = ContextualIndex(tmp_path / "ix", embedder=CountingEmbedder()).update([folder], show_progress=False)
    assert report.empty == ["notes/blank.md"]
    assert "notes/blank.md: no text (empty or whitespace only), 0 chunks" in report.format()
    assert report.to_dict()["empty"] == ["notes/blank.md"]


def test_weights_that_leave_both_sides_out_are_refused(tmp_path):
    import pytest as _pytest

    from contextual_retrieval_core.index.contextual_index import ContextualIndex
    from tests.notes_corpus import CountingEmbedder

    with _pytest.raises(ValueError, match="leave both sides out"):
        ContextualIndex(tmp_path / "ix", embedder=CountingEmbedder(), weights=(0, 0))
