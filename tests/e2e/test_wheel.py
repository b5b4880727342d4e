"""The built wheel: nothing in its names collides with the unrelated `contextual-retrieval`
project on the package index (distribution `contextual-retrieval`, import package
`contextual_retrieval`), and the offline embedder's tokenizer ships inside it."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TAKEN_DISTRIBUTION = "contextual-retrieval"
TAKEN_IMPORT_PACKAGE = "contextual_retrieval"


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    pytest.importorskip("setuptools")  # setuptools builds wheels itself (no `wheel` package needed)
    clone = tmp_path_factory.mktemp("clone")
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    for name in filter(None, tracked.split("\0")):
        source = REPO / name
        if source.is_file():
            (clone / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, clone / name)
    out = tmp_path_factory.mktemp("wheel")
    result = subprocess.run([sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "--no-build-isolation", "-q",
                             "-w", str(out)], cwd=clone, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    (built,) = out.glob("*.whl")
    return built


def test_wheel_distribution_name_is_not_the_taken_one(wheel):
    with zipfile.ZipFile(wheel) as zf:
        (metadata,) = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
        name = re.search(r"^Name: (.+)$", zf.read(metadata).decode(), re.M).group(1).strip()
        entry_points = zf.read(metadata.replace("METADATA", "entry_points.txt")).decode()
    assert name == "contextual-retrieval-kit"
    assert _normalized(name) != _normalized(TAKEN_DISTRIBUTION)
    assert "contextual-retrieval = contextual_retrieval_core.app.cli:main" in entry_points  # the command stays


def test_wheel_top_level_import_packages_differ_from_the_taken_one(wheel):
    with zipfile.ZipFile(wheel) as zf:
        tops = {n.split("/")[0] for n in zf.namelist() if not n.split("/")[0].endswith((".dist-info", ".data"))}
    assert tops == {"contextual_retrieval_core", "contextual_retrieval_llamaindex", "contextual_retrieval_langchain"}
    assert TAKEN_IMPORT_PACKAGE not in tops and all(not t.endswith(".py") for t in tops)


def test_wheel_contains_the_tokenizer_files(wheel):
    """The offline embedder's tokenizer ships inside the wheel, with its licence and notice."""
    members = set(zipfile.ZipFile(wheel).namelist())
    base = "contextual_retrieval_core/embeddings/data/all-MiniLM-L6-v2/"
    assert {base + "tokenizer.json", base + "LICENSE", base + "NOTICE"} <= members
