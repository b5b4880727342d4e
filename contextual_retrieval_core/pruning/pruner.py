"""`ContextPruner`: the retrieved chunks cut down to the units that answer the query.

The settings named below are `PruningConfig`'s.

1. Coarse filter: each chunk's score is ``alpha * dense + (1 - alpha) * BM25`` (cosine of the
   query with the chunk's contextualized text, BM25 of the query over the retrieved chunks, each
   scaled to [0, 1]); chunks under `keep_share` of the best are dropped (or all but `top_n`).
2. Units (`units.split_units`: sentences, headings, list items, whole code statements) are scored
   by their own dense + BM25 relevance (`dense_weight`) blended with their chunk's score
   (`chunk_weight`), and chosen by MMR (`lam`, `min_score`) until the token budget
   (`budget_share` of the input, or `budget` tokens) is spent, each with its neighbouring units
   when `neighbours` is on.
3. Reassembly: kept units in their order, chunks in rank order, `ELISION` between units that
   were not adjacent; every piece keeps its chunk id, document id and character span. The
   generated context stays apart from the source text (`PrunedChunk.context`).
4. Safety valves: a chunk whose top unit stands out (z-score >= `standout_z` over all units)
   keeps it; fewer than `min_tokens` left -> the top two whole chunks; a query without a content
   term, or chunks without text, -> the input unchanged, with the reason in the report.

Each chunk's units, their vectors, BM25 terms and token counts are computed once and kept in a
`UnitCache` (by text), so a query pays only for what it has not seen before; `prepare` fills it
ahead of the first query (at ingestion), and a query vector the retriever already computed can
be passed to `prune` instead of embedding the query again. The selection is the same either way.

Example:
    >>> from contextual_retrieval_core import Chunk, ContextualChunk
    >>> from contextual_retrieval_core.pruning import ContextPruner, PruningConfig
    >>> from contextual_retrieval_core.embeddings.minilm import LocalMiniLMEmbedder
    >>> chunks = [ContextualChunk(Chunk("c1", "report.md", "Revenue grew 3% to $412 million. "
    ...     "The office moved to a new building. Staff enjoyed the summer party."), "ACME Q2 2023.")]
    >>> pruner = ContextPruner(LocalMiniLMEmbedder(), config=PruningConfig(budget=12, min_tokens=1))
    >>> result = pruner.prune("How much did revenue grow?", chunks)
    >>> result.chunks[0].text
    'Revenue grew 3% to $412 million.'
    >>> result.chunks[0].pieces[0].start, result.report.units_kept["c1"]
    (0, (1, 3))
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from contextual_retrieval_core.chunking.tokenizer import Tokenizer
from contextual_retrieval_core.embeddings.base import Embedder, aembed_queries
from contextual_retrieval_core.errors import InputError, InputTypeError
from contextual_retrieval_core.pruning._select import bm25_term_scores, mmr_select, relevance, scale
from contextual_retrieval_core.pruning.config import PruningConfig
from contextual_retrieval_core.pruning.unit_cache import UnitCache
from contextual_retrieval_core.pruning.units import TextKind, Unit, kind_for_path
from contextual_retrieval_core.types import Chunk, ContextualChunk

__all__ = ["ContextPruner"]

from contextual_retrieval_core.pruning.result import (
    Piece,
    PrunedChunk,
    PruningReport,
    PruningResult,
    TokenCounter,
    regex_token_counter,
)


class ContextPruner:
    """Query-aware pruning of retrieved chunks (see the module docstring for the steps).

    Args:
        embedder: an `Embedder` for the query, the chunks and the units (the retriever's own is best).
        config: the scoring settings, a `PruningConfig` (default: `PruningConfig()`, which keeps
            30% of the input's tokens).
        token_counter: a `TokenCounter` (default: `regex_token_counter`).
        tokenizer: the BM25 `Tokenizer` (default: the library's).
        unit_cache: where units, vectors, terms and token counts are kept between queries (default:
            a new `UnitCache` of this pruner's own); share one between pruners with one embedder.

    A wrong type is a TypeError naming the argument and the fix.
    """

    def __init__(
        self,
        embedder: Embedder,
        *,
        config: PruningConfig | None = None,
        token_counter: TokenCounter | None = None,
        tokenizer: Tokenizer | None = None,
        unit_cache: UnitCache | None = None,
    ) -> None:
        if embedder is None or not hasattr(embedder, "embed_documents"):
            raise InputTypeError("embedder must be an Embedder (e.g. LocalMiniLMEmbedder()); got " + type(embedder).__name__)
        if config is not None and not isinstance(config, PruningConfig):
            raise InputTypeError(f"config must be a PruningConfig, got {type(config).__name__}; "
                                 "e.g. ContextPruner(embedder, config=PruningConfig(budget=200))")
        self.embedder = embedder
        self.config = config if config is not None else PruningConfig()
        self.token_counter = token_counter or regex_token_counter
        self.tokenizer = tokenizer or Tokenizer()
        self.unit_cache = unit_cache if unit_cache is not None else UnitCache()

    # -- public -----------------------------------------------------------------------------------

    def prune(
        self,
        query: str,
        chunks: Sequence[ContextualChunk | Chunk],
        *,
        kinds: Sequence[TextKind | None] | None = None,
        query_vector: Sequence[float] | np.ndarray | None = None,
    ) -> PruningResult:
        """Prune `chunks` (best first, as retrieved) for `query`.

        Args:
            query: the question.
            chunks: ContextualChunks (or plain Chunks), in rank order.
            kinds: per chunk, "prose" / "python" / "code", or None to infer it from the document id's
                extension or the text.
            query_vector: the query's vector from this pruner's embedder (``embed_queries([query])[0]``),
                when the retriever already computed it; None embeds the query.
        """
        plan = self._plan(query, chunks, kinds)
        if plan.result is not None:
            return plan.result
        qv = self._query(query_vector) if query_vector is not None else self._query(self.embedder.embed_queries([query])[0])
        self._coarse(plan, qv, _f64(self.unit_cache.vectors([c.indexed_text for c in plan.items], self.embedder)))
        return self._finish(plan, qv, _f64(self.unit_cache.vectors(plan.unit_texts, self.embedder)))

    async def aprune(
        self,
        query: str,
        chunks: Sequence[ContextualChunk | Chunk],
        *,
        kinds: Sequence[TextKind | None] | None = None,
        query_vector: Sequence[float] | np.ndarray | None = None,
    ) -> PruningResult:
        """Async `prune` (the embedder's async methods, or its sync ones in a worker thread)."""
        plan = self._plan(query, chunks, kinds)
        if plan.result is not None:
            return plan.result
        qv = self._query(query_vector if query_vector is not None else (await aembed_queries(self.embedder, [query]))[0])
        self._coarse(plan, qv, _f64(await self.unit_cache.avectors([c.indexed_text for c in plan.items], self.embedder)))
        return self._finish(plan, qv, _f64(await self.unit_cache.avectors(plan.unit_texts, self.embedder)))

    def prepare(self, chunks: Sequence[ContextualChunk | Chunk], *, kinds: Sequence[TextKind | None] | None = None) -> int:
        """Compute ahead of any query what pruning `chunks` needs: their units, the vectors of the
        units and of the chunks' indexed text, their BM25 terms and token counts (at ingestion,
        say). Returns how many texts were embedded (0 when everything was known already).

        Example:
            >>> from contextual_retrieval_core import Chunk
            >>> from contextual_retrieval_core.embeddings.minilm import LocalMiniLMEmbedder
            >>> pruner = ContextPruner(LocalMiniLMEmbedder())
            >>> pruner.prepare([Chunk("c1", "notes.md", "Revenue grew. Costs fell.")])
            3
            >>> pruner.prepare([Chunk("c1", "notes.md", "Revenue grew. Costs fell.")])
            0
        """
        items = [_as_contextual(c, i) for i, c in enumerate(chunks)]
        if kinds is not None and len(kinds) != len(items):
            raise InputError(f"kinds has {len(kinds)} entries for {len(items)} chunks; pass one per chunk or None")
        before = self.unit_cache.embedded
        units = [u.text for i, c in enumerate(items) for u in self._units(c, kinds[i] if kinds is not None else None)]
        indexed = [c.indexed_text for c in items]
        self.unit_cache.vectors(indexed + units, self.embedder)
        self.unit_cache.terms(indexed + units, self.tokenizer)
        self.unit_cache.token_counts([c.text for c in items] + units, self.token_counter)
        return self.unit_cache.embedded - before

    # -- steps ------------------------------------------------------------------------------------

    @staticmethod
    def _query(vector: Any) -> np.ndarray:
        qv = np.asarray(vector, dtype=np.float64)
        if qv.ndim != 1:
            raise InputError(f"query_vector must be one vector (1-d), got shape {qv.shape}")
        return qv

    def _units(self, c: ContextualChunk, kind: TextKind | None) -> list[Unit]:
        return self.unit_cache.units(c.text, kind or kind_for_path(c.document_id))

    def _plan(self, query: str, chunks: Sequence[ContextualChunk | Chunk], kinds: Sequence[TextKind | None] | None) -> _Plan:
        started = time.perf_counter()
        if not isinstance(query, str):
            raise InputTypeError(f"query must be str, got {type(query).__name__}")
        items = [_as_contextual(c, i) for i, c in enumerate(chunks)]
        if kinds is not None and len(kinds) != len(items):
            raise InputError(f"kinds has {len(kinds)} entries for {len(items)} chunks; pass one per chunk or None")
        report = PruningReport(self.token_counter.name)
        report.tokens_before = sum(self.unit_cache.token_counts([c.text for c in items], self.token_counter))
        plan = _Plan(query, items, report, started)
        if not items:
            report.unchanged_reason = "no chunks to prune"
        elif not self.tokenizer.tokenize(query):
            report.unchanged_reason = "the query has no content terms (only stop words or punctuation); nothing to score against"
        if report.unchanged_reason is None:
            for i, c in enumerate(items):
                plan.units.append(self._units(c, kinds[i] if kinds is not None else None))
            if not any(plan.units):
                report.unchanged_reason = "the chunks have no text to score"
        if report.unchanged_reason is not None:
            plan.result = self._unchanged(plan)
            return plan
        return plan

    def _unchanged(self, plan: _Plan) -> PruningResult:
        out = [_whole(c, i, self.token_counter) for i, c in enumerate(plan.items)]
        plan.report.tokens_after = plan.report.tokens_before
        plan.report.units_kept = {c.id: (c.units_kept, c.units_total) for c in out}
        plan.report.elapsed_s = time.perf_counter() - plan.started
        return PruningResult(out, plan.report)

    def _coarse(self, plan: _Plan, qv: np.ndarray, chunk_vecs: np.ndarray) -> None:
        """Step 1, the coarse filter: sets the chunk scores, the kept chunks and the unit texts to embed
        (only the kept chunks' units are embedded)."""
        items, n_chunks = plan.items, len(plan.items)
        cfg = self.config
        dense = scale(_cos(chunk_vecs, qv))
        plan.query_terms = self.tokenizer.tokenize(plan.query)
        sparse = scale(bm25_term_scores(plan.query_terms, self.unit_cache.terms([c.indexed_text for c in items], self.tokenizer)))
        chunk_score = cfg.alpha * dense + (1 - cfg.alpha) * sparse
        best = float(chunk_score.max()) if n_chunks else 0.0
        keep = chunk_score >= cfg.keep_share * best
        if cfg.top_n is not None:
            keep &= np.isin(np.arange(n_chunks), np.argsort(-chunk_score, kind="stable")[: cfg.top_n])
        plan.chunk_score, plan.best, plan.keep = chunk_score, best, keep
        plan.unit_texts = [u.text for ci, us in enumerate(plan.units) if keep[ci] for u in us]

    def _finish(self, plan: _Plan, qv: np.ndarray, unit_vecs: np.ndarray) -> PruningResult:
        """Steps 2-4 over the kept chunks' units (`unit_vecs` in `plan.unit_texts` order)."""
        items, report = plan.items, plan.report
        cfg = self.config
        chunk_score, best, keep = plan.chunk_score, plan.best, plan.keep
        # 2. units of the kept chunks
        owner = np.array([ci for ci, us in enumerate(plan.units) for _ in us], dtype=np.int64)
        all_units = [u for us in plan.units for u in us]
        idx = np.flatnonzero(keep[owner])
        units = [all_units[i] for i in idx]
        vecs = unit_vecs if len(units) else np.zeros((0, qv.shape[0]))
        texts = [u.text for u in units]
        costs = np.array([max(1, n) for n in self.unit_cache.token_counts(texts, self.token_counter)], dtype=np.int64)
        sparse_u = bm25_term_scores(plan.query_terms, self.unit_cache.terms(texts, self.tokenizer))
        rel = relevance(qv, vecs, sparse_u, cfg.dense_weight)
        rel = (1 - cfg.chunk_weight) * rel + cfg.chunk_weight * (chunk_score[owner[idx]] / best if best > 0 else 0.0)
        budget = cfg.budget if cfg.budget is not None else max(1, int(round(cfg.budget_share * report.tokens_before)))
        forced = self._standouts(rel, owner[idx], report, items)
        neighbours = _neighbour_index(owner[idx]) if cfg.neighbours else None
        chosen = mmr_select(rel, vecs, costs, budget, lam=cfg.lam, floor=cfg.min_score, forced=forced, neighbours=neighbours)
        # 3. reassembly
        by_chunk: dict[int, list[Unit]] = {}
        for k in chosen.picked:
            by_chunk.setdefault(int(owner[idx[k]]), []).append(units[k])
        out: list[PrunedChunk] = []
        for ci, c in enumerate(items):
            picked = by_chunk.get(ci)
            if not picked:
                report.chunks_dropped.append(c.id)
                continue
            out.append(PrunedChunk(c, ci, _pieces(c.text, picked, plan.units[ci]), len(picked), len(plan.units[ci]), float(chunk_score[ci])))
        tokens = sum(self.token_counter.count(c.text) for c in out)
        # 4. too little left: the top two whole chunks
        if tokens < min(cfg.min_tokens, report.tokens_before):
            order = np.argsort(-chunk_score, kind="stable")[:2]
            out = [_whole(items[i], int(i), self.token_counter, float(chunk_score[i])) for i in sorted(order)]
            report.fallbacks.append("min_tokens")
            report.chunks_dropped = [c.id for i, c in enumerate(items) if i not in set(order.tolist())]
            tokens = sum(self.token_counter.count(c.text) for c in out)
        report.tokens_after = tokens
        report.units_kept = {c.id: (c.units_kept, c.units_total) for c in out}
        report.elapsed_s = time.perf_counter() - plan.started
        return PruningResult(out, report)

    def _standouts(self, rel: np.ndarray, owners: np.ndarray, report: PruningReport, items: list[ContextualChunk]) -> list[int]:
        if len(rel) < 3:
            return []
        sd = float(rel.std())
        if sd <= 1e-12:
            return []
        z = (rel - float(rel.mean())) / sd
        forced = []
        for ci in np.unique(owners):
            members = np.flatnonzero(owners == ci)
            top = int(members[np.argmax(rel[members])])
            if z[top] >= self.config.standout_z:
                forced.append(top)
                report.fallbacks.append(f"standout:{items[int(ci)].id}")
        return forced


@dataclass
class _Plan:
    query: str
    items: list[ContextualChunk]
    report: PruningReport
    started: float
    units: list[list[Unit]] = field(default_factory=list)
    result: PruningResult | None = None
    # set by the coarse filter
    chunk_score: np.ndarray = field(default_factory=lambda: np.zeros(0))
    best: float = 0.0
    keep: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    unit_texts: list[str] = field(default_factory=list)
    query_terms: list[str] = field(default_factory=list)


def _f64(vectors: np.ndarray) -> np.ndarray:
    return np.asarray(vectors, dtype=np.float64)


def _as_contextual(c: Any, i: int) -> ContextualChunk:
    if isinstance(c, ContextualChunk):
        return c
    if isinstance(c, Chunk):
        return ContextualChunk(c, "")
    raise InputTypeError(f"chunks[{i}] is a {type(c).__name__}; pass ContextualChunk or Chunk objects")


def _cos(vectors: np.ndarray, q: np.ndarray) -> np.ndarray:
    norms = np.clip(np.linalg.norm(vectors, axis=1) * max(np.linalg.norm(q), 1e-12), 1e-12, None)
    return (vectors @ q) / norms


def _neighbour_index(owners: np.ndarray) -> list[tuple[int | None, int | None]]:
    n = len(owners)
    return [
        (i - 1 if i > 0 and owners[i - 1] == owners[i] else None, i + 1 if i + 1 < n and owners[i + 1] == owners[i] else None)
        for i in range(n)
    ]


def _line(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def _pieces(text: str, picked: list[Unit], all_units: list[Unit]) -> tuple[Piece, ...]:
    """Kept units merged into runs: two kept units are one run when no dropped unit lies between."""
    order = {u.start: i for i, u in enumerate(all_units)}
    runs: list[list[int]] = []
    for u in sorted(picked, key=lambda u: u.start):
        k = order[u.start]
        if runs and runs[-1][1] == k - 1:
            runs[-1][1] = k
        else:
            runs.append([k, k])
    out = []
    for a, b in runs:
        s, e = all_units[a].start, all_units[b].end
        out.append(Piece(s, e, text[s:e], _line(text, s), _line(text, e - 1 if e > s else e)))
    return tuple(out)


def _whole(c: ContextualChunk, rank: int, counter: TokenCounter, score: float = 1.0) -> PrunedChunk:
    text = c.text
    piece = Piece(0, len(text), text, 1, _line(text, max(0, len(text) - 1)))
    return PrunedChunk(c, rank, (piece,), 1, 1, score)
