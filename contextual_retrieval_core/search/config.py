"""`FusionConfig`: every query-time fusion setting, validated once, shared by every query path.

`HybridSearcher`, `ContextualIndex.search`, LlamaIndex's `HybridRetriever` and LangChain's
`ContextualEnsembleRetriever` each build one (from a `config=` or from their own keyword
arguments) and run their fusion and reranking through it, so a setting means the same and fails
the same way whichever layer it is given to. One name per idea: `rrf_k` is the RRF constant,
`depth` the candidates taken from each source, `top_k` the results returned (LlamaIndex calls it
`similarity_top_k`, LangChain `k`).

Example:
    >>> config = FusionConfig(weights=(0.8, 0.2), top_k=5)
    >>> hits = config.fuse([("dense", [("a", 0.9), ("b", 0.8)]), ("bm25", [("b", 7.0)])])
    >>> [h.id for h in config.rerank("q", hits, str)]
    ['a', 'b']
    >>> FusionConfig(depth=0)
    Traceback (most recent call last):
    ...
    contextual_retrieval_core.errors.InputError: depth must be a positive integer, got 0
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from contextual_retrieval_core._settings import Settings, setting
from contextual_retrieval_core.checks import fusion_weights, non_negative_number, positive_int
from contextual_retrieval_core.errors import InputError, InputTypeError
from contextual_retrieval_core.rerank.base import ON_RERANK_ERROR, OnRerankError, Reranker
from contextual_retrieval_core.search.feedback import DEFAULT_DENSE_PRF, DEFAULT_PRF_TOP, feedback_weight
from contextual_retrieval_core.search.rank_fusion import DEFAULT_DEPTH, DEFAULT_RRF_K, FUSION_MODES, FusionMode
from contextual_retrieval_core.search.ranked import (
    DEFAULT_TOP_K,
    RankedHit,
    arerank_hits,
    default_weights,
    fuse_sources,
    rerank_hits,
)

__all__ = ["FusionConfig"]

#: (source name, [(id, score or None), ...] best first)
NamedList = tuple[str, Sequence[tuple[Hashable, float | None]]]


@dataclass(frozen=True)
class FusionConfig(Settings):
    """How ranked lists are fused and reranked (frozen; validated when built).

    Args:
        weights: one weight per source, finite and >= 0 (None: 0.5 / 0.5 for two sources, equal
            otherwise). The number of sources is checked when the config is used.
        mode: "rrf" (weighted reciprocal-rank fusion, ``w / (rrf_k + rank)``) or
            "relative_score" (min-max normalised scores, weighted and summed).
        rrf_k: the RRF constant, a finite number >= 0 (default 0: the cookbook's ``w / rank``;
            60 is classic RRF). Unused by "relative_score".
        depth: candidates taken from each source before fusion (default 150, as the cookbook).
        top_k: results returned (default 20).
        rerank_depth: fused candidates the reranker sees (None: `depth`).
        reranker: a core `Reranker` (Cohere, Voyage, cross-encoder, ...) or None.
        on_rerank_error: "raise" (default): a failing reranker fails the query; "fused": the fused
            order is returned and every hit carries the error (``rerank_error``: type and message,
            secrets masked).
        dense_prf: dense pseudo-relevance feedback (Rocchio), for a query path that fuses a dense
            side with another source: the query vector plus this weight times the mean stored
            vector of the fused top `prf_top` chunks, searched again on the dense side and fused
            again (`feedback`). Default 0.5; 0 turns it off. A number in [0, 10].
        prf_top: how many fused chunks feed back (default 3).

    Errors name the setting and the fix: TypeError for a value of the wrong type, ValueError for
    one out of range.
    """

    weights: tuple[float, ...] | None = setting(None, "one fusion weight per source (None: 0.5 / 0.5 for two, equal otherwise)")
    mode: FusionMode = setting("rrf", '"rrf" (weighted reciprocal-rank fusion) or "relative_score"')
    rrf_k: float = setting(DEFAULT_RRF_K, "the RRF constant (0: the cookbook's w / rank; 60: classic RRF)")
    depth: int = setting(DEFAULT_DEPTH, "candidates taken from each source before fusion")
    top_k: int = setting(DEFAULT_TOP_K, "results returned")
    rerank_depth: int | None = setting(None, "fused candidates the reranker sees (None: depth)")
    reranker: Reranker | None = setting(None, "a reranker applied to the fused candidates, or None")
    on_rerank_error: OnRerankError = setting("raise", '"raise", or "fused" to keep the fused order when the reranker fails')
    dense_prf: float = setting(DEFAULT_DENSE_PRF, "dense pseudo-relevance feedback weight (0: off)")
    prf_top: int = setting(DEFAULT_PRF_TOP, "fused chunks that feed back")

    def __post_init__(self) -> None:
        set_ = object.__setattr__  # frozen: normalise once, here
        if self.weights is not None:
            set_(self, "weights", fusion_weights(self.weights))
            if not self.weights:
                raise InputError("weights is empty: pass one weight per source, or None for the defaults")
        if self.mode not in FUSION_MODES:
            raise InputError(f"mode must be 'rrf' or 'relative_score', not {self.mode!r}")
        set_(self, "rrf_k", non_negative_number("rrf_k", self.rrf_k))
        set_(self, "depth", positive_int("depth", self.depth))
        set_(self, "top_k", positive_int("top_k", self.top_k))
        set_(self, "rerank_depth", positive_int("rerank_depth", self.rerank_depth, allow_none=True))
        if self.reranker is not None and not (
            callable(getattr(self.reranker, "rerank", None)) and callable(getattr(self.reranker, "arerank", None))
        ):
            raise InputTypeError(
                f"reranker must be a contextual_retrieval_core Reranker (rerank and arerank methods), got "
                f"{type(self.reranker).__name__}; e.g. CohereReranker(), VoyageReranker() or CrossEncoderReranker()"
            )
        if self.on_rerank_error not in ON_RERANK_ERROR:
            raise InputError(f"on_rerank_error must be 'raise' or 'fused', not {self.on_rerank_error!r}")
        set_(self, "dense_prf", feedback_weight(self.dense_prf))
        set_(self, "prf_top", positive_int("prf_top", self.prf_top))

    @classmethod
    def merged(cls, config: FusionConfig | None = None, **settings: Any) -> FusionConfig:
        """`config` (default: `FusionConfig()`) with every setting that is not None replaced; what
        the query paths call with their own keyword arguments.

        Example:
            >>> FusionConfig.merged(FusionConfig(top_k=5), rrf_k=60, depth=None).rrf_k
            60.0
        """
        if config is not None and not isinstance(config, FusionConfig):
            raise InputTypeError(f"config must be a FusionConfig, got {type(config).__name__}")
        unknown = set(settings) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise InputTypeError(f"unknown fusion settings {sorted(unknown)}; FusionConfig takes {[f.name for f in dataclasses.fields(cls)]}")
        given = {name: value for name, value in settings.items() if value is not None}
        base = config if config is not None else cls()
        return dataclasses.replace(base, **given) if given else base

    @classmethod
    def from_settings(
        cls, config: FusionConfig | None, settings: Mapping[str, Any], *, names: Mapping[str, str] | None = None,
        owner: str = "FusionConfig",
    ) -> FusionConfig:
        """`config` (default: `FusionConfig()`) with the `settings` that are not None, given under a
        framework's own names (`names`: its name -> the field's, such as ``{"k": "top_k"}``).
        An unknown name is a TypeError listing the names `owner` takes.

        Example:
            >>> FusionConfig.from_settings(None, {"k": 5, "rrf_k": None}, names={"k": "top_k"}).top_k
            5
        """
        names = dict(names or {})
        fields = cls.field_names()
        own = set(names) | {f for f in fields if f not in names.values()}
        unknown = sorted(k for k in settings if k not in own)
        if unknown:
            taken = [next((k for k, v in names.items() if v == f), f) for f in fields]
            raise InputTypeError(f"{owner} got unknown settings {unknown}; its fusion settings are {taken}")
        return cls.merged(config, **{names.get(k, k): v for k, v in settings.items()})

    def feeds_back(self, n_sources: int) -> bool:
        """Whether dense PRF runs over `n_sources` fused sources: the weight is not 0 and the dense
        side is fused with another source (a lone dense side has no fused ranking to learn from)."""
        return bool(self.dense_prf) and n_sources > 1

    def feedback_top(self, sources: Sequence[NamedList]) -> list[str]:
        """The ids of the fused top `prf_top` of the first pass's `sources` (what dense PRF moves
        the query toward); empty when `dense_prf` is 0."""
        if not self.dense_prf:
            return []
        return [str(h.id) for h in self.fuse(sources)[: self.prf_top]]

    @property
    def effective_rerank_depth(self) -> int:
        """`rerank_depth`, or `depth` when it is None."""
        return self.depth if self.rerank_depth is None else self.rerank_depth

    def weights_for(self, n: int, per: str = "source") -> tuple[float, ...]:
        """The weights for `n` sources (each called a `per` in errors): the defaults when
        `weights` is None; ValueError naming the fix when the count differs."""
        if self.weights is None:
            return tuple(default_weights(n))
        return fusion_weights(self.weights, n, per=per)

    # -- running ----------------------------------------------------------------------------

    def fuse(self, sources: Sequence[NamedList]) -> list[RankedHit]:
        """Fuse named (id, score) lists, best first, each hit with its rank in every source."""
        weights = self.weights_for(len(sources))
        named = [(name, hits, w) for (name, hits), w in zip(sources, weights)]
        return fuse_sources(named, mode=self.mode, rrf_k=self.rrf_k, depth=self.depth)

    def rerank(
        self, query: str, hits: Sequence[RankedHit], text_of: Callable[[Hashable], str], *, top_k: int | None = None
    ) -> list[RankedHit]:
        """The top `top_k` (default: this config's) of the fused `hits`, reranked when a reranker is set."""
        return rerank_hits(
            query, hits, text_of, self.reranker, top_k=self.top_k if top_k is None else top_k,
            rerank_depth=self.effective_rerank_depth, on_rerank_error=self.on_rerank_error,
        )

    async def arerank(
        self, query: str, hits: Sequence[RankedHit], text_of: Callable[[Hashable], str], *, top_k: int | None = None
    ) -> list[RankedHit]:
        """Async `rerank`."""
        return await arerank_hits(
            query, hits, text_of, self.reranker, top_k=self.top_k if top_k is None else top_k,
            rerank_depth=self.effective_rerank_depth, on_rerank_error=self.on_rerank_error,
        )
