"""Rank fusion over any number of ranked id lists.

Two modes:

- `reciprocal_rank_fusion`: score(d) = sum_i w_i / (k + rank_i(d)), ranks 1-based. ``k=0``
  reproduces Anthropic's cookbook (``w / rank``); ``k=60`` is classic RRF.
- `relative_score_fusion`: each list's scores min-max normalised to [0, 1], then weighted and
  summed (LlamaIndex's "relative_score" mode).

Each list is cut at `depth` candidates (default 150, the cookbook's) before fusing, so the cost is
O(total candidates) whatever the corpus size. Ties in the fused score are broken by the best rank
any source gave, then by the order of first appearance: the result never depends on hash order.
"""

from __future__ import annotations

import math
from typing import Hashable, Literal, NamedTuple, Sequence

__all__ = ["FusedHit", "reciprocal_rank_fusion", "relative_score_fusion", "fuse", "FusionMode"]

FusionMode = Literal["rrf", "relative_score"]

DEFAULT_DEPTH = 150


class FusedHit(NamedTuple):
    """One fused result (a named tuple: cheap to build by the hundred per query).

    Attributes:
        id: the item's id.
        score: the fused score (higher is better).
        ranks: 1-based rank of the item in each input list, None where the list lacked it.
    """

    id: Hashable
    score: float
    ranks: tuple[int | None, ...] = ()


def reciprocal_rank_fusion(
    ranked_lists: Sequence[Sequence[Hashable]],
    weights: Sequence[float] | None = None,
    *,
    k: float = 60.0,
    depth: int | None = DEFAULT_DEPTH,
    top_k: int | None = None,
) -> list[FusedHit]:
    """Weighted reciprocal-rank fusion of ranked id lists (best first).

    Args:
        ranked_lists: one list of ids per retriever, best first. An id may appear once per list.
        weights: one non-negative weight per list (default: all equal). They need not sum to 1.
        k: the RRF constant; 0 gives the cookbook's ``w / rank``, 60 classic RRF.
        depth: candidates taken from each list (None: all).
        top_k: how many fused hits to return (None: all).

    Example:
        >>> [h.id for h in reciprocal_rank_fusion([["a", "b"], ["b", "c"]], [0.8, 0.2], k=0)]
        ['a', 'b', 'c']
    """
    lists, weights = _check(ranked_lists, weights, depth, top_k)
    if k < 0 or not math.isfinite(k):
        raise ValueError(f"k must be a finite number >= 0, got {k}")
    scores: dict[Hashable, float] = {}
    ranks: dict[Hashable, list[int | None]] = {}
    n = len(lists)
    for i, (ids, w) in enumerate(zip(lists, weights)):
        for rank, item in enumerate(ids, start=1):
            if item in scores:
                scores[item] += w / (k + rank)
                ranks[item][i] = rank
            else:
                scores[item] = w / (k + rank)
                ranks[item] = [None] * n
                ranks[item][i] = rank
    return _ranked(scores, ranks, top_k)


def relative_score_fusion(
    scored_lists: Sequence[Sequence[tuple[Hashable, float]]],
    weights: Sequence[float] | None = None,
    *,
    depth: int | None = DEFAULT_DEPTH,
    top_k: int | None = None,
) -> list[FusedHit]:
    """Weighted fusion of min-max normalised scores.

    Args:
        scored_lists: one list of (id, score) pairs per retriever, best first.
        weights: one non-negative weight per list (default: all equal).
        depth: candidates taken from each list (None: all).
        top_k: how many fused hits to return (None: all).

    A list whose scores are all equal contributes its full weight to each of its items.
    """
    ids_only = [[item for item, _ in pairs] for pairs in scored_lists]
    lists, weights = _check(ids_only, weights, depth, top_k)
    scores: dict[Hashable, float] = {}
    ranks: dict[Hashable, list[int | None]] = {}
    n = len(lists)
    for i, (pairs, w) in enumerate(zip(scored_lists, weights)):
        pairs = list(pairs)[: len(lists[i])]
        if not pairs:
            continue
        values = [float(s) for _, s in pairs]
        if not all(math.isfinite(v) for v in values):
            raise ValueError(f"list {i} has a score that is not a finite number")
        lo, hi = min(values), max(values)
        span = hi - lo
        for rank, ((item, _), value) in enumerate(zip(pairs, values), start=1):
            norm = (value - lo) / span if span > 0 else 1.0
            scores[item] = scores.get(item, 0.0) + w * norm
            ranks.setdefault(item, [None] * n)[i] = rank
    return _ranked(scores, ranks, top_k)


def fuse(
    scored_lists: Sequence[Sequence[tuple[Hashable, float]]],
    weights: Sequence[float] | None = None,
    *,
    mode: FusionMode = "rrf",
    k: float = 60.0,
    depth: int | None = DEFAULT_DEPTH,
    top_k: int | None = None,
) -> list[FusedHit]:
    """Fuse (id, score) lists with either mode; the one entry point the retrievers use."""
    if mode == "rrf":
        return reciprocal_rank_fusion(
            [[item for item, _ in pairs] for pairs in scored_lists], weights, k=k, depth=depth, top_k=top_k
        )
    if mode == "relative_score":
        return relative_score_fusion(scored_lists, weights, depth=depth, top_k=top_k)
    raise ValueError(f"mode must be 'rrf' or 'relative_score', not {mode!r}")


def _check(
    lists: Sequence[Sequence[Hashable]],
    weights: Sequence[float] | None,
    depth: int | None,
    top_k: int | None,
) -> tuple[list[Sequence[Hashable]], list[float]]:
    if isinstance(lists, (str, bytes)) or not isinstance(lists, Sequence):
        raise TypeError("ranked_lists must be a sequence of ranked id lists")
    if depth is not None and (isinstance(depth, bool) or depth <= 0):
        raise ValueError(f"depth must be a positive integer or None, got {depth!r}")
    if top_k is not None and (isinstance(top_k, bool) or top_k <= 0):
        raise ValueError(f"top_k must be a positive integer or None, got {top_k!r}")
    if weights is None:
        weights = [1.0] * len(lists)
    weights = [float(w) for w in weights]
    if len(weights) != len(lists):
        raise ValueError(f"got {len(weights)} weights for {len(lists)} ranked lists; pass one weight per list")
    if any(w < 0 or not math.isfinite(w) for w in weights):
        raise ValueError(f"weights must be finite and >= 0, got {weights}")
    cut: list[Sequence[Hashable]] = []
    for i, ids in enumerate(lists):
        ids = list(ids)[:depth] if depth is not None else list(ids)
        if len(set(ids)) != len(ids):
            seen: set[Hashable] = set()
            dup = next(x for x in ids if x in seen or seen.add(x))  # type: ignore[func-returns-value]
            raise ValueError(f"ranked list {i} holds id {dup!r} twice; dedupe each list before fusing")
        cut.append(ids)
    return cut, weights


def _ranked(
    scores: dict[Hashable, float], ranks: dict[Hashable, list[int | None]], top_k: int | None
) -> list[FusedHit]:
    # sort key: fused score (desc), best rank any source gave (asc), first appearance (asc)
    big = float("inf")
    keyed = [
        (-score, min([big if r is None else r for r in ranks[item]]), pos, item)
        for pos, (item, score) in enumerate(scores.items())
    ]
    keyed.sort(key=lambda t: t[:3])
    if top_k is not None:
        keyed = keyed[:top_k]
    return [FusedHit(item, -neg, tuple(ranks[item])) for neg, _, _, item in keyed]
