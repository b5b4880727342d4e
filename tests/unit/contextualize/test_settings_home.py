"""One settings home: `FusionConfig` holds every fusion setting; the core classes take
``config=``; the frameworks' flat fields and keywords are derived from its field list."""

from __future__ import annotations

import dataclasses
import warnings

import pytest

from contextual_retrieval_core import Chunk, ContextualChunk, FusionConfig, HybridSearcher

CHUNKS = [ContextualChunk(Chunk("c1", "d1", "Revenue grew 3%."), "ACME's Q2 filing."),
          ContextualChunk(Chunk("c2", "d1", "Two plants opened."), "ACME's Q2 filing.")]


def test_the_core_searcher_takes_a_config_and_no_flat_keywords() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        searcher = HybridSearcher(CHUNKS, None, config=FusionConfig(top_k=1, rrf_k=60))
    assert searcher.config.top_k == 1 and searcher.rrf_k == 60
    with pytest.raises(TypeError, match="top_k"):  # the flat keywords of 0.1 were removed in 0.3
        HybridSearcher(CHUNKS, None, top_k=1)


def test_langchain_fields_are_the_configs_fields() -> None:
    pytest.importorskip("langchain_core")
    from contextual_retrieval_langchain import ContextualEnsembleRetriever
    from contextual_retrieval_langchain.ensemble import SETTING_NAMES

    own = {v: k for k, v in SETTING_NAMES.items()}
    names = [own.get(f, f) for f in FusionConfig.field_names()]
    fields = ContextualEnsembleRetriever.model_fields
    assert all(n in fields for n in names)
    for f in dataclasses.fields(FusionConfig):
        assert fields[own.get(f.name, f.name)].description == FusionConfig.field_doc(f.name)


def test_llamaindex_keywords_are_the_configs_fields() -> None:
    pytest.importorskip("llama_index.core")
    from llama_index.core.schema import TextNode

    from contextual_retrieval_llamaindex import ContextualBM25Retriever, HybridRetriever

    nodes = [TextNode(text="Revenue grew 3%.", id_="a"), TextNode(text="Revenue fell.", id_="b")]
    hybrid = HybridRetriever({"x": ContextualBM25Retriever(nodes), "y": ContextualBM25Retriever(nodes)},
                             similarity_top_k=1, rrf_k=60, prf_top=2)
    assert (hybrid.config.top_k, hybrid.config.rrf_k, hybrid.config.prf_top) == (1, 60, 2)
    with pytest.raises(TypeError, match="similarity_top_k"):
        HybridRetriever([ContextualBM25Retriever(nodes)], top_k=1)
    # every setting reads back under its LlamaIndex name (weights: one per retriever, as resolved)
    from contextual_retrieval_core.search.config import FusionConfig
    from contextual_retrieval_llamaindex.hybrid import SETTING_NAMES

    own = {core: name for name, core in SETTING_NAMES.items()}
    for name in FusionConfig.field_names():
        assert hasattr(hybrid, own.get(name, name) if name != "weights" else "weights"), name
