"""The query snapshot of an on-disk `ContextualIndex` (`index._snapshot`): a query of an embedded
index reads only its version folder and answers exactly as the Chroma collection does, damaged
snapshot files are named with their fix and repaired by the next update, an index written before
snapshots gets one on its next run, and large indexes keep searching Chroma. Real Chroma, real
BM25; the small deterministic embedder of tests/notes_corpus.py, and the offline model for the demo."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from contextual_retrieval_core.dense.windows import WindowConfig
from contextual_retrieval_core.index import contextual_index as contextual_index_module
from contextual_retrieval_core.index._snapshot import CHUNKS_FILE, has_snapshot
from contextual_retrieval_core.index.contextual_index import ContextualIndex, IndexDamagedError
from contextual_retrieval_core.search.config import FusionConfig
from tests.integration.test_index_windows import TruncatingEmbedder, make_folder
from tests.notes_corpus import CountingEmbedder, make_corpus

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOT_FILES = ("vectors.npy", "vectors.json", CHUNKS_FILE)


def version_folder(ix: Path) -> Path:
    return ix / ContextualIndex.read_manifest(ix).bm25


def without_snapshot(ix: Path, copy: Path) -> Path:
    """A copy of the index folder whose version has no snapshot (as an index written before them)."""
    shutil.copytree(ix, copy)
    for name in SNAPSHOT_FILES:
        (version_folder(copy) / name).unlink()
    return copy


def answers(index: ContextualIndex, queries: list[str], **config) -> list[list[tuple]]:
    out = []
    for q in queries:
        hits = index.search(q, config=FusionConfig(top_k=10, **config))
        out.append([(h.id, h.path, h.context, h.text, h.start_line, h.end_line, h.ranks, round(h.score, 6)) for h in hits])
    return out


QUERIES = ["how many days until refunds are issued", "kubernetes deployment worker pool replicas",
           "evict the least recently used item", "invoices first working day", "LruCache popitem"]


@pytest.mark.parametrize("prf", [0.0, 0.5], ids=["prf-off", "prf-on"])
def test_the_snapshot_answers_as_the_chroma_collection_does(tmp_path, prf):
    ix = tmp_path / "ix"
    ContextualIndex(ix, embedder=CountingEmbedder(), chroma_url="embedded").update([make_corpus(tmp_path)], show_progress=False)
    assert all((version_folder(ix) / name).is_file() for name in SNAPSHOT_FILES)
    chroma_only = without_snapshot(ix, tmp_path / "chroma-only")
    snap = ContextualIndex(ix, embedder=CountingEmbedder())
    assert answers(snap, QUERIES, dense_prf=prf) == answers(ContextualIndex(chroma_only, embedder=CountingEmbedder()),
                                                            QUERIES, dense_prf=prf)
    assert snap._snapshot is not None and snap._vector_index is None  # Chroma was never opened


def test_window_rows_in_the_snapshot_rank_each_chunk_once_as_chroma_does(tmp_path):
    ix = tmp_path / "ix"
    embedder = TruncatingEmbedder()
    report = ContextualIndex(ix, fit_chunks=False, embedder=embedder, windows=WindowConfig(), chroma_url="embedded").update([make_folder(tmp_path)], show_progress=False)
    rows = json.loads((version_folder(ix) / "vectors.json").read_text())["ids"]
    assert len(rows) > report.chunks_total  # the long chunk has window rows
    chroma_only = without_snapshot(ix, tmp_path / "chroma-only")
    queries = ["deployment signing key rotates", "soup broth", "office keys front desk"]
    for prf in (0.0, 0.5):
        got = answers(ContextualIndex(ix, embedder=embedder), queries, dense_prf=prf)
        assert got == answers(ContextualIndex(chroma_only, embedder=embedder), queries, dense_prf=prf)
        assert all(len({h[0] for h in hits}) == len(hits) for hits in got)


def test_updates_write_a_snapshot_of_exactly_the_new_version(tmp_path):
    corpus = make_corpus(tmp_path)
    ix = tmp_path / "ix"
    index = ContextualIndex(ix, embedder=CountingEmbedder(), chroma_url="embedded")
    index.update([corpus], show_progress=False)
    (corpus / "billing.md").write_text("# Billing\n\nRefunds are issued within 30 days.\n", encoding="utf-8")
    (corpus / "readme.txt").unlink()
    index.update([corpus], show_progress=False)
    listed = ContextualIndex.read_manifest(ix).chunk_ids()
    stored = json.loads((version_folder(ix) / "vectors.json").read_text())["ids"]
    assert sorted(stored) == sorted(listed)
    vectors = np.load(version_folder(ix) / "vectors.npy")
    chroma = index._chroma().get(ids=stored, include=["embeddings"])
    by_id = dict(zip(chroma["ids"], chroma["embeddings"]))
    raw = np.asarray([by_id[r] for r in stored], dtype=np.float32)
    assert np.array_equal(vectors, raw / np.clip(np.linalg.norm(raw, axis=1, keepdims=True), 1e-12, None))  # normalised
    assert [p.name for p in ix.glob("bm25*")] == [version_folder(ix).name]  # the old version is gone
    hit = ContextualIndex(ix, embedder=CountingEmbedder()).search("how many days until refunds", top_k=1)[0]
    assert "30 days" in hit.text and hit.path == "notes/billing.md"


def test_a_query_of_an_embedded_index_never_imports_chroma_asyncio_or_the_update_machinery(tmp_path):
    ix = tmp_path / "ix"
    ContextualIndex(ix, embedder=CountingEmbedder()).update([make_corpus(tmp_path)], show_progress=False)
    probe = (
        "import json, sys\n"
        "from contextual_retrieval_core.index.contextual_index import ContextualIndex\n"
        "from tests.notes_corpus import CountingEmbedder\n"
        f"hits = ContextualIndex({str(ix)!r}, embedder=CountingEmbedder()).search('refunds', top_k=2)\n"
        "unneeded = ('chromadb', 'bm25s', 'scipy', 'asyncio', 'tqdm', 'contextual_retrieval_core.index._changes',\n"
        "            'contextual_retrieval_core.generators.structural')\n"
        "print(json.dumps([hits[0].path, sorted(m for m in sys.modules if m in unneeded or m.split('.')[0] in unneeded)]))"
    )
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == ["notes/billing.md", []]


def _missing_rows(folder: Path) -> str:
    (folder / CHUNKS_FILE).unlink()
    return f"{folder / CHUNKS_FILE} is missing"


def _truncated_vectors(folder: Path) -> str:
    data = (folder / "vectors.npy").read_bytes()
    (folder / "vectors.npy").write_bytes(data[: len(data) // 2])
    return f"{folder / 'vectors.npy'} is damaged"


def _garbage_rows(folder: Path) -> str:
    (folder / CHUNKS_FILE).write_bytes(b"not a database " * 100)
    return f"{folder / CHUNKS_FILE} is damaged"  # found by its size and checksum before SQLite reads it


def _foreign_vectors(folder: Path) -> str:
    (folder / "vectors.json").write_text(json.dumps({"ids": ["a", "b", "c", "d", "e", "f", "g"][: len(
        json.loads((folder / "vectors.json").read_text())["ids"])]}), encoding="utf-8")
    return f"{folder / 'vectors.json'} is damaged"


@pytest.mark.parametrize("damage", [_missing_rows, _truncated_vectors, _garbage_rows, _foreign_vectors],
                         ids=lambda f: f.__name__.lstrip("_"))
def test_a_damaged_snapshot_is_named_with_its_fix_and_the_next_update_repairs_it(tmp_path, damage):
    corpus = make_corpus(tmp_path)
    ix = tmp_path / "ix"
    ContextualIndex(ix, embedder=CountingEmbedder()).update([corpus], show_progress=False)
    named = damage(version_folder(ix))
    with pytest.raises(IndexDamagedError) as caught:
        ContextualIndex(ix, embedder=CountingEmbedder()).search("refunds", top_k=3)
    assert named in str(caught.value) and "re-run `contextual-retrieval index" in str(caught.value)
    report = ContextualIndex(ix, embedder=CountingEmbedder()).update([corpus], show_progress=False)
    assert report.note and "the index was damaged" in report.note and report.embedded == 0
    assert ContextualIndex(ix, embedder=CountingEmbedder()).search("refunds", top_k=1)[0].path == "notes/billing.md"


def test_an_index_from_before_snapshots_is_searched_in_chroma_and_gets_one_on_its_next_run(tmp_path):
    corpus = make_corpus(tmp_path)
    built = tmp_path / "built"
    ContextualIndex(built, embedder=CountingEmbedder(), chroma_url="embedded").update([corpus], show_progress=False)
    ix = without_snapshot(built, tmp_path / "ix")
    old = ContextualIndex(ix, embedder=CountingEmbedder())
    assert old.search("refunds", top_k=1)[0].path == "notes/billing.md" and old._snapshot is None
    embedder = CountingEmbedder()
    report = ContextualIndex(ix, embedder=embedder).update([corpus], show_progress=False)
    assert embedder.documents == [] and report.chunks_added == 0  # nothing embedded or paid for again
    assert has_snapshot(version_folder(ix))
    assert answers(ContextualIndex(ix, embedder=CountingEmbedder()), QUERIES) == answers(
        ContextualIndex(built, embedder=CountingEmbedder()), QUERIES)


def test_an_index_over_the_snapshot_limit_is_searched_in_chroma(tmp_path, monkeypatch):
    monkeypatch.setattr(contextual_index_module, "SNAPSHOT_MAX_CHUNKS", 2)
    corpus = make_corpus(tmp_path)
    ix = tmp_path / "ix"
    ContextualIndex(ix, embedder=CountingEmbedder(), chroma_url="embedded").update([corpus], show_progress=False)
    assert ContextualIndex.read_manifest(ix).chunk_count > 2 and not has_snapshot(version_folder(ix))
    index = ContextualIndex(ix, embedder=CountingEmbedder())
    assert index.search("refunds", top_k=1)[0].path == "notes/billing.md" and index._vector_index is not None
    report = ContextualIndex(ix, embedder=CountingEmbedder()).update([corpus], show_progress=False)
    assert report.chunks_added == 0 and not has_snapshot(version_folder(ix))  # an unchanged run writes nothing
