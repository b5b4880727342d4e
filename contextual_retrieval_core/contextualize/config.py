"""`ContextualizeConfig`: every ingestion setting, validated once, the one home of their defaults.

A `Contextualizer` takes one (``config=``); LangChain's `ContextualDocumentTransformer` and
LlamaIndex's `ContextualNodeParser` generate their flat fields from it (name, type, default and
description) and build one from those fields for every run, so a setting means the same, has the
same default and fails the same way in the core and in both frameworks.

Example:
    >>> config = ContextualizeConfig(concurrency=4, show_progress=False)
    >>> config.replace(mode="batch").mode
    'batch'
    >>> ContextualizeConfig(concurrency=0)
    Traceback (most recent call last):
    ...
    contextual_retrieval_core.errors.InputError: concurrency must be a positive integer, got 0
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from contextual_retrieval_core._settings import Settings, setting
from contextual_retrieval_core.checks import positive_int, positive_seconds
from contextual_retrieval_core.errors import InputError, InputTypeError
from contextual_retrieval_core.types import ContextPosition

__all__ = ["ContextualizeConfig", "BATCH_MAX_REQUESTS", "BATCH_MAX_BYTES"]

#: the Message Batches API's limits per batch: 100,000 requests, 256 MB (200 MB leaves room for the JSON envelope)
BATCH_MAX_REQUESTS = 100_000
BATCH_MAX_BYTES = 200 * 1024 * 1024


@dataclass(frozen=True)
class ContextualizeConfig(Settings):
    """How a `Contextualizer` runs (frozen; validated when built).

    Args:
        concurrency: requests in flight at once (realtime mode).
        mode: "realtime" or "batch" (Message Batches: 50% off, results within 24 h).
        grouped: situate the chunks of a document below the cache minimum in one request.
        position, separator: how `ContextualChunk.indexed_text` joins context and chunk.
        show_progress: a progress bar over the contexts to generate.
        batch_poll_interval: seconds between batch status checks.
        batch_max_requests, batch_max_bytes: the most a batch holds (the API's limits).
        give_up_after_rate_limited_s: stop the run (`RateLimitedTooLong`) once the API has
            answered nothing but rate-limit errors for this many seconds (None: never); what was
            generated is stored.
        retry_backoff_s: the wait before the first retry round of chunks whose request failed
            for a reason that may pass; it doubles after every round that brought nothing.
        claim_lease_s, claim_renew_s, claim_poll_s: several workers on one store claim each
            document's chunks before generating them, for `claim_lease_s` seconds, renewed every
            `claim_renew_s` (None: a third of the lease); a waiting worker looks at the store
            every `claim_poll_s`. Only generators that call an LLM claim.
        structural_header: put the chunk's structural context (file, section, enclosing
            definitions) on a line before an LLM's context (the store keeps the context as
            written, so switching it never costs a request).

    Errors name the setting and the fix: TypeError for a value of the wrong type, ValueError for
    one out of range.
    """

    concurrency: int = setting(8, "generation requests in flight at once (realtime mode)")
    mode: Literal["realtime", "batch"] = setting("realtime", '"realtime", or "batch" (Message Batches: 50% off, within 24 h)')
    grouped: bool = setting(False, "situate a document below the cache minimum in one request for all its chunks")
    position: ContextPosition = setting("before", 'where the context goes in the indexed text: "before", "after" or "none"')
    separator: str = setting("\n\n", "what joins context and chunk in the indexed text")
    show_progress: bool = setting(True, "a progress bar over the contexts to generate")
    batch_poll_interval: float = setting(30.0, "seconds between Message Batch status checks")
    batch_max_requests: int = setting(BATCH_MAX_REQUESTS, "the most requests a Message Batch holds")
    batch_max_bytes: int = setting(BATCH_MAX_BYTES, "the most bytes a Message Batch holds")
    give_up_after_rate_limited_s: float | None = setting(120.0, "stop after this many seconds of nothing but rate limits (None: never)")
    retry_backoff_s: float = setting(1.0, "seconds before the first retry round of transient failures (doubles while rounds bring nothing)")
    claim_lease_s: float = setting(60.0, "seconds a worker's claim on a document's chunks lasts")
    claim_renew_s: float | None = setting(None, "seconds between claim renewals (None: a third of the lease)")
    claim_poll_s: float = setting(1.0, "seconds between looks at the store while other workers hold claims")
    structural_header: bool = setting(True, "put the structural context on a line before an LLM's context")

    def __post_init__(self) -> None:
        set_ = object.__setattr__  # frozen: normalise once, here
        for name in ("concurrency", "batch_max_requests", "batch_max_bytes"):
            set_(self, name, positive_int(name, getattr(self, name)))
        if self.mode not in ("realtime", "batch"):
            raise InputError(f"mode must be 'realtime' or 'batch', not {self.mode!r}")
        if self.position not in ("before", "after", "none"):
            raise InputError(f"position must be 'before', 'after' or 'none', not {self.position!r}")
        for name in ("grouped", "show_progress", "structural_header"):
            if not isinstance(getattr(self, name), bool):
                raise InputTypeError(f"{name} must be True or False, got {getattr(self, name)!r}")
        if not isinstance(self.separator, str):
            raise InputTypeError(f"separator must be a string, got {type(self.separator).__name__}")
        for name in ("batch_poll_interval", "retry_backoff_s", "claim_lease_s", "claim_poll_s"):
            set_(self, name, positive_seconds(name, getattr(self, name)))
        for name in ("give_up_after_rate_limited_s", "claim_renew_s"):
            set_(self, name, positive_seconds(name, getattr(self, name), allow_none=True))
        if self.claim_renew_s is not None and self.claim_renew_s >= self.claim_lease_s:
            raise InputError(f"claim_renew_s ({self.claim_renew_s!r}) must be shorter than claim_lease_s "
                             f"({self.claim_lease_s!r}), or leases lapse")
