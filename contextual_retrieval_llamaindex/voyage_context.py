"""`VoyageContextualizedEmbedding`: Voyage's contextualized chunk embeddings as a LlamaIndex embedding.

LlamaIndex embeds nodes through ``get_text_embedding_batch(texts)``: a flat list with no document
grouping, so there each text is embedded as a document of its own. To give every chunk its
document's context, embed the nodes first with `embed_nodes(nodes)` (chunks grouped by
``node.ref_doc_id``, in node order, through the core's `VoyageContextualizedEmbedder.embed_grouped`);
`VectorStoreIndex(nodes, embed_model=...)` keeps an embedding already set on a node. Queries go
out with ``input_type="query"``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index.core.schema import BaseNode, MetadataMode

from contextual_retrieval_core.embeddings.voyage_context import VoyageContextualizedEmbedder
from contextual_retrieval_llamaindex.embeddings import CoreEmbedding

__all__ = ["VoyageContextualizedEmbedding"]


class VoyageContextualizedEmbedding(CoreEmbedding):
    """A `CoreEmbedding` over `VoyageContextualizedEmbedder` (default model "voyage-context-3").

    Args:
        model_name: the contextualized embedding model.
        client / async_client: ready voyageai clients (default: from VOYAGE_API_KEY).
        **options: the core embedder's options (output_dimension, output_dtype, batching=VoyageBatching(...), ...).
    """

    def __init__(self, model_name: str = "voyage-context-3", *, client: Any = None, async_client: Any = None, **options: Any) -> None:
        base = {k: options.pop(k) for k in ("embed_batch_size", "callback_manager") if k in options}
        super().__init__(
            VoyageContextualizedEmbedder(model_name, client=client, async_client=async_client, **options),
            model_name=model_name, **base,
        )

    @classmethod
    def class_name(cls) -> str:
        return "VoyageContextualizedEmbedding"

    def embed_nodes(self, nodes: Sequence[BaseNode]) -> list[BaseNode]:
        """Set ``node.embedding`` on every node, chunks of one source document embedded together
        (grouped by ``ref_doc_id``, else the node's own id), in the given order; returns the nodes."""
        nodes = list(nodes)
        texts = [n.get_content(metadata_mode=MetadataMode.EMBED) for n in nodes]
        groups = [n.ref_doc_id or n.node_id for n in nodes]
        vectors = self.embedder.embed_grouped(texts, groups)  # type: ignore[attr-defined]
        for node, vector in zip(nodes, vectors):
            node.embedding = [float(x) for x in vector]
        return nodes
