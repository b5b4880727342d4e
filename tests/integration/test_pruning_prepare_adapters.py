"""Both frameworks' pruning parts prepare their documents / nodes ahead of the query: nothing is
embedded at query time but the query, and the pruned text is the same."""

from __future__ import annotations

from langchain_core.documents import Document as LCDocument
from llama_index.core.schema import NodeWithScore, TextNode

from contextual_retrieval_core.pruning import ContextPruner, PruningConfig
from contextual_retrieval_langchain.pruning import ContextPruningCompressor
from contextual_retrieval_llamaindex.pruning import ContextPruningPostprocessor
from tests.fakes.counting_embedder import CountingEmbedder

TEXTS = [
    ("reports/acme.md", "ACME reports its results for the quarter. The company's revenue grew by 3% over the previous "
     "quarter, to $412 million. Headcount ended the quarter at 1,200 employees."),
    ("handbook/austin.md", "Employees are entitled to 12 weeks of fully paid leave. The standard working week is 40 hours."),
    ("fuzzer/diff.py", "class DiffExecutor:\n    def run_target(self, input):\n        return self.primary.run(input)\n"),
]
QUERY = "How much did ACME's revenue grow?"


def test_langchain_compressor_prepares_documents(offline_embedder):
    docs = [LCDocument(text, metadata={"source": path}, id=str(i)) for i, (path, text) in enumerate(TEXTS)]
    counting = CountingEmbedder(offline_embedder)
    compressor = ContextPruningCompressor(pruner=ContextPruner(counting, config=PruningConfig(budget=20, min_tokens=1)))
    assert compressor.prepare(docs) > len(docs)
    counting.documents.clear()
    out = compressor.compress_documents(docs, QUERY)
    assert counting.documents == [] and counting.queries == [QUERY]
    cold = ContextPruningCompressor(pruner=ContextPruner(offline_embedder, config=PruningConfig(budget=20, min_tokens=1))).compress_documents(docs, QUERY)
    assert [d.page_content for d in out] == [d.page_content for d in cold]


def test_llamaindex_postprocessor_prepares_nodes(offline_embedder):
    nodes = [TextNode(id_=str(i), text=text, metadata={"file_path": path}) for i, (path, text) in enumerate(TEXTS)]
    counting = CountingEmbedder(offline_embedder)
    post = ContextPruningPostprocessor(pruner=ContextPruner(counting, config=PruningConfig(budget=20, min_tokens=1)))
    assert post.prepare(nodes) > len(nodes)
    counting.documents.clear()
    out = post.postprocess_nodes([NodeWithScore(node=n, score=1.0) for n in nodes], query_str=QUERY)
    assert counting.documents == [] and counting.queries == [QUERY]
    cold = ContextPruningPostprocessor(pruner=ContextPruner(offline_embedder, config=PruningConfig(budget=20, min_tokens=1)))
    expected = cold.postprocess_nodes([NodeWithScore(node=n, score=1.0) for n in nodes], query_str=QUERY)
    assert [n.node.get_content() for n in out] == [n.node.get_content() for n in expected]
