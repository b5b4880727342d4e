"""`ContextualNodeParser`: split whole Documents with any node parser, then situate every chunk."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from llama_index.core.bridge.pydantic import Field, PrivateAttr, SerializeAsAny, field_validator
from llama_index.core.callbacks import CBEventType, EventPayload
from llama_index.core.node_parser import NodeParser
from llama_index.core.node_parser.loading import load_parser
from llama_index.core.schema import BaseNode, MetadataMode, TextNode

from contextual_retrieval_core.contextualize.contextualizer import (
    Contextualizer,
    ContextualizeResult,
    contextualizer_for,
    refresh_options,
)
from contextual_retrieval_core.errors import InputError
from contextual_retrieval_core.generators.prompts import DEFAULT_PROMPT, ContextPrompt
from contextual_retrieval_core.generators.usage import UsageReport
from contextual_retrieval_core.store.context_store import ContextStore
from contextual_retrieval_core.types import Chunk, Document, distinct_documents, number_chunks
from contextual_retrieval_llamaindex._convert import set_context
from contextual_retrieval_llamaindex._crops import crop_nodes, image_batch, is_image_input
from contextual_retrieval_llamaindex._ingest_fields import ContextualizeFields
from contextual_retrieval_llamaindex.llm import as_context_generator
from contextual_retrieval_llamaindex.splitter import FittedSplitter, StructureSplitter

__all__ = ["ContextualNodeParser"]


class ContextualNodeParser(ContextualizeFields):
    """Splits whole Documents with `node_parser` and situates every chunk within its document.

    It receives the whole Documents (an `IngestionPipeline` hands them over), so unlike
    `DocumentContextExtractor` it needs no docstore. Each chunk's context comes from the core
    `Contextualizer`: looked up in the persistent context store first, generated (with prompt
    caching and bounded concurrency) only when missing, and stored the moment it arrives.

    Each returned TextNode's text is the original chunk and its context is in
    ``metadata["context"]``. The node follows LlamaIndex's metadata modes: its metadata (the
    document's, merged in when `include_metadata`, as every NodeParser does, and the splitter's) is
    rendered by LlamaIndex's rules (the document's ``metadata_template``, ``metadata_separator`` and
    ``excluded_embed_metadata_keys`` / ``excluded_llm_metadata_keys``) and placed before the
    contextual text:

    - ``get_content(MetadataMode.EMBED)`` (what embedders and `ContextualBM25Retriever` see) is
      that metadata, a blank line, then the core's ``compose_indexed_text(context, chunk,
      position, separator)``: ``context + "\\n\\n" + chunk`` by default; with
      ``position="after"`` the metadata follows the context at the end;
    - ``get_content(MetadataMode.LLM)`` is the metadata, then the context and the source text
      marked apart (the core's `format_for_llm`).

    To keep a key out of either text, exclude it on the Documents as in LlamaIndex (e.g.
    ``Document(..., excluded_embed_metadata_keys=["owner"])``). The metadata is rendered when the
    node is made: run metadata extractors before this parser. Node ids are stable across runs: a
    UUID of the document id, the chunk's position and its text (give Documents stable ids, e.g.
    ``SimpleDirectoryReader(..., filename_as_id=True)``); every relationship the splitter made
    (previous / next, parent / children of a `HierarchicalNodeParser`) points at the new ids.

    Args:
        generator: a core `ContextGenerator` (default: the offline `StructuralContextGenerator`)
            or any LlamaIndex `LLM` (llama-index's `Anthropic` gets prompt caching).
        node_parser: the splitter (default: `StructureSplitter()`, the library's chunker:
            definitions and headings first, 800 characters at most, one LLM request a chunk;
            `FittedSplitter(embed_model)` also fits every chunk, with its context and rendered
            metadata, to the embedder's window, at the price of more chunks and requests).
        store: a `ContextStore` or a path to one (default: the core's rule: a file under
            ~/.cache for LLM generators, in memory otherwise).
        prompt: the situating prompt for LlamaIndex LLMs (core generators carry their own).
        concurrency, mode, grouped, position, separator, show_progress, ...: the ingestion
            settings, one field each, generated from `ContextualizeConfig` (its names, defaults,
            descriptions and checks): ``mode="batch"`` with `AnthropicContextGenerator` uses
            Message Batches (50% off); ``grouped=True`` situates small documents in one request
            each; `position` places the context in the EMBED text.
        crop_generator: the core generator for image crops (default: the offline
            `StructuralCropContextGenerator`; `AnthropicCropContextGenerator` for Claude).

    Images: frames (a `Document` / `ImageDocument` with an image or ``metadata["detections"]``)
    and crops already cut (`ImageNode`s whose source is their frame) are not split: every crop is
    situated within its frame by `crop_generator` and comes back as an `ImageNode` (its context in
    the EMBED text, its image path kept; see `contextual_retrieval_llamaindex/_crops.py`), after the
    text nodes. Bad frames are refused, all listed, before anything is generated.

    After each call, `last_report` holds the core `UsageReport` of that call (tokens, cache reads,
    cost), also when it had no chunk to situate.

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

    node_parser: SerializeAsAny[NodeParser] = Field(default_factory=StructureSplitter, description="The splitter run first.")
    store_path: str | None = Field(default=None, description="The context store's file (None: the default).")
    generator_id: str = Field(
        default="", description="name/model/prompt of the generator (read-only; keys the pipeline cache)."
    )
    crop_generator_id: str = Field(
        default="", description="name/model/prompt of the crop generator (read-only; keys the pipeline cache)."
    )

    _generator: Any = PrivateAttr()
    _contextualizer: Contextualizer = PrivateAttr()
    _last_report: UsageReport | None = PrivateAttr(default=None)
    _crop_generator: Any = PrivateAttr(default=None)
    _crop_contextualizer: Contextualizer | None = PrivateAttr(default=None)
    _last_crop_report: UsageReport | None = PrivateAttr(default=None)

    def __init__(
        self,
        generator: Any = None,
        node_parser: NodeParser | None = None,
        store: ContextStore | str | os.PathLike[str] | None = None,
        *,
        prompt: ContextPrompt = DEFAULT_PROMPT,
        crop_generator: Any = None,
        **kwargs: Any,
    ) -> None:
        wanted_crop_id = kwargs.pop("crop_generator_id", None)
        if node_parser is not None:
            kwargs["node_parser"] = node_parser
        elif "node_parser" not in kwargs:
            kwargs["node_parser"] = StructureSplitter()
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
            raise InputError(
                f"this parser was saved with generator {wanted_id!r}; pass the same generator to rebuild it, "
                "e.g. ContextualNodeParser.from_dict(data, generator=AnthropicContextGenerator())"
            )
        self._generator = gen
        if isinstance(self.node_parser, StructureSplitter):
            self.node_parser.use_generator(gen, self.contextualize_config.structural_header)
        if isinstance(store, ContextStore):
            context_store: ContextStore | str | None = store
        else:
            context_store = self.store_path
        self._contextualizer = contextualizer_for(gen, context_store, self)
        if crop_generator is None:
            from contextual_retrieval_core.generators.crop_structural import StructuralCropContextGenerator

            crop_generator = StructuralCropContextGenerator()
        self._crop_generator = crop_generator
        self.crop_generator_id = f"{crop_generator.name}/{crop_generator.model}/{crop_generator.prompt_identity}"
        if wanted_crop_id and wanted_crop_id != self.crop_generator_id:
            raise InputError(
                f"this parser was saved with crop generator {wanted_crop_id!r}; pass the same one to rebuild it, "
                "e.g. ContextualNodeParser.from_dict(data, crop_generator=AnthropicCropContextGenerator())"
            )

    @field_validator("node_parser", mode="before")
    @classmethod
    def _load_node_parser(cls, value: Any) -> Any:
        ours = {c.class_name(): c for c in (StructureSplitter, FittedSplitter)}
        if isinstance(value, dict) and value.get("class_name") in ours:
            return ours[value["class_name"]](**{k: v for k, v in _without_id_func(value).items() if k != "class_name"})
        return load_parser(_without_id_func(value)) if isinstance(value, dict) else value

    @classmethod
    def from_dict(cls, data: dict[str, Any], **kwargs: Any) -> ContextualNodeParser:  # type: ignore[override]
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
    def last_report(self) -> UsageReport | None:
        """The usage report of the latest call, also one with nothing to do (None before the first);
        for a call with only image inputs, its crops' report."""
        return self._last_report

    @property
    def last_crop_report(self) -> UsageReport | None:
        """The usage report of the latest call's crops (None when it had no image input)."""
        return self._last_crop_report

    # -- NodeParser ---------------------------------------------------------------------------------

    def get_nodes_from_documents(
        self, documents: Sequence[BaseNode], show_progress: bool = False, **kwargs: Any
    ) -> list[BaseNode]:
        """Split `documents` with `node_parser`, then situate every chunk (see the class docstring)."""
        with self.callback_manager.event(CBEventType.NODE_PARSING, payload={EventPayload.DOCUMENTS: documents}) as event:
            nodes = self._parse_nodes(documents, show_progress=show_progress, **kwargs)
            event.on_end({EventPayload.NODES: nodes})
        return nodes

    async def aget_nodes_from_documents(
        self, documents: Sequence[BaseNode], show_progress: bool = False, **kwargs: Any
    ) -> list[BaseNode]:
        """Async `get_nodes_from_documents`: generation requests run concurrently on the caller's loop."""
        with self.callback_manager.event(CBEventType.NODE_PARSING, payload={EventPayload.DOCUMENTS: documents}) as event:
            nodes = await self._aparse_nodes(documents, show_progress=show_progress, **kwargs)
            event.on_end({EventPayload.NODES: nodes})
        return nodes

    # The wrapped node parser post-processes its own nodes (metadata, char offsets, prev/next
    # links); NodeParser's post-processing is not run again over them (it would link nodes of
    # different levels of a HierarchicalNodeParser as previous/next).

    def _parse_nodes(self, nodes: Sequence[BaseNode], show_progress: bool = False, **kwargs: Any) -> list[BaseNode]:
        images, nodes = _images_apart(nodes)
        crops = image_batch(images) if images else None  # bad frames refused before any generation
        documents = _distinct(nodes)
        chunks = self.node_parser.get_nodes_from_documents(documents, show_progress=show_progress)
        docs, core_chunks, out = self._prepare(documents, chunks)
        refresh_options(self._contextualizer, self, show_progress=self.contextualize_config.show_progress or show_progress)
        text_nodes = self._finish(self._contextualizer.contextualize(docs, core_chunks), out)
        if crops is None:
            self._last_crop_report = None
            return text_nodes
        result = self._crops_contextualizer(show_progress).contextualize(crops.documents, crops.chunks)
        return text_nodes + self._finish_crops(result, crops.documents, bool(nodes))

    async def _aparse_nodes(
        self, nodes: Sequence[BaseNode], show_progress: bool = False, **kwargs: Any
    ) -> list[BaseNode]:
        images, nodes = _images_apart(nodes)
        crops = image_batch(images) if images else None  # bad frames refused before any generation
        documents = _distinct(nodes)
        chunks = await self.node_parser.aget_nodes_from_documents(documents, show_progress=show_progress)
        docs, core_chunks, out = self._prepare(documents, chunks)
        refresh_options(self._contextualizer, self, show_progress=self.contextualize_config.show_progress or show_progress)
        text_nodes = self._finish(await self._contextualizer.acontextualize(docs, core_chunks), out)
        if crops is None:
            self._last_crop_report = None
            return text_nodes
        result = await self._crops_contextualizer(show_progress).acontextualize(crops.documents, crops.chunks)
        return text_nodes + self._finish_crops(result, crops.documents, bool(nodes))

    def _crops_contextualizer(self, show_progress: bool) -> Contextualizer:
        """The crops' `Contextualizer`: `crop_generator`, this parser's store and options."""
        if self._crop_contextualizer is None:
            self._crop_contextualizer = contextualizer_for(self._crop_generator, self._contextualizer.store, self)
        refresh_options(self._crop_contextualizer, self, show_progress=self.contextualize_config.show_progress or show_progress)
        return self._crop_contextualizer

    def _finish_crops(self, result: ContextualizeResult, documents: list[Document], had_text: bool) -> list[BaseNode]:
        self._last_crop_report = result.report
        if not had_text:
            self._last_report = result.report
        return list(crop_nodes(result, documents, self.contextualize_config.position, self.contextualize_config.separator))

    def _prepare(
        self, documents: Sequence[BaseNode], chunks: Sequence[BaseNode]
    ) -> tuple[list[Document], list[Chunk], list[TextNode]]:
        by_id = {d.node_id: d for d in documents}
        texts = [node for node in chunks if isinstance(node, TextNode)]
        for node in texts:
            if (node.ref_doc_id or (node.source_node.node_id if node.source_node else None)) not in by_id:
                raise InputError(
                    f"{type(self.node_parser).__name__} returned a node without its source document; "
                    "ContextualNodeParser needs splitters that keep the SOURCE relationship"
                )
        numbered = number_chunks((node.ref_doc_id or node.source_node.node_id, node.text) for node in texts)  # type: ignore[union-attr]
        renamed: dict[str, str] = {}
        core_chunks: list[Chunk] = []
        out: list[TextNode] = []
        for node, chunk in zip(texts, numbered):
            if chunk is None:  # blank
                continue
            renamed[node.node_id] = node.id_ = chunk.id
            core_chunks.append(chunk)
            out.append(node)
            if self.include_metadata:  # as NodeParser does: the document's metadata, the node's own winning
                node.metadata = {**by_id[chunk.document_id].metadata, **node.metadata}
        dropped = {node.node_id for node in texts} - set(renamed.values())
        for node in out:  # the splitter linked its nodes under their old ids
            _relink(node, renamed, dropped)
        used = {c.document_id for c in core_chunks}
        docs = [
            Document(d.node_id, d.get_content(metadata_mode=MetadataMode.NONE), dict(d.metadata))
            for d in documents
            if d.node_id in used
        ]
        return docs, core_chunks, out

    def _finish(self, result: ContextualizeResult, nodes: list[TextNode]) -> list[BaseNode]:
        self._last_report = result.report
        config = self.contextualize_config
        for node, chunk in zip(nodes, result.chunks):
            set_context(node, chunk.context, config.position, config.separator)
        return list(nodes)


def _relink(node: BaseNode, renamed: dict[str, str], dropped: set[str]) -> None:
    """Point every relationship of `node` (previous, next, parent, children) at the new ids;
    links to dropped (blank) nodes are removed."""
    for rel, info in list(node.relationships.items()):
        if isinstance(info, list):
            node.relationships[rel] = [
                i.model_copy(update={"node_id": renamed.get(i.node_id, i.node_id)}) for i in info if i.node_id not in dropped
            ]
        elif info.node_id in dropped:
            del node.relationships[rel]
        elif info.node_id in renamed:
            node.relationships[rel] = info.model_copy(update={"node_id": renamed[info.node_id]})


def _images_apart(nodes: Sequence[BaseNode]) -> tuple[list[BaseNode], list[BaseNode]]:
    """(frames and crops, the other nodes), each in input order."""
    images = [n for n in nodes if is_image_input(n)]
    return images, [n for n in nodes if not is_image_input(n)]


def _distinct(nodes: Sequence[BaseNode]) -> list[Any]:
    """A document passed twice is split and situated once (the core's rule). Typed loosely: a
    NodeParser receives any nodes, though LlamaIndex types its input as Documents."""
    return distinct_documents(nodes, lambda d: d.node_id, lambda d: d.get_content(metadata_mode=MetadataMode.NONE))


def _without_id_func(data: dict[str, Any]) -> dict[str, Any]:
    """LlamaIndex serializes a node parser's id_func as a name it cannot load back; drop it (the
    default applies, and ContextualNodeParser sets its own stable ids anyway)."""
    data = dict(data)
    if isinstance(data.get("id_func"), dict):
        data.pop("id_func")
    return data
