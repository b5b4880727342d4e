"""The Milvus parts without a server: the filter language as Milvus expressions, the URI as errors
name it, the index record's round trip and damage, and the versions of the framework stores whose
hooks `ContextualMilvus` and `ContextualMilvusVectorStore` override (a new version fails here first,
naming what to re-check)."""

from __future__ import annotations

import importlib.metadata
import inspect
import json
from pathlib import Path

import pytest
from packaging.version import Version

from contextual_retrieval_core.index.manifest import FileEntry, IndexDamagedError
from contextual_retrieval_core.index.milvus_config import MilvusConfig
from contextual_retrieval_core.index.milvus_index import MILVUS_FILE, MilvusContextualIndex, MilvusIndexRecord
from contextual_retrieval_core.search.milvus import MilvusCollection, milvus_filter, milvus_uri_name
from tests.notes_corpus import CountingEmbedder

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("where, expression", [
    ({"team": "web"}, 'metadata["team"] == "web"'),
    ({"year": {"$gte": 2023, "$lt": 2025}}, '(metadata["year"] >= 2023 and metadata["year"] < 2025)'),
    ({"team": {"$ne": "web"}}, '(metadata["team"] is null or metadata["team"] != "web")'),
    ({"team": {"$in": ["a", "b"]}}, '(metadata["team"] == "a" or metadata["team"] == "b")'),
    ({"team": {"$nin": ["a"]}}, '(metadata["team"] is null or metadata["team"] != "a")'),
    ({"flag": True}, 'metadata["flag"] == true'),
    ({"$or": [{"a": 1}, {"b": 'say "hi"'}]}, '(metadata["a"] == 1 or metadata["b"] == "say \\"hi\\"")'),
])
def test_where_dicts_become_milvus_expressions(where, expression):
    assert milvus_filter(where) == expression
    assert milvus_filter(where, "$meta") == expression.replace("metadata[", "$meta[")


def test_a_bad_filter_is_the_where_language_s_error():
    with pytest.raises(ValueError, match="unknown operator"):
        milvus_filter({"team": {"$like": "w%"}})
    with pytest.raises(ValueError, match="strings, numbers and booleans"):
        milvus_filter({"team": {"$in": [["nested"]]}})
    assert milvus_filter(None) == ""


def test_errors_name_the_uri_without_credentials():
    assert milvus_uri_name("https://root:Milvus@db.example:19530") == "https://db.example:19530"
    assert milvus_uri_name("http://127.0.0.1:19530") == "http://127.0.0.1:19530"
    with pytest.raises(ValueError, match="analysis"):
        MilvusCollection("http://127.0.0.1:19530", "c", analysis="lucene")  # type: ignore[arg-type]


def test_the_index_s_milvus_settings_are_checked_once_and_the_token_stays_out_of_the_repr(tmp_path):
    config = MilvusConfig(uri="http://127.0.0.1:19530", token="root:Milvus", dense_index={"index_type": "HNSW"}, timeout=5)
    assert "Milvus'" not in repr(config) and "token" not in repr(config) and config.timeout == 5.0
    for bad, error, match in ((dict(collection="2024-chunks"), ValueError, "collection name"),
                              (dict(uri=""), ValueError, "uri must be"),
                              (dict(analysis="lucene"), ValueError, "analysis"),
                              (dict(batch_rows=0), ValueError, "batch_rows"),
                              (dict(timeout=0), ValueError, "timeout must be a positive number of seconds"),
                              (dict(token=3), TypeError, "token must be a str"),
                              (dict(dense_index="HNSW"), TypeError, "dense_index must be")):
        with pytest.raises(error, match=match):
            MilvusConfig(**bad)  # type: ignore[arg-type]
    index = MilvusContextualIndex(tmp_path / "ix", embedder=CountingEmbedder(), milvus=config)
    assert index.uri == "http://127.0.0.1:19530" and index.milvus is config
    with pytest.raises(TypeError, match="milvus must be a MilvusConfig"):
        MilvusContextualIndex(tmp_path / "ix", embedder=CountingEmbedder(), milvus={"uri": "http://x"})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"milvus=MilvusConfig\(uri=...\)"):
        _ = MilvusContextualIndex(tmp_path / "ix", embedder=CountingEmbedder()).uri


def test_the_index_record_round_trips_and_damage_names_the_file(tmp_path):
    record = MilvusIndexRecord("http://127.0.0.1:19530", "chunks", {"kind": "local", "model": "m"}, 384,
                               {"name": "structural", "model": "", "prompt": "", "label": "structural"}, 800, [0.5, 0.5],
                               files={"a.md": FileEntry("/r", "/r/a.md", "00", 3, 4, ["c1", "c2"])})
    record.write(tmp_path)
    again = MilvusIndexRecord.read(tmp_path)
    assert again == record and again.chunk_ids() == ["c1", "c2"] and again.chunk_count == 2
    data = json.loads((tmp_path / MILVUS_FILE).read_text())
    assert "token" not in data and data["uri"] == "http://127.0.0.1:19530"
    (tmp_path / MILVUS_FILE).write_text('{"format": "contextual-retrieval/milvus-index", "uri": 3}')
    with pytest.raises(IndexDamagedError, match=MILVUS_FILE):
        MilvusIndexRecord.read(tmp_path)
    with pytest.raises(FileNotFoundError, match="--milvus-uri"):
        MilvusIndexRecord.read(tmp_path / "none")


@pytest.mark.parametrize("dist, low, high", [
    ("langchain-milvus", "0.3.3", "0.4"),
    ("llama-index-vector-stores-milvus", "1.2", "2"),
    ("pymilvus", "2.6", "2.6.10"),
])
def test_the_framework_stores_are_the_versions_their_hooks_are_written_for(dist, low, high):
    installed = Version(importlib.metadata.version(dist))
    assert Version(low) <= installed < Version(high), f"re-check the Milvus parts' overrides for {dist} {installed}"
    assert f'"{dist}>={low},<{high}"' in (ROOT / "pyproject.toml").read_text()


def test_the_hooks_the_subclasses_override_are_there():
    from langchain_milvus import Milvus
    from llama_index.vector_stores.milvus import MilvusVectorStore

    for cls, hooks in ((Milvus, ("_add_metadata_fields", "_prepare_insert_list", "_parse_document")),
                       (MilvusVectorStore, ("_default_search", "_sparse_search", "_parse_from_milvus_results"))):
        for hook in hooks:
            assert callable(getattr(cls, hook, None)), f"{cls.__name__}.{hook} is gone"
    assert list(inspect.signature(MilvusVectorStore._sparse_search).parameters)[:4] == ["self", "query", "string_expr", "output_fields"]
    assert list(inspect.signature(Milvus._prepare_insert_list).parameters)[:2] == ["self", "texts"]
