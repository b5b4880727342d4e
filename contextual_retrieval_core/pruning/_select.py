"""Scoring units against a query and choosing them: relevance blend, then MMR under a budget.

- `relevance`: the embedder's cosine (query vs unit) and BM25 of the query over the units,
  each scaled to [0, 1] over the candidates and blended with `dense_weight`;
- `mmr_select`: maximal marginal relevance (Carbonell & Goldstein): repeatedly take the unit with
  the best ``lam * relevance - (1 - lam) * max cosine to what is already taken`` that still fits
  the token budget, until nothing fits or relevance falls under the floor; optionally with one
  neighbouring unit on each side of every pick.

All arithmetic is on whole numpy arrays; the only loop is over picks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from contextual_retrieval_core.chunking.tokenizer import Tokenizer
from contextual_retrieval_core.search.bm25 import BM25Index

__all__ = ["relevance", "scale", "bm25_scores", "bm25_term_scores", "mmr_select", "Selection"]


def scale(values: np.ndarray) -> np.ndarray:
    """`values` mapped to [0, 1] (min-max); all zeros when they are all equal."""
    values = np.asarray(values, dtype=np.float64)
    if values.size == 0:
        return values
    lo, hi = float(values.min()), float(values.max())
    if hi - lo <= 1e-12:
        return np.zeros_like(values)
    return (values - lo) / (hi - lo)


def bm25_scores(query: str, texts: Sequence[str], tokenizer: Tokenizer) -> np.ndarray:
    """BM25 of `query` over `texts` as a small corpus of their own (0 for texts without a term)."""
    out = np.zeros(len(texts), dtype=np.float64)
    if not texts or not tokenizer.tokenize(query):
        return out
    ids = [str(i) for i in range(len(texts))]
    index = BM25Index(tokenizer).index_tokens(ids, tokenizer.tokenize_many(texts))
    for hit_id, score in index.search(query, len(texts)):
        out[int(hit_id)] = score
    return out


def bm25_term_scores(query_terms: Sequence[str], terms: Sequence[Any], *, k1: float = 1.2, b: float = 0.75) -> np.ndarray:
    """`bm25_scores` from texts already tokenized (`UnitCache.terms`): the same Lucene BM25 over
    `terms` as a corpus of their own, computed for the query's terms only, with no index built.

    Gives exactly `bm25_scores`' numbers: the same arithmetic in the same order.

    Example:
        >>> from contextual_retrieval_core.pruning.unit_cache import Terms
        >>> tok = Tokenizer()
        >>> texts = ["revenue grew", "the office moved", "revenue fell"]
        >>> bool((bm25_term_scores(tok.tokenize("revenue"), [Terms(tok.tokenize(t)) for t in texts])
        ...       == bm25_scores("revenue", texts, tok)).all())
        True
    """
    n = len(terms)
    out = np.zeros(n, dtype=np.float64)
    if not n or not query_terms:
        return out
    lengths = np.fromiter((t.length for t in terms), dtype=np.int64, count=n)
    norm = k1 * (1.0 - b + b * lengths / max(float(lengths.mean()), 1e-12))
    for term in query_terms:
        tf = np.fromiter((t.counts.get(term, 0) for t in terms), dtype=np.int64, count=n)
        present = tf > 0
        df = float(np.count_nonzero(present))
        if not df:
            continue
        idf = np.log1p((n - df + 0.5) / (df + 0.5))
        out[present] += idf * tf[present] / (tf[present] + norm[present])
    return out


def relevance(query_vector: np.ndarray, vectors: np.ndarray, sparse: np.ndarray, dense_weight: float) -> np.ndarray:
    """``dense_weight * scaled cosine + (1 - dense_weight) * scaled BM25`` per row of `vectors`."""
    if len(vectors) == 0:
        return np.zeros(0)
    cosine = _normalise(vectors) @ _normalise(query_vector.reshape(1, -1))[0]
    return dense_weight * scale(cosine) + (1.0 - dense_weight) * scale(sparse)


def _normalise(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float64)
    return vectors / np.clip(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12, None)


@dataclass
class Selection:
    """What `mmr_select` chose: unit indices (sorted) and their total cost."""

    picked: list[int]
    cost: int


def mmr_select(
    rel: np.ndarray,
    vectors: np.ndarray,
    costs: np.ndarray,
    budget: int,
    *,
    lam: float,
    floor: float | None = None,
    forced: Sequence[int] = (),
    neighbours: Sequence[tuple[int | None, int | None]] | None = None,
) -> Selection:
    """Units chosen by MMR until the token `budget` is spent.

    Args:
        rel: relevance per unit (higher is better).
        vectors: one embedding per unit (for the redundancy term).
        costs: tokens per unit.
        budget: tokens to fill (forced units are taken even beyond it).
        lam: weight of relevance against redundancy (1: relevance only).
        floor: stop when the best remaining relevance is under this (None: no floor).
        forced: units taken first, whatever they cost.
        neighbours: per unit, (previous, next) unit index in the same chunk, or None; when given,
            each pick also takes its neighbours that still fit.
    """
    n = len(rel)
    taken = np.zeros(n, dtype=bool)
    if n == 0:
        return Selection([], 0)
    unit = _normalise(vectors) if len(vectors) else np.zeros((n, 1))
    max_sim = np.zeros(n)
    spent = 0

    def take(i: int) -> None:
        nonlocal spent, max_sim
        taken[i] = True
        spent += int(costs[i])
        max_sim = np.maximum(max_sim, unit @ unit[i])

    for i in forced:
        if not taken[i]:
            take(i)
    while True:
        open_ = ~taken & (costs <= budget - spent)
        if floor is not None:
            open_ &= rel >= floor
        if not open_.any():
            break
        score = np.where(open_, lam * rel - (1.0 - lam) * max_sim, -np.inf)
        best = int(np.argmax(score))
        take(best)
        if neighbours is not None:
            for j in neighbours[best]:
                if j is not None and not taken[j] and spent + costs[j] <= budget:
                    take(j)
    return Selection(sorted(np.flatnonzero(taken).tolist()), spent)
