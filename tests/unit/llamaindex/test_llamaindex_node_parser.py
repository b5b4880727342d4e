"""ContextualNodeParser against LlamaIndex's own contracts: relationships a HierarchicalNodeParser
made survive re-identification (AutoMergingRetriever works over them), node text follows
LlamaIndex's metadata modes, `position` / `separator` go through the core's composition as in
LangChain, `last_report` describes every run."""

from __future__ import annotations

import pytest
from langchain_core.documents import Document as LCDocument
from llama_index.core import Document, StorageContext, VectorStoreIndex
from llama_index.core.node_parser import HierarchicalNodeParser, SentenceSplitter, get_leaf_nodes
from llama_index.core.retrievers import AutoMergingRetriever
from llama_index.core.schema import MetadataMode, NodeRelationship, TextNode

from contextual_retrieval_core.app.demo_corpus import DEMO_DOCUMENTS
from contextual_retrieval_core.types import Chunk, ContextualChunk
from contextual_retrieval_langchain import ContextualDocumentTransformer
from contextual_retrieval_llamaindex import ContextualBM25Retriever, ContextualNodeParser, LocalMiniLMEmbedding


def demo_docs(**extra) -> list[Document]:
    return [Document(text=text, id_=path, **extra) for path, text in DEMO_DOCUMENTS[:4]]


# -- relationships --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def hierarchy() -> list[TextNode]:
    inner = HierarchicalNodeParser.from_defaults(chunk_sizes=[256, 64], chunk_overlap=0)
    return ContextualNodeParser(node_parser=inner, show_progress=False).get_nodes_from_documents(demo_docs())


def test_every_relationship_points_at_a_returned_node(hierarchy):
    ids = {n.node_id for n in hierarchy}
    kinds = set()
    for node in hierarchy:
        for rel, info in node.relationships.items():
            if rel == NodeRelationship.SOURCE:
                assert info.node_id == node.ref_doc_id
                continue
            kinds.add(rel)
            for target in info if isinstance(info, list) else [info]:
                assert target.node_id in ids, (rel, target.node_id)
    assert {NodeRelationship.PARENT, NodeRelationship.CHILD} <= kinds
    by_id = {n.node_id: n for n in hierarchy}
    for node in hierarchy:  # parent and child links agree with each other
        parent = node.relationships.get(NodeRelationship.PARENT)
        if parent is not None:
            assert node.node_id in [c.node_id for c in by_id[parent.node_id].relationships[NodeRelationship.CHILD]]


def test_auto_merging_retriever_merges_contextual_leaves_into_their_parents(hierarchy):
    storage = StorageContext.from_defaults()
    storage.docstore.add_documents(hierarchy)
    leaves = get_leaf_nodes(hierarchy)
    assert 0 < len(leaves) < len(hierarchy)
    index = VectorStoreIndex(leaves, storage_context=storage, embed_model=LocalMiniLMEmbedding())
    retriever = AutoMergingRetriever(index.as_retriever(similarity_top_k=12), storage, simple_ratio_thresh=0.0)
    results = retriever.retrieve("How did ACME revenue change in the second quarter?")
    leaf_ids = {n.node_id for n in leaves}
    merged = [r.node for r in results if r.node.node_id not in leaf_ids]
    assert merged, "no leaf was merged into its parent"
    for node in merged:  # a parent: it has children, and its own context
        assert node.relationships[NodeRelationship.CHILD] and node.metadata["context"]


# -- metadata modes, position and separator ----------------------------------------------------------------


def test_document_metadata_reaches_embed_and_llm_text_by_llamaindex_rules():
    doc = Document(
        text="# Q2\n\nRevenue grew by 3% over the previous quarter.",
        id_="acme-q2.md",
        metadata={"company": "ACME", "year": 2023, "title": "Quarterly report", "internal_ref": "X-17"},
        excluded_embed_metadata_keys=["internal_ref"],
        excluded_llm_metadata_keys=["internal_ref", "year"],
    )
    node = ContextualNodeParser(show_progress=False).get_nodes_from_documents([doc])[0]
    context = node.metadata["context"]
    embed = node.get_content(MetadataMode.EMBED)
    assert embed == f"company: ACME\nyear: 2023\ntitle: Quarterly report\n\n{context}\n\n{node.text}"
    llm = node.get_content(MetadataMode.LLM)
    assert llm.startswith("company: ACME\ntitle: Quarterly report\n\n[Context:") and llm.endswith(node.text)
    assert "X-17" not in embed + llm and "2023" not in llm
    assert node.metadata["internal_ref"] == "X-17"  # still there for filters
    # BM25 indexes the same EMBED text: a query on the document's metadata alone finds the chunk
    hits = ContextualBM25Retriever([node]).retrieve("ACME quarterly report")
    assert [h.node.node_id for h in hits] == [node.node_id]
    assert ContextualBM25Retriever([node]).retrieve("X-17") == []


def test_a_custom_metadata_template_is_honoured():
    doc = Document(
        text="Revenue grew by 3%.", id_="a", metadata={"company": "ACME"}, metadata_template="<{key}={value}>"
    )
    node = ContextualNodeParser(show_progress=False).get_nodes_from_documents([doc])[0]
    assert node.get_content(MetadataMode.EMBED).startswith("<company=ACME>\n\n")


@pytest.mark.parametrize("position", ["before", "after", "none"])
@pytest.mark.parametrize("separator", ["\n\n", " | ", "\n{x}\n"])
def test_position_and_separator_compose_as_the_core_and_langchain(position, separator):
    splitter = SentenceSplitter(chunk_size=64, chunk_overlap=0)
    nodes = ContextualNodeParser(
        node_parser=splitter, position=position, separator=separator, show_progress=False
    ).get_nodes_from_documents(demo_docs())
    assert any(n.metadata["context"] for n in nodes)
    for node in nodes:
        expected = ContextualChunk(Chunk(node.node_id, node.ref_doc_id, node.text), node.metadata["context"], position, separator)
        assert node.get_content(MetadataMode.EMBED) == expected.indexed_text
        assert node.get_content(MetadataMode.NONE) == node.text
        assert node.metadata["context"] in node.get_content(MetadataMode.LLM)
    # LangChain, given the same chunks and parents, indexes the same text under the same ids
    chunks = [LCDocument(page_content=n.text, metadata={"source": n.ref_doc_id}) for n in nodes]
    docs = ContextualDocumentTransformer(position=position, separator=separator, show_progress=False).transform_documents(
        chunks, parents=dict(DEMO_DOCUMENTS[:4])
    )
    assert [(d.id, d.page_content) for d in docs] == [(n.node_id, n.get_content(MetadataMode.EMBED)) for n in nodes]


def test_metadata_with_position_after_follows_the_context():
    doc = Document(text="# Q2\n\nRevenue grew by 3%.", id_="q2.md", metadata={"company": "ACME"})
    node = ContextualNodeParser(position="after", show_progress=False).get_nodes_from_documents([doc])[0]
    context = node.metadata["context"]
    assert node.get_content(MetadataMode.EMBED) == f"{node.text}\n\n{context}\n\ncompany: ACME"
    assert node.get_content(MetadataMode.LLM).startswith(node.text + "\n\n[Context: generated to situate the source text above")


# -- options and reports ---------------------------------------------------------------------------------


def test_both_ingestion_parts_take_every_setting_from_contextualize_config():
    """One home for the ingestion settings: each part has a field per `ContextualizeConfig` setting
    with the config's default and description, and a run's `Contextualizer` gets exactly the
    values the fields hold (given at construction or set afterwards)."""
    import dataclasses

    from contextual_retrieval_core.contextualize.config import ContextualizeConfig

    for part in (ContextualNodeParser, ContextualDocumentTransformer):
        for f in dataclasses.fields(ContextualizeConfig):
            field = part.model_fields[f.name]
            assert field.default == f.default, (part.__name__, f.name)  # the defaults, not only the names
            assert field.description == ContextualizeConfig.field_doc(f.name)
    assert ContextualNodeParser().contextualize_config == ContextualizeConfig()
    assert ContextualDocumentTransformer().contextualize_config == ContextualizeConfig()
    values = {"concurrency": 3, "mode": "realtime", "grouped": False, "position": "after", "separator": " | ", "show_progress": False,
              "give_up_after_rate_limited_s": 30.0, "retry_backoff_s": 0.5, "claim_lease_s": 30.0, "claim_renew_s": 5.0, "claim_poll_s": 0.5,
              "structural_header": False, "batch_poll_interval": 2.0, "batch_max_requests": 10, "batch_max_bytes": 1000}
    parser = ContextualNodeParser(**values)
    transformer = ContextualDocumentTransformer(**values)
    assert parser._contextualizer.config == transformer.contextualizer.config == ContextualizeConfig(**values)
    transformer.concurrency = 5  # a field set later counts
    assert transformer.contextualizer.config.concurrency == 5
    with pytest.raises(ValueError, match="claim_renew_s"):
        ContextualDocumentTransformer(claim_lease_s=1.0, claim_renew_s=2.0)  # the core's check, through the field
    with pytest.raises(ValueError, match="concurrency must be a positive integer"):
        ContextualNodeParser(concurrency=0)


def test_last_report_describes_the_last_run_even_with_nothing_to_do():
    parser = ContextualNodeParser(show_progress=False)
    assert parser.last_report is None
    parser.get_nodes_from_documents(demo_docs())
    assert parser.last_report.chunks > 0
    assert parser.get_nodes_from_documents([]) == []
    assert parser.last_report is not None and (parser.last_report.documents, parser.last_report.chunks) == (0, 0)
    assert parser.get_nodes_from_documents([Document(text="   ", id_="blank")]) == []
    assert parser.last_report.chunks == 0 and parser.last_report.generated == 0
