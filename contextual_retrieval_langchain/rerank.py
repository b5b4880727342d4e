"""`RerankCompressor`: the core rerankers as a LangChain `BaseDocumentCompressor`.

Cohere by default (``rerank-v3.5`` through `ClientV2` / `AsyncClientV2`), Voyage or a local
cross-encoder too; use it in `ContextualCompressionRetriever` or as the ensemble's reranker.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import Callbacks
from langchain_core.documents import BaseDocumentCompressor
from langchain_core.documents import Document as LCDocument
from pydantic import ConfigDict, Field

from contextual_retrieval_core.errors import InputTypeError
from contextual_retrieval_core.rerank.base import Reranker, RerankResult
from contextual_retrieval_core.search.ranked import DEFAULT_TOP_K

__all__ = ["RerankCompressor", "RELEVANCE_SCORE_KEY"]

#: metadata key of the reranker's score (as LangChain's own rerank compressors name it)
RELEVANCE_SCORE_KEY = "relevance_score"


class RerankCompressor(BaseDocumentCompressor):
    """Reranks retrieved Documents (their page_content: context + chunk) and keeps the `top_n` best.

    Args:
        reranker: a core `Reranker` (`CohereReranker`, `VoyageReranker`, `CrossEncoderReranker`,
            ...); default: a `CohereReranker` built from `model`, `client` and `async_client`.
        model: the Cohere rerank model when `reranker` is not given (default "rerank-v3.5").
        client / async_client: a ready `cohere.ClientV2` / `cohere.AsyncClientV2` (built from
            COHERE_API_KEY when omitted).
        top_n: how many Documents to keep (None: all, reordered).

    Example:
        >>> from langchain_core.documents import Document
        >>> from contextual_retrieval_core.rerank import PassThroughReranker
        >>> compressor = RerankCompressor(reranker=PassThroughReranker(), top_n=1)
        >>> [(d.page_content, d.metadata["relevance_score"])
        ...  for d in compressor.compress_documents([Document("a"), Document("b")], "q")]
        [('a', 1.0)]
        >>> import cohere
        >>> cohere_rerank = RerankCompressor(client=cohere.ClientV2(api_key="..."))  # doctest: +SKIP
        >>> voyage_rerank = RerankCompressor.voyage(client=voyageai.Client(api_key="..."))  # doctest: +SKIP
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    reranker: Any | None = None
    model: str = "rerank-v3.5"
    client: Any | None = Field(default=None, exclude=True)
    async_client: Any | None = Field(default=None, exclude=True)
    top_n: int | None = Field(default=DEFAULT_TOP_K, gt=0)

    def model_post_init(self, context: Any) -> None:
        if self.reranker is None:
            from contextual_retrieval_core.rerank.cohere import CohereReranker

            self.reranker = CohereReranker(self.model, client=self.client, async_client=self.async_client)
        elif not (callable(getattr(self.reranker, "rerank", None)) and callable(getattr(self.reranker, "arerank", None))):
            raise InputTypeError(
                f"reranker must be a core Reranker (rerank/arerank), got {type(self.reranker).__name__}; "
                "see contextual_retrieval_core.rerank"
            )
        else:  # report the model actually used
            self.model = str(getattr(self.reranker, "model_name", None) or type(self.reranker).__name__)

    @classmethod
    def voyage(cls, model: str = "rerank-2.5", *, client: Any = None, async_client: Any = None, top_n: int | None = DEFAULT_TOP_K, **kwargs: Any) -> RerankCompressor:
        """Rerank with Voyage (`VoyageReranker`; the key from VOYAGE_API_KEY when no client is given)."""
        from contextual_retrieval_core.rerank.voyage import VoyageReranker

        return cls(reranker=VoyageReranker(model, client=client, async_client=async_client, **kwargs), top_n=top_n)

    def _core(self) -> Reranker:
        """The core reranker (set when the compressor was built)."""
        assert self.reranker is not None
        return self.reranker

    def compress_documents(
        self, documents: Sequence[LCDocument], query: str, callbacks: Callbacks | None = None
    ) -> list[LCDocument]:
        docs = list(documents)
        if not docs:
            return []
        return _pick(docs, self._core().rerank(query, [d.page_content for d in docs], top_n=self.top_n))

    async def acompress_documents(
        self, documents: Sequence[LCDocument], query: str, callbacks: Callbacks | None = None
    ) -> list[LCDocument]:
        docs = list(documents)
        if not docs:
            return []
        return _pick(docs, await self._core().arerank(query, [d.page_content for d in docs], top_n=self.top_n))


def _pick(docs: list[LCDocument], results: Sequence[RerankResult]) -> list[LCDocument]:
    return [
        docs[r.index].model_copy(update={"metadata": {**docs[r.index].metadata, RELEVANCE_SCORE_KEY: float(r.score)}})
        for r in results
    ]
