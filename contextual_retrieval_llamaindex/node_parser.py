"""`ContextualNodeParser`: split whole Documents with any node parser, then situate every chunk."""

from __future__ import annotations

import os
from typing import Any, Dict, List, Literal, Optional, Sequence

from llama_index.core.bridge.pydantic import Field, PrivateAttr, SerializeAsAny, field_validator
from llama_index.core.node_parser import NodeParser, SentenceSplitter
from llama_index.core.node_parser.loading import load_parser
from llama_index.core.schema import BaseNode, MetadataMode, NodeRelationship, TextNode

from contextual_retrieval_core.contextualizer import Contextualizer, ContextualizeResult
from contextual_retrieval_core.prompts import DEFAULT_PROMPT, ContextPrompt
from contextual_retrieval_core.store import ContextStore
from contextual_retrieval_core.types import CONTEXT_KEY, Chunk, Document, distinct_documents, number_chunks
from contextual_retrieval_core.usage import UsageReport

from ._convert import set_context
from .llm import as_context_generator

__all__ = ["ContextualNodeParser"]


class ContextualNodeParser(NodeParser):
    """Splits whole Documents with `node_parser` and situates every chunk within its document.

    It receives the whole Documents (an `IngestionPipeline` hands them over), so unlike
    `DocumentContextExtractor` it needs no docstore. Each chunk's context comes from the core
    `Contextualizer`: looked up in the persistent context store first, generated (with prompt
    caching and bounded concurrency) only when missing, and stored the moment it arrives.

    Each returned TextNode's text is the original chunk; the context is in ``metadata["context"]``
    and the node is laid out so that ``get_content(MetadataMode.EMBED)`` is ``context + "\\n\\n" +
    chunk`` (what embedders and `ContextualBM25Retriever` see) and ``MetadataMode.LLM`` shows the
    context and the source text marked apart. The document's other metadata stays on the node
    (for filters and display) but is neither embedded nor shown to the LLM. Node ids are stable
    across runs: a UUID of the document id, the chunk's position and its text (give Documents
    stable ids, e.g. ``SimpleDirectoryReader(..., filename_as_id=True)``). Run metadata
    extractors before this parser: metadata added to its nodes afterwards would be embedded as
    bare values (the layout shows only the context's keys by name).

    Args:
        generator: a core `ContextGenerator` (default: the offline `StructuralContextGenerator`)
            or any LlamaIndex `LLM` (llama-index's `Anthropic` gets prompt caching).
        node_parser: the splitter (default: `SentenceSplitter()`).
        store: a `ContextStore` or a path to one (default: the core's rule: a file under
            ~/.cache for LLM generators, in memory otherwise).
        prompt: the situating prompt for LlamaIndex LLMs (core generators carry their own).
        concurrency: requests in flight at once.
        mode: "realtime" or "batch" (Message Batches with `AnthropicContextGenerator`).
        grouped: situate small documents in one request each (`AnthropicContextGenerator`).
        show_progress: a progress bar over the contexts to generate.

    After each call, `last_report` holds the core `UsageReport` (tokens, cache reads, cost).

    Example:
        >>> from llama_index.core import Document
        >>> parser = ContextualNodeParser(show_progress=False)
        >>> nodes = parser.get_nodes_from_documents(
        ...     [Document(text="# Q2 results\\nRevenue grew 3%.", id_="acme-q2.md")])
        >>> nodes[0].metadata["context"]
        'From acme-q2.md, section: Q2 results.'
        >>> from llama_index.core.schema import MetadataMode
        >>> print(nodes[0].get_content(MetadataMode.EMBED))
        From acme-q2.md, section: Q2 results.
        <BLANKLINE>
        # Q2 results
        Revenue grew 3%.
    """

    node_parser: SerializeAsAny[NodeParser] = Field(default_factory=SentenceSplitter, description="The splitter run first.")
    store_path: Optional[str] = Field(default=None, description="The context store's file (None: the default).")
    concurrency: int = Field(default=8, ge=1, description="Requests in flight at once.")
    mode: Literal["realtime", "batch"] = Field(default="realtime", description="'realtime' or 'batch'.")
    grouped: bool = Field(default=False, description="Situate small documents in one request each.")
    show_progress: bool = Field(default=True, description="Progress bar over generated contexts.")
    generator_id: str = Field(
        default="", description="name/model/prompt of the generator (read-only; keys the pipeline cache)."
    )

    _generator: Any = PrivateAttr()
    _contextualizer: Contextualizer = PrivateAttr()
    _last_report: Optional[UsageReport] = PrivateAttr(default=None)

    def __init__(
        self,
        generator: Any = None,
        node_parser: Optional[NodeParser] = None,
        store: ContextStore | str | os.PathLike[str] | None = None,
        *,
        prompt: ContextPrompt = DEFAULT_PROMPT,
        **kwargs: Any,
    ) -> None:
        if node_parser is not None:
            kwargs["node_parser"] = node_parser
        if isinstance(store, ContextStore):
            kwargs["store_path"] = str(store.path)
        elif store is not None:
            kwargs["store_path"] = os.fspath(store)
        wanted_id = kwargs.pop("generator_id", None)
        super().__init__(**kwargs)
        if generator is None:
            from contextual_retrieval_core.generators.structural import StructuralContextGenerator

            generator = StructuralContextGenerator()
        gen = as_context_generator(generator, prompt)
        self.generator_id = f"{gen.name}/{gen.model}/{gen.prompt_identity}"
        if wanted_id and wanted_id != self.generator_id:
            raise ValueError(
                f"this parser was saved with generator {wanted_id!r}; pass the same generator to rebuild it, "
                "e.g. ContextualNodeParser.from_dict(data, generator=AnthropicContextGenerator())"
            )
        self._generator = gen
        if isinstance(store, ContextStore):
            context_store: ContextStore | str | None = store
        else:
            context_store = self.store_path
        self._contextualizer = Contextualizer(
            gen,
            context_store,
            concurrency=self.concurrency,
            mode=self.mode,
            grouped=self.grouped,
            show_progress=self.show_progress,
        )

    @field_validator("node_parser", mode="before")
    @classmethod
    def _load_node_parser(cls, value: Any) -> Any:
        return load_parser(_without_id_func(value)) if isinstance(value, dict) else value

    @classmethod
    def from_dict(cls, data: Dict[str, Any], **kwargs: Any) -> "ContextualNodeParser":  # type: ignore[override]
        """Rebuild from `to_dict` output; pass ``generator=`` when it was an LLM generator."""
        return super().from_dict(_without_id_func(data), **kwargs)

    @classmethod
    def class_name(cls) -> str:
        return "ContextualNodeParser"

    @property
    def generator(self) -> Any:
        """The core ContextGenerator in use."""
        return self._generator

    @property
    def store(self) -> ContextStore:
        """The context store."""
        return self._contextualizer.store

    @property
    def last_report(self) -> Optional[UsageReport]:
        """The usage report of the latest call (None before the first)."""
        return self._last_report

    # -- NodeParser ---------------------------------------------------------------------------------

    def _parse_nodes(self, nodes: Sequence[BaseNode], show_progress: bool = False, **kwargs: Any) -> List[BaseNode]:
        documents = _distinct(nodes)
        chunks = self.node_parser.get_nodes_from_documents(documents, show_progress=show_progress)
        docs, core_chunks, out = self._prepare(documents, chunks)
        if not out:
            return []
        self._contextualizer.show_progress = self.show_progress or show_progress
        return self._finish(self._contextualizer.contextualize(docs, core_chunks), out)

    async def _aparse_nodes(
        self, nodes: Sequence[BaseNode], show_progress: bool = False, **kwargs: Any
    ) -> List[BaseNode]:
        documents = _distinct(nodes)
        chunks = await self.node_parser.aget_nodes_from_documents(documents, show_progress=show_progress)
        docs, core_chunks, out = self._prepare(documents, chunks)
        if not out:
            return []
        self._contextualizer.show_progress = self.show_progress or show_progress
        return self._finish(await self._contextualizer.acontextualize(docs, core_chunks), out)

    def _prepare(
        self, documents: Sequence[BaseNode], chunks: Sequence[BaseNode]
    ) -> tuple[list[Document], list[Chunk], list[TextNode]]:
        by_id = {d.node_id: d for d in documents}
        texts = [node for node in chunks if isinstance(node, TextNode)]
        for node in texts:
            if (node.ref_doc_id or (node.source_node.node_id if node.source_node else None)) not in by_id:
                raise ValueError(
                    f"{type(self.node_parser).__name__} returned a node without its source document; "
                    "ContextualNodeParser needs splitters that keep the SOURCE relationship"
                )
        numbered = number_chunks((node.ref_doc_id or node.source_node.node_id, node.text) for node in texts)  # type: ignore[union-attr]
        renamed: Dict[str, str] = {}
        core_chunks: list[Chunk] = []
        out: list[TextNode] = []
        for node, chunk in zip(texts, numbered):
            if chunk is None:  # blank
                continue
            renamed[node.node_id] = node.id_ = chunk.id
            core_chunks.append(chunk)
            out.append(node)
        for node in out:  # the splitter linked the chunks under their old ids
            for rel in (NodeRelationship.PREVIOUS, NodeRelationship.NEXT):
                info = node.relationships.get(rel)
                if info is not None and not isinstance(info, list) and info.node_id in renamed:
                    info.node_id = renamed[info.node_id]
        used = {c.document_id for c in core_chunks}
        docs = [
            Document(d.node_id, d.get_content(metadata_mode=MetadataMode.NONE), dict(d.metadata))
            for d in documents
            if d.node_id in used
        ]
        return docs, core_chunks, out

    def _postprocess_parsed_nodes(self, nodes: List[BaseNode], parent_doc_map: Dict[str, Any]) -> List[BaseNode]:
        # NodeParser merges the documents' metadata in afterwards: lay the nodes out again so
        # that metadata stays out of the embedded and LLM text
        nodes = super()._postprocess_parsed_nodes(nodes, parent_doc_map)
        for node in nodes:
            if isinstance(node, TextNode):
                set_context(node, node.metadata.get(CONTEXT_KEY, ""))
        return nodes

    def _finish(self, result: ContextualizeResult, nodes: list[TextNode]) -> List[BaseNode]:
        self._last_report = result.report
        for node, chunk in zip(nodes, result.chunks):  # laid out in _postprocess_parsed_nodes
            node.metadata[CONTEXT_KEY] = chunk.context
        return list(nodes)


def _distinct(nodes: Sequence[BaseNode]) -> list[BaseNode]:
    """A document passed twice is split and situated once (the core's rule)."""
    return distinct_documents(nodes, lambda d: d.node_id, lambda d: d.get_content(metadata_mode=MetadataMode.NONE))


def _without_id_func(data: Dict[str, Any]) -> Dict[str, Any]:
    """LlamaIndex serializes a node parser's id_func as a name it cannot load back; drop it (the
    default applies, and ContextualNodeParser sets its own stable ids anyway)."""
    data = dict(data)
    if isinstance(data.get("id_func"), dict):
        data.pop("id_func")
    return data
