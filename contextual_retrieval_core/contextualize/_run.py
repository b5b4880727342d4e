"""One `Contextualizer` run: its bookkeeping (store commits, usage accounting), its realtime
scheduling (one cache-warming request per document, then bounded fan-out) and its share of the
work among other workers on the same store (each document's chunks claimed just before they are
generated; contextualize_claims.py).

A context is committed to the store before its request slot is freed, so a kill loses at most the
requests in flight; a commit that fails ends the run at once.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tqdm.auto import tqdm

from contextual_retrieval_core.contextualize.interrupts import StopAsked
from contextual_retrieval_core.generators.base import (
    FatalGenerationError,
    Generation,
    GenerationError,
    GroupedGeneration,
    PromptCaching,
    RateLimitedTooLong,
    ReportsRateLimits,
    SyncPath,
    TokenUsage,
    is_transient,
)
from contextual_retrieval_core.generators.usage import UsageReport
from contextual_retrieval_core.store.errors import StoreFullError
from contextual_retrieval_core.types import Chunk, Document

if TYPE_CHECKING:  # pragma: no cover - typing only
    from contextual_retrieval_core.contextualize._claims import WorkClaims
    from contextual_retrieval_core.contextualize.config import ContextualizeConfig
    from contextual_retrieval_core.generators.base import ContextGenerator
    from contextual_retrieval_core.store import ContextStore
    from contextual_retrieval_core.store._space import SpaceReserve

__all__ = ["DocState", "Run", "RunSettings", "WorkItem"]

#: the longest wait between two retry rounds
_MAX_BACKOFF_S = 60.0


@dataclass(frozen=True)
class RunSettings:
    """What a run reads of its `Contextualizer`, fixed for the run: the generator, the store and
    the config (`ContextualizeConfig`: every setting lives there)."""

    generator: ContextGenerator
    store: ContextStore
    config: ContextualizeConfig


@dataclass
class DocState:
    """One document of a run: its chunks to generate and what its requests showed."""

    document: Document
    cacheable: bool | None  # None: not known until the first request's usage shows it
    todo: list[Chunk]
    prefix_tokens: int = 0
    generated: int = 0
    #: chunks held back until the document's first chunk has written the cache
    waiting: list[Chunk] = field(default_factory=list)


@dataclass
class WorkItem:
    """One unit of realtime work: a document's first chunk (it writes the cache), another chunk,
    or a group of chunks situated in one request."""

    kind: str  # "doc" (claim, then one of the others) | "first" | "chunk" | "group"
    state: DocState
    chunks: list[Chunk]


class Run:
    """The state of one contextualize call, and its realtime scheduling."""

    def __init__(
        self,
        settings: RunSettings,
        report: UsageReport,
        keys: dict[str, str],
        grouped_keys: dict[str, str],
        contexts: dict[str, str],
        total: int,
        claims: WorkClaims,
        *,
        prefer_sync: bool = False,
    ) -> None:
        self.settings, self.report, self.keys, self.grouped_keys = settings, report, keys, grouped_keys
        gen = settings.generator
        #: a synchronous caller and a generator with a sync path: requests go through it, in threads
        self.in_threads = prefer_sync and isinstance(gen, SyncPath) and gen.has_sync_path
        self.contexts = contexts
        #: the contexts this run plans to generate
        self.total = total
        self.generated = 0
        self.failures: dict[str, str] = {}
        #: chunk id -> (its document's state, the chunk, the error): failed for a reason that may
        #: pass, tried again in the next round
        self.transient: dict[str, tuple[DocState, Chunk, str]] = {}
        #: `time.monotonic()` of the last context that arrived (or of the run's start)
        self.last_progress = time.monotonic()
        #: what stops the run: a `FatalGenerationError`, or a `StoreFullError` (the disk filled up)
        self.fatal: BaseException | None = None
        #: the disk space set aside for this run's commits (None: nothing set aside)
        self.space: SpaceReserve | None = None
        self.windowed_docs: set[str] = set()
        self.warned_cache = False
        self.lock = threading.RLock()
        self.claims = claims
        #: chunk id -> (its document's state, the chunk): claimed by another worker when reached
        self.left: dict[str, tuple[DocState, Chunk]] = {}
        self.taking_over = False  # True once this run generates what it first left to others
        #: once set (a first Ctrl-C), the run sends nothing more and ends when its requests in flight have
        self.stop: threading.Event | None = None
        # what the generator writes ("questions" for the question generator), "contexts" by default
        desc = getattr(settings.generator, "writes", "contexts")
        self.bar = tqdm(total=total, desc=desc, unit="chunk", disable=not settings.config.show_progress or not total)

    def close(self) -> None:
        self.bar.close()

    # -- bookkeeping --------------------------------------------------------------------------------

    def record(self, state: DocState, chunk: Chunk, gen: Generation, *, first: bool, grouped: bool = False) -> None:
        """Store a context the moment it arrives, then account for it (thread-safe)."""
        self.commit(chunk, gen, grouped=grouped)
        self.note(state, chunk, gen, first=first)

    def commit(self, chunk: Chunk, gen: Generation, *, grouped: bool = False) -> None:
        """Commit one context to the store (its own transaction)."""
        settings = self.settings

        def put() -> None:
            settings.store.put(
                self.grouped_keys[chunk.id] if grouped else self.keys[chunk.id],
                gen.context,
                generator=settings.generator.name,
                model=settings.generator.model,
                doc_id=chunk.document_id,
                chunk_id=chunk.id,
                original_index=chunk.index,
                usage=gen.usage.to_dict(),
            )

        try:
            put()
        except StoreFullError as exc:
            # the disk filled up: the space set aside takes this answer (it is paid for) and
            # those still in flight; the run sends nothing more and ends with this error
            self.stop_for_space(exc)
            if self.space is None:
                raise
            put()

    def stop_for_space(self, exc: StoreFullError) -> None:
        """The store's disk filled up: free the space set aside for the answers in flight (the
        first time) and stop the run; it ends with `exc`."""
        if self.space is not None:
            self.space.release()
        with self.lock:
            if self.fatal is None:
                self.fatal = exc

    async def arecord(self, state: DocState, chunk: Chunk, gen: Generation, *, first: bool, grouped: bool = False) -> None:
        """`record` from the event loop: the commit (with fsync) runs in a thread and is awaited,
        so the request slot is freed only once the context is durable. A commit that fails
        (`ContextStoreError`) ends the worker, and with it the run."""
        await asyncio.to_thread(self.commit, chunk, gen, grouped=grouped)
        self.note(state, chunk, gen, first=first)

    def note(self, state: DocState, chunk: Chunk, gen: Generation, *, first: bool) -> None:
        """Account for a generated context."""
        with self.lock:
            self.contexts[chunk.id] = gen.context
            self.generated += 1
            self.last_progress = time.monotonic()
            state.generated += 1
            self.bar.update(1)
            self.account(state, gen.usage, first=first, windowed=gen.windowed)

    def account(self, state: DocState, usage: TokenUsage, *, first: bool, windowed: bool = False) -> None:
        report = self.report
        report.usage += usage
        if state.cacheable is None and first and usage.requests:
            # a probing first request: its usage shows whether the prefix is cached
            state.cacheable = bool(usage.cache_write_tokens or usage.cache_write_1h_tokens or usage.cache_read_tokens)
            if isinstance(self.settings.generator, PromptCaching):
                self.settings.generator.learn_cacheable(state.document, state.cacheable)
            report.cacheable_documents += int(state.cacheable)
        if usage.cache_write_tokens or usage.cache_write_1h_tokens:
            report.cache_writes += 1
        if state.cacheable:
            state.prefix_tokens = max(
                state.prefix_tokens, usage.cache_write_tokens + usage.cache_write_1h_tokens + usage.cache_read_tokens
            )
            if not first and usage.requests and not usage.cache_read_tokens:
                report.cache_misses += 1
                if not self.warned_cache:
                    self.warned_cache = True
                    warnings.warn(
                        f"prompt cache not read for a chunk of {state.document.id!r} after its document "
                        "was written to the cache: check that the document block is identical across "
                        "its chunks and reaches the model's cache minimum (this warning shows once per run)",
                        UserWarning,
                        stacklevel=2,
                    )
        if windowed and state.document.id not in self.windowed_docs:
            self.windowed_docs.add(state.document.id)
            report.windowed_documents += 1

    def below_minimum(self, state: DocState) -> bool:
        """For grouped mode: known to be below the cache minimum, or estimated so when unsure."""
        if state.cacheable is not None:
            return not state.cacheable
        gen = self.settings.generator
        if not isinstance(gen, PromptCaching) or gen.cache_min_tokens is None:
            return False
        minimum = gen.cache_min_tokens
        below = gen.document_tokens(state.document) < minimum
        if below:  # grouped requests carry no cache_control: settle it as not cacheable
            state.cacheable = False
        return below

    def fail(self, chunk: Chunk, exc: BaseException, state: DocState | None = None) -> None:
        """A chunk's request failed: fatal errors stop the run; transient ones (`is_transient`)
        wait for the next retry round; any other fails the chunk."""
        if isinstance(exc, FatalGenerationError):
            if self.fatal is None:
                self.fatal = exc
            return
        message = str(exc) or type(exc).__name__
        if state is not None and is_transient(exc):
            with self.lock:
                self.transient[chunk.id] = (state, chunk, message)
                self.report.transient_failures += 1
            return
        self.failures[chunk.id] = message

    async def retry_transient(self, generate: Any) -> None:
        """Retry rounds: while chunks failed for a reason that may pass, wait (`retry_backoff_s`,
        doubled after every round in which no context arrived, at most a minute), then generate
        them again with `generate(states)`. The rounds end when none is left, or when no context
        has arrived for `give_up_after_rate_limited_s` (None: never): the chunks still failing
        then fail the run, naming their last error."""
        settings = self.settings
        limit, delay = settings.config.give_up_after_rate_limited_s, settings.config.retry_backoff_s
        while self.transient and not self.stopping():
            idle = time.monotonic() - self.last_progress
            if limit is not None and idle >= limit:
                break
            await asyncio.sleep(delay if limit is None else min(delay, limit - idle))
            if limit is not None and time.monotonic() - self.last_progress >= limit:
                break
            states: dict[str, DocState] = {}
            for state, chunk, _ in self.transient.values():
                if state.document.id not in states:
                    states[state.document.id] = state
                    state.todo, state.waiting = [], []
                states[state.document.id].todo.append(chunk)
            self.transient = {}
            self.report.retry_rounds += 1
            before = self.generated
            await generate(states)
            delay = settings.config.retry_backoff_s if self.generated > before else min(2 * delay, _MAX_BACKOFF_S)
        for chunk_id, (_, _, message) in self.transient.items():
            self.failures[chunk_id] = (
                f"failed with transient errors through {self.report.retry_rounds} retry rounds, the last: {message}"
            )
        self.transient = {}

    # -- realtime -------------------------------------------------------------------------------------

    async def realtime(self, states: dict[str, DocState]) -> None:
        """Bounded fan-out: warm documents' chunks first, new documents' first chunks fill free slots."""
        queue: asyncio.PriorityQueue = asyncio.PriorityQueue()
        seq = itertools.count()
        workers_n = self.settings.config.concurrency
        pending = 0

        def push(priority: int, item: WorkItem | None) -> None:
            nonlocal pending
            pending += 1
            queue.put_nowait((priority, next(seq), item))

        # priority 0: chunks of documents whose cache is written; 1: a cacheable document (its
        # warm-up starts early, so its chunks are never the tail); 1.5: the other chunks of a
        # started document; 2: the rest. Larger documents first, so no worker ends on a long one.
        for state in sorted(states.values(), key=lambda s: -len(s.todo)):
            grouped = self.settings.config.grouped and self.below_minimum(state)
            push(1 if state.cacheable is not False and not grouped else 2, WorkItem("doc", state, list(state.todo)))

        async def worker() -> None:
            nonlocal pending
            while True:
                _, _, item = await queue.get()
                if item is None:  # stop
                    return
                try:
                    await self._handle(item, push)
                finally:
                    pending -= 1
                    if pending == 0:
                        for _ in range(workers_n):
                            queue.put_nowait((9, next(seq), None))

        tasks = [asyncio.create_task(worker()) for _ in range(workers_n)]
        workers = asyncio.gather(*tasks)
        watch = asyncio.create_task(self._watch_rate_limits())
        try:
            either: set[asyncio.Future[Any]] = {workers, watch}
            done, _ = await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
            if watch in done:
                self.fatal = self.fatal or watch.result()
            else:
                workers.result()  # a worker's error (a failed commit) ends the run at once
        finally:
            watch.cancel()
            for task in tasks:
                task.cancel()
            # the workers' gather too: an interrupted run leaves no exception unretrieved
            await asyncio.gather(watch, workers, *tasks, return_exceptions=True)

    async def _watch_rate_limits(self) -> RateLimitedTooLong:
        """Returns (ending the run) once the API has answered only 429s for the allowed time."""
        limit = self.settings.config.give_up_after_rate_limited_s
        gen = self.settings.generator
        if limit is None or not isinstance(gen, ReportsRateLimits):
            await asyncio.Event().wait()  # never
            raise AssertionError("unreachable")
        gen.stop_retrying(False)  # a run after one that gave up may send again
        started = time.monotonic()
        while True:
            await asyncio.sleep(min(1.0, limit / 4))
            since = gen.rate_limited_since()
            if since is not None and time.monotonic() - max(since, started) >= limit:
                gen.stop_retrying()  # the requests still retrying in worker threads end too
                return RateLimitedTooLong(
                    f"the API answered nothing but 429 rate-limit errors for {limit:g} s "
                    f"(give_up_after_rate_limited_s); the {self.generated} contexts generated are stored — "
                    "run again later, lower concurrency, or raise the rate limit"
                )

    def take_claims(self, state: DocState) -> None:
        """Claim the document's chunks to generate; those another worker holds are left to it."""
        held, others, taken = self.claims.partition(state.todo, self.keys)
        with self.lock:
            state.todo = held
            for chunk in others:
                self.left[chunk.id] = (state, chunk)
            # taken over: from an expired lease, or (waiting on others) one released unfinished
            self.report.taken_over += len(held) if self.taking_over else taken

    async def _start(self, item: WorkItem, push: Any) -> None:
        """A document's turn: claim its chunks, then situate them as its kind of document goes."""
        state = item.state
        try:
            await asyncio.to_thread(self.take_claims, state)
        except StoreFullError as exc:
            self.stop_for_space(exc)  # nothing of this document was sent
            return
        if not state.todo:
            return
        if self.settings.config.grouped and self.below_minimum(state):
            await self._group(state, list(state.todo), push)
        elif state.cacheable is not False and not state.generated:
            state.waiting = list(state.todo[1:])  # until the first chunk has written the cache
            await self._handle(WorkItem("first", state, [state.todo[0]]), push)
        else:
            for chunk in state.todo[1:]:
                push(1.5, WorkItem("chunk", state, [chunk]))
            await self._handle(WorkItem("chunk", state, [state.todo[0]]), push)

    async def wait_for_others(self, generate: Any) -> None:
        """Serve the chunks left to other workers from the store once they land; take over those
        whose claim expired or was released, generating them with `generate(states)`."""
        while self.left and not self.stopping():
            await asyncio.sleep(self.claims.poll_s)
            keys = [self.keys[i] for i in self.left] + [self.grouped_keys[i] for i in self.left if i in self.grouped_keys]
            found = await asyncio.to_thread(self.settings.store.get_many, keys)
            for chunk_id in list(self.left):
                hit = found.get(self.keys[chunk_id]) or found.get(self.grouped_keys.get(chunk_id, ""))
                if hit and hit.strip():
                    self.contexts[chunk_id] = hit
                    del self.left[chunk_id]
                    self.report.left_to_other_workers += 1
                    self.bar.update(1)
            if not self.left:
                return
            states: dict[str, DocState] = {}
            for old, chunk in self.left.values():
                state = states.setdefault(old.document.id, DocState(old.document, old.cacheable, []))
                state.todo.append(chunk)
            self.left, self.taking_over = {}, True
            await generate(states)  # claims each document again: what is still held elsewhere is left again

    def stopping(self) -> bool:
        """Whether the run sends nothing more: a fatal error, or a graceful stop was asked for."""
        if self.fatal is None and self.stop is not None and self.stop.is_set():
            self.fatal = StopAsked(f"interrupted: {self.generated} contexts generated in this run are stored, "
                                     "the requests in flight included; run again to resume")
        return self.fatal is not None

    async def _handle(self, item: WorkItem, push: Any) -> None:
        kind, state = item.kind, item.state
        if self.stopping():
            return
        if kind == "doc":
            await self._start(item, push)
            return
        if kind == "group":
            await self._group(state, item.chunks, push)
            return
        chunk = item.chunks[0]
        try:
            gen = self.settings.generator
            if self.in_threads:
                result = await asyncio.to_thread(gen.generate, state.document, chunk)
            else:
                result = await gen.agenerate(state.document, chunk)
        except Exception as exc:
            if not isinstance(exc, GenerationError) and not is_transient(exc):
                raise  # a framework's own error that is not transient ends the run, as it is
            self.fail(chunk, exc, state)
            if kind == "first" and state.waiting and not self.stopping():
                # failed for good: the next chunk goes alone and writes the cache instead
                push(1, WorkItem("first", state, [state.waiting.pop(0)]))
            return
        await self.arecord(state, chunk, result, first=kind == "first")
        if kind == "first":
            for rest in state.waiting:
                push(0, WorkItem("chunk", state, [rest]))
            state.waiting = []

    async def _group(self, state: DocState, chunks: list[Chunk], push: Any) -> None:
        gen = self.settings.generator
        try:
            assert isinstance(gen, GroupedGeneration)  # checked when the Contextualizer was made
            if self.in_threads:
                found, usage = await asyncio.to_thread(gen.generate_group, state.document, chunks)
            else:
                found, usage = await gen.agenerate_group(state.document, chunks)
        except GenerationError as exc:
            if isinstance(exc, FatalGenerationError):
                self.fail(chunks[0], exc)
                return
            found, usage = {}, TokenUsage()
        self.report.grouped_requests += 1 if usage.requests else 0
        self.account(state, usage, first=True)
        for chunk in chunks:
            context = found.get(chunk.id)
            if context is None:
                self.report.grouped_fallbacks += 1
                push(0, WorkItem("chunk", state, [chunk]))
            else:
                await self.arecord(state, chunk, Generation(context, TokenUsage()), first=True, grouped=True)
