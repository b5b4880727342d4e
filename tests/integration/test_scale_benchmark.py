"""Smoke test of benchmarks/scale.py on tiny corpora: it runs its children, writes the JSON the
issue names, and its recall and growth figures are computed (timings are never asserted)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.scripts import load_script

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "scale.py"


@pytest.fixture(scope="module")
def scale():
    return load_script(SCRIPT, "scale_benchmark")


def test_scale_writes_the_issue_schema(scale, tmp_path, monkeypatch) -> None:
    # a random-only run reads no cookbook vectors: with an empty cache of them (SCALE_CACHE, as on
    # a fresh machine) nothing is embedded (the first child embedded the whole cookbook, 45 of
    # the 46 s this test took, when every run read them)
    monkeypatch.setenv("SCALE_CACHE", str(tmp_path / "scale-cache"))
    out = tmp_path / "scale.json"
    assert scale.main(["--sizes", "300,900", "--kinds", "random", "--queries", "5", "--peers-n", "0",
                       "--no-real-recall", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert not list((tmp_path / "scale-cache").glob("*.npz"))  # a random-only run embedded nothing
    assert [r["n"] for r in data["sizes"]] == [300, 900]
    for row in data["sizes"]:
        for key in ("n", "build_s", "peak_rss_mb", "disk_mb", "bm25_p50_ms", "dense_p50_ms",
                    "fusion_p50_ms", "hybrid_p50_ms", "hybrid_p95_ms"):
            assert isinstance(row[key], (int, float)) and row[key] >= 0, key
        assert row["dense_index"] == "VectorIndex"  # far below the threshold: exact
        assert row["dense_recall_at_150"] == 1.0  # exact search recalls itself
        assert row["peak_rss_mb"] > 0 and row["disk_mb"] > 0
    assert set(data["growth_exponent"]["random"]) >= {"bm25_p50_ms", "fusion_p50_ms", "hybrid_p50_ms"}
    assert data["peers"] == []


def test_bad_sizes_are_refused(scale) -> None:
    with pytest.raises(SystemExit):
        scale.main(["--sizes", "ten"])


def test_embedding_like_vectors_follow_the_real_ones(scale) -> None:
    import numpy as np

    rng = np.random.default_rng(0)
    real = rng.standard_normal((50, 16)).astype(np.float32)
    real /= np.linalg.norm(real, axis=1, keepdims=True)
    blocks = list(scale.embedding_like(250_000, real, rng))  # blocks of 100,000, the last one short
    assert [len(b) for b in blocks] == [100_000, 100_000, 50_000]
    made = blocks[2][:400]
    assert made.shape == (400, 16) and made.dtype == np.float32
    assert np.allclose(np.linalg.norm(made, axis=1), 1.0, atol=1e-5)
    # each synthetic vector lies nearer its closest real vector than random unit vectors do
    near = (made @ real.T).max(axis=1).mean()
    rand = scale.random_vectors(400, rng)[:, :16]
    rand /= np.linalg.norm(rand, axis=1, keepdims=True)
    assert near > (rand @ real.T).max(axis=1).mean() + 0.1
