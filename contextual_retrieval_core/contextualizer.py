"""`Contextualizer`: documents and their chunks in, contextual chunks and a usage report out.

What it guarantees:

- Nothing is paid for twice: every context is looked up in the `ContextStore` first, and every
  generated context is committed to it before its request slot is freed, so a crash or a kill
  loses at most the requests in flight. The store is checked writable before the first request;
  a commit that fails stops the run at once, naming the file and the reason.
- One cache write per document: the first chunk of a document whose prefix reaches the model's
  cache minimum goes alone; when it returns (the cache is written) the document's other chunks
  fan out and read it. If it fails for good, the next chunk becomes the first. Warm documents' chunks go before new documents' first chunks, and new
  documents start whenever a slot is free, so the concurrency bound stays full.
- Caching is verified from the usage the API returns: a chunk after the first that does not read
  the cache is counted and warned about (once per run).
- Message Batches mode (50% off): the corpus goes in batches (first chunks of cacheable documents
  first, so the rest read their cache), batch ids are stored at once, and a rerun picks up a batch
  that was still running when its process died. A stored batch the API no longer knows (404) is
  marked abandoned, reported, and its chunks generated again.
- Sustained rate limiting (nothing but 429s for `give_up_after_rate_limited_s`) stops the run with
  `RateLimitedTooLong`; what was generated is stored.
- Text is checked before anything is sent: a document or chunk that cannot be encoded as UTF-8
  (lone surrogates) is refused, naming it.
- Grouped mode (opt-in): a document below the cache minimum is situated in one request for all of
  its chunks instead of paying for the whole document once per chunk; a chunk the answer misses
  falls back to its own request.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import logging
import os
import threading
import time
import warnings
import weakref
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Sequence

from tqdm.auto import tqdm

from .generators.base import (
    PREFER_SYNC,
    ContextGenerator,
    FatalGenerationError,
    Generation,
    GenerationError,
    RateLimitedTooLong,
    ReportsRateLimits,
    TokenUsage,
)
from .store import ContextStore
from .types import Chunk, ContextPosition, ContextualChunk, Document, distinct_documents
from .usage import UsageReport

__all__ = ["Contextualizer", "ContextualizeResult", "ContextualizationError", "default_store_path"]

log = logging.getLogger(__name__)

_GROUPED_SUFFIX = "/grouped-v1"
_BATCH_MAX_REQUESTS = 100_000
_BATCH_MAX_BYTES = 200 * 1024 * 1024  # under the API's 256 MB, leaving room for the JSON envelope


def default_store_path() -> Path:
    """~/.cache/contextual-retrieval/contexts.sqlite3 (XDG_CACHE_HOME respected)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "contextual-retrieval" / "contexts.sqlite3"


class ContextualizationError(RuntimeError):
    """Some contexts could not be generated. Those that were are in the store: rerun to resume.

    Attributes:
        failures: chunk id -> error message.
    """

    def __init__(self, message: str, failures: dict[str, str]) -> None:
        super().__init__(message)
        self.failures = failures


@dataclass
class ContextualizeResult:
    """The contextual chunks (in input order), the usage report, and flagged chunks."""

    chunks: list[ContextualChunk]
    report: UsageReport
    #: ids of chunks whose text does not occur in their document (situated all the same)
    not_in_document: list[str] = field(default_factory=list)


@dataclass
class _DocState:
    document: Document
    cacheable: bool | None  # None: not known until the first request's usage shows it
    todo: list[Chunk]
    prefix_tokens: int = 0
    generated: int = 0
    #: chunks held back until the document's first chunk has written the cache
    waiting: list[Chunk] = field(default_factory=list)


class Contextualizer:
    """Situates every chunk within its document, through a store, with verified caching.

    Args:
        generator: a `ContextGenerator` (default: the offline `StructuralContextGenerator`).
        store: a `ContextStore`, a path to one, or None for the default file
            (`default_store_path()`) with LLM generators and an in-memory store otherwise.
        concurrency: requests in flight at once (realtime mode).
        mode: "realtime" (default) or "batch" (Message Batches: 50% off, results within 24 h).
        grouped: situate documents below the cache minimum in one request each.
        position, separator: how `ContextualChunk.indexed_text` joins context and chunk.
        show_progress: a progress bar over the contexts to generate.
        batch_poll_interval: seconds between batch status checks.
        give_up_after_rate_limited_s: stop the run (`RateLimitedTooLong`) once the API has answered
            nothing but 429 rate-limit errors, SDK retries included, for this many seconds
            (default 120; None: never). Everything generated before is stored.

    Example:
        >>> from contextual_retrieval_core import Chunk, Document
        >>> doc = Document("guide.md", "# Setup\\n## Linux\\nRun make install.")
        >>> result = Contextualizer(show_progress=False).contextualize(
        ...     [doc], [Chunk("c0", "guide.md", "Run make install.")])
        >>> result.chunks[0].context
        'From guide.md, section: Setup > Linux.'
    """

    def __init__(
        self,
        generator: ContextGenerator | None = None,
        store: ContextStore | str | os.PathLike[str] | None = None,
        *,
        concurrency: int = 8,
        mode: Literal["realtime", "batch"] = "realtime",
        grouped: bool = False,
        position: ContextPosition = "before",
        separator: str = "\n\n",
        show_progress: bool = True,
        batch_poll_interval: float = 30.0,
        batch_max_requests: int = _BATCH_MAX_REQUESTS,
        batch_max_bytes: int = _BATCH_MAX_BYTES,
        give_up_after_rate_limited_s: float | None = 120.0,
    ) -> None:
        if generator is None:
            from .generators.structural import StructuralContextGenerator

            generator = StructuralContextGenerator()
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise ValueError(f"concurrency must be an int >= 1, got {concurrency!r}")
        if give_up_after_rate_limited_s is not None and not give_up_after_rate_limited_s > 0:
            raise ValueError(
                f"give_up_after_rate_limited_s must be a positive number of seconds or None, got {give_up_after_rate_limited_s!r}"
            )
        if mode not in ("realtime", "batch"):
            raise ValueError(f"mode must be 'realtime' or 'batch', not {mode!r}")
        if mode == "batch" and not hasattr(generator, "batch_client"):
            raise ValueError(f"{type(generator).__name__} has no batch API; use mode='realtime'")
        if grouped and not hasattr(generator, "agenerate_group"):
            raise ValueError(f"{type(generator).__name__} cannot situate chunks in groups; use grouped=False")
        self.generator = generator
        if store is None:
            store = ContextStore(default_store_path()) if generator.is_llm else ContextStore(":memory:")
        elif not isinstance(store, ContextStore):
            store = ContextStore(store)
        self.store = store
        self.concurrency, self.mode, self.grouped = concurrency, mode, grouped
        self.position, self.separator = position, separator
        self.show_progress = show_progress
        self.batch_poll_interval = batch_poll_interval
        self.batch_max_requests, self.batch_max_bytes = batch_max_requests, batch_max_bytes
        self.give_up_after_rate_limited_s = give_up_after_rate_limited_s
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_lock = threading.Lock()
        self._loop_closer: weakref.finalize | None = None

    # -- public ---------------------------------------------------------------------------------

    def contextualize(self, documents: Sequence[Document], chunks: Sequence[Chunk]) -> ContextualizeResult:
        """Situate `chunks` (each naming its document by `document_id`) within `documents`.

        The work runs on this Contextualizer's own event loop, in a background thread that lives
        as long as the Contextualizer (so it works inside a running loop too, e.g. a notebook):
        an async client used on it keeps its connections from one call to the next.
        """
        loop = self._background_loop()
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            raise RuntimeError("contextualize() was called from inside this Contextualizer's own run; await acontextualize instead")

        async def main() -> ContextualizeResult:
            # a sync caller: generators that hold a sync path use it, so their async clients stay
            # on the loops their owner awaits them on
            PREFER_SYNC.set(True)
            return await self.acontextualize(documents, chunks)

        future = asyncio.run_coroutine_threadsafe(main(), loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()  # Ctrl-C in the caller stops the run (what arrived is stored)
            raise

    def close(self) -> None:
        """Stop this Contextualizer's background loop (it also stops when the Contextualizer is
        garbage-collected; a later `contextualize` starts a new one)."""
        with self._loop_lock:
            closer, self._loop, self._loop_closer = self._loop_closer, None, None
        if closer is not None:
            closer()

    def _background_loop(self) -> asyncio.AbstractEventLoop:
        """The loop every `contextualize` call runs on, started on first use."""
        with self._loop_lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                # sync clients and store commits run in threads: enough of them for the
                # concurrency bound (the stock default has min(32, cores + 4) threads)
                executor = ThreadPoolExecutor(self.concurrency * 2 + 4, thread_name_prefix="contextualize")
                loop.set_default_executor(executor)
                thread = threading.Thread(target=_serve, args=(loop, executor), name="contextualize-loop", daemon=True)
                thread.start()
                self._loop = loop
                self._loop_closer = weakref.finalize(self, loop.call_soon_threadsafe, loop.stop)
                self._loop_closer.atexit = False  # a daemon thread: nothing to do at exit
            return self._loop

    async def acontextualize(self, documents: Sequence[Document], chunks: Sequence[Chunk]) -> ContextualizeResult:
        """Async `contextualize`: requests run concurrently on the caller's event loop."""
        started = time.perf_counter()
        docs, ordered, not_in_doc, without_chunks = _validate(documents, chunks)
        gen = self.generator
        report = UsageReport(
            generator=getattr(gen, "label", gen.name),
            model=gen.model,
            is_llm=gen.is_llm,
            mode=self.mode,
            grouped=self.grouped,
            documents=len(docs),
            chunks=len(ordered),
            chunks_not_in_document=len(not_in_doc),
            documents_without_chunks=without_chunks,
        )
        if not_in_doc:
            warnings.warn(
                f"{len(not_in_doc)} chunks do not occur verbatim in their document (first: "
                f"{not_in_doc[0]}); they are situated all the same — check the chunk/document mapping",
                UserWarning,
                stacklevel=2,
            )
        if self.mode == "batch":
            await asyncio.to_thread(self._collect_pending_batches, report)

        keys = self._keys(docs, ordered)
        grouped_keys = self._keys(docs, ordered, grouped=True) if self.grouped else {}
        found = self.store.get_many(list(keys.values()) + list(grouped_keys.values()))
        contexts: dict[str, str] = {}
        for c in ordered:
            hit = _stored(found, keys[c.id])
            if hit is None and self.grouped:
                hit = _stored(found, grouped_keys[c.id])
            if hit is not None:
                contexts[c.id] = hit
        report.store_hits = len(contexts)

        # chunks of one document with the same text share a store key: one generation each
        first_of_key: dict[str, str] = {}  # store key -> the chunk id generated for it
        twins: dict[str, str] = {}  # chunk id -> the chunk id whose context it takes
        states: dict[str, _DocState] = {}
        for c in ordered:
            if c.id in contexts:
                continue
            twin = first_of_key.setdefault(keys[c.id], c.id)
            if twin != c.id:
                twins[c.id] = twin
                continue
            state = states.get(c.document_id)
            if state is None:
                doc = docs[c.document_id]
                cacheable = gen.cacheable(doc) if hasattr(gen, "cacheable") else False  # type: ignore[attr-defined]
                state = states[c.document_id] = _DocState(doc, cacheable, [])
            state.todo.append(c)
        report.cacheable_documents = sum(1 for s in states.values() if s.cacheable is True)
        report.repeated_chunks = len(twins)

        total = sum(len(s.todo) for s in states.values())
        if total:  # before the first request: a store that cannot take the answers stops here
            await asyncio.to_thread(self.store.check_writable)
        run = _Run(self, report, keys, grouped_keys, contexts, total)
        try:
            if total:
                if self.mode == "batch":
                    await asyncio.to_thread(run.batch, states)
                else:
                    await run.realtime(states)
        finally:
            run.close()
            for state in states.values():
                if state.cacheable and state.generated > 1:
                    report.ideal_cache_read_tokens += state.prefix_tokens * (state.generated - 1)
            report.generated = run.generated
            report.elapsed_s = time.perf_counter() - started
        if run.fatal is not None:
            raise run.fatal
        if run.failures:
            for chunk_id, twin in twins.items():
                if twin in run.failures:
                    run.failures[chunk_id] = run.failures[twin]
            first = next(iter(run.failures.items()))
            raise ContextualizationError(
                f"{len(run.failures)} of {total + len(twins)} contexts could not be generated (first: {first[0]}: "
                f"{first[1]}); the {run.generated} generated are stored — run again to retry the rest",
                run.failures,
            )
        for chunk_id, twin in twins.items():
            contexts[chunk_id] = contexts[twin]
        out = [
            ContextualChunk(c, contexts[c.id], position=self.position, separator=self.separator) for c in ordered
        ]
        return ContextualizeResult(out, report, not_in_doc)

    def _keys(self, docs: dict[str, Document], chunks: list[Chunk], *, grouped: bool = False) -> dict[str, str]:
        """Store keys by chunk id (each document's text hashed once)."""
        gen = self.generator
        identity = gen.prompt_identity + (_GROUPED_SUFFIX if grouped else "")
        keyers: dict[str, Any] = {}
        out = {}
        for c in chunks:
            keyer = keyers.get(c.document_id)
            if keyer is None:
                keyer = keyers[c.document_id] = ContextStore.keyer(gen.name, gen.model, identity, docs[c.document_id].text)
            out[c.id] = keyer(c.text)
        return out

    # -- batches left by a previous process -------------------------------------------------------

    def _collect_pending_batches(self, report: UsageReport) -> None:
        gen = self.generator
        pending = self.store.pending_batches(generator=gen.name, model=gen.model)
        if pending:
            self.store.check_writable()
        for batch_id, manifest in pending:
            log.info("collecting Message Batch %s left by an earlier run", batch_id)
            _BatchRunner(self, None, report).collect(batch_id, manifest)


class _Run:
    """The state of one contextualize call."""

    def __init__(
        self,
        owner: Contextualizer,
        report: UsageReport,
        keys: dict[str, str],
        grouped_keys: dict[str, str],
        contexts: dict[str, str],
        total: int,
    ) -> None:
        self.owner, self.report, self.keys, self.grouped_keys = owner, report, keys, grouped_keys
        self.contexts = contexts
        self.generated = 0
        self.failures: dict[str, str] = {}
        self.fatal: FatalGenerationError | None = None
        self.windowed_docs: set[str] = set()
        self.warned_cache = False
        self.lock = threading.RLock()
        self.bar = tqdm(total=total, desc="contexts", unit="chunk", disable=not owner.show_progress or not total)

    def close(self) -> None:
        self.bar.close()

    # -- bookkeeping --------------------------------------------------------------------------------

    def record(self, state: _DocState, chunk: Chunk, gen: Generation, *, first: bool, grouped: bool = False) -> None:
        """Store a context the moment it arrives, then account for it (thread-safe)."""
        self.commit(chunk, gen, grouped=grouped)
        self.note(state, chunk, gen, first=first)

    def commit(self, chunk: Chunk, gen: Generation, *, grouped: bool = False) -> None:
        """Commit one context to the store (its own transaction)."""
        owner = self.owner
        owner.store.put(
            self.grouped_keys[chunk.id] if grouped else self.keys[chunk.id],
            gen.context,
            generator=owner.generator.name,
            model=owner.generator.model,
            doc_id=chunk.document_id,
            chunk_id=chunk.id,
            original_index=chunk.index,
            usage=gen.usage.to_dict(),
        )

    async def arecord(self, state: _DocState, chunk: Chunk, gen: Generation, *, first: bool, grouped: bool = False) -> None:
        """`record` from the event loop: the commit (with fsync) runs in a thread and is awaited,
        so the request slot is freed only once the context is durable. A commit that fails
        (`ContextStoreError`) ends the worker, and with it the run."""
        await asyncio.to_thread(self.commit, chunk, gen, grouped=grouped)
        self.note(state, chunk, gen, first=first)

    def note(self, state: _DocState, chunk: Chunk, gen: Generation, *, first: bool) -> None:
        """Account for a generated context."""
        with self.lock:
            self.contexts[chunk.id] = gen.context
            self.generated += 1
            state.generated += 1
            self.bar.update(1)
            self.account(state, gen.usage, first=first, windowed=gen.windowed)

    def account(self, state: _DocState, usage: TokenUsage, *, first: bool, windowed: bool = False) -> None:
        report = self.report
        report.usage += usage
        if state.cacheable is None and first and usage.requests:
            # a probing first request: its usage shows whether the prefix is cached
            state.cacheable = bool(usage.cache_write_tokens or usage.cache_write_1h_tokens or usage.cache_read_tokens)
            learn = getattr(self.owner.generator, "learn_cacheable", None)
            if learn is not None:
                learn(state.document, state.cacheable)
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

    def _below_minimum(self, state: _DocState) -> bool:
        """For grouped mode: known to be below the cache minimum, or estimated so when unsure."""
        if state.cacheable is not None:
            return not state.cacheable
        gen: Any = self.owner.generator
        minimum = getattr(getattr(gen, "info", None), "cache_min_tokens", None)
        if minimum is None or not hasattr(gen, "document_tokens"):
            return False
        below = gen.document_tokens(state.document) < minimum
        if below:  # grouped requests carry no cache_control: settle it as not cacheable
            state.cacheable = False
        return below

    def fail(self, chunk: Chunk, exc: BaseException) -> None:
        if isinstance(exc, FatalGenerationError):
            if self.fatal is None:
                self.fatal = exc
            return
        self.failures[chunk.id] = str(exc)

    # -- realtime -------------------------------------------------------------------------------------

    async def realtime(self, states: dict[str, _DocState]) -> None:
        """Bounded fan-out: warm documents' chunks first, new documents' first chunks fill free slots."""
        queue: asyncio.PriorityQueue = asyncio.PriorityQueue()
        seq = itertools.count()
        workers_n = self.owner.concurrency
        pending = 0

        def push(priority: int, item: tuple) -> None:
            nonlocal pending
            pending += 1
            queue.put_nowait((priority, next(seq), item))

        # priority 0: chunks of documents whose cache is written; 1: the first chunk of a cacheable
        # document (warm-ups start early, so their chunks are never the tail); 2: the rest
        for state in states.values():
            if self.owner.grouped and self._below_minimum(state):
                push(2, ("group", state, list(state.todo)))
            elif state.cacheable is not False:
                state.waiting = list(state.todo[1:])  # until the first chunk has written the cache
                push(1, ("first", state, state.todo[0]))
            else:
                for chunk in state.todo:
                    push(2, ("chunk", state, chunk))

        async def worker() -> None:
            nonlocal pending
            while True:
                _, _, item = await queue.get()
                if item[0] == "stop":
                    return
                try:
                    await self._handle(item, push)
                finally:
                    pending -= 1
                    if pending == 0:
                        for _ in range(workers_n):
                            queue.put_nowait((9, next(seq), ("stop",)))

        tasks = [asyncio.create_task(worker()) for _ in range(workers_n)]
        workers = asyncio.gather(*tasks)
        watch = asyncio.create_task(self._watch_rate_limits())
        try:
            done, _ = await asyncio.wait({workers, watch}, return_when=asyncio.FIRST_COMPLETED)
            if watch in done:
                self.fatal = self.fatal or watch.result()
            else:
                workers.result()  # a worker's error (a failed commit) ends the run at once
        finally:
            watch.cancel()
            for task in tasks:
                task.cancel()
            await asyncio.gather(watch, *tasks, return_exceptions=True)

    async def _watch_rate_limits(self) -> RateLimitedTooLong:
        """Returns (ending the run) once the API has answered only 429s for the allowed time."""
        limit = self.owner.give_up_after_rate_limited_s
        gen = self.owner.generator
        if limit is None or not isinstance(gen, ReportsRateLimits):
            await asyncio.Event().wait()  # never
        started = time.monotonic()
        while True:
            await asyncio.sleep(min(1.0, limit / 4))
            since = gen.rate_limited_since()
            if since is not None and time.monotonic() - max(since, started) >= limit:
                return RateLimitedTooLong(
                    f"the API answered nothing but 429 rate-limit errors for {limit:g} s "
                    f"(give_up_after_rate_limited_s); the {self.generated} contexts generated are stored — "
                    "run again later, lower concurrency, or raise the rate limit"
                )

    async def _handle(self, item: tuple, push: Any) -> None:
        kind, state = item[0], item[1]
        if self.fatal is not None:
            return
        if kind == "group":
            await self._group(state, item[2], push)
            return
        chunk = item[2]
        try:
            result = await self.owner.generator.agenerate(state.document, chunk)
        except GenerationError as exc:
            self.fail(chunk, exc)
            if kind == "first" and state.waiting and self.fatal is None:
                # failed for good: the next chunk goes alone and writes the cache instead
                push(1, ("first", state, state.waiting.pop(0)))
            return
        await self.arecord(state, chunk, result, first=kind == "first")
        if kind == "first":
            for rest in state.waiting:
                push(0, ("chunk", state, rest))
            state.waiting = []

    async def _group(self, state: _DocState, chunks: list[Chunk], push: Any) -> None:
        gen = self.owner.generator
        try:
            found, usage = await gen.agenerate_group(state.document, chunks)  # type: ignore[attr-defined]
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
                push(0, ("chunk", state, chunk))
            else:
                await self.arecord(state, chunk, Generation(context, TokenUsage()), first=True, grouped=True)

    # -- batch ------------------------------------------------------------------------------------------

    def batch(self, states: dict[str, _DocState]) -> None:
        _BatchRunner(self.owner, self, self.report).run(states)


class _BatchRunner:
    """Message Batches: submit, persist the batch ids, poll, map results back by custom_id."""

    def __init__(self, owner: Contextualizer, run: _Run | None, report: UsageReport) -> None:
        self.owner, self.run_state, self.report = owner, run, report
        self.gen: Any = owner.generator
        self.states: dict[str, _DocState] = {}
        self.chunks: dict[str, Chunk] = {}
        self.fallbacks: list[tuple[_DocState, Chunk]] = []

    def run(self, states: dict[str, _DocState]) -> None:
        run = self.run_state
        assert run is not None
        self.states = states
        warm: list[tuple[str, dict, dict]] = []
        rest: list[tuple[str, dict, dict]] = []
        for state in states.values():
            doc = state.document
            for chunk in state.todo:
                self.chunks[chunk.id] = chunk
            if self.owner.grouped and run._below_minimum(state):
                params, marked = self.gen.build_group_request(doc, state.todo)
                by_pos = {str(i): c for i, c in enumerate(state.todo)}
                if marked:
                    items = {m: {"key": run.grouped_keys[by_pos[m].id], "chunk_id": by_pos[m].id} for m in marked}
                    cid = "g" + hashlib.sha256(json.dumps(sorted(i["key"] for i in items.values())).encode()).hexdigest()[:63]
                    warm.append((cid, params, {"kind": "group", "doc_id": doc.id, "items": items}))
                unmarked = [c for i, c in enumerate(state.todo) if str(i) not in set(marked)]
                for chunk in unmarked:
                    warm.append(self._chunk_request(state, chunk, first=False))
            elif state.cacheable is not False:
                warm.append(self._chunk_request(state, state.todo[0], first=True))
                rest.extend(self._chunk_request(state, c, first=False) for c in state.todo[1:])
            else:
                warm.extend(self._chunk_request(state, c, first=False) for c in state.todo)
        for phase in (warm, rest):
            if phase and run.fatal is None:
                self._submit_and_collect(phase)
        for state, chunk in self.fallbacks:
            if run.fatal is not None:
                break
            try:
                run.record(state, chunk, self.gen.generate(state.document, chunk), first=False)
            except GenerationError as exc:
                run.fail(chunk, exc)

    def _chunk_request(self, state: _DocState, chunk: Chunk, *, first: bool) -> tuple[str, dict, dict]:
        run = self.run_state
        assert run is not None
        key = run.keys[chunk.id]
        # a batch may take far longer than 5 minutes: its cache breakpoints use the 1-hour TTL
        request = self.gen.build_request(state.document, chunk, cache_ttl="1h")
        entry = {"kind": "chunk", "key": key, "chunk_id": chunk.id, "doc_id": state.document.id,
                 "index": chunk.index, "first": first, "windowed": request.windowed}
        return key, request.params, entry

    def _submit_and_collect(self, items: list[tuple[str, dict, dict]]) -> None:
        batches = self.gen.batch_client()
        groups: list[list[tuple[str, dict, dict]]] = [[]]
        size = 0
        for item in items:
            item_size = len(json.dumps({"custom_id": item[0], "params": item[1]}).encode("utf-8"))
            if groups[-1] and (len(groups[-1]) >= self.owner.batch_max_requests or size + item_size > self.owner.batch_max_bytes):
                groups.append([])
                size = 0
            groups[-1].append(item)
            size += item_size
        submitted = []
        for group in groups:
            try:
                batch = batches.create(requests=[{"custom_id": cid, "params": params} for cid, params, _ in group])
            except Exception as exc:
                raise _batch_error(exc) from exc
            manifest = {cid: entry for cid, _, entry in group}
            self.owner.store.add_batch(batch.id, generator=self.gen.name, model=self.gen.model, manifest=manifest)
            submitted.append((batch.id, manifest))
        for batch_id, manifest in submitted:
            self.collect(batch_id, manifest)

    def collect(self, batch_id: str, manifest: dict[str, dict]) -> None:
        """Wait for a batch to end, store every context it made, mark it collected."""
        batches = self.gen.batch_client()
        try:
            while True:
                status = batches.retrieve(batch_id)
                if status.processing_status == "ended":
                    break
                time.sleep(self.owner.batch_poll_interval)
            results = list(batches.results(batch_id))
        except Exception as exc:
            if getattr(exc, "status_code", None) != 404:
                raise _batch_error(exc) from exc
            self._abandon(batch_id, manifest, exc)
            return
        seen: set[str] = set()
        for entry_result in results:
            entry = manifest.get(entry_result.custom_id)
            if entry is None:
                continue
            seen.add(entry_result.custom_id)
            result = entry_result.result
            if result.type != "succeeded":
                self._missed(entry)
                continue
            try:
                text, usage = self.gen.parse_message(result.message)
            except GenerationError:
                self._missed(entry)
                continue
            self._store(entry, text, usage)
        for cid, entry in manifest.items():
            if cid not in seen:
                self._missed(entry)
        self.owner.store.finish_batch(batch_id)

    def _abandon(self, batch_id: str, manifest: dict[str, dict], exc: Exception) -> None:
        """The API does not know the batch (or its results): mark it abandoned, say so, and
        regenerate its chunks (this run's fall back to requests; an earlier run's are not in the
        store, so the run that follows generates them)."""
        self.owner.store.abandon_batch(batch_id)
        self.report.abandoned_batches.append(batch_id)
        warnings.warn(
            f"Message Batch {batch_id} is unknown to the API (404: {getattr(exc, 'message', exc)}); it is marked "
            f"abandoned in {self.owner.store.path} and its {len(manifest)} requests are generated again",
            UserWarning,
            stacklevel=2,
        )
        for entry in manifest.values():
            self._missed(entry)

    def _store(self, entry: dict, text: str, usage: TokenUsage) -> None:
        store, gen, run = self.owner.store, self.gen, self.run_state
        if entry["kind"] == "chunk":
            if run is not None and entry["chunk_id"] in self.chunks:
                state = self.states[entry["doc_id"]]
                run.record(state, self.chunks[entry["chunk_id"]], Generation(text, usage, entry.get("windowed", False)), first=entry["first"])
            else:
                store.put(entry["key"], text, generator=gen.name, model=gen.model, doc_id=entry["doc_id"],
                          chunk_id=entry["chunk_id"], original_index=entry.get("index"), usage=usage.to_dict())
            return
        found = gen.parse_group(text, entry["items"])
        state = self.states.get(entry["doc_id"]) if run is not None else None
        if run is not None and state is not None:
            run.report.grouped_requests += 1
            run.account(state, usage, first=True)
        for marked, item in entry["items"].items():
            context = found.get(marked)
            if context is None:
                self._missed({"kind": "chunk", "key": item["key"], "chunk_id": item["chunk_id"], "doc_id": entry["doc_id"]})
                continue
            if run is not None and state is not None and item["chunk_id"] in self.chunks:
                run.record(state, self.chunks[item["chunk_id"]], Generation(context, TokenUsage()), first=True, grouped=True)
            else:
                store.put(item["key"], context, generator=gen.name, model=gen.model, doc_id=entry["doc_id"],
                          chunk_id=item["chunk_id"], usage=None)

    def _missed(self, entry: dict) -> None:
        run = self.run_state
        if run is None or entry.get("kind") == "group":
            if run is not None:
                for item in entry["items"].values():
                    self._missed({"kind": "chunk", "chunk_id": item["chunk_id"], "doc_id": entry["doc_id"]})
            return
        chunk = self.chunks.get(entry["chunk_id"])
        if chunk is not None:
            if entry.get("key") == run.grouped_keys.get(chunk.id):
                run.report.grouped_fallbacks += 1
            self.fallbacks.append((self.states[entry["doc_id"]], chunk))


def _serve(loop: asyncio.AbstractEventLoop, executor: ThreadPoolExecutor) -> None:
    """A Contextualizer's background thread: run its loop until stopped, then close it."""
    asyncio.set_event_loop(loop)
    try:
        loop.run_forever()
    finally:
        try:
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            executor.shutdown(wait=False)
            loop.close()


def _batch_error(exc: Exception) -> Exception:
    from .generators.anthropic import _translate

    try:
        import anthropic
    except ImportError:  # pragma: no cover
        return GenerationError(str(exc))
    return _translate(exc, anthropic)


def _stored(found: dict[str, str], key: str) -> str | None:
    """A stored context, or None. A blank one (written by an earlier version) counts as missing:
    it is generated again and replaced."""
    hit = found.get(key)
    return hit if hit is not None and hit.strip() else None


def _check_utf8(text: str, what: str) -> None:
    """Refuse text the API (JSON, UTF-8) and the store cannot take: lone surrogates."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"{what} cannot be encoded as UTF-8 ({exc.reason}: {text[exc.start]!r} at character {exc.start}), "
            "as a file read with errors='surrogateescape' leaves it; read the file with its real encoding or "
            "with errors='replace' before contextualizing"
        ) from None


def _validate(
    documents: Sequence[Document], chunks: Sequence[Chunk]
) -> tuple[dict[str, Document], list[Chunk], list[str], int]:
    """Check the inputs before anything is paid for; returns docs by id, chunks, flags."""
    if isinstance(documents, (str, Document)) or isinstance(chunks, (str, Chunk)):
        raise TypeError("pass lists: contextualize([document, ...], [chunk, ...])")
    for doc in documents:
        if not isinstance(doc, Document):
            raise TypeError(f"documents must be Document objects, got {type(doc).__name__}")
    docs: dict[str, Document] = {}
    # the same document passed twice is situated once; two texts under one id are an error
    for doc in distinct_documents(documents, lambda d: d.id, lambda d: d.text):
        if "\x00" in doc.text:
            raise ValueError(
                f"document {doc.id!r} looks binary (it contains NUL bytes); extract its text first or leave it out"
            )
        _check_utf8(doc.text, f"document {doc.id!r}")
        docs[doc.id] = doc
    ordered: list[Chunk] = []
    seen: set[str] = set()
    used: set[str] = set()
    not_in_doc: list[str] = []
    for chunk in chunks:
        if not isinstance(chunk, Chunk):
            raise TypeError(f"chunks must be Chunk objects, got {type(chunk).__name__}")
        if chunk.id in seen:
            raise ValueError(f"duplicate chunk id {chunk.id!r}: every chunk needs a unique id")
        seen.add(chunk.id)
        doc = docs.get(chunk.document_id)
        if doc is None:
            raise ValueError(
                f"chunk {chunk.id!r} names document {chunk.document_id!r}, which is not among the documents passed"
            )
        if not chunk.text.strip():
            raise ValueError(f"chunk {chunk.id!r} is empty; drop empty chunks before contextualizing")
        if "\x00" in chunk.text:
            raise ValueError(f"chunk {chunk.id!r} looks binary (it contains NUL bytes)")
        _check_utf8(chunk.text, f"chunk {chunk.id!r} of document {doc.id!r}")
        if not doc.text.strip():
            raise ValueError(
                f"document {doc.id!r} is empty but has chunks (first: {chunk.id!r}); pass the document's full text"
            )
        if chunk.text not in doc.text:
            not_in_doc.append(chunk.id)
        used.add(doc.id)
        ordered.append(chunk)
    return docs, ordered, not_in_doc, len(docs) - len(used)
