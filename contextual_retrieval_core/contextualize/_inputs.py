"""What `Contextualizer` checks before anything is paid for: documents and chunks of the right types,
one text per document id, every chunk naming a known document, no empty, binary or un-encodable
text, and which chunks do not occur in their document, verbatim or up to whitespace (situated all
the same, with a warning).
"""

from __future__ import annotations

from collections.abc import Sequence

from contextual_retrieval_core.errors import InputError, InputTypeError
from contextual_retrieval_core.types import Chunk, Document, distinct_documents

__all__ = ["validate_inputs", "check_utf8"]


def check_utf8(text: str, what: str) -> None:
    """Refuse text the API (JSON, UTF-8) and the store cannot take: lone surrogates."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InputError(
            f"{what} cannot be encoded as UTF-8 ({exc.reason}: {text[exc.start]!r} at character {exc.start}), "
            "as a file read with errors='surrogateescape' leaves it; read the file with its real encoding or "
            "with errors='replace' before contextualizing"
        ) from None


def validate_inputs(
    documents: Sequence[Document], chunks: Sequence[Chunk]
) -> tuple[dict[str, Document], list[Chunk], list[str], int]:
    """Check the inputs before anything is paid for; returns docs by id, chunks, flags."""
    if isinstance(documents, (str, Document)) or isinstance(chunks, (str, Chunk)):
        raise InputTypeError("pass lists: contextualize([document, ...], [chunk, ...])")
    for doc in documents:
        if not isinstance(doc, Document):
            raise InputTypeError(f"documents must be Document objects, got {type(doc).__name__}")
    docs: dict[str, Document] = {}
    # the same document passed twice is situated once; two texts under one id are an error
    for doc in distinct_documents(documents, lambda d: d.id, lambda d: d.text):
        if "\x00" in doc.text:
            raise InputError(
                f"document {doc.id!r} looks binary (it contains NUL bytes); extract its text first or leave it out"
            )
        check_utf8(doc.text, f"document {doc.id!r}")
        docs[doc.id] = doc
    ordered: list[Chunk] = []
    seen: set[str] = set()
    used: set[str] = set()
    not_in_doc: list[str] = []
    flat: dict[str, str] = {}
    for chunk in chunks:
        if not isinstance(chunk, Chunk):
            raise InputTypeError(f"chunks must be Chunk objects, got {type(chunk).__name__}")
        if chunk.id in seen:
            raise InputError(f"duplicate chunk id {chunk.id!r}: every chunk needs a unique id")
        seen.add(chunk.id)
        if chunk.document_id not in docs:
            raise InputError(
                f"chunk {chunk.id!r} names document {chunk.document_id!r}, which is not among the documents passed"
            )
        doc = docs[chunk.document_id]
        if not chunk.text.strip():
            raise InputError(f"chunk {chunk.id!r} is empty; drop empty chunks before contextualizing")
        if "\x00" in chunk.text:
            raise InputError(f"chunk {chunk.id!r} looks binary (it contains NUL bytes)")
        check_utf8(chunk.text, f"chunk {chunk.id!r} of document {doc.id!r}")
        if not doc.text.strip():
            raise InputError(
                f"document {doc.id!r} is empty but has chunks (first: {chunk.id!r}); pass the document's full text"
            )
        if chunk.text not in doc.text and " ".join(chunk.text.split()) not in _spaced(doc, flat):
            not_in_doc.append(chunk.id)
        used.add(doc.id)
        ordered.append(chunk)
    return docs, ordered, not_in_doc, len(docs) - len(used)


def _spaced(doc: Document, flat: dict[str, str]) -> str:
    """The document's words joined by single spaces (computed once per document): a chunk whose
    splitter re-joined sentences with other whitespace (semantic chunkers do) still counts as
    found in its document."""
    if doc.id not in flat:
        flat[doc.id] = " ".join(doc.text.split())
    return flat[doc.id]
