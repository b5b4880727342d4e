"""The whole contextual hybrid on a real Milvus server (Milvus Lite on loopback): both legs on the
server against the in-process sides, filters on both legs, incremental updates by stable ids, a
server stopped during a query loop, and a server killed during an index run."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from contextual_retrieval_core.dense.server_errors import VectorServerUnavailable
from contextual_retrieval_core.generators.callable import CallableContextGenerator
from contextual_retrieval_core.index.contextual_index import ContextualIndex
from contextual_retrieval_core.index.manifest import IndexMismatchError
from contextual_retrieval_core.index.milvus_config import MilvusConfig
from contextual_retrieval_core.index.milvus_index import MilvusContextualIndex, MilvusIndexRecord
from contextual_retrieval_core.search._where import where_predicate
from contextual_retrieval_core.search.bm25 import BM25Index
from contextual_retrieval_core.search.milvus import MilvusCollection, MilvusRow, MilvusServerUnavailable
from tests.milvus_server import MilvusLite, milvus_lite  # noqa: F401
from tests.notes_corpus import CountingEmbedder, change_corpus, make_corpus

pytestmark = pytest.mark.timeout(300)

ROOT = Path(__file__).resolve().parents[2]
QUERIES = [
    "how are ranked lists fused with weights", "dense pseudo relevance feedback moves the query vector",
    "BM25 index saved to a folder", "metadata filter where dict operators", "rerank the fused candidates",
    "query flow steps generator", "RRF constant rrf_k", "tokenize code identifiers camel case",
    "relative score fusion normalised", "search many queries at once", "windows of long chunks collapse",
    "FeedbackRows moved query", "positive integer check", "HybridSearcher vector store chroma",
]


def _code_corpus(root: Path) -> Path:
    """This repository's search stage, as a folder of real code to index."""
    folder = root / "code"
    shutil.copytree(ROOT / "contextual_retrieval_core" / "search", folder, ignore=shutil.ignore_patterns("__pycache__", "milvus.py"))
    return folder


def _server_ids(collection: MilvusCollection) -> list[str]:
    """Every row id on the server, as a list (a duplicated row would show twice)."""
    collection.client.load_collection(collection.name)  # released by a restarted Milvus Lite
    rows = collection.client.query(collection.name, filter='id != ""', output_fields=["id"], limit=16_384)
    return [str(r["id"]) for r in rows]


def test_both_legs_on_the_server_rank_as_the_in_process_sides(tmp_path, milvus_server):  # noqa: F811
    code = _code_corpus(tmp_path)
    milvus = MilvusContextualIndex(tmp_path / "mv", embedder=CountingEmbedder(), milvus=MilvusConfig(uri=milvus_server.uri))
    milvus.update([code], show_progress=False, shared_contexts=False)
    local = ContextualIndex(tmp_path / "local", embedder=CountingEmbedder(), windows=False)
    local.update([code], show_progress=False, shared_contexts=False)
    assert sorted(_server_ids(milvus.collection)) == sorted(milvus.record.chunk_ids()) == sorted(local.manifest.chunk_ids())
    # BM25: Milvus's function over our terms against the in-process index over the same texts
    rows = milvus.collection.rows(milvus.record.chunk_ids())
    bm25 = BM25Index().index(list(rows), [text for text, _ in rows.values()])
    overlaps = []
    for query, served in zip(QUERIES, milvus.collection.search_bm25(QUERIES, 20)):
        ours = [i for i, _ in bm25.search(query, 20)]
        assert [i for i, _ in served][:5] == ours[:5], query
        overlaps.append(len({i for i, _ in served} & set(ours)) / max(len(ours), 1))
    assert min(overlaps) >= 0.9, overlaps
    # the whole query path: same top 10, same ranks on each side
    for query in QUERIES:
        got, want = milvus.search(query, top_k=10), local.search(query, top_k=10)
        assert [h.id for h in got] == [h.id for h in want], query
        assert [h.ranks for h in got] == [h.ranks for h in want], query
        assert [(h.path, h.start_line, h.end_line, h.context, h.text) for h in got] == \
               [(h.path, h.start_line, h.end_line, h.context, h.text) for h in want]


WHERES = [
    {"team": "web"}, {"team": {"$ne": "web"}}, {"year": {"$gte": 2023}}, {"year": {"$lt": 2022}},
    {"team": {"$in": ["web", "db"]}}, {"team": {"$nin": ["web"]}}, {"team": {"$in": []}}, {"flag": True},
    {"flag": {"$ne": True}}, {"$and": [{"team": "web"}, {"year": {"$gt": 2021}}]},
    {"$or": [{"team": "db"}, {"year": {"$lte": 2020}}]}, {"team": "web", "year": 2024}, {"name": 'say "hi"'},
    {"name": {"$in": ["naïve", "a\\b"]}},
]


def test_filters_keep_on_the_server_what_the_where_language_keeps(milvus_server):  # noqa: F811
    import numpy as np

    collection = MilvusCollection(milvus_server.uri, "where_parity")
    collection.drop()
    collection.create(4, {"embedder": {"model": "toy"}})
    metas = [{"team": "web", "year": 2024, "flag": True}, {"team": "db", "year": 2022}, {"year": 2020, "flag": False},
             {"team": "ops", "year": 2023, "name": 'say "hi"'}, {"team": "web", "year": 2021, "name": "naïve"},
             {"name": "a\\b", "flag": "yes"}, {}]
    rows = [MilvusRow(f"r{i}", f"row {i} apples", np.eye(4)[i % 4], m) for i, m in enumerate(metas)]
    collection.upsert(rows)
    for where in WHERES:
        keep = where_predicate(where)
        want = {r.id for r in rows if keep(r.metadata)}
        dense = {i for i, _ in collection.search_dense([[0.5, 0.5, 0.5, 0.5]], 50, where)[0]}
        bm25 = {i for i, _ in collection.search_bm25(["apples"], 50, where)[0]}
        assert dense == want == bm25, where
    collection.drop()


def test_updates_add_replace_and_delete_by_stable_ids(tmp_path, milvus_server):  # noqa: F811
    notes = make_corpus(tmp_path)
    embedder = CountingEmbedder()
    index = MilvusContextualIndex(tmp_path / "ix", embedder=embedder, milvus=MilvusConfig(uri=milvus_server.uri))
    first = index.update([notes], show_progress=False, shared_contexts=False)
    before = set(index.record.chunk_ids())
    assert first.chunks_added == first.chunks_total == len(before) == len(_server_ids(index.collection))
    kept_file = "notes/sub/cache.py"
    kept = index.record.files[kept_file].chunks

    change_corpus(notes)  # billing changed, readme gone, faq new
    embedded = len(embedder.documents)
    second = index.update([notes], show_progress=False, shared_contexts=False)
    after = index.record.chunk_ids()
    assert (second.files_new, second.files_changed, second.files_unchanged, second.files_removed) == (1, 1, 1, 1)
    assert index.record.files[kept_file].chunks == kept  # the unchanged file's rows stay as they were
    ids = _server_ids(index.collection)
    assert len(ids) == len(set(ids)) and sorted(ids) == sorted(after)  # no duplicate, none missing, none stale
    assert len(embedder.documents) - embedded == second.chunks_added == len(set(after) - before)
    assert index.search("office opens at nine", top_k=1)[0].path == "notes/faq.md"
    assert not [h for h in index.search("Kubernetes replicas") if h.path == "notes/readme.txt"]

    third = index.update([notes], show_progress=False, shared_contexts=False)  # nothing changed: nothing done
    assert (third.chunks_added, third.chunks_removed, third.files_unchanged) == (0, 0, 3)
    assert sorted(_server_ids(index.collection)) == sorted(after)

    removed = index.remove([notes / "faq.md"])
    assert removed.files_removed == 1 and sorted(_server_ids(index.collection)) == sorted(index.record.chunk_ids())
    # a query from a fresh object reads the folder's record and the collection's settings
    again = MilvusContextualIndex(tmp_path / "ix", embedder=CountingEmbedder())
    assert again.search("refunds within 30 days", top_k=1)[0].path == "notes/billing.md"


def test_filters_reach_both_legs_of_an_index_query(tmp_path, milvus_server):  # noqa: F811
    index = MilvusContextualIndex(tmp_path / "ix", embedder=CountingEmbedder(), milvus=MilvusConfig(uri=milvus_server.uri))
    index.update([make_corpus(tmp_path)], show_progress=False, shared_contexts=False)
    hits = index.search("refunds invoices cache evict kubernetes", where={"path": {"$ne": "notes/billing.md"}})
    assert hits and all(h.path != "notes/billing.md" for h in hits)
    assert {h.path for h in hits} == {"notes/sub/cache.py", "notes/readme.txt"}
    only = index.search("refunds invoices cache evict kubernetes", where={"path": "notes/readme.txt"})
    assert [h.path for h in only] == ["notes/readme.txt"] and only[0].ranks["dense"] == 1


def test_another_embedder_is_refused_by_the_folder_and_by_the_collection(tmp_path, milvus_server):  # noqa: F811
    index = MilvusContextualIndex(tmp_path / "ix", embedder=CountingEmbedder(), milvus=MilvusConfig(uri=milvus_server.uri))
    index.update([make_corpus(tmp_path)], show_progress=False, shared_contexts=False)
    with pytest.raises(IndexMismatchError, match="toy-bow-64"):
        MilvusContextualIndex(tmp_path / "ix", embedder=CountingEmbedder("other-model")).search("refunds")
    # another folder pointed at the same collection, with another embedder
    other = MilvusContextualIndex(tmp_path / "other", embedder=CountingEmbedder("other-model"),
                                  milvus=MilvusConfig(uri=milvus_server.uri, collection=index.collection.name))
    with pytest.raises(IndexMismatchError, match="toy-bow-64"):
        other.update([make_corpus(tmp_path / "b")], show_progress=False, shared_contexts=False)
    assert not (tmp_path / "other" / "milvus-index.json").exists()


def test_a_stopped_server_names_its_uri_and_queries_recover(tmp_path, pytestconfig):
    with milvus_lite(pytestconfig) as server:
        index = MilvusContextualIndex(tmp_path / "ix", embedder=CountingEmbedder(), milvus=MilvusConfig(uri=server.uri, timeout=5))
        index.update([make_corpus(tmp_path)], show_progress=False, shared_contexts=False)
        want = [h.id for h in index.search("refunds within 14 days")]
        failed = 0
        for n in range(6):
            if n == 2:
                server.stop()
            if n == 4:
                server.start()
            try:
                assert [h.id for h in index.search("refunds within 14 days")] == want
            except MilvusServerUnavailable as exc:
                assert isinstance(exc, VectorServerUnavailable)
                assert f"the Milvus server at {server.uri} does not answer" in str(exc) and "--milvus-uri" in str(exc)
                failed += 1
        assert failed == 2


def test_an_index_run_whose_server_is_killed_completes_on_rerun_paying_nothing_twice(tmp_path, pytestconfig):
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(30):
        (docs / f"valves{i}.md").write_text(
            f"# Valves {i}\n\n" + "\n\n".join(f"## Part {j}\n\n" + f"Valve {i}-{j} closes before pump {i} starts. " * 6
                                             for j in range(4)), encoding="utf-8")
    asked: list[str] = []
    generator = CallableContextGenerator(lambda doc, chunk: asked.append(chunk.id) or f"About {doc.id}, part {chunk.index}.",
                                         name="counting-llm", model="m1")
    embedder = CountingEmbedder()
    with milvus_lite(pytestconfig) as server:
        from pymilvus import MilvusClient

        from contextual_retrieval_core.search.milvus import GRPC_OPTIONS

        upserts: list[int] = []

        class KilledMidWrite(MilvusClient):
            """pymilvus's client, whose server dies as the run's fourth upsert goes out (one row a
            write): the kill lands part way through the run's writes on any machine, however busy
            (a watcher thread polling the server raced the run's writes under load)."""

            def upsert(self, *args, **kwargs):
                upserts.append(1)
                if len(upserts) == 4:
                    server.kill()
                return super().upsert(*args, **kwargs)

        client = KilledMidWrite(uri=server.uri, timeout=5, grpc_options=GRPC_OPTIONS)
        index = MilvusContextualIndex(tmp_path / "ix", embedder=embedder, generator=generator,
                                      milvus=MilvusConfig(uri=server.uri, batch_rows=1, timeout=5, client=client))
        with pytest.raises(MilvusServerUnavailable, match=server.uri):
            index.update([docs], show_progress=False, shared_contexts=False)
        assert len(upserts) >= 4
        assert not (tmp_path / "ix" / "milvus-index.json").exists()
        paid, embedded = len(asked), len(embedder.documents)
        assert paid == embedded > 20

        server.start()
        watcher = MilvusCollection(server.uri, index.collection.name)
        on_server = len(_server_ids(watcher))
        assert on_server < paid, on_server  # the run stopped part way through its writes (what Lite kept of them)
        rerun = MilvusContextualIndex(tmp_path / "ix", embedder=embedder, generator=generator,
                                      milvus=MilvusConfig(uri=server.uri, collection=index.collection.name))
        report = rerun.update([docs], show_progress=False, shared_contexts=False)
        assert len(asked) == paid, "a context was paid for twice"
        assert len(embedder.documents) == embedded, "a chunk was embedded twice"
        assert report.contexts is not None and report.contexts.generated == 0
        ids = _server_ids(watcher)
        record = MilvusIndexRecord.read(tmp_path / "ix")
        assert len(ids) == len(set(ids)) == paid and sorted(ids) == sorted(record.chunk_ids())
        assert rerun.search("valve 7-2 closes before pump 7", top_k=1)[0].path == "docs/valves7.md"
