"""Fusing ranked lists from named sources, then optionally reranking: the query path's last steps.

`HybridSearcher` and both framework ensemble retrievers call these two functions, so fusion,
per-source ranks and reranking behave the same whichever framework runs the query.

Example:
    >>> hits = fuse_sources([("dense", [("a", 0.9), ("b", 0.8)], 0.5), ("bm25", [("b", 7.0)], 0.5)])
    >>> [(h.id, h.ranks) for h in hits]
    [('b', {'dense': 2, 'bm25': 1}), ('a', {'dense': 1, 'bm25': None})]
    >>> from contextual_retrieval_core.rerank import PassThroughReranker
    >>> [h.id for h in rerank_hits("q", hits, {"a": "A", "b": "B"}.__getitem__, PassThroughReranker(), top_k=1)]
    ['b']
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable, Sequence
from itertools import repeat
from typing import Any, NamedTuple

from contextual_retrieval_core.checks import positive_int
from contextual_retrieval_core.errors import InputError
from contextual_retrieval_core.rerank.base import ON_RERANK_ERROR, OnRerankError, Reranker, describe_error
from contextual_retrieval_core.search.rank_fusion import DEFAULT_DEPTH, DEFAULT_RRF_K, FusionMode, fused_columns

logger = logging.getLogger(__name__)

__all__ = [
    "RankedHit",
    "Source",
    "fuse_sources",
    "rerank_hits",
    "arerank_hits",
    "fallback_hits",
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
    "RERANK_ERROR_KEY",
]

#: Dense and BM25 get an equal say by default. Anthropic's cookbook uses 0.8 / 0.2 with a strong
#: hosted embedder (voyage-2); a small local embedder is no stronger than BM25, so neither side is
#: favoured. Pass `weights=(0.8, 0.2)` with a hosted embedder to follow the cookbook.
DEFAULT_WEIGHTS: tuple[float, float] = (0.5, 0.5)
#: results returned, as in the cookbook's top-20 evaluation.
DEFAULT_TOP_K: int = 20

#: metadata keys both framework retrievers put on their results: the final score, the fusion
#: score, {source name: 1-based rank or None}, and the reranker's score when reranked
SCORE_KEY = "score"
FUSED_SCORE_KEY = "fused_score"
RANKS_KEY = "ranks"
RERANK_SCORE_KEY = "rerank_score"
#: metadata key of the reranker's failure ("Type: message") when on_rerank_error="fused" kept the
#: fused order
RERANK_ERROR_KEY = "rerank_error"

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
        rerank_error: why the reranker failed ("Type: message", secrets masked) when the fused
            order was kept instead (``on_rerank_error="fused"``); None otherwise.
    """

    id: Hashable
    score: float
    ranks: dict[str, int | None]
    fused_score: float
    rerank_score: float | None = None
    rerank_error: str | None = None

    def result_metadata(self) -> dict[str, Any]:
        """What a framework result carries of this hit in its metadata: `FUSED_SCORE_KEY`,
        `RANKS_KEY`, and `RERANK_SCORE_KEY` / `RERANK_ERROR_KEY` when there is one."""
        meta: dict[str, Any] = {FUSED_SCORE_KEY: self.fused_score, RANKS_KEY: dict(self.ranks)}
        if self.rerank_score is not None:
            meta[RERANK_SCORE_KEY] = self.rerank_score
        if self.rerank_error is not None:
            meta[RERANK_ERROR_KEY] = self.rerank_error
        return meta


def default_weights(n: int) -> list[float]:
    """(0.5, 0.5) for a dense + BM25 pair (`DEFAULT_WEIGHTS`), equal weights otherwise."""
    if n < 1:
        raise InputError("pass at least one source")
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
        raise InputError(f"source names must be unique, got {names}")
    lists = [_first_occurrences(hits, scored=mode != "rrf") for _, hits, _ in sources]
    columns = fused_columns(lists, [w for _, _, w in sources], mode=mode, rrf_k=rrf_k, depth=depth, top_k=top_k)
    new = tuple.__new__  # a fused query makes up to 2 x depth hits: no per-hit Python frame
    if len(names) == 2:  # dense + BM25, the common case: a dict display, cheaper than dict(zip())
        first, second = names
        return [new(RankedHit, (item, score, {first: a, second: b}, score, None, None))
                for item, score, a, b in zip(columns.ids, columns.scores, *columns.ranks)]
    rows = zip(*columns.ranks) if columns.ranks else repeat(())
    return [new(RankedHit, (item, score, dict(zip(names, ranks)), score, None, None))
            for item, score, ranks in zip(columns.ids, columns.scores, rows)]


def _first_occurrences(hits: Sequence[tuple[Hashable, float | None]], scored: bool = True) -> list[tuple[Hashable, Any]]:
    """`hits` without repeated ids (the first occurrence kept); with `scored`, each score a float
    (1 / position for None). Reciprocal-rank fusion reads only the ids: their scores pass as they are."""
    if not scored:
        hits = list(hits)
        if len({item for item, _ in hits}) == len(hits):
            return hits
        seen: set = set()
        return [(item, score) for item, score in hits if not (item in seen or seen.add(item))]  # type: ignore[func-returns-value]
    seen = set()
    out: list[tuple[Hashable, Any]] = []
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
    top_k: int | None = None,
    rerank_depth: int | None = None,
    on_rerank_error: OnRerankError = "raise",
) -> list[RankedHit]:
    """The top `top_k` (default 20): reranked from the first `rerank_depth` fused hits (default:
    all), or the fused order cut.

    When the reranker raises and `on_rerank_error` is "fused", the fused order is returned instead,
    each hit carrying the error in `rerank_error`; with "raise" (the default) the error propagates.
    """
    top_k, pool = _rerank_args(hits, reranker, top_k, rerank_depth, on_rerank_error)
    if reranker is None or not pool:
        return list(hits[:top_k])
    try:
        results = reranker.rerank(query, [text_of(h.id) for h in pool], top_n=top_k)
    except Exception as exc:
        return _fallback(exc, pool, top_k, on_rerank_error)
    return _reranked(pool, results)


async def arerank_hits(
    query: str,
    hits: Sequence[RankedHit],
    text_of: Callable[[Hashable], str],
    reranker: Reranker | None,
    *,
    top_k: int | None = None,
    rerank_depth: int | None = None,
    on_rerank_error: OnRerankError = "raise",
) -> list[RankedHit]:
    """Async `rerank_hits` (the reranker's `arerank`)."""
    top_k, pool = _rerank_args(hits, reranker, top_k, rerank_depth, on_rerank_error)
    if reranker is None or not pool:
        return list(hits[:top_k])
    try:
        results = await reranker.arerank(query, [text_of(h.id) for h in pool], top_n=top_k)
    except Exception as exc:
        return _fallback(exc, pool, top_k, on_rerank_error)
    return _reranked(pool, results)


def _rerank_args(
    hits: Sequence[RankedHit], reranker: Reranker | None, top_k: Any, rerank_depth: Any, on_rerank_error: str
) -> tuple[int, list[RankedHit]]:
    top_k = positive_int("top_k", top_k, allow_none=True)
    rerank_depth = positive_int("rerank_depth", rerank_depth, allow_none=True)
    if on_rerank_error not in ON_RERANK_ERROR:
        raise InputError(f"on_rerank_error must be 'raise' or 'fused', not {on_rerank_error!r}")
    top_k = DEFAULT_TOP_K if top_k is None else top_k
    return top_k, (list(hits[: rerank_depth or len(hits)]) if reranker is not None else [])


def fallback_hits(exc: BaseException, hits: Sequence[RankedHit], top_k: int) -> list[RankedHit]:
    """The fused order cut to `top_k`, each hit marked with why the reranker failed (and logged)."""
    error = describe_error(exc)
    logger.warning("the reranker failed (%s); keeping the fused order", error)
    return [h._replace(rerank_error=error) for h in hits[:top_k]]


def _fallback(exc: Exception, pool: list[RankedHit], top_k: int, on_rerank_error: str) -> list[RankedHit]:
    if on_rerank_error != "fused":
        raise exc
    return fallback_hits(exc, pool, top_k)


def _reranked(pool: list[RankedHit], results: Sequence) -> list[RankedHit]:
    return [pool[r.index]._replace(score=float(r.score), rerank_score=float(r.score)) for r in results]
