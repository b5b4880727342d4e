"""`chunk_to_fit`: the library's chunking, and, as an option, chunks sized so that context + chunk
fits the embedder.

By default chunks are cut by characters, definitions and headings first, whatever their contexts
will be. With a window (`fit_chunks=True`, `--fit-chunks`, `FittedSplitter`), one place decides
what a chunk's context will take before it exists, for every caller that chunks whole documents
(`contextual-retrieval index`, LlamaIndex's `ContextualNodeParser` and LangChain's
`ContextualDocumentTransformer` without a splitter of their own):

- the structural context (the offline generator's, and the header on an LLM's contexts) is
  computed for each candidate chunk and counted exactly with the embedder's tokenizer;
- an LLM-written context (any other generator) gets `LLM_CONTEXT_RESERVE` tokens on top.

Example:
    >>> from contextual_retrieval_core import Document
    >>> from contextual_retrieval_core.embeddings import LocalMiniLMEmbedder
    >>> from contextual_retrieval_core.chunking.budget import window_of
    >>> window = window_of(LocalMiniLMEmbedder())  # 256 tokens, counted with MiniLM's tokenizer
    >>> doc = Document("notes.md", "# Notes\\n\\n" + "Words, words and more words. " * 120)
    >>> [window.tokens(piece) for _, piece in chunk_to_fit(doc, window)]
    [193, 192, 193, 192, 72]
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from contextual_retrieval_core.chunking.budget import LLM_CONTEXT_RESERVE, TokenWindow, split_to_fit, window_of
from contextual_retrieval_core.chunking.code_outline import chunk_boundaries, cut_ranks
from contextual_retrieval_core.chunking.split import CODE_EXTENSIONS, DEFAULT_CHUNK_CHARS
from contextual_retrieval_core.generators._header_source import header_generator_for, writes_structural_context
from contextual_retrieval_core.types import Chunk, Document, number_chunks

__all__ = ["chunk_documents", "chunk_to_fit", "context_reserve"]


def context_reserve(generator: Any, structural_header: bool = True) -> tuple[Any, int]:
    """(the generator of the part of each context computable before generation, or None; the
    tokens kept on top for the rest): the structural generator alone is exact, an LLM's context
    gets `LLM_CONTEXT_RESERVE` after its structural header (when `structural_header`)."""
    from contextual_retrieval_core.generators.structural import StructuralContextGenerator

    if generator is None or writes_structural_context(generator):
        return (generator or StructuralContextGenerator()), 0
    return (header_generator_for(generator) if structural_header else None), LLM_CONTEXT_RESERVE


def chunk_to_fit(
    document: Document,
    window: TokenWindow | None,
    *,
    generator: Any = None,
    structural_header: bool = True,
    max_chars: int = DEFAULT_CHUNK_CHARS,
    path: str | None = None,
    extra_reserve: int = 0,
) -> list[tuple[int, str]]:
    """Chunks of `document` that fit `window` with their contexts (`split_to_fit`); code (by
    `path`'s extension, default the document id) is cut at tree-sitter's definitions first
    (`code_outline.chunk_boundaries`), and, when chunks are fitted to a window, then between the
    statements of a body (`code_outline.cut_ranks`), so that a definition too long for the window
    is split at its inner boundaries.

    Args:
        window: the embedder's (`budget.window_of(embedder)`); None: `max_chars` alone.
        generator: the context generator (None: the structural one).
        structural_header: whether an LLM's contexts get the structural header (the default).
        extra_reserve: tokens the embedded text holds besides context and chunk (a framework's
            rendered metadata).
    """
    where = path or document.id
    suffix = where.rsplit(".", 1)[-1].lower() if "." in where.rsplit("/", 1)[-1] else ""
    code = f".{suffix}" in CODE_EXTENSIONS
    boundaries = cut_ranks(document.text, where) if window is not None else chunk_boundaries(document.text, where)
    exact, fixed = context_reserve(generator, structural_header)
    reserve = None
    if window is not None and exact is not None:
        def reserve(offset: int, piece: str) -> int:
            context = exact.generate(document, Chunk(f"{document.id}@{offset}", document.id, piece, 0, {"start_index": offset})).context
            return window.tokens(context) if context else 0
    return split_to_fit(document.text, window, max_chars=max_chars, code=code, boundaries=boundaries,
                        reserve=reserve, fixed_reserve=fixed + extra_reserve)


def chunk_documents(
    documents: Iterable[Document],
    embedder: Any = None,
    *,
    fit: bool = False,
    generator: Any = None,
    structural_header: bool = True,
    max_chars: int = DEFAULT_CHUNK_CHARS,
) -> list[Chunk]:
    """The library's chunks of `documents`, ready for `Contextualizer` and `HybridSearcher`: at
    most `max_chars` characters, cut at definitions and headings first (`chunk_to_fit`), as
    ``contextual-retrieval index`` cuts them. Ids are `stable_chunk_id`'s, as every other path
    gives them; ``metadata["start_index"]`` is the chunk's offset in its document. A document's id
    is its path for telling code from prose.

    Args:
        embedder: the embedder the chunks will get; read only with `fit`.
        fit: also keep each chunk, with the context `generator` will give it, within `embedder`'s
            window (an embedder with no window: `max_chars` alone). More chunks, so more LLM
            requests; without it a text longer than the window is embedded whole by the
            library's embedders.
        generator: the context generator the chunks will be situated with (for `fit`).
        structural_header: whether an LLM's contexts get the structural header (for `fit`).

    Example:
        >>> doc = Document("guide.md", "# Guide\\n\\n" + "Each step is written down. " * 150)
        >>> [(c.index, c.metadata["start_index"]) for c in chunk_documents([doc])][:3]
        [(0, 0), (1, 797), (2, 1596)]
    """
    window = window_of(embedder) if fit else None
    chunks: list[Chunk] = []
    for doc in documents:
        pieces = chunk_to_fit(doc, window, generator=generator, structural_header=structural_header, max_chars=max_chars)
        numbered = number_chunks((doc.id, piece) for _, piece in pieces)
        for (offset, _), chunk in zip(pieces, numbered):
            if chunk is not None:
                chunks.append(Chunk(chunk.id, chunk.document_id, chunk.text, chunk.index, {"start_index": offset}))
    return chunks
