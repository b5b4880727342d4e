"""The core dataclasses: a document, a chunk of it, and a chunk with its context.

Framework adapters convert their own objects to these at the edge; every core service speaks only
these types.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from contextual_retrieval_core.errors import InputError, InputTypeError

__all__ = [
    "Document",
    "Chunk",
    "ContextualChunk",
    "ContextPosition",
    "compose_indexed_text",
    "format_for_llm",
    "stable_chunk_id",
    "number_chunks",
    "distinct_documents",
    "CONTEXT_LABEL",
    "SOURCE_LABEL",
    "CONTEXT_KEY",
    "CHUNK_INDEX_KEY",
]

#: metadata keys the framework adapters (and the on-disk index) put on a contextual chunk
CONTEXT_KEY = "context"
CHUNK_INDEX_KEY = "chunk_index"

#: How an LLM is shown a retrieved chunk: the generated context and the source text marked apart,
#: so an answer quotes the source, never the context (`format_for_llm`).
CONTEXT_LABEL = "[Context: generated to situate the source text below; not part of the source]"
SOURCE_LABEL = "[Source text]"

ContextPosition = Literal["before", "after", "none"]


@dataclass(frozen=True)
class Document:
    """A whole document, the text an LLM reads to situate each of its chunks.

    Args:
        id: stable identifier, unique within a corpus (a path, a uuid, a database key).
        text: the full text.
        metadata: free-form metadata carried through to the chunks' results.
    """

    id: str
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _check_text("Document", self.id, self.text)


@dataclass(frozen=True)
class Chunk:
    """A piece of a document, as the user's splitter produced it.

    Args:
        id: stable identifier, unique within a corpus.
        document_id: the id of the Document the chunk comes from.
        text: the chunk's text.
        index: position of the chunk within its document (0-based).
        metadata: free-form metadata.
    """

    id: str
    document_id: str
    text: str
    index: int = 0
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _check_text("Chunk", self.id, self.text)


@dataclass(frozen=True)
class ContextualChunk:
    """A chunk with the context that situates it within its document.

    `text` is the original chunk, `context` the generated context, and `indexed_text` the text that
    is embedded and BM25-indexed: by default ``context + "\\n\\n" + text``, outer whitespace
    trimmed.

    Args:
        chunk: the original chunk.
        context: the situating context ("" when none was generated).
        position: where the context goes in `indexed_text`: "before" (default, as in Anthropic's
            cookbook), "after", or "none" (index the chunk alone).
        separator: what joins context and chunk.
    """

    chunk: Chunk
    context: str
    position: ContextPosition = "before"
    separator: str = "\n\n"

    @property
    def id(self) -> str:
        return self.chunk.id

    @property
    def document_id(self) -> str:
        return self.chunk.document_id

    @property
    def text(self) -> str:
        return self.chunk.text

    @property
    def indexed_text(self) -> str:
        return compose_indexed_text(self.context, self.chunk.text, self.position, self.separator)


def compose_indexed_text(
    context: str, text: str, position: ContextPosition = "before", separator: str = "\n\n"
) -> str:
    """The text to embed and BM25-index for a chunk and its context."""
    if position not in ("before", "after", "none"):
        raise InputError(f"position must be 'before', 'after' or 'none', not {position!r}")
    if position == "none" or not context:
        return text
    # outer whitespace trimmed, as LlamaIndex's get_content does: the same text in both frameworks
    if position == "before":
        return (context + separator + text).strip()
    return (text + separator + context).strip()


def format_for_llm(context: str, text: str) -> str:
    """A chunk for an LLM prompt, context and source marked apart (just the source without context).

    Example:
        >>> print(format_for_llm("From ACME's Q2 2023 report.", "Revenue grew 3%."))
        [Context: generated to situate the source text below; not part of the source]
        <BLANKLINE>
        From ACME's Q2 2023 report.
        <BLANKLINE>
        [Source text]
        <BLANKLINE>
        Revenue grew 3%.
    """
    if not context:
        return text
    return f"{CONTEXT_LABEL}\n\n{context}\n\n{SOURCE_LABEL}\n\n{text}"


def labelled(label: str, text: str) -> str:
    """`label` then `text`, a multi-line text's later lines indented under its first (the CLI shows
    a context, structural header and LLM context on two lines, this way).

    Example:
        >>> print(labelled("   context: ", "From a.py, in def run.\\nStarts the workers."))
           context: From a.py, in def run.
                    Starts the workers.
    """
    return label + text.replace("\n", "\n" + " " * len(label))


def stable_chunk_id(document_id: str, index: int, text: str) -> str:
    """A chunk id that is the same on every run: a UUID from the document id, position and text.

    Example:
        >>> stable_chunk_id("a.md", 0, "hi") == stable_chunk_id("a.md", 0, "hi") != stable_chunk_id("a.md", 1, "hi")
        True
    """
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    return str(uuid.uuid5(_ID_NAMESPACE, f"{document_id}\x00{index}\x00{digest}"))


_ID_NAMESPACE = uuid.UUID("6f1c3a52-8e0b-4d7e-9a51-2c4b7d9e0f13")

T = TypeVar("T")


def number_chunks(pieces: Iterable[tuple[str, str]]) -> list[Chunk | None]:
    """Chunks for a splitter's output: (document id, text) pairs in order, numbered per document.

    Blank pieces are skipped (None in their place) and not counted, so every adapter gives a
    chunk the same index and the same `stable_chunk_id` whatever blanks its splitter emits.

    Example:
        >>> [c and (c.document_id, c.index) for c in number_chunks([("a", "x"), ("a", " "), ("a", "y"), ("b", "z")])]
        [('a', 0), None, ('a', 1), ('b', 0)]
    """
    counters: dict[str, int] = {}
    out: list[Chunk | None] = []
    for document_id, text in pieces:
        if not text.strip():
            out.append(None)
            continue
        index = counters.get(document_id, 0)
        counters[document_id] = index + 1
        out.append(Chunk(stable_chunk_id(document_id, index, text), document_id, text, index))
    return out


def distinct_documents(items: Iterable[T], id_of: Callable[[T], str], text_of: Callable[[T], str]) -> list[T]:
    """`items` with repeats of a document (same id, same text) dropped; ValueError when two
    different texts share an id. What the contextualizer and both adapters do with their input.

    Example:
        >>> distinct_documents([("a", "x"), ("a", "x"), ("b", "y")], lambda d: d[0], lambda d: d[1])
        [('a', 'x'), ('b', 'y')]
    """
    seen: dict[str, str] = {}
    out: list[T] = []
    for item in items:
        ident, text = id_of(item), text_of(item)
        if ident in seen:
            if seen[ident] != text:
                raise InputError(f"two different documents share the id {ident!r}: give each document a unique id")
            continue
        seen[ident] = text
        out.append(item)
    return out


def _check_text(kind: str, ident: str, text: object) -> None:
    if not isinstance(ident, str) or not ident:
        raise InputError(f"{kind} id must be a non-empty string, got {ident!r}")
    if isinstance(text, (bytes, bytearray)):
        raise InputTypeError(
            f"{kind} {ident!r}: text is bytes; decode it first, e.g. "
            "data.decode('utf-8', errors='replace')"
        )
    if not isinstance(text, str):
        raise InputTypeError(f"{kind} {ident!r}: text must be str, got {type(text).__name__}")
