"""`LateChunkingEmbedding`: late-chunked node vectors in an `IngestionPipeline`, offline.

A LlamaIndex embedding is also a transformation: in ``IngestionPipeline(transformations=[...,
embed_model])`` it is called on the nodes and sets ``node.embedding``. This one embeds the nodes
of one source document together (grouped by ``node.ref_doc_id``, else the node's own id, each
group in node order) through the core's `LateChunkingEmbedder`, so every node's vector is pooled
from token embeddings that saw its neighbours. The text of a node is its
``get_content(MetadataMode.EMBED)``, which for `ContextualNodeParser` nodes holds the context
before the chunk. Queries, and texts embedded one by one (``get_text_embedding``), get ordinary
MiniLM vectors, so the same object serves as the index's ``embed_model``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index.core.bridge.pydantic import Field
from llama_index.core.callbacks import CBEventType, EventPayload
from llama_index.core.schema import BaseNode, MetadataMode

from contextual_retrieval_core.embeddings.late_chunking import MAX_POSITIONS, LateChunkingEmbedder
from contextual_retrieval_llamaindex.embeddings import CoreEmbedding

__all__ = ["LateChunkingEmbedding"]


class LateChunkingEmbedding(CoreEmbedding):
    """The core `LateChunkingEmbedder` as a LlamaIndex embedding and ingestion transformation.

    Args:
        window: positions per macro-window (at most 512, the model's limit).
        overlap: tokens shared by consecutive macro-windows (default: a quarter of `window`).

    Example:
        >>> from llama_index.core import Document
        >>> from llama_index.core.ingestion import IngestionPipeline
        >>> from llama_index.core.node_parser import SentenceSplitter
        >>> pipeline = IngestionPipeline(transformations=[
        ...     SentenceSplitter(chunk_size=50, chunk_overlap=0), LateChunkingEmbedding()])
        >>> text = " ".join(f"In quarter {q} ACME sold {q * 7} anvils to road runners." for q in range(1, 9))
        >>> nodes = pipeline.run(documents=[Document(text=text, id_="acme")])
        >>> len(nodes) > 1, len(nodes[0].embedding)
        (True, 384)
    """

    window: int = Field(default=MAX_POSITIONS, description="positions per macro-window (at most 512)")
    overlap: int | None = Field(default=None, description="tokens shared by consecutive macro-windows")

    def __init__(self, window: int = MAX_POSITIONS, overlap: int | None = None, **kwargs: Any) -> None:
        embedder = LateChunkingEmbedder(window=window, overlap=overlap)
        kwargs.pop("model_name", None)
        super().__init__(embedder, window=window, overlap=embedder.overlap, **kwargs)

    @classmethod
    def class_name(cls) -> str:
        return "LateChunkingEmbedding"

    def __call__(self, nodes: Sequence[BaseNode], **kwargs: Any) -> Sequence[BaseNode]:
        """Set ``node.embedding`` on every node, nodes of one source document late-chunked
        together (one EMBEDDING callback event per call); returns the nodes."""
        texts, groups = _texts_and_groups(nodes)
        with self.callback_manager.event(CBEventType.EMBEDDING, payload={EventPayload.SERIALIZED: self.to_dict()}) as event:
            vectors = _lists(self.embedder.embed_grouped(texts, groups))  # type: ignore[attr-defined]
            event.on_end(payload={EventPayload.CHUNKS: texts, EventPayload.EMBEDDINGS: vectors})
        return _set(nodes, vectors)

    async def acall(self, nodes: Sequence[BaseNode], **kwargs: Any) -> Sequence[BaseNode]:
        texts, groups = _texts_and_groups(nodes)
        with self.callback_manager.event(CBEventType.EMBEDDING, payload={EventPayload.SERIALIZED: self.to_dict()}) as event:
            vectors = _lists(await self.embedder.aembed_grouped(texts, groups))  # type: ignore[attr-defined]
            event.on_end(payload={EventPayload.CHUNKS: texts, EventPayload.EMBEDDINGS: vectors})
        return _set(nodes, vectors)


def _texts_and_groups(nodes: Sequence[BaseNode]) -> tuple[list[str], list[str]]:
    return ([n.get_content(metadata_mode=MetadataMode.EMBED) for n in nodes],
            [n.ref_doc_id or n.node_id for n in nodes])


def _lists(vectors: Any) -> list[list[float]]:
    return [[float(x) for x in vector] for vector in vectors]


def _set(nodes: Sequence[BaseNode], vectors: list[list[float]]) -> Sequence[BaseNode]:
    for node, vector in zip(nodes, vectors):
        node.embedding = vector
    return nodes
