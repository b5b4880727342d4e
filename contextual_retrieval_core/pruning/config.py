"""`PruningConfig`: every scoring setting of `ContextPruner`, validated once, the one home of their defaults.

A `ContextPruner` takes one (``config=``); LangChain's `ContextPruningCompressor` and LlamaIndex's
`ContextPruningPostprocessor` generate their flat fields from it (name, type, default and
description) and build one from those fields, so a setting means the same, has the same default
and fails the same way in the core and in both frameworks.

Example:
    >>> config = PruningConfig(budget=200, neighbours=False)
    >>> config.replace(lam=0.5).lam
    0.5
    >>> PruningConfig(budget_share=0)
    Traceback (most recent call last):
    ...
    contextual_retrieval_core.errors.InputError: budget_share must be in (0, 1], got 0.0
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from contextual_retrieval_core._settings import Settings, setting
from contextual_retrieval_core.checks import non_negative_number, positive_int
from contextual_retrieval_core.errors import InputError, InputTypeError

__all__ = ["PruningConfig"]


def _share(name: str, value: Any) -> float:
    """`value` as a float in [0, 1]; TypeError / ValueError naming `name`."""
    number = non_negative_number(name, value)
    if number > 1:
        raise InputError(f"{name} must be in [0, 1], got {value!r}")
    return number


@dataclass(frozen=True)
class PruningConfig(Settings):
    """How a `ContextPruner` scores and chooses what to keep (frozen; validated when built).

    Args:
        budget: tokens of source text to keep (a positive integer); None for `budget_share`.
        budget_share: the share of the input's tokens to keep when `budget` is None, in (0, 1].
        alpha: weight of dense against BM25 in the coarse filter over chunks, in [0, 1].
        dense_weight: the same weight for units, in [0, 1].
        keep_share: chunks scoring under this share of the best chunk are dropped, in [0, 1].
        top_n: keep at most this many chunks (None: no limit).
        chunk_weight: weight of a unit's chunk score in its relevance, in [0, 1].
        lam: MMR's weight of relevance against redundancy, in [0, 1] (1: relevance only).
        min_score: no unit under this relevance (in [0, 1]) is kept; None for no floor.
        neighbours: keep the unit before and after each pick when the budget allows.
        standout_z: a chunk's top unit whose z-score over all units reaches this (a number >= 0)
            is always kept; a large value (say 99) turns this off.
        min_tokens: when fewer tokens than this are kept, the top two chunks are kept whole
            instead (an integer >= 0; 0 turns this off).

    Errors name the setting and the fix: TypeError for a value of the wrong type, ValueError for
    one out of range.
    """

    budget: int | None = setting(None, "tokens of source text to keep (None: budget_share of the input)")
    budget_share: float = setting(0.3, "share of the input's tokens to keep when budget is None")
    alpha: float = setting(0.5, "weight of dense against BM25 in the coarse filter over chunks")
    dense_weight: float = setting(0.5, "weight of dense against BM25 in a unit's relevance")
    keep_share: float = setting(0.25, "chunks scoring under this share of the best chunk are dropped")
    top_n: int | None = setting(None, "keep at most this many chunks (None: no limit)")
    chunk_weight: float = setting(0.3, "weight of a unit's chunk score in its relevance")
    lam: float = setting(0.7, "MMR's weight of relevance against redundancy (1: relevance only)")
    min_score: float | None = setting(None, "no unit under this relevance is kept (None: no floor)")
    neighbours: bool = setting(True, "keep the unit before and after each pick when the budget allows")
    standout_z: float = setting(2.0, "a chunk's top unit with this z-score over all units is always kept")
    min_tokens: int = setting(16, "under this many tokens kept, the top two chunks are kept whole")

    def __post_init__(self) -> None:
        set_ = object.__setattr__  # frozen: normalise once, here
        set_(self, "budget", positive_int("budget", self.budget, allow_none=True, what="a positive number of tokens"))
        budget_share = non_negative_number("budget_share", self.budget_share)
        if not 0 < budget_share <= 1:
            raise InputError(f"budget_share must be in (0, 1], got {budget_share!r}")
        set_(self, "budget_share", budget_share)
        for name in ("alpha", "dense_weight", "keep_share", "chunk_weight", "lam"):
            set_(self, name, _share(name, getattr(self, name)))
        if self.min_score is not None:
            set_(self, "min_score", _share("min_score", self.min_score))
        set_(self, "top_n", positive_int("top_n", self.top_n, allow_none=True))
        if not isinstance(self.neighbours, bool):
            raise InputTypeError(f"neighbours must be True or False, got {self.neighbours!r}")
        set_(self, "standout_z", non_negative_number("standout_z", self.standout_z))
        if not (type(self.min_tokens) is int and self.min_tokens == 0):  # 0 turns the fallback off
            set_(self, "min_tokens", positive_int("min_tokens", self.min_tokens, what="an integer >= 0"))
