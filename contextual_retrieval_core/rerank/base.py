"""The `Reranker` protocol and the pass-through default."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from contextual_retrieval_core.checks import positive_int
from contextual_retrieval_core.errors import InputTypeError

__all__ = [
    "Reranker",
    "RerankResult",
    "PassThroughReranker",
    "check_top_n",
    "candidate_texts",
    "best_first",
    "OnRerankError",
    "ON_RERANK_ERROR",
    "describe_error",
]

#: what a query does when its reranker raises: "raise" (the default) or "fused" (return the fused
#: order, the error reported on every hit)
OnRerankError = Literal["raise", "fused"]
ON_RERANK_ERROR: tuple[str, ...] = ("raise", "fused")


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
    """TypeError / ValueError unless `top_n` is None or a positive integer."""
    positive_int("top_n", top_n, allow_none=True)


def candidate_texts(texts: Sequence[str]) -> list[str]:
    """The candidates as a list; a bare string is a mistake, not 1 candidate per character."""
    if isinstance(texts, str):
        raise InputTypeError("pass a list of candidate texts, not a single string")
    return list(texts)


def best_first(results: list[RerankResult], top_n: int | None) -> list[RerankResult]:
    """Results sorted by score (desc), ties by input position, cut to `top_n`."""
    ranked = sorted(results, key=lambda r: (-r.score, r.index))
    return ranked if top_n is None else ranked[:top_n]


_KEY_VARS = ("ANTHROPIC_API_KEY", "COHERE_API_KEY", "CO_API_KEY", "VOYAGE_API_KEY")
_SECRET = re.compile(r"(?i)(bearer\s+|api[_-]?key[\"']?\s*[=:]\s*[\"']?)[A-Za-z0-9._\-]{6,}")


def describe_error(exc: BaseException, limit: int = 300) -> str:
    """"Type: message" for a failed call, for result metadata and logs: an HTTP error as its status
    and the API's message (never its headers), API keys from the environment and anything that
    looks like a bearer token or api_key masked, cut to `limit` characters.

    Example:
        >>> describe_error(RuntimeError("upstream said no"))
        'RuntimeError: upstream said no'
    """
    status, body = getattr(exc, "status_code", None), getattr(exc, "body", None)
    if isinstance(status, int):
        detail = body.get("message", body) if isinstance(body, dict) else body
        text = f"HTTP {status}: {detail}" if detail not in (None, "") else f"HTTP {status}"
    else:
        text = str(exc)
    for name in _KEY_VARS:
        key = os.environ.get(name)
        if key and len(key) >= 6:
            text = text.replace(key, "***")
    text = _SECRET.sub(lambda m: m.group(1) + "***", " ".join(text.split()))
    out = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return out if len(out) <= limit else out[: limit - 3] + "..."
