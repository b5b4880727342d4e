"""Context pruning as LlamaIndex node postprocessors: `ContextPruningPostprocessor` (the core's
`ContextPruner`) and `LLMCompressorPostprocessor` (the core's `LLMContextCompressor`).

Both return new nodes (copies whose text is the kept source text; the context stays in the
metadata, so `MetadataMode.LLM` still shows context and source apart) and never change the
caller's nodes. A copy carries ``metadata["pruned_spans"]``: [start, end, start_line, end_line]
per kept piece of the original text (hidden from the LLM and the embedder). Nodes without text
(images, ...) pass through untouched, in their place.

Every `PruningConfig` setting is a pydantic field of `ContextPruningPostprocessor`, with the
config's name, type, default and description; the values are validated by the core (the pruner is
built from `PruningConfig.of(postprocessor)`), so a setting means the same and fails the same way
as in a core `ContextPruner`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle, TextNode

from contextual_retrieval_core.errors import InputError, InputTypeError
from contextual_retrieval_core.pruning import (
    PRUNED_SPANS_KEY,
    ContextPruner,
    LLMContextCompressor,
    PruningConfig,
    PruningResult,
    kind_for_path,
)
from contextual_retrieval_core.types import CONTEXT_KEY, Chunk, ContextualChunk
from contextual_retrieval_llamaindex._ingest_fields import with_config_fields

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


class _PruningChecked(BaseNodePostprocessor):
    @property
    def pruning_config(self) -> PruningConfig:
        """The `PruningConfig` the pruning fields hold."""
        return PruningConfig.of(self)


if TYPE_CHECKING:  # the generated fields are read by name; to a type checker this is the base
    _PruningFields = _PruningChecked
else:
    _PruningFields = with_config_fields(_PruningChecked, PruningConfig, "_WithPruningFields")


class ContextPruningPostprocessor(_PruningFields):
    """Keeps the sentences / statements of the retrieved nodes that answer the query.

    Put it last, after retrieval and reranking:
    ``RetrieverQueryEngine.from_args(retriever, node_postprocessors=[ContextualRerank(...), ContextPruningPostprocessor()])``.

    Args:
        embedder: a core `Embedder` (default: the offline `LocalMiniLMEmbedder`).
        pruner: a ready core `ContextPruner` (then the pruning fields hold its settings, and
            giving them as well is an error).
        **settings: any `PruningConfig` setting, under its name (budget: tokens of source text to
            keep; None, the default, keeps `budget_share`, 0.3, of the input; lam, alpha,
            neighbours, min_tokens, ...).

    Example:
        >>> from llama_index.core.schema import NodeWithScore, TextNode
        >>> nodes = [NodeWithScore(node=TextNode(text="Revenue grew 3% to $412 million. The office moved. "
        ...     "Lunch was at noon. Parking is free."), score=1.0)]
        >>> out = ContextPruningPostprocessor(budget=10, min_tokens=1).postprocess_nodes(nodes, query_str="How much did revenue grow?")
        >>> out[0].node.text
        'Revenue grew 3% to $412 million.'
    """

    _pruner: ContextPruner = PrivateAttr()
    last_report: Any | None = Field(default=None, exclude=True, description="The last call's PruningReport.")

    def __init__(self, embedder: Any = None, *, pruner: ContextPruner | None = None, **settings: Any) -> None:
        names = PruningConfig.field_names()
        unknown = sorted(k for k in settings if k not in names)
        if unknown:
            raise InputTypeError(f"ContextPruningPostprocessor got unknown settings {unknown}; its pruning settings are {list(names)}")
        if pruner is not None:
            if not isinstance(pruner, ContextPruner):
                raise InputTypeError(f"pruner must be a contextual_retrieval_core ContextPruner, got {type(pruner).__name__}")
            if settings:
                raise InputError(f"pass pruner= or the pruning settings {sorted(settings)}, not both: the pruner has its own (its config)")
            settings = {name: getattr(pruner.config, name) for name in names}
        super().__init__(**settings)
        if pruner is None:
            if embedder is None:
                from contextual_retrieval_core.embeddings.minilm import LocalMiniLMEmbedder

                embedder = LocalMiniLMEmbedder()
            pruner = ContextPruner(embedder, config=self.pruning_config)
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
