"""Semantic chunkers as the splitter inside the contextual parts, with the offline embedder:
LlamaIndex's `SemanticSplitterNodeParser` in `ContextualNodeParser` and langchain-experimental's
`SemanticChunker` in `ContextualDocumentTransformer`."""

from __future__ import annotations

import asyncio
import re
import warnings

import pytest

# two topics, each under its own heading; a semantic splitter should break between them
GUIDE = (
    "# Billing\n"
    "Invoices go out on the first of each month. Payment of an invoice is due within thirty days. "
    "Unpaid invoices accrue interest at one percent a month.\n\n"
    "# Deploy\n"
    "Run make deploy from the release branch. The pipeline builds the container image and pushes it "
    "to the registry.\nA rollback redeploys the previous image tag."
)
FAQ = "# Support\nSupport answers tickets within one working day. Urgent tickets page the on-call engineer."


def _words(text: str) -> str:
    return " ".join(text.split())


def _check_chunks(chunks: list[tuple[str, str, str]]) -> None:
    """(document, context, chunk text) per chunk: the chunks cover each document's words in order,
    no chunk mixes the billing and deploy topics, and each context names the chunk's section."""
    by_doc: dict[str, list[tuple[str, str]]] = {}
    for doc, context, text in chunks:
        by_doc.setdefault(doc, []).append((context, text))
    assert set(by_doc) == {"guide.md", "faq.md"}
    assert _words(" ".join(t for _, t in by_doc["guide.md"])) == _words(GUIDE)
    assert _words(" ".join(t for _, t in by_doc["faq.md"])) == _words(FAQ)
    assert len(by_doc["guide.md"]) >= 2
    for context, text in by_doc["guide.md"]:
        billing, deploy = "nvoice" in text, re.search(r"deploy|rollback|registry", text) is not None
        assert not (billing and deploy), text
        assert context.startswith("From guide.md")
        if billing:
            assert "section: Billing" in context, (context, text)
        if deploy:
            assert "section: Deploy" in context, (context, text)


def test_llamaindex_semantic_splitter_inside_the_contextual_node_parser():
    from llama_index.core import Document
    from llama_index.core.ingestion import IngestionPipeline
    from llama_index.core.node_parser import SemanticSplitterNodeParser
    from llama_index.core.schema import MetadataMode

    from contextual_retrieval_llamaindex import ContextualNodeParser, LocalMiniLMEmbedding

    splitter = SemanticSplitterNodeParser(embed_model=LocalMiniLMEmbedding(), buffer_size=1,
                                          breakpoint_percentile_threshold=60)
    parser = ContextualNodeParser(node_parser=splitter, show_progress=False)
    docs = [Document(text=GUIDE, id_="guide.md"), Document(text=FAQ, id_="faq.md")]
    nodes = IngestionPipeline(transformations=[parser]).run(documents=docs)
    _check_chunks([(n.ref_doc_id, n.metadata["context"], n.text) for n in nodes])
    for n in nodes:  # the embedded text is the context, a blank line, then the chunk
        assert n.get_content(metadata_mode=MetadataMode.EMBED) == f"{n.metadata['context']}\n\n{n.text}".strip()
    again = asyncio.run(parser.aget_nodes_from_documents(docs))
    assert [(n.node_id, n.text, n.metadata["context"]) for n in again] == [
        (n.node_id, n.text, n.metadata["context"]) for n in nodes]


def test_langchain_semantic_chunker_inside_the_contextual_document_transformer():
    from langchain_core.documents import Document

    with warnings.catch_warnings():  # the package announces its sunset on import
        warnings.simplefilter("ignore", DeprecationWarning)
        from langchain_experimental.text_splitter import SemanticChunker

    from contextual_retrieval_langchain import ContextualDocumentTransformer, LocalMiniLMEmbeddings

    chunker = SemanticChunker(LocalMiniLMEmbeddings(), breakpoint_threshold_type="percentile",
                              breakpoint_threshold_amount=60)
    transformer = ContextualDocumentTransformer(text_splitter=chunker, show_progress=False)
    docs = [Document(GUIDE, metadata={"source": "guide.md"}), Document(FAQ, metadata={"source": "faq.md"})]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = transformer.transform_documents(docs)
    # the chunker re-joins sentences with single spaces: such a chunk is found in its document
    assert any(d.metadata["original_content"] not in GUIDE for d in out)
    assert not [w for w in caught if "do not occur" in str(w.message)]
    _check_chunks([(d.metadata["parent_id"], d.metadata["context"], d.metadata["original_content"]) for d in out])
    for d in out:
        assert d.page_content == f"{d.metadata['context']}\n\n{d.metadata['original_content']}".strip()
    assert [d.metadata["chunk_index"] for d in out if d.metadata["parent_id"] == "guide.md"] == list(
        range(sum(d.metadata["parent_id"] == "guide.md" for d in out)))
    again = asyncio.run(transformer.atransform_documents(docs))
    assert [(d.page_content, d.metadata) for d in again] == [(d.page_content, d.metadata) for d in out]


@pytest.mark.parametrize("framework", ["llamaindex", "langchain"])
def test_semantic_chunks_then_late_chunking_gives_the_cores_vectors(framework):
    import numpy as np

    from contextual_retrieval_core.embeddings.late_chunking import LateChunkingEmbedder

    late = LateChunkingEmbedder()
    if framework == "llamaindex":
        from llama_index.core import Document
        from llama_index.core.ingestion import IngestionPipeline
        from llama_index.core.node_parser import SemanticSplitterNodeParser
        from llama_index.core.schema import MetadataMode

        from contextual_retrieval_llamaindex import ContextualNodeParser, LateChunkingEmbedding, LocalMiniLMEmbedding

        splitter = SemanticSplitterNodeParser(embed_model=LocalMiniLMEmbedding(), breakpoint_percentile_threshold=60)
        nodes = IngestionPipeline(transformations=[
            ContextualNodeParser(node_parser=splitter, show_progress=False), LateChunkingEmbedding()]).run(
            documents=[Document(text=GUIDE, id_="guide.md")])
        got = np.array([n.embedding for n in nodes])
        texts, groups = [n.get_content(metadata_mode=MetadataMode.EMBED) for n in nodes], [n.ref_doc_id for n in nodes]
    else:
        from langchain_core.documents import Document

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            from langchain_experimental.text_splitter import SemanticChunker

        from contextual_retrieval_langchain import ContextualDocumentTransformer, LateChunkingEmbeddings, LocalMiniLMEmbeddings

        chunker = SemanticChunker(LocalMiniLMEmbeddings(), breakpoint_threshold_type="percentile", breakpoint_threshold_amount=60)
        docs = ContextualDocumentTransformer(text_splitter=chunker, show_progress=False).transform_documents(
            [Document(GUIDE, metadata={"source": "guide.md"})])
        got = np.array(LateChunkingEmbeddings().embed_grouped_documents(docs))
        texts, groups = [d.page_content for d in docs], [d.metadata["parent_id"] for d in docs]
    assert len(texts) >= 2
    np.testing.assert_allclose(got, late.embed_grouped(texts, groups), atol=1e-6)


def test_a_chunk_that_differs_from_its_document_only_in_whitespace_is_not_reported():
    from contextual_retrieval_core.contextualize._inputs import validate_inputs
    from contextual_retrieval_core.types import Chunk, Document

    doc = Document("guide.md", "Invoices go out monthly.\nPayment is due in thirty days.\n\nDeploy with make.")
    chunks = [Chunk("a", "guide.md", "Invoices go out monthly. Payment is due in thirty days.", 0),
              Chunk("b", "guide.md", "Deploy with make.", 1),
              Chunk("c", "guide.md", "Deploy with  cmake.", 2)]
    assert validate_inputs([doc], chunks)[2] == ["c"]
