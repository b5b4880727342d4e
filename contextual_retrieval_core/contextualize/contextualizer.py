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
- Transient failures (429, 5xx, overloaded, timeouts, dropped connections; `is_transient`) are ridden
  out whatever client the generator uses: a chunk whose request still failed after the client's own
  retries goes again in a later round, after a backoff (`retry_backoff_s`), until no context has
  arrived for `give_up_after_rate_limited_s`. Other errors fail their chunk at once. The report
  counts the failures ridden out and the rounds.
- SIGTERM during `contextualize` takes Ctrl-C's path (`Terminated`, a KeyboardInterrupt): sending
  stops, what arrived is stored, work claims are released.
- A full disk loses no paid context: the store's disk is checked before the first request, a
  reserve is kept for the run, and a write that fails for space frees it, so the answers in flight
  land; the run then stops with `StoreFullError`, naming the folder and the space needed.
- Text is checked before anything is sent: a document or chunk that cannot be encoded as UTF-8
  (lone surrogates) is refused, naming it.
- Grouped mode (opt-in): a document below the cache minimum is situated in one request for all of
  its chunks instead of paying for the whole document once per chunk; a chunk the answer misses
  falls back to its own request.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
import warnings
import weakref
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contextual_retrieval_core.contextualize._batches import BatchRunner
from contextual_retrieval_core.contextualize._claims import WorkClaims
from contextual_retrieval_core.contextualize._inputs import validate_inputs
from contextual_retrieval_core.contextualize._run import DocState, Run, RunSettings
from contextual_retrieval_core.contextualize.config import ContextualizeConfig
from contextual_retrieval_core.contextualize.interrupts import GRACE_S, Interrupted, StopAsked, Terminated, sigterm_as_interrupt
from contextual_retrieval_core.errors import ContextualRetrievalError, InputError, InputTypeError, RunError
from contextual_retrieval_core.generators.base import (
    BatchGeneration,
    ContextGenerator,
    GroupedGeneration,
    PromptCaching,
    label_of,
)
from contextual_retrieval_core.generators.usage import UsageReport
from contextual_retrieval_core.store._space import SpaceReserve
from contextual_retrieval_core.store.context_store import ContextStore
from contextual_retrieval_core.store.errors import StoreFullError
from contextual_retrieval_core.types import Chunk, ContextualChunk, Document

__all__ = ["Contextualizer", "ContextualizeResult", "ContextualizationError", "default_store_path", "refresh_options",
           "contextualizer_for", "store_keys"]

log = logging.getLogger(__name__)

_GROUPED_SUFFIX = "/grouped-v1"
#: how long an interrupted `contextualize` waits for its run's clean-up
_CLEAN_UP_S = 10.0


def default_store_path() -> Path:
    """~/.cache/contextual-retrieval/contexts.sqlite3 (XDG_CACHE_HOME respected)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "contextual-retrieval" / "contexts.sqlite3"


class ContextualizationError(ContextualRetrievalError, RuntimeError):
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
        claim_lease_s: several workers may share one store: a run claims each document's chunks
            just before it generates them, for this many seconds (default 60), renewed every
            `claim_renew_s` (default: a third of the lease) while it lives; other workers skip
            them, serve them from the store once they land, and take them over when a lease
            runs out (a dead worker). claim_poll_s: how often a worker waiting on others looks
            at the store (default 1). Only generators that call an LLM claim.
        structural_header: put the chunk's structural context (file, section, enclosing
            definitions: what `StructuralContextGenerator` writes, free and offline) on a line
            before the generator's context, for every generator but `StructuralContextGenerator`
            itself (default True; the store keeps the generated context as written, so switching it
            never costs a request). Its effect on retrieval: benchmarks/RESULTS.md, "The structural
            header on LLM contexts".
        give_up_after_rate_limited_s: stop the run (`RateLimitedTooLong`) once the API has answered
            nothing but 429 rate-limit errors, SDK retries included, for this many seconds
            (default 120; None: never). Everything generated before is stored.
        retry_backoff_s: a chunk whose request failed for a reason that may pass (429, 5xx,
            overloaded, timeout, dropped connection: `is_transient`), after whatever retries the
            client itself makes, is tried again in a later round; the first round waits this many
            seconds (default 1), and the wait doubles after every round in which no context
            arrived (at most a minute). The rounds end once no context has arrived for
            `give_up_after_rate_limited_s` (None: they never end); the chunks still failing then
            fail the run (`ContextualizationError`). Other errors fail their chunk at once. The
            report counts `transient_failures` and `retry_rounds`.

    Example:
        >>> from contextual_retrieval_core import Chunk, Document
        >>> doc = Document("guide.md", "# Setup\\n## Linux\\nRun make install.")
        >>> result = Contextualizer(config=ContextualizeConfig(show_progress=False)).contextualize(
        ...     [doc], [Chunk("c0", "guide.md", "Run make install.")])
        >>> result.chunks[0].context
        'From guide.md, section: Setup > Linux.'
    """

    def __init__(
        self,
        generator: ContextGenerator | None = None,
        store: ContextStore | str | os.PathLike[str] | None = None,
        *,
        config: ContextualizeConfig | None = None,
    ) -> None:
        if generator is None:
            from contextual_retrieval_core.generators.structural import StructuralContextGenerator

            generator = StructuralContextGenerator()
        if config is None:
            config = ContextualizeConfig()
        elif not isinstance(config, ContextualizeConfig):
            raise InputTypeError(f"config must be a ContextualizeConfig, got {type(config).__name__}")
        self.generator = generator
        self.config = config  # checked against the generator here, and again by each run (it may be replaced)
        self._check_config()
        if store is None:
            store = ContextStore(default_store_path()) if generator.is_llm else ContextStore(":memory:")
        elif not isinstance(store, ContextStore):
            store = ContextStore(store)
        self.store = store
        self._structural: Any = None  # the StructuralContextGenerator the headers come from (its outline cache)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_lock = threading.Lock()
        self._loop_closer: weakref.finalize | None = None

    def _check_config(self) -> None:
        """What the config asks of the generator: batch mode a batch API, grouped mode groups."""
        gen, config = self.generator, self.config
        if config.mode == "batch" and not isinstance(gen, BatchGeneration):
            raise InputError(f"{type(gen).__name__} has no batch API; use mode='realtime'")
        if config.grouped and not isinstance(gen, GroupedGeneration):
            raise InputError(f"{type(gen).__name__} cannot situate chunks in groups; use grouped=False")

    # the settings, read from `config` (one place)
    concurrency = property(lambda self: self.config.concurrency)
    mode = property(lambda self: self.config.mode)
    grouped = property(lambda self: self.config.grouped)
    position = property(lambda self: self.config.position)
    separator = property(lambda self: self.config.separator)
    show_progress = property(lambda self: self.config.show_progress)
    structural_header = property(lambda self: self.config.structural_header)

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
            raise RunError("contextualize() was called from inside this Contextualizer's own run; await acontextualize instead")

        # a sync caller: generators that hold a sync path use it (in threads), so their async
        # clients stay on the loops their owner awaits them on
        ended, stop = threading.Event(), threading.Event()

        async def run() -> ContextualizeResult:
            try:
                return await self._run(documents, chunks, prefer_sync=True, stop=stop)
            finally:
                ended.set()

        future = asyncio.run_coroutine_threadsafe(run(), loop)
        try:
            with sigterm_as_interrupt():  # SIGTERM takes Ctrl-C's path
                try:
                    return future.result()
                except KeyboardInterrupt as first:
                    # the first Ctrl-C or SIGTERM: nothing more is sent; the requests in flight end
                    # and their contexts are stored (a second one stops the run at once)
                    stop.set()
                    try:
                        future.result(timeout=GRACE_S)
                    except StopAsked as stopped:  # the run's own word: it stopped as asked
                        if isinstance(first, Terminated):
                            raise Terminated(f"stopped by SIGTERM; {str(stopped).removeprefix('interrupted: ')}") from None
                        raise Interrupted(str(stopped)) from None
                    except KeyboardInterrupt:  # a second Ctrl-C or SIGTERM: at once
                        raise
                    except BaseException:  # another error, or the grace ran out
                        pass
                    raise first
        except BaseException:
            future.cancel()  # stops the run at once (what arrived is stored)
            ended.wait(_CLEAN_UP_S)  # its clean-up (work claims released) ends before the caller goes on
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
        """Async `contextualize`: requests run concurrently on the caller's event loop. SIGTERM
        (on a loop in the main thread) stops it as Ctrl-C does."""
        with sigterm_as_interrupt():
            return await self._run(documents, chunks, prefer_sync=False)

    async def _run(self, documents: Sequence[Document], chunks: Sequence[Chunk], *, prefer_sync: bool,
                   stop: threading.Event | None = None) -> ContextualizeResult:
        """A run; `prefer_sync`: a generator with a sync path (`SyncPath`) takes it, in threads;
        `stop`, once set, ends it gracefully (nothing more sent, the requests in flight stored).
        The steps: check the inputs, look the contexts up, plan what to generate, generate it
        (store first, claims, disk reserve), then finish (failures, twins, headers)."""
        started = time.perf_counter()
        docs, ordered, not_in_doc, without_chunks = validate_inputs(documents, chunks)
        report = self._report(docs, ordered, not_in_doc, without_chunks)
        if self.mode == "batch":
            await asyncio.to_thread(self._collect_pending_batches, report)
        keys, grouped_keys, contexts = self._lookup(docs, ordered)
        report.store_hits = len(contexts)
        states, twins = self._plan(docs, ordered, keys, contexts, report)
        total = sum(len(s.todo) for s in states.values())
        space = SpaceReserve(self.store, contexts=total, in_flight=self.concurrency)
        if total:  # before the first request: a store that cannot take the answers stops here
            await asyncio.to_thread(self.store.check_writable)
            await asyncio.to_thread(space.check_and_hold)  # room for the contexts, and a reserve
        claims = WorkClaims(self.store, lease_s=self.config.claim_lease_s, renew_s=self.config.claim_renew_s,
                            poll_s=self.config.claim_poll_s, enabled=self.generator.is_llm and bool(total))
        run = Run(self._run_settings(), report, keys, grouped_keys, contexts, total, claims, prefer_sync=prefer_sync)
        run.space, run.stop = space, stop
        try:
            await self._generate(run, states, claims)
        finally:
            await asyncio.to_thread(claims.stop)
            space.close()
            run.close()
            for state in states.values():
                if state.cacheable and state.generated > 1:
                    report.ideal_cache_read_tokens += state.prefix_tokens * (state.generated - 1)
            report.generated = run.generated
            report.elapsed_s = time.perf_counter() - started
        return await self._finish(run, space, twins, docs, ordered, not_in_doc)

    def _report(self, docs: dict[str, Document], ordered: list[Chunk], not_in_doc: list[str], without_chunks: int) -> UsageReport:
        """The run's report, its input counts filled (a warning for chunks not in their document)."""
        gen = self.generator
        if not_in_doc:
            warnings.warn(
                f"{len(not_in_doc)} chunks do not occur verbatim in their document (first: "
                f"{not_in_doc[0]}); they are situated all the same — check the chunk/document mapping",
                UserWarning,
                stacklevel=4,
            )
        return UsageReport(generator=label_of(gen), model=gen.model, is_llm=gen.is_llm, mode=self.mode, grouped=self.grouped,
                           documents=len(docs), chunks=len(ordered), chunks_not_in_document=len(not_in_doc),
                           documents_without_chunks=without_chunks)

    def _lookup(self, docs: dict[str, Document], ordered: list[Chunk]) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
        """(store keys, grouped-mode keys, contexts the store holds), each by chunk id."""
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
        return keys, grouped_keys, contexts

    def _plan(self, docs: dict[str, Document], ordered: list[Chunk], keys: dict[str, str], contexts: dict[str, str],
              report: UsageReport) -> tuple[dict[str, DocState], dict[str, str]]:
        """What to generate, by document, and the twins: chunks of one document with the same text
        share a store key, so one is generated and the others take its context."""
        gen = self.generator
        first_of_key: dict[str, str] = {}  # store key -> the chunk id generated for it
        twins: dict[str, str] = {}  # chunk id -> the chunk id whose context it takes
        states: dict[str, DocState] = {}
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
                cacheable = gen.cacheable(doc) if isinstance(gen, PromptCaching) else False
                state = states[c.document_id] = DocState(doc, cacheable, [])
            state.todo.append(c)
        report.cacheable_documents = sum(1 for s in states.values() if s.cacheable is True)
        report.repeated_chunks = len(twins)
        return states, twins

    async def _generate(self, run: Run, states: dict[str, DocState], claims: WorkClaims) -> None:
        """Generate the planned contexts (realtime with retry rounds, or Message Batches), then
        wait for those other workers claimed."""

        async def generate(todo: dict[str, DocState]) -> None:
            if self.mode == "batch":
                await asyncio.to_thread(BatchRunner(run.settings, run, run.report).run, todo)
            else:
                await run.realtime(todo)
                await run.retry_transient(run.realtime)  # chunks that failed for a reason that may pass

        if run.total:
            claims.start()
            await generate(states)
            await run.wait_for_others(generate)

    async def _finish(self, run: Run, space: SpaceReserve, twins: dict[str, str], docs: dict[str, Document],
                      ordered: list[Chunk], not_in_doc: list[str]) -> ContextualizeResult:
        """The result, or the error that ended the run (what arrived is stored either way)."""
        if isinstance(run.fatal, StoreFullError):  # the disk filled up: what arrived is stored
            raise space.full_error(run.fatal, stored=run.generated, left=run.total - run.generated)
        if run.fatal is not None:
            raise run.fatal
        if run.failures:
            for chunk_id, twin in twins.items():
                if twin in run.failures:
                    run.failures[chunk_id] = run.failures[twin]
            first = next(iter(run.failures.items()))
            raise ContextualizationError(
                f"{len(run.failures)} of {run.total + len(twins)} contexts could not be generated (first: {first[0]}: "
                f"{first[1]}); the {run.generated} generated are stored — run again to retry the rest",
                run.failures,
            )
        contexts = run.contexts
        for chunk_id, twin in twins.items():
            contexts[chunk_id] = contexts[twin]
        if self.structural_header and not is_structural_generator(self.generator):  # parsing: off the event loop
            contexts = await asyncio.to_thread(self._with_headers, docs, ordered, contexts)
        out = [ContextualChunk(c, contexts[c.id], position=self.position, separator=self.separator) for c in ordered]
        return ContextualizeResult(out, run.report, not_in_doc)

    def _run_settings(self) -> RunSettings:
        """This Contextualizer's generator, store and config as they are now, for one run."""
        self._check_config()
        return RunSettings(self.generator, self.store, self.config)

    def _with_headers(self, docs: dict[str, Document], chunks: list[Chunk], contexts: dict[str, str]) -> dict[str, str]:
        """Each context with its chunk's structural context on a line before it (`structural_header`)."""
        from contextual_retrieval_core.generators._header_source import header_generator_for
        from contextual_retrieval_core.generators.structural import StructuralContextGenerator, with_structural_header

        if self._structural is None:
            self._structural = StructuralContextGenerator()
        header = header_generator_for(self.generator, self._structural).generate  # type: ignore[union-attr]
        return {c.id: with_structural_header(header(docs[c.document_id], c).context, contexts[c.id]) for c in chunks}

    def _keys(self, docs: dict[str, Document], chunks: list[Chunk], *, grouped: bool = False) -> dict[str, str]:
        return store_keys(self.generator, docs, chunks, grouped=grouped)

    # -- batches left by a previous process -------------------------------------------------------

    def _collect_pending_batches(self, report: UsageReport) -> None:
        gen = self.generator
        pending = self.store.pending_batches(generator=gen.name, model=gen.model)
        if pending:
            self.store.check_writable()
        for batch_id, manifest in pending:
            log.info("collecting Message Batch %s left by an earlier run", batch_id)
            BatchRunner(self._run_settings(), None, report).collect(batch_id, manifest)


def store_keys(generator: ContextGenerator, documents: Mapping[str, Document], chunks: Sequence[Chunk], *,
               grouped: bool = False) -> dict[str, str]:
    """The `ContextStore` key of each chunk's context from `generator`, by chunk id (each document's
    text hashed once): what a `Contextualizer` looks up, so a caller can look up or copy the same
    contexts (`ContextStore.copy_from`). `documents`: by id; `grouped`: the keys of grouped mode."""
    identity = generator.prompt_identity + (_GROUPED_SUFFIX if grouped else "")
    keyers: dict[str, Any] = {}
    out = {}
    for c in chunks:
        keyer = keyers.get(c.document_id)
        if keyer is None:
            keyer = keyers[c.document_id] = ContextStore.keyer(generator.name, generator.model, identity, documents[c.document_id].text)
        out[c.id] = keyer(c.text)
    return out


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


def _stored(found: dict[str, str], key: str) -> str | None:
    """A stored context, or None. A blank one counts as missing: it is generated again and
    replaced."""
    hit = found.get(key)
    return hit if hit is not None and hit.strip() else None


#: the Contextualizer settings both ingestion parts (LangChain's ContextualDocumentTransformer,
#: LlamaIndex's ContextualNodeParser) expose as fields of the same names
def contextualizer_for(generator: ContextGenerator | None, store: Any, part: Any) -> Contextualizer:
    """The `Contextualizer` an ingestion part runs: `generator`, `store`, and the config its flat
    fields hold (`ContextualizeConfig.of`: one place, so the two frameworks' parts never drift apart)."""
    return Contextualizer(generator, store, config=ContextualizeConfig.of(part))


def refresh_options(contextualizer: Contextualizer, part: Any, **overrides: Any) -> Contextualizer:
    """The part's config, read again from its fields before a run (with `overrides`, such as a
    call's ``show_progress``), so a field changed after the part was built counts (LlamaIndex keys
    its pipeline cache on the fields)."""
    config = ContextualizeConfig.of(part)
    contextualizer.config = config.replace(**overrides) if overrides else config
    return contextualizer


def is_structural_generator(generator: Any) -> bool:
    """Whether `generator` writes the structural context itself (it gets no second header)."""
    from contextual_retrieval_core.generators._header_source import writes_structural_context

    return writes_structural_context(generator)
