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

Scores are summed per list with dict operations, the order comes from one stable `numpy.lexsort`
over (score, best rank) and the hits are built column-wise.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from itertools import repeat
from typing import Any, Literal, NamedTuple

import numpy as np

from contextual_retrieval_core.checks import fusion_weights, non_negative_number, not_a_string, positive_int
from contextual_retrieval_core.errors import InputError, InputTypeError

__all__ = [
    "FusedHit",
    "FusedColumns",
    "fused_columns",
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
) -> list[FusedHit]:
    """Weighted reciprocal-rank fusion of ranked id lists (best first).

    Args:
        ranked_lists: one list of ids per retriever, best first. An id may appear once per list.
        weights: one non-negative weight per list (default: all equal). They need not sum to 1.
        rrf_k: the RRF constant (default 0, the cookbook's ``w / rank``; 60 is classic RRF).
        depth: candidates taken from each list (None: all).
        top_k: how many fused hits to return (None: all).

    Example:
        >>> [h.id for h in reciprocal_rank_fusion([["a", "b"], ["b", "c"]], [0.8, 0.2])]
        ['a', 'b', 'c']
    """
    rrf = non_negative_number("rrf_k", DEFAULT_RRF_K if rrf_k is None else rrf_k)
    lists, weights = _check(ranked_lists, weights, depth, top_k)
    return _hits(_rrf_columns(lists, weights, rrf, top_k))


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
    return _hits(_relative_columns(scored_lists, weights, depth, top_k))


def fuse(
    scored_lists: Sequence[Sequence[tuple[Hashable, float]]],
    weights: Sequence[float] | None = None,
    *,
    mode: FusionMode = "rrf",
    rrf_k: float | None = None,
    depth: int | None = DEFAULT_DEPTH,
    top_k: int | None = None,
) -> list[FusedHit]:
    """Fuse (id, score) lists with either mode; the one entry point the retrievers use.

    `rrf_k` (default 0) is used by "rrf" only."""
    return _hits(fused_columns(scored_lists, weights, mode=mode, rrf_k=rrf_k, depth=depth, top_k=top_k))


class FusedColumns(NamedTuple):
    """A fusion result column-wise, best first: what `fuse` returns as `FusedHit` rows, without
    building a row object per hit (the ensemble builds its own).

    Attributes:
        ids: the fused ids; scores: their fused scores; ranks: for each input list, the 1-based
            rank of each id in it (None where the list lacked it).
    """

    ids: list[Hashable]
    scores: list[float]
    ranks: list[list[int | None]]


def fused_columns(
    scored_lists: Sequence[Sequence[tuple[Hashable, float]]],
    weights: Sequence[float] | None = None,
    *,
    mode: FusionMode = "rrf",
    rrf_k: float | None = None,
    depth: int | None = DEFAULT_DEPTH,
    top_k: int | None = None,
) -> FusedColumns:
    """`fuse`, returning `FusedColumns`; the same validation and the same results."""
    if mode == "rrf":
        rrf = non_negative_number("rrf_k", DEFAULT_RRF_K if rrf_k is None else rrf_k)
        not_a_string("scored_lists", scored_lists, "(id, score) lists")
        lists, weights = _check([[item for item, _ in pairs] for pairs in scored_lists], weights, depth, top_k)
        return _rrf_columns(lists, weights, rrf, top_k)
    if mode == "relative_score":
        return _relative_columns(scored_lists, weights, depth, top_k)
    raise InputError(f"mode must be 'rrf' or 'relative_score', not {mode!r}")


def _rrf_columns(lists: list[list[Hashable]], weights: list[float], rrf_k: float, top_k: int | None) -> FusedColumns:
    row: dict[Hashable, int] = {}  # id -> its row in the arrays, rows in order of first appearance
    scores = np.zeros(sum(map(len, lists)))
    best = np.full(len(scores), _NO_RANK, dtype=np.int64)
    rank_columns = []
    for ids, w in zip(lists, weights):
        new = [item for item in ids if item not in row]
        row.update(zip(new, range(len(row), len(row) + len(new))))
        rows = np.fromiter(map(row.__getitem__, ids), dtype=np.intp, count=len(ids))
        ranks = np.arange(1, len(ids) + 1, dtype=np.int64)
        # w / (rrf_k + rank) added list by list, as the scalar loop did: the same floats, bit for bit
        scores[rows] += w / (rrf_k + ranks)
        best[rows] = np.minimum(best[rows], ranks)
        column = np.zeros(len(scores), dtype=np.int64)  # 0: not in this list
        column[rows] = ranks
        rank_columns.append(column)
    n = len(row)
    return _ordered(list(row), scores[:n], best[:n], [c[:n] for c in rank_columns], top_k)


def _relative_columns(scored_lists: Any, weights: Any, depth: int | None, top_k: int | None) -> FusedColumns:
    not_a_string("scored_lists", scored_lists, "(id, score) lists")
    for i, pairs in enumerate(scored_lists):
        not_a_string(f"scored_lists[{i}]", pairs, "(id, score) pairs")
    ids_only = [[item for item, _ in pairs] for pairs in scored_lists]
    lists, weights = _check(ids_only, weights, depth, top_k)
    scores: dict[Hashable, float] = {}
    rank_maps: list[dict[Hashable, int]] = []
    for i, (pairs, w) in enumerate(zip(scored_lists, weights)):
        pairs = list(pairs)[: len(lists[i])]
        rank_maps.append(dict(zip(lists[i], range(1, len(lists[i]) + 1))))
        if not pairs:
            continue
        values = [float(s) for _, s in pairs]
        if not all(math.isfinite(v) for v in values):
            raise InputError(f"list {i} has a score that is not a finite number")
        lo, hi = min(values), max(values)
        span = hi - lo
        for (item, _), value in zip(pairs, values):
            norm = (value - lo) / span if span > 0 else 1.0
            scores[item] = scores.get(item, 0.0) + w * norm
    items = list(scores)
    columns = [np.fromiter(map(ranks.get, items, repeat(0)), dtype=np.int64, count=len(items)) for ranks in rank_maps]
    best = np.full(len(items), _NO_RANK, dtype=np.int64)
    for column in columns:
        best = np.minimum(best, np.where(column > 0, column, _NO_RANK))
    return _ordered(items, np.fromiter(scores.values(), dtype=np.float64, count=len(items)), best, columns, top_k)


def _check(
    lists: Sequence[Sequence[Hashable]],
    weights: Sequence[float] | None,
    depth: int | None,
    top_k: int | None,
) -> tuple[list[list[Hashable]], list[float]]:
    not_a_string("ranked_lists", lists, "ranked id lists")
    if not isinstance(lists, Sequence):
        raise InputTypeError(f"ranked_lists must be a list of ranked id lists, got {type(lists).__name__}")
    for i, ids in enumerate(lists):
        not_a_string(f"ranked_lists[{i}]", ids, "ids")
    depth = positive_int("depth", depth, allow_none=True)
    top_k = positive_int("top_k", top_k, allow_none=True)
    weights = list(fusion_weights([1.0] * len(lists) if weights is None else weights, len(lists)))
    cut: list[list[Hashable]] = []
    for i, ids in enumerate(lists):
        ids = list(ids)[:depth] if depth is not None else list(ids)
        if len(set(ids)) != len(ids):
            seen: set[Hashable] = set()
            dup = next(x for x in ids if x in seen or seen.add(x))  # type: ignore[func-returns-value]
            raise InputError(f"ranked list {i} holds id {dup!r} twice; dedupe each list before fusing")
        cut.append(ids)
    return cut, weights


def _ordered(items: list[Hashable], scores: np.ndarray, best: np.ndarray, rank_columns: list[np.ndarray],
             top_k: int | None) -> FusedColumns:
    """Sort by fused score (desc), then the best rank any list gave (asc), then first appearance:
    `numpy.lexsort` is stable, and `items` are in order of first appearance. A rank column holds
    each item's 1-based rank in one list, 0 where the list lacked it (None in the result)."""
    if not items:
        return FusedColumns([], [], [[] for _ in rank_columns])
    order = np.lexsort((best, -scores))
    if top_k is not None:
        order = order[:top_k]
    ids = list(map(items.__getitem__, order.tolist()))
    return FusedColumns(ids, scores[order].tolist(), [[r or None for r in c[order].tolist()] for c in rank_columns])


_NO_RANK = np.iinfo(np.int64).max


def _hits(columns: FusedColumns) -> list[FusedHit]:
    rows = zip(*columns.ranks) if columns.ranks else repeat(())
    return list(map(tuple.__new__, repeat(FusedHit), zip(columns.ids, columns.scores, rows)))
