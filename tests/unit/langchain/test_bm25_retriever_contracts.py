"""The BM25 retrievers against the frameworks' expectations: LlamaIndex's `from_defaults(docstore=...)`
refuses an IngestionPipeline's docstore (whole Documents, not chunks) with the fix; both retrievers
pickle and deep-copy like the stock ones."""

from __future__ import annotations

import copy
import pickle

import pytest
from langchain_core.documents import Document as LCDocument
from llama_index.core import Document
from llama_index.core.ingestion import DocstoreStrategy, IngestionPipeline
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.storage.docstore import SimpleDocumentStore

from contextual_retrieval_core.app.demo_corpus import DEMO_DOCUMENTS
from contextual_retrieval_langchain import ContextualBM25Retriever as LCBM25
from contextual_retrieval_llamaindex import ContextualBM25Retriever, ContextualNodeParser


def test_a_pipeline_docstore_of_whole_documents_is_refused_with_the_fix():
    pipeline = IngestionPipeline(
        transformations=[ContextualNodeParser(node_parser=SentenceSplitter(chunk_size=64, chunk_overlap=0), show_progress=False)],
        docstore=SimpleDocumentStore(),
        docstore_strategy=DocstoreStrategy.DUPLICATES_ONLY,
    )
    nodes = pipeline.run(documents=[Document(text=t, id_=p) for p, t in DEMO_DOCUMENTS[:3]])
    assert len(pipeline.docstore.docs) == 3 < len(nodes)  # the pipeline's docstore: its inputs
    with pytest.raises(ValueError, match=r"whole Documents.*from_defaults\(nodes=pipeline.run"):
        ContextualBM25Retriever.from_defaults(docstore=pipeline.docstore)
    retriever = ContextualBM25Retriever.from_defaults(nodes=nodes)
    assert set(retriever.nodes) == {n.node_id for n in nodes}
    chunks = SimpleDocumentStore()
    chunks.add_documents(nodes)  # a docstore of chunk nodes is fine
    assert set(ContextualBM25Retriever.from_defaults(docstore=chunks).nodes) == set(retriever.nodes)


@pytest.mark.parametrize("clone", [lambda r: pickle.loads(pickle.dumps(r)), copy.deepcopy], ids=["pickle", "deepcopy"])
def test_langchain_bm25_pickles_like_the_stock_one(clone):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # langchain-community announces its sunset
        from langchain_community.retrievers import BM25Retriever

    docs = [LCDocument(t, id=p, metadata={"source": p}) for p, t in DEMO_DOCUMENTS]
    stock = BM25Retriever.from_documents(docs)
    assert clone(stock).invoke("revenue")  # the stock retriever pickles...
    ours = LCBM25.from_documents(docs, k=5)
    again = clone(ours)  # ...and so does ours, answering the same
    for query in ("revenue grew", "DiffExecutor run_target", "holidays in Berlin"):
        assert [(d.id, d.metadata["bm25_score"]) for d in again.invoke(query)] == [
            (d.id, d.metadata["bm25_score"]) for d in ours.invoke(query)
        ]
    assert again.k == 5


def test_llamaindex_bm25_pickles():
    nodes = ContextualNodeParser(show_progress=False).get_nodes_from_documents(
        [Document(text=t, id_=p) for p, t in DEMO_DOCUMENTS[:3]]
    )
    ours = ContextualBM25Retriever(nodes, similarity_top_k=4)
    again = pickle.loads(pickle.dumps(ours))
    assert [(r.node.node_id, r.score) for r in again.retrieve("revenue")] == [(r.node.node_id, r.score) for r in ours.retrieve("revenue")]
