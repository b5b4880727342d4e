"""`ContextualIndex` (real Chroma, real BM25), `split_text` and `collect_files`.

The index tests use a small deterministic bag-of-words embedder (the `Embedder` protocol, counting
what it is asked to embed) so incremental behaviour can be checked exactly and fast; the CLI tests
(tests/integration/test_cli_index.py) run the real local embedder.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

import pytest

from contextual_retrieval_core.chunking.split import split_text
from contextual_retrieval_core.index.contextual_index import ContextualIndex, IndexMismatchError
from contextual_retrieval_core.index.files import collect_files
from tests.notes_corpus import CountingEmbedder, CountingGenerator, make_corpus

# -- split_text ------------------------------------------------------------------------------------


def test_split_text_chunks_are_verbatim_bounded_and_cover_the_text():
    text = Path(__file__).with_name("test_indexing.py").read_text(encoding="utf-8")
    chunks = split_text(text, max_chars=400, code=True)
    assert len(chunks) > 5
    for offset, chunk in chunks:
        assert text[offset : offset + len(chunk)] == chunk
        assert 0 < len(chunk) <= 400 and chunk == chunk.strip()
    offsets = [o for o, _ in chunks]
    assert offsets == sorted(offsets)
    assert " ".join(c for _, c in chunks).split() == text.split()  # nothing but whitespace lost


def test_split_text_prefers_headings_and_definitions():
    prose = "# One\n\n" + "alpha " * 30 + "\n\n# Two\n\n" + "beta " * 30 + "\n"
    assert [c.split("\n")[0] for _, c in split_text(prose, max_chars=250)] == ["# One", "# Two"]
    code = "def first():\n" + "    x = 1\n" * 12 + "\n\ndef second():\n" + "    y = 2\n" * 12
    assert [c.split("\n")[0] for _, c in split_text(code, max_chars=250, code=True)] == ["def first():", "def second():"]


def test_split_text_cuts_one_long_line_at_spaces():
    text = " ".join(f"word{i}" for i in range(200))
    chunks = split_text(text, max_chars=100)
    assert all(len(c) <= 100 for _, c in chunks)
    assert " ".join(c for _, c in chunks) == text
    with pytest.raises(ValueError, match="at least 50"):
        split_text(text, max_chars=10)


# -- collect_files -----------------------------------------------------------------------------------


def test_collect_files_skips_hidden_vendored_and_binary(tmp_path):
    folder = make_corpus(tmp_path)
    for skipped in (".git", ".venv", "node_modules", "__pycache__", "pkg.egg-info"):
        (folder / skipped).mkdir()
        (folder / skipped / "x.py").write_text("print('skip me')\n")
    (folder / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    (folder / "data.txt").write_bytes(b"binary\x00content")
    (folder / ".hidden.md").write_text("# hidden\n")
    scan = collect_files([folder])
    assert [f.doc_id for f in scan.files] == ["notes/billing.md", "notes/readme.txt", "notes/sub/cache.py"]
    # data.txt: a text extension with binary content
    assert [(s.path.name, s.reason) for s in scan.skipped] == [("data.txt", "binary (NUL bytes)")]
    assert scan.other_extensions == {".png": 1}
    explicit = collect_files([folder / "billing.md", tmp_path / "notes" / "sub" / "cache.py"]).files
    assert [f.doc_id for f in explicit] == ["billing.md", "cache.py"]


def test_collect_files_errors_name_the_fix(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist; pass existing files or folders"):
        collect_files([tmp_path / "missing"])
    (tmp_path / "a" / "docs").mkdir(parents=True)
    (tmp_path / "b" / "docs").mkdir(parents=True)
    (tmp_path / "a" / "docs" / "x.md").write_text("one")
    (tmp_path / "b" / "docs" / "x.md").write_text("two")
    with pytest.raises(ValueError, match="pass their common parent folder"):
        collect_files([tmp_path / "a" / "docs", tmp_path / "b" / "docs"])
    with pytest.raises(ValueError, match=r"pass a list of paths"):
        collect_files(tmp_path / "a")  # type: ignore[arg-type]


def test_ingestion_batches_chroma_writes_and_deletes_under_the_client_limit(tmp_path, monkeypatch):
    """update() writes through ChromaVectorIndex.add and removes through .delete, both in batches
    of the client's max batch size."""
    from contextual_retrieval_core.dense.chroma import ChromaVectorIndex

    folder = make_corpus(tmp_path)
    index = ContextualIndex(tmp_path / "ix", embedder=CountingEmbedder(), chunk_chars=60, chroma_url="embedded")
    monkeypatch.setattr(ChromaVectorIndex, "max_batch_size", property(lambda self: 2))
    calls: list[tuple[str, int]] = []
    collection = index._chroma()
    for name in ("upsert", "delete"):
        original = getattr(collection, name)

        def spy(*args, _name=name, _original=original, **kwargs):
            calls.append((_name, len(kwargs["ids"])))
            return _original(*args, **kwargs)

        monkeypatch.setattr(collection, name, spy)
    first = index.update([folder], show_progress=False)
    upserts = [n for op, n in calls if op == "upsert"]
    assert first.chunks_added > 2 and sum(upserts) == first.chunks_added and max(upserts) <= 2
    calls.clear()
    for f in list(folder.rglob("*.md")):
        f.unlink()
    second = index.update([folder], show_progress=False)
    deletes = [n for op, n in calls if op == "delete" and n]
    assert second.chunks_removed > 2 and sum(deletes) == second.chunks_removed and max(deletes) <= 2
    assert len(index._chroma().get(include=[])["ids"]) == second.chunks_total


def test_weights_for_unwraps_the_embedding_cache(tmp_path):
    """Voyage fuses 0.8 / 0.2 (the cookbook's) also behind a CachedEmbedder; anything else gets the
    defaults. The CLI's index/query and the demo take their weights from here."""
    voyageai = pytest.importorskip("voyageai")
    from contextual_retrieval_core._factories import weights_for
    from contextual_retrieval_core.embeddings.cache import CachedEmbedder
    from contextual_retrieval_core.embeddings.voyage import VoyageEmbedder
    from contextual_retrieval_core.search.ranked import DEFAULT_WEIGHTS
    from tests.fakes.voyage_server import FakeVoyageServer

    with FakeVoyageServer() as server:
        voyage = VoyageEmbedder(
            "voyage-3.5",
            client=voyageai.Client(api_key=server.api_key, base_url=server.base_url, max_retries=0),
            async_client=voyageai.AsyncClient(api_key=server.api_key, base_url=server.base_url, max_retries=0),
        )
        cached = CachedEmbedder(voyage, tmp_path / "cache.sqlite3")
        assert cached.embed_documents(["a chunk"]).shape[0] == 1  # a working embedder, not a stub
        assert weights_for(voyage) == (0.8, 0.2)
        assert weights_for(cached) == (0.8, 0.2)
        cached.close()
    assert weights_for(CountingEmbedder()) == tuple(DEFAULT_WEIGHTS)
    assert weights_for(CachedEmbedder(CountingEmbedder(), tmp_path / "toy.sqlite3")) == tuple(DEFAULT_WEIGHTS)


# -- the index ---------------------------------------------------------------------------------------


def test_index_then_search_from_a_fresh_process_object(tmp_path):
    folder = make_corpus(tmp_path)
    embedder = CountingEmbedder()
    report = ContextualIndex(tmp_path / "ix", embedder=embedder).update([folder], show_progress=False)
    assert (report.files_new, report.files_unchanged, report.chunks_total) == (3, 0, len(embedder.documents))
    assert report.embedded == report.chunks_added == report.chunks_total > 0
    assert report.contexts is not None and report.contexts.generated == report.chunks_total
    names = {p.name for p in (tmp_path / "ix").iterdir()}
    assert names >= {"manifest.json", "embeddings.sqlite3", ".lock"} and "chroma" not in names  # every row in files
    version = ContextualIndex.read_manifest(tmp_path / "ix").bm25
    assert [n for n in names if n.startswith("bm25")] == [version]
    assert {"vectors.npy", "vectors.json", "chunks.sqlite3"} <= {p.name for p in (tmp_path / "ix" / version).iterdir()}

    reopened = ContextualIndex(tmp_path / "ix", embedder=CountingEmbedder())
    hits = reopened.search("how long do refunds take?", top_k=3)
    top = hits[0]
    assert top.path == "notes/billing.md" and "14 days" in top.text
    assert top.context == "From notes/billing.md, section: Billing."  # one chunk: the whole file
    assert set(top.ranks) == {"dense", "bm25"} and top.ranks["bm25"] == 1
    assert (top.start_line, top.end_line) == (1, 9)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    code_hit = reopened.search("LruCache evict", top_k=1)[0]
    assert code_hit.path == "notes/sub/cache.py" and "LruCache" in code_hit.context


def test_rerun_on_unchanged_files_embeds_and_situates_nothing(tmp_path):
    folder = make_corpus(tmp_path)
    ContextualIndex(tmp_path / "ix", embedder=CountingEmbedder()).update([folder], show_progress=False)
    embedder, generator = CountingEmbedder(), CountingGenerator()
    index = ContextualIndex(tmp_path / "ix", embedder=embedder, generator=CountingGenerator())
    # a different generator re-situates everything: run that once, then check the no-op rerun
    switched = index.update([folder], show_progress=False)
    assert switched.files_changed == 3 and "every file is re-situated" in (switched.note or "")
    index = ContextualIndex(tmp_path / "ix", embedder=embedder, generator=generator)
    report = index.update([folder], show_progress=False)
    assert (report.files_unchanged, report.files_new, report.files_changed, report.files_removed) == (3, 0, 0, 0)
    assert (report.embedded, report.generated, report.contexts) == (0, 0, None)
    assert generator.calls == []

    # same content, new mtime: hashed, found unchanged, still nothing embedded or situated
    before = len(embedder.documents)
    future = time.time() + 10
    for f in folder.rglob("*.*"):
        os.utime(f, (future, future))
    report = index.update([folder], show_progress=False)
    assert report.files_unchanged == 3 and report.generated == 0 and len(embedder.documents) == before


def test_changed_and_deleted_files_are_replaced_and_removed(tmp_path):
    folder = make_corpus(tmp_path)
    embedder, generator = CountingEmbedder(), CountingGenerator()
    index = ContextualIndex(tmp_path / "ix", embedder=embedder, generator=generator)
    first = index.update([folder], show_progress=False)
    old_billing = set(index.manifest.files["notes/billing.md"].chunks)

    generator.calls.clear()
    embedder.documents.clear()
    (folder / "billing.md").write_text(
        "# Billing\n\n## Refunds\n\nRefunds are issued within 30 days of a written request.\n", encoding="utf-8")
    (folder / "readme.txt").unlink()
    report = index.update([folder], show_progress=False)
    assert (report.files_changed, report.files_removed, report.files_unchanged) == (1, 1, 1)
    new_billing = index.manifest.files["notes/billing.md"].chunks
    assert set(generator.calls) == set(new_billing)  # only the changed file was situated
    assert len(embedder.documents) == len(new_billing)
    assert report.chunks_total == first.chunks_total - report.chunks_removed + report.chunks_added
    assert "notes/readme.txt" not in index.manifest.files

    from contextual_retrieval_core.dense.vectors import VectorIndex

    stored = VectorIndex.load(tmp_path / "ix" / index.manifest.bm25).ids
    assert not old_billing & set(stored) and set(new_billing) <= set(stored)
    assert len(stored) == report.chunks_total
    hits = index.search("Kubernetes worker replicas", top_k=10)
    assert all(h.path != "notes/readme.txt" for h in hits)  # gone from Chroma and BM25
    assert "30 days" in index.search("refund days", top_k=1)[0].text


def test_files_from_other_paths_are_kept(tmp_path):
    folder = make_corpus(tmp_path)
    other = tmp_path / "more"
    other.mkdir()
    (other / "faq.md").write_text("# FAQ\n\nThe office opens at nine.\n")
    index = ContextualIndex(tmp_path / "ix", embedder=CountingEmbedder())
    index.update([folder], show_progress=False)
    report = index.update([other], show_progress=False)
    assert (report.files_new, report.files_removed) == (1, 0)
    assert sorted(index.manifest.files) == ["more/faq.md", "notes/billing.md", "notes/readme.txt", "notes/sub/cache.py"]
    assert index.search("when does the office open", top_k=1)[0].path == "more/faq.md"


def test_embedder_mismatch_and_non_index_errors_name_the_fix(tmp_path):
    folder = make_corpus(tmp_path)
    ContextualIndex(tmp_path / "ix", embedder=CountingEmbedder()).update([folder], show_progress=False)
    import shutil

    shutil.copytree(tmp_path / "ix", tmp_path / "ix-copy")
    other = ContextualIndex(tmp_path / "ix-copy", embedder=CountingEmbedder("another-model"))
    with pytest.raises(IndexMismatchError, match="--rebuild"):
        other.search("anything")
    with pytest.raises(IndexMismatchError, match="--rebuild"):
        other.update([folder], show_progress=False)
    assert other.update([folder], show_progress=False, rebuild=True).chunks_total == len(other)  # rebuilt with it
    assert other.search("when does the office open", top_k=1)
    with pytest.raises(FileNotFoundError, match="contextual-retrieval index PATH"):
        ContextualIndex.read_manifest(tmp_path / "nowhere")
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "photo.jpg").write_bytes(b"\xff\xd8")
    with pytest.raises(ValueError, match=r"nothing to index under .*no text, markdown or code file.*\.jpg \(1\)"):
        ContextualIndex(tmp_path / "ix2", embedder=CountingEmbedder()).update([empty], show_progress=False)
    index = ContextualIndex(tmp_path / "ix", embedder=CountingEmbedder())
    assert index.search("  ") == []  # a blank query finds nothing, as in every query path
    assert len(index.search("refunds", top_k=1)) == 1
    from contextual_retrieval_core.search.config import FusionConfig

    assert len(index.search("refunds", config=FusionConfig(top_k=2))) == 2
    with pytest.raises(ValueError, match="top_k must be a positive integer"):
        index.search("refunds", top_k=0)


def test_index_folder_inside_the_indexed_paths_or_around_them_is_refused(tmp_path):
    folder = make_corpus(tmp_path)
    for index_dir in (folder / "index", folder, folder / "sub" / "deeper"):
        with pytest.raises(ValueError, match="the index would index itself; put the index elsewhere"):
            ContextualIndex(index_dir, embedder=CountingEmbedder()).update([folder], show_progress=False)
        assert not (index_dir / "manifest.json").exists()
    with pytest.raises(ValueError, match="is inside the index folder"):
        ContextualIndex(tmp_path, embedder=CountingEmbedder()).update([folder / "sub"], show_progress=False)
    # another index folder found while walking is never indexed
    ContextualIndex(tmp_path / "ix", embedder=CountingEmbedder()).update([folder], show_progress=False)
    shutil.copytree(tmp_path / "ix", folder / "old-index")
    report = ContextualIndex(tmp_path / "ix2", embedder=CountingEmbedder()).update([folder], show_progress=False)
    assert report.files_new == 3


def test_auto_choices_follow_keys_and_installed_sdks(monkeypatch):
    from contextual_retrieval_core._factories import choose_generator, choose_reranker, unused_keys

    for name in ("ANTHROPIC_API_KEY", "VOYAGE_API_KEY", "COHERE_API_KEY", "CO_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    assert choose_generator("auto").name == "structural" and choose_reranker("auto") is None
    assert unused_keys() == []
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-a-secret")
    monkeypatch.setenv("COHERE_API_KEY", "co-test")
    assert choose_generator("auto").name == "anthropic"
    assert choose_reranker("auto").model_name == "rerank-v3.5"
    # a key without its SDK (only the local extras installed): auto stays offline and says why
    monkeypatch.setitem(sys.modules, "anthropic", None)
    monkeypatch.setitem(sys.modules, "cohere", None)
    assert choose_generator("auto").name == "structural" and choose_reranker("auto") is None
    notes = unused_keys()
    assert len(notes) == 2 and "pip install 'contextual-retrieval-kit[anthropic]'" in notes[0]
    assert all("sk-test" not in n and "co-test" not in n for n in notes)
    with pytest.raises(ValueError, match="choose auto, structural or anthropic"):
        choose_generator("gpt")


def test_the_report_adds_up_when_a_file_grows_by_one_section(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    guide = folder / "guide.md"
    guide.write_text("# Guide\n\n" + "".join(f"## Step {i}\n\n" + f"Step {i} says what to check. " * 30 + "\n\n"
                                             for i in range(6)), encoding="utf-8")
    index = ContextualIndex(tmp_path / "ix", embedder=CountingEmbedder(), generator=CountingGenerator())
    first = index.update([folder], show_progress=False)
    assert first.chunks_total > 4
    guide.write_text(guide.read_text(encoding="utf-8") + "## Step 6\n\nThe last step, appended.\n", encoding="utf-8")
    second = index.update([folder], show_progress=False)
    # only the chunks at the end change; the file's other chunks keep their ids, so they are
    # neither added nor removed, and the counts add up
    assert second.files_changed == 1 and 1 <= second.chunks_added <= 2 and second.chunks_removed <= 1
    assert second.chunks_total == first.chunks_total + second.chunks_added - second.chunks_removed
    assert (f"chunks: {second.chunks_added} added, {second.chunks_removed} removed, {second.chunks_total} in the index"
            in second.format())
    assert f"{second.chunks_total} chunks in 1 document —" in second.format()


def test_an_unchanged_rerun_keeps_the_version_and_its_checks(tmp_path):
    folder = make_corpus(tmp_path)
    ContextualIndex(tmp_path / "ix", embedder=CountingEmbedder()).update([folder], show_progress=False)
    before = ContextualIndex.read_manifest(tmp_path / "ix")
    for f in folder.rglob("*.md"):
        os.utime(f)  # touched, not changed: hashed again, then recorded with the new mtimes
    report = ContextualIndex(tmp_path / "ix", embedder=CountingEmbedder()).update([folder], show_progress=False)
    after = ContextualIndex.read_manifest(tmp_path / "ix")
    assert report.chunks_added == report.chunks_removed == 0 and report.contexts is None
    assert after.bm25 == before.bm25 and after.checks == before.checks and after.checks
    ContextualIndex(tmp_path / "ix", embedder=CountingEmbedder()).check()
