"""Context pruning as LlamaIndex node postprocessors: `ContextPruningPostprocessor` (the core's
`ContextPruner`) and `LLMCompressorPostprocessor` (the core's `LLMContextCompressor`).

Both return new nodes (copies whose text is the kept source text; the context stays in the
metadata, so `MetadataMode.LLM` still shows context and source apart) and never change the
caller's nodes. A copy carries ``metadata["pruned_spans"]``: [start, end, start_line, end_line]
per kept piece of the original text (hidden from the LLM and the embedder). Nodes without text
(images, ...) pass through untouched, in their place.
"""

from __future__ import annotations

from typing import Any

from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle, TextNode

from contextual_retrieval_core.errors import InputError
from contextual_retrieval_core.pruning import PRUNED_SPANS_KEY, ContextPruner, LLMContextCompressor, PruningResult, kind_for_path
from contextual_retrieval_core.types import CONTEXT_KEY, Chunk, ContextualChunk

__all__ = ["ContextPruningPostprocessor", "LLMCompressorPostprocessor"]

_PATH_KEYS = ("file_path", "file_name", "path", "source")


def _split(nodes: list[NodeWithScore]) -> tuple[list[int], list[ContextualChunk], list]:
    """Positions of the text nodes, their core chunks, and each chunk's text kind."""
    positions, chunks, kinds = [], [], []
    for i, n in enumerate(nodes):
        node = n.node
        if not isinstance(node, TextNode):
            continue
        text = node.get_content(metadata_mode=MetadataMode.NONE)
        if not isinstance(text, str) or not text.strip():
            continue
        path = next((str(node.metadata[k]) for k in _PATH_KEYS if node.metadata.get(k)), None)
        document_id = node.ref_doc_id or path or node.node_id
        context = node.metadata.get(CONTEXT_KEY) or ""
        positions.append(i)
        chunks.append(ContextualChunk(Chunk(node.node_id, str(document_id), text), str(context)))
        kinds.append(kind_for_path(path or str(document_id)))
    return positions, chunks, kinds


def _rebuild(nodes: list[NodeWithScore], positions: list[int], result: PruningResult) -> list[NodeWithScore]:
    """New nodes: pruned copies of the text nodes that kept something, in rank order, with the
    nodes that have no text left where they were."""
    by_position = {positions[c.rank]: c for c in result.chunks}
    text_positions = set(positions)
    out = []
    for i, n in enumerate(nodes):
        if i not in text_positions:
            out.append(n)  # not text: nothing to prune
            continue
        pruned = by_position.get(i)
        if pruned is None:
            continue
        node = n.node.model_copy(deep=True)
        node.set_content(pruned.text)
        node.metadata[PRUNED_SPANS_KEY] = pruned.spans
        for attr in ("excluded_embed_metadata_keys", "excluded_llm_metadata_keys"):
            keys = list(getattr(node, attr))
            if PRUNED_SPANS_KEY not in keys:
                setattr(node, attr, keys + [PRUNED_SPANS_KEY])
        out.append(NodeWithScore(node=node, score=n.score))
    return out


def _query(query_bundle: QueryBundle | None) -> str:
    if query_bundle is None:
        raise InputError("pruning needs the query: pass query_bundle= or query_str=")
    return query_bundle.query_str


class ContextPruningPostprocessor(BaseNodePostprocessor):
    """Keeps the sentences / statements of the retrieved nodes that answer the query.

    Put it last, after retrieval and reranking:
    ``RetrieverQueryEngine.from_args(retriever, node_postprocessors=[ContextualRerank(...), ContextPruningPostprocessor()])``.

    Args:
        embedder: a core `Embedder` (default: the offline `LocalMiniLMEmbedder`).
        budget: tokens of source text to keep; None for `budget_share` of the input (default 0.3).
        pruner: a ready core `ContextPruner` (then the other settings are ignored).
        **settings: any other `ContextPruner` setting (lam, alpha, neighbours, min_tokens, ...).

    Example:
        >>> from llama_index.core.schema import NodeWithScore, TextNode
        >>> nodes = [NodeWithScore(node=TextNode(text="Revenue grew 3% to $412 million. The office moved. "
        ...     "Lunch was at noon. Parking is free."), score=1.0)]
        >>> out = ContextPruningPostprocessor(budget=10, min_tokens=1).postprocess_nodes(nodes, query_str="How much did revenue grow?")
        >>> out[0].node.text
        'Revenue grew 3% to $412 million.'
    """

    budget: int | None = Field(default=None, description="Tokens of source text to keep (None: budget_share).")
    budget_share: float = Field(default=0.3, description="Share of the input's tokens to keep when budget is None.")
    _pruner: ContextPruner = PrivateAttr()
    last_report: Any | None = Field(default=None, exclude=True, description="The last call's PruningReport.")

    def __init__(self, embedder: Any = None, *, budget: int | None = None, budget_share: float = 0.3,
                 pruner: ContextPruner | None = None, **settings: Any) -> None:
        super().__init__(budget=budget, budget_share=budget_share)
        if pruner is None:
            if embedder is None:
                from contextual_retrieval_core.embeddings.minilm import LocalMiniLMEmbedder

                embedder = LocalMiniLMEmbedder()
            pruner = ContextPruner(embedder, budget=budget, budget_share=budget_share, **settings)
        self._pruner = pruner

    @classmethod
    def class_name(cls) -> str:
        return "ContextPruningPostprocessor"

    @property
    def pruner(self) -> ContextPruner:
        return self._pruner

    def prepare(self, nodes: list[Any]) -> int:
        """Compute ahead of any query what pruning `nodes` (nodes or NodeWithScore) needs: their
        units' vectors, terms and token counts (`ContextPruner.prepare`), at ingestion, say.
        Returns the texts embedded."""
        wrapped = [n if isinstance(n, NodeWithScore) else NodeWithScore(node=n, score=None) for n in nodes]
        _, chunks, kinds = _split(wrapped)
        return self._pruner.prepare(chunks, kinds=kinds)

    def _postprocess_nodes(self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None) -> list[NodeWithScore]:
        query = _query(query_bundle)
        positions, chunks, kinds = _split(nodes)
        result = self._pruner.prune(query, chunks, kinds=kinds)
        self.last_report = result.report
        return _rebuild(nodes, positions, result)

    async def _apostprocess_nodes(self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None) -> list[NodeWithScore]:
        query = _query(query_bundle)
        positions, chunks, kinds = _split(nodes)
        result = await self._pruner.aprune(query, chunks, kinds=kinds)
        self.last_report = result.report
        return _rebuild(nodes, positions, result)


class LLMCompressorPostprocessor(BaseNodePostprocessor):
    """An LLM (Claude `claude-haiku-4-5` by default, or any callable) extracts the passages that
    answer; only passages found in the retrieved nodes are kept (see `LLMContextCompressor`).

    Args:
        compressor: a ready core `LLMContextCompressor`; default: one built from `llm`, `model`
            and `client` / `async_client` (ANTHROPIC_API_KEY when no client and no llm).

    Example:
        >>> from llama_index.core.schema import NodeWithScore, TextNode
        >>> post = LLMCompressorPostprocessor(llm=lambda prompt: "<passage>Revenue grew 3%.</passage>")
        >>> nodes = [NodeWithScore(node=TextNode(text="Revenue grew 3%. Staff grew."), score=1.0)]
        >>> [n.node.text for n in post.postprocess_nodes(nodes, query_str="revenue?")]
        ['Revenue grew 3%.']
    """

    model: str = Field(default="claude-haiku-4-5", description="The Claude model.")
    _compressor: LLMContextCompressor = PrivateAttr()
    last_report: Any | None = Field(default=None, exclude=True, description="The last call's PruningReport.")

    def __init__(self, compressor: LLMContextCompressor | None = None, *, llm: Any = None, model: str = "claude-haiku-4-5",
                 client: Any = None, async_client: Any = None, **settings: Any) -> None:
        compressor = compressor or LLMContextCompressor(llm, model=model, client=client, async_client=async_client, **settings)
        super().__init__(model=compressor.model)
        self._compressor = compressor

    @classmethod
    def class_name(cls) -> str:
        return "LLMCompressorPostprocessor"

    def _postprocess_nodes(self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None) -> list[NodeWithScore]:
        positions, chunks, _ = _split(nodes)
        result = self._compressor.compress(_query(query_bundle), chunks)
        self.last_report = result.report
        return _rebuild(nodes, positions, result)

    async def _apostprocess_nodes(self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None) -> list[NodeWithScore]:
        positions, chunks, _ = _split(nodes)
        result = await self._compressor.acompress(_query(query_bundle), chunks)
        self.last_report = result.report
        return _rebuild(nodes, positions, result)
