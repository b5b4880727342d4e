"""`ContextualBM25Retriever`: the core BM25 index over contextual nodes, as a LlamaIndex retriever."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks import CallbackManager
from llama_index.core.schema import BaseNode, Document, NodeWithScore, QueryBundle
from llama_index.core.storage.docstore.types import BaseDocumentStore
from llama_index.core.storage.docstore.utils import doc_to_json, json_to_doc
from llama_index.core.vector_stores.types import MetadataFilters
from llama_index.core.vector_stores.utils import build_metadata_filter_fn

from contextual_retrieval_core.checks import not_a_string, positive_int
from contextual_retrieval_core.chunking.tokenizer import Tokenizer
from contextual_retrieval_core.errors import InputError
from contextual_retrieval_core.search.bm25 import BM25Index, load_with_records, save_with_records
from contextual_retrieval_core.search.ranked import DEFAULT_TOP_K
from contextual_retrieval_llamaindex._convert import indexed_text

__all__ = ["ContextualBM25Retriever"]

class ContextualBM25Retriever(BaseRetriever):
    """BM25 over each node's ``get_content(MetadataMode.EMBED)``: context + chunk for the nodes of
    `ContextualNodeParser` (contextual BM25), the plain text for any other node.

    Uses the core `BM25Index` (a tokenizer for code and prose: identifiers split, stop words,
    stemming, CJK bigrams; Lucene idf, k1=1.2, b=0.75).

    Args:
        nodes: the nodes to index (or use `from_defaults(docstore=...)`).
        similarity_top_k: results per query (default 20; `HybridRetriever.from_defaults` asks for its
            `depth`, 150).
        filters: `MetadataFilters` applied to every query (node metadata, as vector stores do).
        tokenizer: a core `Tokenizer` (default settings otherwise).
        k1, b, method: BM25 parameters (see `BM25Index`).
        index: a prebuilt `BM25Index` over these nodes' ids (what `from_persist_dir` passes).

    Scores on the returned nodes are BM25 scores; nodes with score 0 are never returned.
    `persist(dir)` writes the index (JSON + .npy) and the nodes (JSON lines); no pickle.

    Example:
        >>> from llama_index.core.schema import TextNode
        >>> retriever = ContextualBM25Retriever([
        ...     TextNode(text="Revenue grew 3%.", id_="a"), TextNode(text="Two plants opened.", id_="b")])
        >>> [(r.node.node_id, round(r.score, 2)) for r in retriever.retrieve("revenue growth")]
        [('a', 0.32)]
    """

    def __init__(
        self,
        nodes: Sequence[BaseNode],
        *,
        similarity_top_k: int = DEFAULT_TOP_K,
        filters: MetadataFilters | None = None,
        tokenizer: Tokenizer | None = None,
        k1: float = 1.2,
        b: float = 0.75,
        method: str = "lucene",
        index: BM25Index | None = None,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
    ) -> None:
        positive_int("similarity_top_k", similarity_top_k)
        not_a_string("nodes", nodes, "nodes")
        nodes = list(nodes)
        if not nodes:
            raise InputError("no nodes to index: pass the nodes from your node parser (or a docstore)")
        self.nodes: dict[str, BaseNode] = {n.node_id: n for n in nodes}
        if len(self.nodes) != len(nodes):
            raise InputError(
                "duplicate node ids: every node needs a unique id (ContextualNodeParser gives each chunk one; "
                "for hand-made nodes pass id_=...)"
            )
        self.similarity_top_k = int(similarity_top_k)
        self.filters = filters
        self._mask: np.ndarray | None = None
        self._mask_for: MetadataFilters | None = None
        ids = list(self.nodes)
        if index is None:
            index = BM25Index(tokenizer, k1=k1, b=b, method=method).index(ids, [indexed_text(n) for n in nodes])  # type: ignore[arg-type]
        elif tokenizer is not None or (k1, b, method) != (1.2, 0.75, "lucene"):
            raise InputError("pass either index= or the BM25 settings (tokenizer, k1, b, method), not both")
        elif list(index.ids) != ids:
            raise InputError("the BM25Index was built over other node ids; rebuild it from these nodes")
        self.index = index
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    @classmethod
    def from_defaults(
        cls,
        nodes: Sequence[BaseNode] | None = None,
        docstore: BaseDocumentStore | None = None,
        index: Any = None,
        **kwargs: Any,
    ) -> ContextualBM25Retriever:
        """From nodes, a docstore, or a LlamaIndex index (its docstore). A docstore holding whole
        Documents (an `IngestionPipeline`'s, which keeps the pipeline's inputs) is refused: BM25
        would index whole documents instead of chunks; pass the pipeline's nodes."""
        if nodes is None:
            docstore = docstore or getattr(index, "docstore", None)
            if docstore is None:
                raise InputError("pass nodes=, docstore= or index= (an index whose docstore holds the nodes)")
            nodes = list(docstore.docs.values())
            whole = [n.node_id for n in nodes if isinstance(n, Document)]
            if whole:
                raise InputError(
                    f"the docstore holds {len(whole)} whole Documents (e.g. {whole[0]!r}), not chunk nodes: an "
                    "IngestionPipeline's docstore keeps its input documents. Pass the pipeline's output instead: "
                    "ContextualBM25Retriever.from_defaults(nodes=pipeline.run(documents=...)), or index=<your VectorStoreIndex>"
                )
        return cls(nodes, **kwargs)

    # -- retrieval ----------------------------------------------------------------------------------

    def _allowed(self) -> np.ndarray | None:
        """The filters as a mask over the indexed nodes, computed once per `filters` object."""
        filters = self.filters
        if filters is None or not filters.filters:
            return None
        if self._mask_for is not filters:
            keep = build_metadata_filter_fn(lambda node_id: self.nodes[node_id].metadata, filters)
            self._mask = self.index.mask(keep)
            self._mask_for = filters
        return self._mask

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        hits = self.index.search(query_bundle.query_str, self.similarity_top_k, allowed=self._allowed())
        return [NodeWithScore(node=self.nodes[i], score=score) for i, score in hits]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._retrieve(query_bundle)  # in-process and fast: no I/O to await

    # -- persistence --------------------------------------------------------------------------------

    def persist(self, path: str | Path) -> Path:
        """Write the index, its nodes and settings to directory `path` (JSON and .npy, no pickle)."""
        settings = {"similarity_top_k": self.similarity_top_k, "filters": self.filters.model_dump() if self.filters else None}
        nodes = (doc_to_json(self.nodes[i]) for i in self.index.ids)
        return save_with_records(path, self.index, nodes, settings)

    @classmethod
    def from_persist_dir(cls, path: str | Path, **kwargs: Any) -> ContextualBM25Retriever:
        """Load what `persist` wrote; keyword arguments override the saved settings."""
        index, records, settings = load_with_records(path)
        if settings.get("filters"):
            settings["filters"] = MetadataFilters.model_validate(settings["filters"])
        settings.update(kwargs)
        settings.setdefault("index", index)
        return cls([json_to_doc(r) for r in records], **settings)
