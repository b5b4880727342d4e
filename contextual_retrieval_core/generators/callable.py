"""`CallableContextGenerator`: your own function as a `ContextGenerator`.

It wraps a local model, another provider's SDK, or a LlamaIndex / LangChain LLM. The function
takes ``(document, chunk)`` and returns the context as a ``str``, or as a `Generation` when it
can report token usage.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from contextual_retrieval_core.errors import InputError, InputTypeError, RunError
from contextual_retrieval_core.generators.base import Generation, GenerationError
from contextual_retrieval_core.types import Chunk, Document

__all__ = ["CallableContextGenerator"]

ContextResult = str | Generation
SyncContextFn = Callable[[Document, Chunk], ContextResult]
AsyncContextFn = Callable[[Document, Chunk], Awaitable[ContextResult]]


def _is_async(fn: Any) -> bool:
    if inspect.iscoroutinefunction(fn):
        return True
    call = getattr(fn, "__call__", None)  # noqa: B004 - an object with an `async def __call__`: the method itself is asked
    return call is not None and not inspect.isfunction(fn) and inspect.iscoroutinefunction(call)


def _describe(fn: Any) -> str:
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    return name if isinstance(name, str) else repr(fn)


async def _await(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


class CallableContextGenerator:
    """Wraps ``fn(document, chunk) -> str | Generation`` as a `ContextGenerator`.

    Pass a sync callable as `fn`, an async one as `afn` (or as `fn`: a coroutine function is
    recognised), or both. `generate` calls the sync callable. If there is only an async one, it
    runs it with `asyncio.run`; that fails inside a running event loop, where you await
    `agenerate` instead. `agenerate` awaits the async callable. If there is only a sync one, it
    runs it in a worker thread (`asyncio.to_thread`), so a blocking HTTP client does not stall
    the loop. With both, the synchronous `Contextualizer.contextualize` uses the sync one (in
    threads) and `acontextualize` the async one.

    A returned ``str`` is stripped of surrounding whitespace. A returned `Generation` is passed
    through unchanged, so an adapter can report `TokenUsage`. A blank context (either way) raises
    `GenerationError`, so it is never stored; anything else raises `TypeError`.
    Exceptions from the callable propagate as they are. Raise `GenerationError` to mark one
    chunk as failed and let the run go on, `TransientGenerationError` to have the `Contextualizer`
    try it again in a later round (it does so by itself for an error that `is_transient` judges
    so: a 429 or 5xx status, a timeout, a dropped connection), or `FatalGenerationError` to stop
    the run (contexts made so far stay in the store).

    Args:
        fn: ``(document, chunk) -> str | Generation``, sync (or async, as if passed as `afn`).
        name: the generator's name, part of the context-store key. Give each distinct
            generator its own name, so their stored contexts never mix.
        model: the model id, part of the store key ("" when none).
        prompt_identity: an identity of the prompt, part of the store key. Change it whenever
            the prompt changes, so stale contexts are not reused.
        prompt: a `ContextPrompt` (or anything with a str ``.identity``). Its identity becomes
            `prompt_identity`.
        afn: an async ``(document, chunk) -> str | Generation``, or any callable that returns an
            awaitable.
        is_llm: False when the callable calls no language model (reports label it so).

    Example:
        >>> import asyncio
        >>> from contextual_retrieval_core import Chunk, Document
        >>> doc = Document("notes.md", "# Billing\\nInvoices are sent monthly.")
        >>> chunk = Chunk("n0", "notes.md", "Invoices are sent monthly.")
        >>> def situate(document, chunk):
        ...     return f"  From {document.id}, chunk {chunk.index}.  "
        >>> gen = CallableContextGenerator(situate, name="my-llm", model="local-7b")
        >>> gen.generate(doc, chunk).context
        'From notes.md, chunk 0.'
        >>> async def asituate(document, chunk):
        ...     return "About monthly invoices."
        >>> agen = CallableContextGenerator(asituate, name="my-async-llm")
        >>> asyncio.run(agen.agenerate(doc, chunk)).context
        'About monthly invoices.'
        >>> agen.generate(doc, chunk).context  # no running loop here, so asyncio.run is used
        'About monthly invoices.'
    """

    def __init__(
        self,
        fn: SyncContextFn | AsyncContextFn | None = None,
        *,
        name: str = "callable",
        model: str = "",
        prompt_identity: str = "",
        prompt: Any = None,
        afn: AsyncContextFn | None = None,
        is_llm: bool = True,
    ) -> None:
        if fn is None and afn is None:
            raise InputTypeError(
                "CallableContextGenerator needs a callable: pass fn=(document, chunk) -> str, "
                "or afn=an async one"
            )
        for arg, value in (("fn", fn), ("afn", afn)):
            if value is not None and not callable(value):
                raise InputTypeError(
                    f"{arg} must be a callable (document, chunk) -> str, got {type(value).__name__}"
                )
        if fn is not None and _is_async(fn):
            if afn is not None:
                raise InputError(
                    f"fn {_describe(fn)!r} is async and afn was also given; pass the sync callable "
                    "as fn and the async one as afn"
                )
            fn, afn = None, fn
        if not isinstance(name, str) or not name:
            raise InputError(f"name must be a non-empty string (it is part of the store key), got {name!r}")
        if not isinstance(model, str):
            raise InputTypeError(f"model must be str, got {type(model).__name__}")
        if not isinstance(prompt_identity, str):
            raise InputTypeError(f"prompt_identity must be str, got {type(prompt_identity).__name__}")
        if prompt is not None:
            identity = getattr(prompt, "identity", None)
            if not isinstance(identity, str):
                raise InputTypeError(
                    "prompt must have a str .identity (e.g. a contextual_retrieval_core.generators.prompts.ContextPrompt); "
                    f"got {type(prompt).__name__}. Or pass prompt_identity='...' directly"
                )
            if prompt_identity and prompt_identity != identity:
                raise InputError(
                    "prompt_identity and prompt.identity differ; pass only one of prompt= and prompt_identity="
                )
            prompt_identity = identity
        self.fn: SyncContextFn | None = fn  # type: ignore[assignment]
        self.afn: AsyncContextFn | None = afn
        self.name = name
        self.model = model
        self.prompt_identity = prompt_identity
        self.prompt = prompt
        self.is_llm = bool(is_llm)

    @property
    def label(self) -> str:
        """How usage reports name this generator."""
        return self.name if self.is_llm else f"{self.name} (no LLM)"

    @property
    def has_sync_path(self) -> bool:
        """Whether a sync callable was given (`generate` then calls it directly)."""
        return self.fn is not None

    def __repr__(self) -> str:
        parts = [f"name={self.name!r}"]
        if self.fn is not None:
            parts.append(f"fn={_describe(self.fn)}")
        if self.afn is not None:
            parts.append(f"afn={_describe(self.afn)}")
        if self.model:
            parts.append(f"model={self.model!r}")
        return f"CallableContextGenerator({', '.join(parts)})"

    # -- ContextGenerator ---------------------------------------------------------------------------

    def generate(self, document: Document, chunk: Chunk) -> Generation:
        """Call the sync callable. If there is none, run the async one with `asyncio.run`."""
        if self.fn is not None:
            result = self.fn(document, chunk)
            if inspect.isawaitable(result):
                result = self._run_awaitable(result, self.fn)
            return self._coerce(result, self.fn)
        assert self.afn is not None
        self._check_no_running_loop()
        result = asyncio.run(_await(self.afn(document, chunk)))  # type: ignore[arg-type]
        return self._coerce(result, self.afn)

    async def agenerate(self, document: Document, chunk: Chunk) -> Generation:
        """Await the async callable. If there is none, run the sync one in a worker thread. (The
        synchronous `Contextualizer.contextualize` calls `generate` in threads when there is a
        sync callable, `has_sync_path`: the async callable's clients stay on your own loops.)"""
        if self.afn is not None:
            result: Any = self.afn(document, chunk)
            if inspect.isawaitable(result):
                result = await result
            return self._coerce(result, self.afn)
        assert self.fn is not None
        result = await asyncio.to_thread(self.fn, document, chunk)
        if inspect.isawaitable(result):
            result = await result
        return self._coerce(result, self.fn)

    # -- helpers ------------------------------------------------------------------------------------

    def _check_no_running_loop(self) -> None:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return
        raise RunError(
            f"{type(self).__name__} {self.name!r}: generate() was called inside a running event "
            "loop, but the wrapped callable is async; use agenerate inside an event loop: "
            "`await generator.agenerate(document, chunk)`"
        )

    def _run_awaitable(self, awaitable: Any, fn: Any) -> Any:
        try:
            self._check_no_running_loop()
        except RuntimeError:
            close = getattr(awaitable, "close", None)
            if callable(close):
                close()  # no "coroutine was never awaited" warning
            raise
        return asyncio.run(_await(awaitable))

    def _coerce(self, result: Any, fn: Any) -> Generation:
        if isinstance(result, str):
            result = Generation(result.strip())
        if isinstance(result, Generation):
            if not isinstance(result.context, str) or not result.context.strip():
                # never stored: a blank context would be a store hit that situates nothing
                raise GenerationError(
                    f"context callable {_describe(fn)!r} (generator {self.name!r}) returned no text for "
                    "this chunk"
                )
            return result
        raise InputTypeError(
            f"context callable {_describe(fn)!r} (generator {self.name!r}) returned "
            f"{type(result).__name__}; it must return the context as a str, or a "
            "contextual_retrieval_core.generators.Generation(context, usage)"
        )
