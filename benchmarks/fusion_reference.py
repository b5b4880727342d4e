"""The fusion code as it was before the speed-up (commit 2a7f48d): `reciprocal_rank_fusion`,
`relative_score_fusion` and `fuse_sources`, pure Python with one tuple key per item, kept verbatim
(validation left out) as the peer `bm25_speed.py` times the library's fusion against, and as the
reference tests/unit/search/test_fusion_speed.py checks the library's results against, bit for bit."""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from typing import NamedTuple


class FusedHit(NamedTuple):
    id: Hashable
    score: float
    ranks: tuple = ()


class RankedHit(NamedTuple):
    id: Hashable
    score: float
    ranks: dict
    fused_score: float
    rerank_score: float | None = None
    rerank_error: str | None = None


def _cut(lists, depth):
    return [list(ids)[:depth] if depth is not None else list(ids) for ids in lists]


def reciprocal_rank_fusion(ranked_lists, weights=None, *, rrf_k=0.0, depth=150, top_k=None):
    k = float(rrf_k)
    lists = _cut(ranked_lists, depth)
    weights = [1.0] * len(lists) if weights is None else [float(w) for w in weights]
    scores: dict = {}
    ranks: dict = {}
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


def relative_score_fusion(scored_lists, weights=None, *, depth=150, top_k=None):
    lists = _cut([[item for item, _ in pairs] for pairs in scored_lists], depth)
    weights = [1.0] * len(lists) if weights is None else [float(w) for w in weights]
    scores: dict = {}
    ranks: dict = {}
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


def _ranked(scores, ranks, top_k):
    big = float("inf")
    keyed = [
        (-score, min([big if r is None else r for r in ranks[item]]), pos, item)
        for pos, (item, score) in enumerate(scores.items())
    ]
    keyed.sort(key=lambda t: t[:3])
    if top_k is not None:
        keyed = keyed[:top_k]
    return [FusedHit(item, -neg, tuple(ranks[item])) for neg, _, _, item in keyed]


def _first_occurrences(hits):
    seen: set = set()
    out = []
    for item, score in hits:
        if item not in seen:
            seen.add(item)
            out.append((item, float(score) if score is not None else 1.0 / (len(out) + 1)))
    return out


def fuse_sources(sources: Sequence, *, mode="rrf", rrf_k=0.0, depth=150, top_k=None) -> list[RankedHit]:
    names = [name for name, _, _ in sources]
    if len(set(names)) != len(names):
        raise ValueError(f"source names must be unique, got {names}")
    lists = [_first_occurrences(hits) for _, hits, _ in sources]
    weights = [w for _, _, w in sources]
    if mode == "rrf":
        fused = reciprocal_rank_fusion([[item for item, _ in pairs] for pairs in lists], weights, rrf_k=rrf_k,
                                       depth=depth, top_k=top_k)
    else:
        fused = relative_score_fusion(lists, weights, depth=depth, top_k=top_k)
    return [RankedHit(h.id, h.score, dict(zip(names, h.ranks)), h.score) for h in fused]
