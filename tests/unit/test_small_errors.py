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
