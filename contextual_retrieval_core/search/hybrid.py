"""`HybridSearcher`: contextual embeddings + contextual BM25 in process, fused, optionally reranked.

The core's query path over `ContextualChunk`s held in memory, used by the evaluation runner and
the demo: it supplies its two sides (`InMemoryDenseSide`, `BM25Side`) to the one `QueryFlow`
that every query path runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from contextual_retrieval_core.checks import is_blank, positive_int, string_list
from contextual_retrieval_core.dense._window_rows import requested_windows
from contextual_retrieval_core.dense.hnsw import dense_index
from contextual_retrieval_core.dense.windows import WindowConfig, build_dense_rows
from contextual_retrieval_core.embeddings.base import Embedder
from contextual_retrieval_core.errors import InputError, InputTypeError
from contextual_retrieval_core.search._sides import BM25Side, InMemoryDenseSide
from contextual_retrieval_core.search.bm25 import BM25Index
from contextual_retrieval_core.search.config import FusionConfig
from contextual_retrieval_core.search.feedback import feedback_rows
from contextual_retrieval_core.search.flow import QueryFlow, Source
from contextual_retrieval_core.search.rank_fusion import DEFAULT_RRF_K
from contextual_retrieval_core.search.ranked import DEFAULT_TOP_K, DEFAULT_WEIGHTS
from contextual_retrieval_core.types import ContextualChunk

__all__ = ["HybridSearcher", "SearchHit", "FusionConfig", "DEFAULT_WEIGHTS", "DEFAULT_RRF_K", "DEFAULT_TOP_K"]


@dataclass(frozen=True)
class SearchHit:
    """One search result.

    Attributes:
        id: the chunk id.
        score: the final score (fused, or the reranker's when reranking).
        chunk: the ContextualChunk.
        ranks: 1-based rank per source ("dense", "bm25"), None where the source missed it.
        fused_score: the fusion score before reranking.
        rerank_score: the reranker's score (None when not reranked).
        rerank_error: why the reranker failed, when ``on_rerank_error="fused"`` kept the fused
            order ("Type: message"); None otherwise.
    """

    id: str
    score: float
    chunk: ContextualChunk
    ranks: dict[str, int | None] = field(default_factory=dict)
    fused_score: float = 0.0
    rerank_score: float | None = None
    rerank_error: str | None = None


class HybridSearcher:
    """Vector search and BM25 over contextualized chunks, fused with weighted RRF.

    Args:
        chunks: the ContextualChunks to search (their `indexed_text` is embedded and indexed).
        embedder: an `Embedder`; None for BM25 only.
        use_bm25: build the BM25 side (False for dense only).
        bm25: a prebuilt BM25Index over exactly the chunks' ids (default: built here); an index
            over other ids is a ValueError.
        config: the `FusionConfig` (default: `FusionConfig()`): (dense, BM25) weights, fusion
            mode, `rrf_k`, `depth` per side, `top_k`, reranker and its depth and error policy,
            and dense feedback (`dense_prf`, `prf_top`). Dense feedback runs when both sides
            are used; with ``vector_store="chroma"`` or an index of your own a normalised copy
            of the rows is kept for it (rows x dimensions float32; `dense_prf=0` saves it).
        show_progress: progress bar while embedding the chunks.
        batch_size: texts per embedding call.
        vector_store: "memory" (default: in-process search, exact below `ANN_THRESHOLD` chunks,
            HNSW above), "chroma" (an in-memory embedded Chroma collection,
            `ChromaVectorIndex`), or a ready index with ``add(ids, vectors)`` and
            ``search_many(vectors, k)``.
        windows: how chunks longer than the embedder's window are embedded: True (default:
            `WindowConfig()`) or a `WindowConfig`: whole, as the chunk's own vector plus one per
            further overlapping window, each with the chunk's context, scored by the best; False
            or None: one vector per chunk, truncated at the embedder's window.

    Threads: `search` and `search_many` may run in many threads at once on one searcher; a query
    reads the BM25 arrays, the vector index and the embedder's model and changes none of them
    (a vector index or reranker of your own must allow concurrent reads too).

    Example:
        >>> from contextual_retrieval_core import Chunk, ContextualChunk
        >>> chunks = [ContextualChunk(Chunk("c1", "d1", "Revenue grew 3%."), "ACME's Q2 2023 filing.")]
        >>> searcher = HybridSearcher(chunks, embedder=None)  # BM25 only
        >>> [hit.id for hit in searcher.search("ACME revenue", top_k=5)]
        ['c1']
    """

    def __init__(
        self,
        chunks: Sequence[ContextualChunk],
        embedder: Embedder | None,
        *,
        use_bm25: bool = True,
        bm25: BM25Index | None = None,
        config: FusionConfig | None = None,
        show_progress: bool = False,
        batch_size: int = 64,
        vector_store: Any = "memory",
        windows: WindowConfig | bool | None = True,
    ) -> None:
        if not chunks:
            raise InputError("no chunks to search: pass at least one ContextualChunk")
        if embedder is None and not use_bm25:
            raise InputError("nothing to search with: pass an embedder, or keep use_bm25=True")
        self.config = FusionConfig.merged(config)
        self.weights = self.config.weights_for(2)  # (dense, bm25), whichever sides are used
        self.chunks = {c.id: c for c in chunks}
        if len(self.chunks) != len(chunks):
            raise InputError("duplicate chunk ids: every chunk needs a unique id")
        ids = list(self.chunks)
        texts = [c.indexed_text for c in chunks]
        self.embedder = embedder
        if use_bm25 and bm25 is not None:
            _check_bm25_ids(bm25, ids)
        self.vectors: Any = None
        self._owners: dict[str, str] = {}
        self._extra_rows = 0
        if embedder is not None:
            rows = build_dense_rows(embedder, chunks, requested_windows(windows, None), batch_size=batch_size,
                                    show_progress=show_progress)
            self._owners = {r: o for r, o in zip(rows.ids, rows.owners) if r != o}
            self._extra_rows = rows.extra
            ids, vectors = rows.ids, rows.vectors
            if vector_store == "memory":
                self.vectors = dense_index(ids, vectors, show_progress=show_progress)
            elif vector_store == "chroma":
                from contextual_retrieval_core.dense.chroma import ChromaVectorIndex

                self.vectors = ChromaVectorIndex(ids, vectors)
            elif hasattr(vector_store, "search_many") and hasattr(vector_store, "add"):
                vector_store.add(ids, vectors)
                self.vectors = vector_store
            else:
                raise InputError(f"vector_store must be 'memory', 'chroma' or an index with add/search_many, not {vector_store!r}")
        self._feedback_rows: Any = None
        if self.vectors is not None and self.config.feeds_back(1 + int(use_bm25)):  # PRF from the fused ranking only
            # the in-process indexes hold the normalised rows in this order: read them, not a copy
            held = getattr(self.vectors, "vectors", None)
            own = isinstance(held, np.ndarray) and list(getattr(self.vectors, "ids", ())) == list(rows.ids)
            self._feedback_rows = feedback_rows(rows.ids, held if own else rows.vectors, self._owners, normalized=own)  # type: ignore[arg-type]
        self.bm25: BM25Index | None = None
        if use_bm25:
            self.bm25 = bm25 if bm25 is not None else BM25Index().index(list(self.chunks), texts)
        sides: list[Source] = []
        if self.vectors is not None:
            sides.append(InMemoryDenseSide(
                "dense", embedder, self.vectors, self.config.depth, self._owners, self._extra_rows,  # type: ignore[arg-type]
                len(self.chunks), self._feedback_rows,
            ))
        if self.bm25 is not None:
            sides.append(BM25Side("bm25", self.bm25, self.config.depth))
        # the weights of the sides in use, in query order (dense, then bm25)
        used = [w for w, on in zip(self.weights, (self.vectors is not None, self.bm25 is not None)) if on]
        self._flow = QueryFlow(self.config.replace(weights=tuple(used)), sides)

    # the settings, read from `config` (one place)
    mode = property(lambda self: self.config.mode)
    rrf_k = property(lambda self: self.config.rrf_k)
    depth = property(lambda self: self.config.depth)
    top_k = property(lambda self: self.config.top_k)
    reranker = property(lambda self: self.config.reranker)
    rerank_depth = property(lambda self: self.config.effective_rerank_depth)
    dense_prf = property(lambda self: self.config.dense_prf)
    prf_top = property(lambda self: self.config.prf_top)

    def search(self, query: str, top_k: int | None = None) -> list[SearchHit]:
        """The top `top_k` chunks for one query (default: the config's 20); a blank query finds
        nothing."""
        if not isinstance(query, str):
            raise InputTypeError(f"query must be a str, got {type(query).__name__}; for several queries use search_many")
        return self.search_many([query], top_k)[0]

    def search_many(self, queries: Sequence[str], top_k: int | None = None) -> list[list[SearchHit]]:
        """The top `top_k` chunks for each query (query vectors embedded in one batch)."""
        top_k = self.config.top_k if top_k is None else positive_int("top_k", top_k)
        queries = string_list("queries", queries, "query strings")
        asked = [i for i, q in enumerate(queries) if not is_blank(q)]
        out: list[list[SearchHit]] = [[] for _ in queries]
        if not asked:
            return out
        results = self._flow.run([queries[i] for i in asked], text_of=lambda i: self.chunks[i].indexed_text, top_k=top_k)  # type: ignore[index]
        for i, result in zip(asked, results):
            out[i] = [
                SearchHit(str(h.id), h.score, self.chunks[h.id], h.ranks, h.fused_score, h.rerank_score, h.rerank_error)  # type: ignore[index]
                for h in result.hits or ()
            ]
        return out


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
    raise InputError(
        f"bm25 does not index these chunks: {' and '.join(found)}; build it over the same chunks, "
        "BM25Index().index([c.id for c in chunks], [c.indexed_text for c in chunks]), or leave bm25=None"
    )
