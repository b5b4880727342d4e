"""Rank fusion over any number of ranked id lists.

Two modes:

- `reciprocal_rank_fusion`: score(d) = sum_i w_i / (rrf_k + rank_i(d)), ranks 1-based.
  ``rrf_k=0`` (the default everywhere in this library) reproduces Anthropic's cookbook
  (``w / rank``); ``rrf_k=60`` is classic RRF.
- `relative_score_fusion`: each list's scores min-max normalised to [0, 1], then weighted and
  summed (LlamaIndex's "relative_score" mode).

Each list is cut at `depth` candidates (default 150, the cookbook's) before fusing, so the cost is
O(total candidates) whatever the corpus size. Ties in the fused score are broken by the best rank
any source gave, then by the order of first appearance: the result never depends on hash order.
"""

from __future__ import annotations

import math
from typing import Any, Hashable, Literal, NamedTuple, Sequence

from .checks import fusion_weights, non_negative_number, not_a_string, positive_int, renamed_keyword

__all__ = [
    "FusedHit",
    "reciprocal_rank_fusion",
    "relative_score_fusion",
    "fuse",
    "FusionMode",
    "FUSION_MODES",
    "DEFAULT_DEPTH",
    "DEFAULT_RRF_K",
]

FusionMode = Literal["rrf", "relative_score"]
FUSION_MODES: tuple[str, ...] = ("rrf", "relative_score")

#: candidates taken from each ranked list (the cookbook's 150)
DEFAULT_DEPTH = 150
#: the RRF constant: 0 is the cookbook's ``w / rank`` (1-based ranks)
DEFAULT_RRF_K: float = 0.0


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
    rrf_k: float | None = None,
    depth: int | None = DEFAULT_DEPTH,
    top_k: int | None = None,
    k: Any = None,
) -> list[FusedHit]:
    """Weighted reciprocal-rank fusion of ranked id lists (best first).

    Args:
        ranked_lists: one list of ids per retriever, best first. An id may appear once per list.
        weights: one non-negative weight per list (default: all equal). They need not sum to 1.
        rrf_k: the RRF constant (default 0, the cookbook's ``w / rank``; 60 is classic RRF).
        depth: candidates taken from each list (None: all).
        top_k: how many fused hits to return (None: all).
        k: the old name of `rrf_k` (deprecated).

    Example:
        >>> [h.id for h in reciprocal_rank_fusion([["a", "b"], ["b", "c"]], [0.8, 0.2])]
        ['a', 'b', 'c']
    """
    rrf_k = renamed_keyword("reciprocal_rank_fusion", "k", "rrf_k", k, rrf_k)
    k = non_negative_number("rrf_k", DEFAULT_RRF_K if rrf_k is None else rrf_k)
    lists, weights = _check(ranked_lists, weights, depth, top_k)
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
    not_a_string("scored_lists", scored_lists, "(id, score) lists")
    for i, pairs in enumerate(scored_lists):
        not_a_string(f"scored_lists[{i}]", pairs, "(id, score) pairs")
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
    rrf_k: float | None = None,
    depth: int | None = DEFAULT_DEPTH,
    top_k: int | None = None,
    k: Any = None,
) -> list[FusedHit]:
    """Fuse (id, score) lists with either mode; the one entry point the retrievers use.

    `rrf_k` (default 0) is used by "rrf" only; `k` is its old name (deprecated)."""
    rrf_k = renamed_keyword("fuse", "k", "rrf_k", k, rrf_k)
    if mode == "rrf":
        not_a_string("scored_lists", scored_lists, "(id, score) lists")
        return reciprocal_rank_fusion(
            [[item for item, _ in pairs] for pairs in scored_lists], weights, rrf_k=rrf_k, depth=depth, top_k=top_k
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
    not_a_string("ranked_lists", lists, "ranked id lists")
    if not isinstance(lists, Sequence):
        raise TypeError(f"ranked_lists must be a list of ranked id lists, got {type(lists).__name__}")
    for i, ids in enumerate(lists):
        not_a_string(f"ranked_lists[{i}]", ids, "ids")
    depth = positive_int("depth", depth, allow_none=True)
    top_k = positive_int("top_k", top_k, allow_none=True)
    weights = list(fusion_weights([1.0] * len(lists) if weights is None else weights, len(lists)))
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
