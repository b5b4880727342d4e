"""`CrossEncoderReranker`: a local sentence-transformers cross-encoder, or any model with `predict`.

sentence-transformers is optional (`pip install 'contextual-retrieval-kit[crossencoder]'`) and imported
only when a model is loaded by name.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from contextual_retrieval_core._sdk import in_thread
from contextual_retrieval_core.errors import InputError, InputTypeError, MissingDependencyError
from contextual_retrieval_core.rerank.base import RerankResult, best_first, candidate_texts, check_top_n

__all__ = ["CrossEncoderReranker", "PairScorer"]

DEFAULT_CROSS_ENCODER = "cross-encoder/ms-marco-MiniLM-L-6-v2"
_INSTALL_HINT = (
    "CrossEncoderReranker needs sentence-transformers: pip install 'contextual-retrieval-kit[crossencoder]' "
    "(or pass model= any object with a predict(list_of_pairs) method)"
)


@runtime_checkable
class PairScorer(Protocol):
    """Anything that scores (query, text) pairs, like `sentence_transformers.CrossEncoder`."""

    def predict(self, sentences: list[tuple[str, str]]) -> Any:
        ...


class CrossEncoderReranker:
    """Reranks candidates with a cross-encoder that scores each (query, text) pair.

    Args:
        model_name: a sentence-transformers CrossEncoder to load (default
            "cross-encoder/ms-marco-MiniLM-L-6-v2"); with `model=` it is only the reported name.
        model: an already built scorer with `predict(list_of_pairs) -> scores`; nothing is loaded.
        max_length: the CrossEncoder's max sequence length (when loading by name).
        device: the torch device (when loading by name), e.g. "cpu" or "cuda".

    Example:
        >>> class Overlap:
        ...     def predict(self, pairs):
        ...         return [len(set(q.split()) & set(t.split())) for q, t in pairs]
        >>> reranker = CrossEncoderReranker("overlap", model=Overlap())
        >>> [r.index for r in reranker.rerank("red fox", ["blue sky", "red fox", "red car"])]
        [1, 2, 0]
    """

    def __init__(
        self,
        model_name: str = DEFAULT_CROSS_ENCODER,
        *,
        model: PairScorer | None = None,
        max_length: int | None = None,
        device: str | None = None,
    ) -> None:
        self.model_name = model_name
        if model is None:
            model = _load_cross_encoder(model_name, max_length=max_length, device=device)
        elif not callable(getattr(model, "predict", None)):
            raise InputTypeError(f"model must have a predict(list_of_pairs) method, got {type(model).__name__}")
        self.model = model

    def rerank(self, query: str, texts: Sequence[str], top_n: int | None = None) -> list[RerankResult]:
        """Scores `texts` against `query`; returns at most `top_n` results, best first."""
        check_top_n(top_n)
        items = candidate_texts(texts)
        if not items:
            return []
        scores = np.asarray(self.model.predict([(query, text) for text in items]), dtype=np.float64)
        if scores.ndim == 2 and scores.shape[1] == 1:
            scores = scores[:, 0]
        if scores.shape != (len(items),):
            raise InputError(
                f"{self.model_name}: predict returned scores of shape {scores.shape} for {len(items)} "
                "pairs; a reranking cross-encoder must return one score per pair"
            )
        return best_first([RerankResult(i, float(score)) for i, score in enumerate(scores)], top_n)

    async def arerank(self, query: str, texts: Sequence[str], top_n: int | None = None) -> list[RerankResult]:
        """`rerank` in a worker thread, so the event loop stays free while the model runs."""
        return await in_thread(self.rerank, query, texts, top_n)


def _load_cross_encoder(model_name: str, *, max_length: int | None, device: str | None) -> PairScorer:
    try:
        from sentence_transformers import CrossEncoder
    except ImportError as exc:
        raise MissingDependencyError(_INSTALL_HINT) from exc
    options: dict[str, Any] = {}
    if max_length is not None:
        options["max_length"] = max_length
    if device is not None:
        options["device"] = device
    return CrossEncoder(model_name, **options)
