"""The `Reranker` protocol and the pass-through default."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence, runtime_checkable

__all__ = ["Reranker", "RerankResult", "PassThroughReranker", "check_top_n", "candidate_texts", "best_first"]


@dataclass(frozen=True)
class RerankResult:
    """One reranked candidate.

    Attributes:
        index: position of the candidate in the list given to `rerank`.
        score: the reranker's relevance score (higher is better).
    """

    index: int
    score: float


@runtime_checkable
class Reranker(Protocol):
    """Rescores candidate texts against a query; returns at most `top_n`, best first."""

    #: a stable name for the model, used in reports
    model_name: str

    def rerank(self, query: str, texts: Sequence[str], top_n: int | None = None) -> list[RerankResult]:
        ...

    async def arerank(self, query: str, texts: Sequence[str], top_n: int | None = None) -> list[RerankResult]:
        ...


class PassThroughReranker:
    """Keeps the incoming order; the default when no reranker is configured.

    Scores are 1/(1 + position), so they stay monotone with the input order.

    Example:
        >>> [r.index for r in PassThroughReranker().rerank("q", ["a", "b", "c"], top_n=2)]
        [0, 1]
    """

    model_name = "pass-through"

    def rerank(self, query: str, texts: Sequence[str], top_n: int | None = None) -> list[RerankResult]:
        check_top_n(top_n)
        n = len(texts) if top_n is None else min(top_n, len(texts))
        return [RerankResult(i, 1.0 / (1 + i)) for i in range(n)]

    async def arerank(self, query: str, texts: Sequence[str], top_n: int | None = None) -> list[RerankResult]:
        return self.rerank(query, texts, top_n)


def check_top_n(top_n: int | None) -> None:
    """ValueError unless `top_n` is None or a positive integer."""
    if top_n is not None and (isinstance(top_n, bool) or top_n <= 0):
        raise ValueError(f"top_n must be a positive integer or None, got {top_n}")


def candidate_texts(texts: Sequence[str]) -> list[str]:
    """The candidates as a list; a bare string is a mistake, not 1 candidate per character."""
    if isinstance(texts, str):
        raise TypeError("pass a list of candidate texts, not a single string")
    return list(texts)


def best_first(results: list[RerankResult], top_n: int | None) -> list[RerankResult]:
    """Results sorted by score (desc), ties by input position, cut to `top_n`."""
    ranked = sorted(results, key=lambda r: (-r.score, r.index))
    return ranked if top_n is None else ranked[:top_n]
