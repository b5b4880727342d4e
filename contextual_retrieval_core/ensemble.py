"""Fusing ranked lists from named sources, then optionally reranking: the query path's last steps.

`HybridSearcher` and both framework ensemble retrievers call these two functions, so fusion,
per-source ranks and reranking behave the same whichever framework runs the query.

Example:
    >>> hits = fuse_sources([("dense", [("a", 0.9), ("b", 0.8)], 0.5), ("bm25", [("b", 7.0)], 0.5)])
    >>> [(h.id, h.ranks) for h in hits]
    [('b', {'dense': 2, 'bm25': 1}), ('a', {'dense': 1, 'bm25': None})]
    >>> from contextual_retrieval_core.rerank import PassThroughReranker
    >>> [h.id for h in rerank_hits("q", hits, {"a": "A", "b": "B"}.__getitem__, PassThroughReranker(), k=1)]
    ['b']
"""

from __future__ import annotations

from typing import Callable, Hashable, NamedTuple, Sequence

from .fusion import DEFAULT_DEPTH, FusionMode, fuse
from .rerank.base import Reranker

__all__ = [
    "RankedHit",
    "Source",
    "fuse_sources",
    "rerank_hits",
    "arerank_hits",
    "default_weights",
    "unique_names",
    "DEFAULT_WEIGHTS",
    "DEFAULT_RRF_K",
    "DEFAULT_TOP_K",
    "DEFAULT_DEPTH",
    "SCORE_KEY",
    "FUSED_SCORE_KEY",
    "RANKS_KEY",
    "RERANK_SCORE_KEY",
]

#: Dense and BM25 get an equal say by default. Anthropic's cookbook uses 0.8 / 0.2 with a strong
#: hosted embedder (voyage-2); a small local embedder is no stronger than BM25, so neither side is
#: favoured. Pass `weights=(0.8, 0.2)` with a hosted embedder to follow the cookbook.
DEFAULT_WEIGHTS: tuple[float, float] = (0.5, 0.5)
#: RRF constant: 0 is the cookbook's ``w / rank`` (1-based ranks).
DEFAULT_RRF_K: float = 0.0
#: results returned, as in the cookbook's top-20 evaluation.
DEFAULT_TOP_K: int = 20

#: metadata keys both framework retrievers put on their results: the final score, the fusion
#: score, {source name: 1-based rank or None}, and the reranker's score when reranked
SCORE_KEY = "score"
FUSED_SCORE_KEY = "fused_score"
RANKS_KEY = "ranks"
RERANK_SCORE_KEY = "rerank_score"

#: (source name, [(id, score), ...] best first, weight); a score may be None when the source
#: reports none (relative-score fusion then uses 1 / rank)
Source = tuple[str, Sequence[tuple[Hashable, "float | None"]], float]


class RankedHit(NamedTuple):
    """One result of fusion (and reranking).

    Attributes:
        id: the item's id.
        score: the final score: the reranker's when reranked, else the fused score.
        ranks: 1-based rank in each source by name, None where the source missed it.
        fused_score: the fusion score.
        rerank_score: the reranker's score (None when not reranked).
    """

    id: Hashable
    score: float
    ranks: dict[str, int | None]
    fused_score: float
    rerank_score: float | None = None


def default_weights(n: int) -> list[float]:
    """(0.5, 0.5) for a dense + BM25 pair (`DEFAULT_WEIGHTS`), equal weights otherwise."""
    if n < 1:
        raise ValueError("pass at least one source")
    return list(DEFAULT_WEIGHTS) if n == 2 else [1.0 / n] * n


def unique_names(names: Sequence[str]) -> list[str]:
    """`names` with repeats numbered ("bm25", "bm25_2", ...), for naming sources.

    Example:
        >>> unique_names(["dense", "bm25", "bm25"])
        ['dense', 'bm25', 'bm25_2']
    """
    out: list[str] = []
    for name in names:
        candidate, n = name, 2
        while candidate in out:
            candidate, n = f"{name}_{n}", n + 1
        out.append(candidate)
    return out


def fuse_sources(
    sources: Sequence[Source],
    *,
    mode: FusionMode = "rrf",
    rrf_k: float = DEFAULT_RRF_K,
    depth: int | None = DEFAULT_DEPTH,
    top_k: int | None = None,
) -> list[RankedHit]:
    """Fuse named, weighted (id, score) lists; each hit carries its rank in every source.

    A source that lists an id more than once keeps its first (best) occurrence; a missing (None)
    score counts as 1 / rank.
    """
    names = [name for name, _, _ in sources]
    if len(set(names)) != len(names):
        raise ValueError(f"source names must be unique, got {names}")
    lists = [_first_occurrences(hits) for _, hits, _ in sources]
    fused = fuse(lists, [w for _, _, w in sources], mode=mode, k=rrf_k, depth=depth, top_k=top_k)
    return [RankedHit(h.id, h.score, dict(zip(names, h.ranks)), h.score) for h in fused]


def _first_occurrences(hits: Sequence[tuple[Hashable, float | None]]) -> list[tuple[Hashable, float]]:
    seen: set = set()
    out: list[tuple[Hashable, float]] = []
    for item, score in hits:
        if item not in seen:
            seen.add(item)
            out.append((item, float(score) if score is not None else 1.0 / (len(out) + 1)))
    return out


def rerank_hits(
    query: str,
    hits: Sequence[RankedHit],
    text_of: Callable[[Hashable], str],
    reranker: Reranker | None,
    *,
    k: int = DEFAULT_TOP_K,
    rerank_depth: int | None = None,
) -> list[RankedHit]:
    """The top `k`: reranked from the first `rerank_depth` fused hits, or the fused order cut."""
    _check_depth(rerank_depth)
    if reranker is None or not hits:
        return list(hits[:k])
    pool = list(hits[: rerank_depth or len(hits)])
    return _reranked(pool, reranker.rerank(query, [text_of(h.id) for h in pool], top_n=k))


async def arerank_hits(
    query: str,
    hits: Sequence[RankedHit],
    text_of: Callable[[Hashable], str],
    reranker: Reranker | None,
    *,
    k: int = DEFAULT_TOP_K,
    rerank_depth: int | None = None,
) -> list[RankedHit]:
    """Async `rerank_hits` (the reranker's `arerank`)."""
    _check_depth(rerank_depth)
    if reranker is None or not hits:
        return list(hits[:k])
    pool = list(hits[: rerank_depth or len(hits)])
    return _reranked(pool, await reranker.arerank(query, [text_of(h.id) for h in pool], top_n=k))


def _reranked(pool: list[RankedHit], results: Sequence) -> list[RankedHit]:
    return [pool[r.index]._replace(score=float(r.score), rerank_score=float(r.score)) for r in results]


def _check_depth(rerank_depth: int | None) -> None:
    if rerank_depth is not None and (isinstance(rerank_depth, bool) or rerank_depth <= 0):
        raise ValueError(f"rerank_depth must be a positive integer or None, got {rerank_depth!r}")
