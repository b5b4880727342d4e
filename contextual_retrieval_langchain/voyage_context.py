"""`VoyageContextualizedEmbeddings`: Voyage's contextualized chunk embeddings as LangChain `Embeddings`.

LangChain's ``embed_documents(texts)`` gets a flat list with no document grouping, so there each
text is embedded as a document of its own. To give every chunk its document's context, pass the
chunks grouped: ``embed_document_chunks([[chunk, ...], ...])`` (one list per document, in
document order), or ``embed_grouped_documents(docs, key="source")`` for LangChain `Document`s
grouped by a metadata key. Queries go out with ``input_type="query"``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.documents import Document

from contextual_retrieval_core.embeddings.voyage_context import VoyageContextualizedEmbedder
from contextual_retrieval_core.errors import InputError
from contextual_retrieval_langchain.embeddings import EmbedderEmbeddings

__all__ = ["VoyageContextualizedEmbeddings"]


class VoyageContextualizedEmbeddings(EmbedderEmbeddings):
    """`EmbedderEmbeddings` over `VoyageContextualizedEmbedder` (default model "voyage-context-3").

    Example:
        >>> import voyageai
        >>> emb = VoyageContextualizedEmbeddings(client=voyageai.Client(api_key="pa-..."))  # doctest: +SKIP
        >>> emb.embed_document_chunks([["intro", "body"], ["other"]])  # doctest: +SKIP
    """

    def __init__(self, model: str = "voyage-context-3", *, client: Any = None, async_client: Any = None, **options: Any) -> None:
        super().__init__(embedder=VoyageContextualizedEmbedder(model, client=client, async_client=async_client, **options))

    def embed_document_chunks(self, documents: Sequence[Sequence[str]]) -> list[list[list[float]]]:
        """One list of chunk vectors per document; each document's chunks embedded together."""
        return [v.astype(float).tolist() for v in self.embedder.embed_document_chunks(documents)]

    def embed_grouped_documents(self, documents: Sequence[Document], key: str = "source") -> list[list[float]]:
        """Vectors of `documents` in order, those with the same ``metadata[key]`` embedded together."""
        missing = [i for i, d in enumerate(documents) if key not in d.metadata]
        if missing:
            raise InputError(f"documents[{missing[0]}] has no metadata[{key!r}]; pass key= naming the document field")
        vectors = self.embedder.embed_grouped([d.page_content for d in documents], [str(d.metadata[key]) for d in documents])
        return vectors.astype(float).tolist()
