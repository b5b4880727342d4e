"""`HybridSearcher`: contextual embeddings + contextual BM25, fused, optionally reranked.

The core's complete query path over `ContextualChunk`s, used by the evaluation runner and the
CLI. The framework adapters compose their own retrievers but call the same `fuse` and rerankers,
with the same defaults, defined here once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from .bm25 import BM25Index
from .embeddings.base import Embedder
from .ensemble import DEFAULT_RRF_K, DEFAULT_TOP_K, DEFAULT_WEIGHTS, _check_depth, fuse_sources, rerank_hits
from .fusion import DEFAULT_DEPTH, FusionMode
from .rerank.base import Reranker
from .types import ContextualChunk
from .ann import dense_index

__all__ = ["HybridSearcher", "SearchHit", "DEFAULT_WEIGHTS", "DEFAULT_RRF_K", "DEFAULT_TOP_K"]


@dataclass(frozen=True)
class SearchHit:
    """One search result.

    Attributes:
        id: the chunk id.
        score: the final score (fused, or the reranker's when reranking).
        chunk: the ContextualChunk.
        ranks: 1-based rank per source ("dense", "bm25"), None where the source missed it.
        fused_score: the fusion score before reranking.
    """

    id: str
    score: float
    chunk: ContextualChunk
    ranks: dict[str, int | None] = field(default_factory=dict)
    fused_score: float = 0.0


class HybridSearcher:
    """Vector search and BM25 over contextualized chunks, fused with weighted RRF.

    Args:
        chunks: the ContextualChunks to search (their `indexed_text` is embedded and indexed).
        embedder: an `Embedder`; None for BM25 only.
        use_bm25: build the BM25 side (False for dense only).
        bm25: a prebuilt BM25Index over exactly the chunks' ids (default: built here); an index
            over other ids is a ValueError.
        weights: (dense, BM25) fusion weights.
        mode: "rrf" (default) or "relative_score".
        rrf_k: the RRF constant (0: the cookbook's w / rank; 60: classic RRF).
        depth: candidates taken from each side before fusion (default 150, as the cookbook).
        reranker: an optional `Reranker` applied to the fused candidates.
        vector_store: "memory" (default: in-process search, exact below `ann.ANN_THRESHOLD`
            chunks, HNSW above) or "chroma" (an in-memory
            embedded Chroma collection, `ChromaVectorIndex`), or a ready index with
            ``add(ids, vectors)`` and ``search_many(vectors, k)``.
        rerank_depth: how many fused candidates the reranker sees: a positive integer, or None
            for `depth`.
        show_progress: progress bar while embedding the chunks.

    Example:
        >>> from contextual_retrieval_core import Chunk, ContextualChunk
        >>> chunks = [ContextualChunk(Chunk("c1", "d1", "Revenue grew 3%."), "ACME's Q2 2023 filing.")]
        >>> searcher = HybridSearcher(chunks, embedder=None)  # BM25 only
        >>> [hit.id for hit in searcher.search("ACME revenue", k=5)]
        ['c1']
    """

    def __init__(
        self,
        chunks: Sequence[ContextualChunk],
        embedder: Embedder | None,
        *,
        use_bm25: bool = True,
        bm25: BM25Index | None = None,
        weights: Sequence[float] = DEFAULT_WEIGHTS,
        mode: FusionMode = "rrf",
        rrf_k: float = DEFAULT_RRF_K,
        depth: int = DEFAULT_DEPTH,
        reranker: Reranker | None = None,
        rerank_depth: int | None = None,
        show_progress: bool = False,
        batch_size: int = 64,
        vector_store: Any = "memory",
    ) -> None:
        if not chunks:
            raise ValueError("no chunks to search: pass at least one ContextualChunk")
        if embedder is None and not use_bm25:
            raise ValueError("nothing to search with: pass an embedder, or keep use_bm25=True")
        if len(weights) != 2:
            raise ValueError(f"weights is (dense, bm25): got {len(weights)} values")
        _check_depth(rerank_depth)  # 0 is a mistake, not "the default"
        self.chunks = {c.id: c for c in chunks}
        if len(self.chunks) != len(chunks):
            raise ValueError("duplicate chunk ids: every chunk needs a unique id")
        ids = list(self.chunks)
        texts = [c.indexed_text for c in chunks]
        self.embedder = embedder
        self.weights = tuple(float(w) for w in weights)
        self.mode, self.rrf_k, self.depth = mode, float(rrf_k), int(depth)
        self.reranker = reranker
        self.rerank_depth = self.depth if rerank_depth is None else rerank_depth
        if use_bm25 and bm25 is not None:
            _check_bm25_ids(bm25, ids)
        self.vectors: Any = None
        if embedder is not None:
            vectors = _embed_with_progress(embedder, texts, batch_size, show_progress)
            if vector_store == "memory":
                self.vectors = dense_index(ids, vectors)
            elif vector_store == "chroma":
                from .chroma import ChromaVectorIndex

                self.vectors = ChromaVectorIndex(ids, vectors)  # type: ignore[assignment]
            elif hasattr(vector_store, "search_many") and hasattr(vector_store, "add"):
                vector_store.add(ids, vectors)
                self.vectors = vector_store
            else:
                raise ValueError(f"vector_store must be 'memory', 'chroma' or an index with add/search_many, not {vector_store!r}")
        self.bm25: BM25Index | None = None
        if use_bm25:
            self.bm25 = bm25 if bm25 is not None else BM25Index().index(ids, texts)

    def search(self, query: str, k: int = DEFAULT_TOP_K) -> list[SearchHit]:
        """The top `k` chunks for one query."""
        return self.search_many([query], k)[0]

    def search_many(self, queries: Sequence[str], k: int = DEFAULT_TOP_K) -> list[list[SearchHit]]:
        """The top `k` chunks for each query (query vectors embedded in one batch)."""
        if isinstance(k, bool) or k <= 0:
            raise ValueError(f"k must be a positive integer, got {k!r}")
        queries = list(queries)
        for q in queries:
            if not isinstance(q, str):
                raise TypeError(f"queries must be str, got {type(q).__name__}")
        dense: list[list[tuple[str, float]]] = [[] for _ in queries]
        if self.vectors is not None and queries:
            nonempty = [i for i, q in enumerate(queries) if q.strip()]
            if nonempty:
                qv = self.embedder.embed_queries([queries[i] for i in nonempty])  # type: ignore[union-attr]
                for i, hits in zip(nonempty, self.vectors.search_many(qv, self.depth)):
                    dense[i] = hits
        results = []
        for qi, query in enumerate(queries):
            sources: list[tuple[str, list[tuple[str, float]], float]] = []
            if self.vectors is not None:
                sources.append(("dense", dense[qi], self.weights[0]))
            if self.bm25 is not None:
                sources.append(("bm25", self.bm25.search(query, self.depth) if query.strip() else [], self.weights[1]))
            results.append(self._finish(query, sources, k))
        return results

    def _finish(self, query: str, sources: list[tuple[str, list[tuple[str, float]], float]], k: int) -> list[SearchHit]:
        fused = fuse_sources(sources, mode=self.mode, rrf_k=self.rrf_k, depth=self.depth)
        ranked = rerank_hits(
            query, fused, lambda i: self.chunks[i].indexed_text, self.reranker, k=k, rerank_depth=self.rerank_depth
        )
        return [SearchHit(h.id, h.score, self.chunks[h.id], h.ranks, h.fused_score) for h in ranked]  # type: ignore[index]


def _check_bm25_ids(bm25: BM25Index, ids: list[str]) -> None:
    indexed, wanted = set(bm25.ids), set(ids)
    if indexed == wanted:
        return
    missing, extra = sorted(wanted - indexed), sorted(indexed - wanted)
    found = []
    if missing:
        found.append(f"{len(missing)} chunk ids missing from it (e.g. {missing[0]!r})")
    if extra:
        found.append(f"{len(extra)} ids of no chunk (e.g. {extra[0]!r})")
    raise ValueError(
        f"bm25 does not index these chunks: {' and '.join(found)}; build it over the same chunks, "
        "BM25Index().index([c.id for c in chunks], [c.indexed_text for c in chunks]), or leave bm25=None"
    )


def _embed_with_progress(embedder: Embedder, texts: list[str], batch_size: int, show_progress: bool) -> np.ndarray:
    from tqdm.auto import tqdm

    parts = []
    with tqdm(total=len(texts), desc=f"embedding ({embedder.model_name})", unit="chunk", disable=not show_progress) as bar:
        for start in range(0, len(texts), batch_size):
            batch = texts[start : start + batch_size]
            parts.append(np.asarray(embedder.embed_documents(batch), dtype=np.float32))
            bar.update(len(batch))
    return np.concatenate(parts) if parts else np.zeros((0, 0), dtype=np.float32)
