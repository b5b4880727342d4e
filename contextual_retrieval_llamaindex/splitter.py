"""The library's chunker as LlamaIndex node parsers: `StructureSplitter` (ContextualNodeParser's
default) and `FittedSplitter` (the option that fits every chunk and its context to the window).

Chunks are cut as ``contextual-retrieval index`` cuts them (`contextualize.fit.chunk_to_fit`):
code at tree-sitter's definitions, then between the statements of a body; prose at headings,
paragraphs and lines; at most `max_chars` characters. `FittedSplitter` also keeps each chunk small
enough that, with its context and rendered metadata, it fits the embedder's window, counted with
the embedder's own tokenizer (docs/defaults.md): more chunks, so more LLM requests.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.node_parser import NodeParser
from llama_index.core.node_parser.node_utils import build_nodes_from_splits
from llama_index.core.schema import BaseNode, MetadataMode
from llama_index.core.utils import get_tqdm_iterable

from contextual_retrieval_core._factories import default_window
from contextual_retrieval_core.chunking.budget import TokenWindow
from contextual_retrieval_core.chunking.split import DEFAULT_CHUNK_CHARS
from contextual_retrieval_core.contextualize.fit import chunk_to_fit
from contextual_retrieval_core.types import Document

__all__ = ["StructureSplitter", "FittedSplitter"]

#: metadata keys that name a node's file (SimpleDirectoryReader's, then LangChain loaders')
PATH_KEYS = ("file_path", "file_name", "source")


class StructureSplitter(NodeParser):
    """Split Documents with the library's chunker: definitions and headings first, at most
    `max_chars` characters, whatever the contexts will be (so one LLM request a chunk, however
    long the contexts). A node longer than the embedder's window is embedded whole by the
    library's embedding models.

    Args:
        max_chars: characters per chunk at most.

    Example:
        >>> from llama_index.core import Document as LIDocument
        >>> nodes = StructureSplitter(max_chars=200).get_nodes_from_documents(
        ...     [LIDocument(text="# A\\n\\n" + "Some words here. " * 20, metadata={"file_path": "a.md"})])
        >>> len(nodes) > 1 and all(len(n.text) <= 200 for n in nodes)
        True
    """

    max_chars: int = Field(default=DEFAULT_CHUNK_CHARS, ge=50, description="Characters per chunk at most.")
    structural_header: bool = Field(default=True, description="Whether an LLM's contexts get the structural header.")

    _window: TokenWindow | None = PrivateAttr(default=None)
    _generator: Any = PrivateAttr(default=None)

    @classmethod
    def class_name(cls) -> str:
        return "ContextualRetrievalStructureSplitter"

    def use_generator(self, generator: Any, structural_header: bool = True) -> None:
        """The generator the chunks will be situated with (what `ContextualNodeParser` calls);
        `FittedSplitter` keeps room for its contexts."""
        self._generator = generator
        self.structural_header = structural_header

    def _parse_nodes(self, nodes: Sequence[BaseNode], show_progress: bool = False, **kwargs: Any) -> list[BaseNode]:
        out: list[BaseNode] = []
        for node in get_tqdm_iterable(nodes, show_progress, "Parsing nodes"):
            text = node.get_content(metadata_mode=MetadataMode.NONE)
            path = next((str(node.metadata[k]) for k in PATH_KEYS if node.metadata.get(k)), node.node_id)
            rendered = node.get_metadata_str(MetadataMode.EMBED) if self._window is not None else ""
            pieces = chunk_to_fit(Document(node.node_id, text, dict(node.metadata)), self._window, generator=self._generator,
                                  structural_header=self.structural_header, max_chars=self.max_chars, path=path,
                                  extra_reserve=self._window.tokens(rendered) if rendered and self._window else 0)
            out.extend(build_nodes_from_splits([piece for _, piece in pieces], node, id_func=self.id_func))
        return out


class FittedSplitter(StructureSplitter):
    """`StructureSplitter` whose every chunk, with its context and rendered metadata, fits the
    embedder's window (an LLM's context is given `LLM_CONTEXT_RESERVE` tokens): nothing is
    embedded past the window, at the price of more, shorter chunks and so more LLM requests.

    Args:
        embed_model: the embedding the nodes will get (`CoreEmbedding` or any object exposing
            `max_tokens` and `count_tokens`); default: the library's offline MiniLM (256 tokens).
            A model that exposes no window gets `max_chars` alone.
        generator: the context generator the chunks will be situated with (None: the structural
            one); `ContextualNodeParser` sets its own.
        max_chars: characters per chunk at most.

    Example:
        >>> FittedSplitter().window_tokens  # the offline MiniLM's window, counted with its tokenizer
        256
    """

    window_tokens: int | None = Field(default=None, description="The embedder window chunks fit (read-only).")

    def __init__(self, embed_model: Any = None, generator: Any = None, **kwargs: Any) -> None:
        kwargs.pop("window_tokens", None)
        super().__init__(**kwargs)
        self._window = default_window(embed_model)
        self.window_tokens = self._window.size if self._window is not None else None
        self._generator = generator

    @classmethod
    def class_name(cls) -> str:
        return "ContextualRetrievalFittedSplitter"
