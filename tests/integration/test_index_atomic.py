"""`ContextualIndex` failure paths: an update interrupted at any point leaves the previous index
fully queryable; damaged index folders give `IndexDamagedError` naming the file and the fix, and a
re-run of `index` repairs them; `query` never creates or alters an index folder. Both layouts:
the index's own files (the default) and an embedded Chroma (``chroma_url="embedded"``, the layout
of indexes written before version folders held every row). Real Chroma, real BM25; the embedder
is the small deterministic one of tests/notes_corpus.py."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from contextual_retrieval_core.app.cli import main
from contextual_retrieval_core.dense.chroma import ChromaVectorIndex
from contextual_retrieval_core.dense.vectors import VectorIndex
from contextual_retrieval_core.index.contextual_index import ContextualIndex, IndexDamagedError
from contextual_retrieval_core.search.bm25 import BM25Index
from tests.notes_corpus import CountingEmbedder, change_corpus, folder_digest, make_corpus


def assert_serves(index_dir: Path, *, refund_days: str, has_readme: bool) -> None:
    """A fresh index object answers from one consistent state: the manifest's chunks only."""
    index = ContextualIndex(index_dir, embedder=CountingEmbedder())
    listed = set(index.manifest.chunk_ids())
    hits = index.search("how many days until refunds are issued", top_k=10)
    assert hits and all(h.id in listed for h in hits)
    assert hits[0].path == "notes/billing.md" and f"{refund_days} days" in hits[0].text
    kube = index.search("kubernetes deployment worker pool replicas", top_k=10)
    assert all(h.id in listed for h in kube)
    assert (kube[0].path == "notes/readme.txt") is has_readme


class Interrupt(KeyboardInterrupt):
    """What Ctrl-C raises, marked as ours."""


def _interrupt_embedding(monkeypatch, index):
    def embed(texts):
        raise Interrupt("during embedding")

    monkeypatch.setattr(index.embedder, "embed_documents", embed)


def _interrupt_chroma_upsert(monkeypatch, index):
    monkeypatch.setattr(ChromaVectorIndex, "max_batch_size", property(lambda self: 1))
    collection = index._chroma()
    original, calls = collection.upsert, []

    def upsert(*args, **kwargs):
        calls.append(1)
        if len(calls) > 1:  # the first batch of new rows is in, the rest never arrives
            raise Interrupt("during the Chroma writes")
        return original(*args, **kwargs)

    monkeypatch.setattr(collection, "upsert", upsert)


def _interrupt_rows_write(monkeypatch, index):
    from contextual_retrieval_core.index._snapshot import RowWriter

    def put(self, start, block):
        raise Interrupt("while writing the dense rows")

    monkeypatch.setattr(RowWriter, "put", put)


def _interrupt_bm25_save(monkeypatch, index):
    original = BM25Index.save

    def save(self, path):
        original(self, path)
        (Path(path) / "tf.npy").write_bytes(b"")  # half written
        raise Interrupt("while writing BM25")

    monkeypatch.setattr(BM25Index, "save", save)


def _interrupt_manifest_swap(monkeypatch, index):
    import contextual_retrieval_core.index.manifest as manifest_module

    def replace(src, dst):
        raise Interrupt("just before the manifest swap")

    monkeypatch.setattr(manifest_module.os, "replace", replace)


def stored_rows(index: ContextualIndex) -> list[str]:
    """The row ids the index stores: its version's rows, or its Chroma collection's."""
    if index.manifest is not None and index.manifest.dense == "files":
        return VectorIndex.load(index.path / index.manifest.bm25).ids
    return index._chroma().get(include=[])["ids"]


INTERRUPTS = [(None, f) for f in (_interrupt_embedding, _interrupt_rows_write, _interrupt_bm25_save, _interrupt_manifest_swap)] + [
    ("embedded", f) for f in (_interrupt_embedding, _interrupt_chroma_upsert, _interrupt_bm25_save, _interrupt_manifest_swap)]


@pytest.mark.parametrize(("layout", "interrupt"), INTERRUPTS,
                         ids=[f"{layout or 'files'}-{f.__name__.removeprefix('_interrupt_')}" for layout, f in INTERRUPTS])
def test_an_interrupted_update_leaves_the_previous_index_fully_queryable(layout, interrupt, tmp_path, monkeypatch):
    folder = make_corpus(tmp_path)
    ix = tmp_path / "ix"
    ContextualIndex(ix, embedder=CountingEmbedder(), chroma_url=layout).update([folder], show_progress=False)
    change_corpus(folder)
    index = ContextualIndex(ix, embedder=CountingEmbedder())
    with monkeypatch.context() as patch:
        interrupt(patch, index)
        with pytest.raises(Interrupt):
            index.update([folder], show_progress=False)
    assert_serves(ix, refund_days="14", has_readme=True)

    report = ContextualIndex(ix, embedder=CountingEmbedder()).update([folder], show_progress=False)
    assert (report.files_new, report.files_changed, report.files_removed) == (1, 1, 1)
    assert_serves(ix, refund_days="30", has_readme=False)
    finished = ContextualIndex(ix, embedder=CountingEmbedder())
    assert finished.manifest.dense == ("chroma" if layout else "files")
    assert sorted(stored_rows(finished)) == sorted(finished.manifest.chunk_ids())  # rows left by the interruption are gone
    assert [p.name for p in ix.glob("bm25*")] == [finished.manifest.bm25]


@pytest.mark.parametrize("layout", [None, "embedded"], ids=["files", "embedded-chroma"])
def test_an_update_interrupted_after_the_swap_serves_the_new_index(tmp_path, monkeypatch, layout):
    folder = make_corpus(tmp_path)
    ix = tmp_path / "ix"
    ContextualIndex(ix, embedder=CountingEmbedder(), chroma_url=layout).update([folder], show_progress=False)
    change_corpus(folder)

    def delete(self, ids):
        raise Interrupt("during the clean-up")

    def rmtree(path, ignore_errors=False):
        raise Interrupt("during the clean-up")

    with monkeypatch.context() as patch:
        if layout:
            patch.setattr(ChromaVectorIndex, "delete", delete)
        else:
            patch.setattr("contextual_retrieval_core.index.contextual_index.shutil.rmtree", rmtree)
        with pytest.raises(Interrupt):
            ContextualIndex(ix, embedder=CountingEmbedder()).update([folder], show_progress=False)
    assert_serves(ix, refund_days="30", has_readme=False)  # stale rows are there, and never served
    again = ContextualIndex(ix, embedder=CountingEmbedder())
    assert again.update([folder], show_progress=False).files_unchanged == 3
    # the next update that changes something finishes the clean-up
    (folder / "faq.md").write_text("# FAQ\n\nThe office opens at ten.\n", encoding="utf-8")
    again.update([folder], show_progress=False)
    assert sorted(stored_rows(again)) == sorted(again.manifest.chunk_ids())
    assert len(list(ix.glob("bm25*"))) == 1


# -- damaged folders -----------------------------------------------------------------------------


def built(tmp_path: Path, name: str = "ix") -> tuple[Path, Path]:
    folder = tmp_path / "corpus" if (tmp_path / "corpus").exists() else make_corpus(tmp_path / "corpus_root")
    ix = tmp_path / name
    ContextualIndex(ix, embedder=CountingEmbedder()).update([folder], show_progress=False)
    return folder, ix


def _bm25_from_another_index(tmp_path, ix):
    """A version folder swapped for another index's: caught by its recorded sizes and checksums."""
    other = tmp_path / "other"
    (other / "docs").mkdir(parents=True)
    (other / "docs" / "x.md").write_text("# X\n\nSomething else entirely.\n", encoding="utf-8")
    ContextualIndex(tmp_path / "ix2", embedder=CountingEmbedder()).update([other / "docs"], show_progress=False)
    mine = ix / ContextualIndex.read_manifest(ix).bm25
    shutil.rmtree(mine)
    shutil.copytree(tmp_path / "ix2" / ContextualIndex.read_manifest(tmp_path / "ix2").bm25, mine)
    return mine.name, "is damaged"


def _deleted_chroma(tmp_path, ix):
    shutil.rmtree(ix / "chroma")
    return "chroma", "is missing or holds no Chroma database"


def _deleted_rows(tmp_path, ix):
    bm25 = ix / ContextualIndex.read_manifest(ix).bm25
    (bm25 / "vectors.npy").unlink()
    return f"{bm25.name}/vectors.npy", "is missing"


def _empty_npy(tmp_path, ix):
    bm25 = ix / ContextualIndex.read_manifest(ix).bm25
    (bm25 / "indices.npy").write_bytes(b"")
    return f"{bm25.name}/indices.npy", "is damaged (0 bytes"


DAMAGES = [(None, _bm25_from_another_index), (None, _deleted_rows), (None, _empty_npy), ("embedded", _deleted_chroma)]


@pytest.mark.parametrize(("layout", "damage"), DAMAGES, ids=[f.__name__.lstrip("_") for _, f in DAMAGES])
def test_a_damaged_folder_names_the_file_and_the_fix_and_index_repairs_it(layout, damage, tmp_path):
    folder = make_corpus(tmp_path)
    ix = tmp_path / "ix"
    ContextualIndex(ix, embedder=CountingEmbedder(), chroma_url=layout).update([folder], show_progress=False)
    name, what = damage(tmp_path, ix)
    before = folder_digest(ix)
    with pytest.raises(IndexDamagedError) as caught:
        ContextualIndex(ix, embedder=CountingEmbedder()).search("refunds", top_k=3)
    message = str(caught.value)
    assert str(ix / name) in message and what in message and "re-run `contextual-retrieval index" in message
    assert folder_digest(ix) == before and not ((ix / "chroma").exists() and name == "chroma")  # query changed nothing

    report = ContextualIndex(ix, embedder=CountingEmbedder()).update([folder], show_progress=False)
    assert report.note and "the index was damaged" in report.note
    assert ContextualIndex(ix, embedder=CountingEmbedder()).search("refunds", top_k=1)[0].path == "notes/billing.md"


def test_a_garbage_embedding_cache_is_named_and_never_read_by_queries(tmp_path):
    folder = make_corpus(tmp_path)
    ix = tmp_path / "ix"
    ContextualIndex(ix, embedder=CountingEmbedder()).update([folder], show_progress=False)
    for leftover in ix.glob("embeddings.sqlite3*"):
        leftover.unlink()
    (ix / "embeddings.sqlite3").write_bytes(b"not a database " * 200)
    before = folder_digest(ix)
    assert ContextualIndex(ix, embedder=CountingEmbedder()).search("refunds", top_k=1)[0].path == "notes/billing.md"
    assert folder_digest(ix) == before
    (folder / "billing.md").write_text("# Billing\n\nRefunds take a week.\n", encoding="utf-8")
    with pytest.raises(IndexDamagedError, match=r"embeddings\.sqlite3 is not a readable embedding cache .*delete it"):
        ContextualIndex(ix, embedder=CountingEmbedder()).update([folder], show_progress=False)


def test_a_garbage_manifest_is_named(tmp_path):
    (tmp_path / "ix").mkdir()
    (tmp_path / "ix" / "manifest.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(IndexDamagedError, match=r"manifest\.json is not valid JSON .*--rebuild"):
        ContextualIndex(tmp_path / "ix", embedder=CountingEmbedder())


# -- the CLI -------------------------------------------------------------------------------------


@pytest.mark.usefixtures("offline_env")
def test_query_never_creates_or_alters_an_index_folder_and_exits_2_without_a_traceback(tmp_path, capsys):
    missing = tmp_path / "nowhere"
    assert main(["query", str(missing), "anything"]) == 2
    assert not missing.exists() and "build one with: contextual-retrieval index" in capsys.readouterr().err

    folder = make_corpus(tmp_path)
    ix = tmp_path / "ix"
    assert main(["index", str(folder), "--index-dir", str(ix), "--no-progress"]) == 0
    capsys.readouterr()
    rows = ix / ContextualIndex.read_manifest(ix).bm25 / "vectors.npy"
    rows.unlink()
    before = folder_digest(ix)
    assert main(["query", str(ix), "refunds"]) == 2
    err = capsys.readouterr().err
    assert f"{rows} is missing" in err and "re-run `contextual-retrieval index" in err and "Traceback" not in err
    assert not rows.exists() and folder_digest(ix) == before
    assert main(["index", str(folder), "--index-dir", str(ix), "--no-progress"]) == 0  # the repair
    assert "the index was damaged" in capsys.readouterr().out
    assert main(["query", str(ix), "refunds", "--json", "-k", "1"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["path"] == "notes/billing.md"
    assert main(["query", str(ix), "   "]) == 2
    assert "the question is empty" in capsys.readouterr().err


@pytest.mark.usefixtures("offline_env")
def test_os_errors_exit_2_with_the_path(tmp_path, capsys):
    folder = make_corpus(tmp_path)
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    assert main(["index", str(folder), "--index-dir", str(blocker / "ix"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert str(blocker) in err and "Traceback" not in err
