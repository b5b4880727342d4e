"""Model facts, prices, and the `UsageReport` of an ingestion run.

Prices are US$ per million tokens, from Anthropic's published price list; cache writes cost 1.25x
the input price with the 5-minute TTL and 2x with the 1-hour TTL, cache reads 0.1x, and the
Message Batches API halves everything. A model missing from the table is reported with an unknown
price (cost None), never a guessed one.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from contextual_retrieval_core.generators.base import TokenUsage

__all__ = ["ModelInfo", "MODELS", "model_info", "UsageReport", "cost_usd", "estimate_tokens", "cache_verdict"]


@dataclass(frozen=True)
class ModelInfo:
    """What the library needs to know about a Claude model (None: not known to this version).

    Attributes:
        input_price: US$ per million uncached input tokens.
        output_price: US$ per million output tokens.
        cache_min_tokens: the shortest prompt prefix the API caches; shorter prefixes are
            silently not cached.
        context_window: input + output tokens the model accepts.
        max_output_tokens: the most tokens one answer may have.
    """

    input_price: float | None
    output_price: float | None
    cache_min_tokens: int | None
    context_window: int = 200_000
    max_output_tokens: int = 4_096


#: Known models, by id prefix (dated ids such as claude-3-haiku-20240307 match their prefix).
MODELS: dict[str, ModelInfo] = {
    "claude-haiku-4-5": ModelInfo(1.00, 5.00, 4096, 200_000, 64_000),
    "claude-3-5-haiku": ModelInfo(0.80, 4.00, 2048, 200_000, 8_192),
    "claude-3-haiku": ModelInfo(0.25, 1.25, 2048, 200_000, 4_096),
    "claude-sonnet-4-5": ModelInfo(3.00, 15.00, 1024, 200_000, 64_000),
    "claude-sonnet-4": ModelInfo(3.00, 15.00, 1024, 200_000, 64_000),
    "claude-opus-4-1": ModelInfo(15.00, 75.00, 1024, 200_000, 32_000),
    "claude-opus-4": ModelInfo(15.00, 75.00, 1024, 200_000, 32_000),
}
_UNKNOWN = ModelInfo(None, None, None)


def model_info(model: str) -> ModelInfo:
    """The table entry whose id is the longest prefix of `model` (Bedrock/Vertex ids included).

    Example:
        >>> [model_info(m).cache_min_tokens for m in ("claude-3-haiku-20240307",
        ...     "us.anthropic.claude-3-haiku-20240307-v1:0", "global.anthropic.claude-3-haiku-20240307-v1:0",
        ...     "claude-3-haiku@20240307")]
        [2048, 2048, 2048, 2048]
    """
    name = model.split("/")[-1]
    # Bedrock: [us. | eu. | apac. | global. ...]anthropic.claude-...
    name = re.sub(r"^(?:[a-z]+\.)?anthropic\.", "", name)
    name = name.split("@")[0]  # Vertex: claude-3-haiku@20240307
    best = ""
    for prefix in MODELS:
        if name.startswith(prefix) and len(prefix) > len(best):
            # a shorter family prefix must not claim a newer sibling (claude-opus-4 vs claude-opus-4-5)
            rest = name[len(prefix) :]
            if rest and rest[0] == "-" and rest[1:2].isdigit() and len(rest.split("-")[1]) == 1:
                continue
            best = prefix
    return MODELS[best] if best else _UNKNOWN


def estimate_tokens(text: str, chars_per_token: float = 4.0) -> int:
    """A quick token estimate (the API's count_tokens gives the exact figure)."""
    return math.ceil(len(text) / chars_per_token) if text else 0


def cache_verdict(estimated_tokens: int, minimum: int | None) -> bool | None:
    """Whether a prefix of about `estimated_tokens` reaches a cache `minimum`, when an estimate can tell.

    True / False when the estimate is clear by a factor of 1.5 either way; None when it is too
    close to call (or the minimum is unknown): then the first request carries cache_control and its
    usage settles it.

    Example:
        >>> cache_verdict(9000, 4096), cache_verdict(1000, 4096), cache_verdict(4000, 4096)
        (True, False, None)
    """
    if minimum is None:
        return None
    if estimated_tokens >= minimum * 1.5:
        return True
    if estimated_tokens * 1.5 < minimum:
        return False
    return None


def cost_usd(usage: TokenUsage, model: str, *, batch: bool = False) -> float | None:
    """The price of `usage` on `model` (None when the model's price is not known)."""
    info = model_info(model)
    if info.input_price is None or info.output_price is None:
        return None
    per = info.input_price / 1e6
    total = (
        usage.input_tokens * per
        + usage.cache_write_tokens * per * 1.25
        + usage.cache_write_1h_tokens * per * 2.0
        + usage.cache_read_tokens * per * 0.1
        + usage.output_tokens * info.output_price / 1e6
    )
    return total * (0.5 if batch else 1.0)


@dataclass
class UsageReport:
    """What an ingestion run did and cost.

    Attributes:
        generator: the generator's label ("anthropic", or "structural (no LLM)" for the offline
            default); model: the model id.
        mode: "realtime" or "batch"; grouped: whether small documents were situated in one request.
        documents, chunks: inputs; store_hits: contexts served from the store (paid for before);
        generated: contexts made in this run; repeated_chunks: chunks whose text repeats another
        chunk of the same document (one store key), so they take its context, generated once.
        usage: token counts and requests / SDK retries.
        cacheable_documents: documents whose prefix reaches the model's cache minimum and that
            had at least one chunk to generate.
        cache_writes: requests that wrote the cache.
        ideal_cache_read_tokens: what perfect caching would read: for every cacheable document,
            its prefix tokens times (generated chunks - 1).
        cache_misses: requests on an already-written document prefix that did not read it.
        windowed_documents: documents too long for the model, sent as head + region around the chunk.
        grouped_requests / grouped_fallbacks: grouped-mode requests, and chunks that fell back to a
            per-chunk request because the grouped answer lacked them.
        chunks_not_in_document: chunks whose text does not occur in their document (allowed).
        left_to_other_workers: chunks another worker held a claim on when this run reached them
            (it was generating them): this run did not pay for them, it served them from the store
            once they landed. taken_over: chunks whose claim this run took over from a worker whose
            lease expired (it died) or that gave them up, and generated itself.
        abandoned_batches: ids of stored Message Batches the API no longer knows (404): marked
            abandoned in the store, their chunks generated again.
        transient_failures: requests that failed for a reason that may pass (429, 5xx, overloaded,
            timeout, dropped connection) after the client's own retries, and were tried again in
            a later round; retry_rounds: how many such rounds the run went through.
        elapsed_s: wall time.
    """

    generator: str = ""
    model: str = ""
    is_llm: bool = True
    mode: str = "realtime"
    grouped: bool = False
    documents: int = 0
    chunks: int = 0
    store_hits: int = 0
    generated: int = 0
    repeated_chunks: int = 0
    usage: TokenUsage = field(default_factory=TokenUsage)
    cacheable_documents: int = 0
    cache_writes: int = 0
    ideal_cache_read_tokens: int = 0
    cache_misses: int = 0
    windowed_documents: int = 0
    grouped_requests: int = 0
    grouped_fallbacks: int = 0
    chunks_not_in_document: int = 0
    documents_without_chunks: int = 0
    left_to_other_workers: int = 0
    taken_over: int = 0
    abandoned_batches: list[str] = field(default_factory=list)
    transient_failures: int = 0
    retry_rounds: int = 0
    elapsed_s: float = 0.0

    @property
    def batch(self) -> bool:
        return self.mode == "batch"

    @property
    def cache_read_share(self) -> float | None:
        """Cache reads as a share of the ideal (1.0 = every possible read happened)."""
        if not self.ideal_cache_read_tokens:
            return None
        return self.usage.cache_read_tokens / self.ideal_cache_read_tokens

    @property
    def cache_writes_per_cacheable_document(self) -> float | None:
        return self.cache_writes / self.cacheable_documents if self.cacheable_documents else None

    def cost_usd(self, model: str | None = None) -> float | None:
        """The run's cost at `model`'s prices (default: the model it ran on)."""
        return cost_usd(self.usage, model or self.model, batch=self.batch)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["usage"] = self.usage.to_dict()
        data["cache_read_share"] = self.cache_read_share
        data["cache_writes_per_cacheable_document"] = self.cache_writes_per_cacheable_document
        data["cost_usd"] = self.cost_usd()
        return data

    def format(self) -> str:
        """A human-readable summary, as the CLI prints it."""
        u = self.usage
        label = self.generator + (f" / {self.model}" if self.model else "")
        lines = [
            f"contexts: {self.chunks} chunks in {self.documents} document{'' if self.documents == 1 else 's'} — "
            f"{self.store_hits} from the store, "
            f"{self.generated} generated ({label}, {self.mode}{', grouped' if self.grouped else ''})",
        ]
        if self.left_to_other_workers or self.taken_over:
            lines.append(
                f"  workers: {self.left_to_other_workers} chunks left to other workers (served from the store once "
                f"they landed), {self.taken_over} taken over from expired or released claims"
            )
        if not self.is_llm:
            lines.append("  no LLM: contexts are structural (title, headings, enclosing code names)")
            return "\n".join(lines)
        share = self.cache_read_share
        lines += [
            f"  requests: {u.requests} ({u.retries} SDK retries)",
            f"  tokens: input {u.input_tokens:,}, output {u.output_tokens:,}, cache write "
            f"{u.cache_write_tokens + u.cache_write_1h_tokens:,}, cache read {u.cache_read_tokens:,}",
            f"  prompt cache: {self.cache_writes} writes for {self.cacheable_documents} cacheable documents; "
            f"reads {'n/a' if share is None else f'{100 * share:.1f}%'} of ideal"
            + (f"; {self.cache_misses} missed reads" if self.cache_misses else ""),
        ]
        extra = []
        if self.windowed_documents:
            extra.append(f"{self.windowed_documents} documents windowed (too long for the model)")
        if self.grouped_requests:
            extra.append(f"{self.grouped_requests} grouped requests, {self.grouped_fallbacks} chunk fallbacks")
        if self.repeated_chunks:
            extra.append(f"{self.repeated_chunks} repeated chunks took the context of their first copy")
        if self.chunks_not_in_document:
            extra.append(f"{self.chunks_not_in_document} chunks not found in their document")
        if self.transient_failures:
            extra.append(f"{self.transient_failures} transient failures ridden out in {self.retry_rounds} retry rounds")
        if self.abandoned_batches:
            extra.append(f"{len(self.abandoned_batches)} Message Batches unknown to the API, abandoned and regenerated")
        if extra:
            lines.append("  " + "; ".join(extra))
        cost = self.cost_usd()
        lines.append(
            f"  cost: {'unknown (no price for ' + self.model + ')' if cost is None else f'${cost:.4f}'}"
            + (" at the 50% batch rate" if self.batch else "")
        )
        return "\n".join(lines)
