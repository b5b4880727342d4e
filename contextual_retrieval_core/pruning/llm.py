"""`LLMContextCompressor`: an LLM extracts the passages that answer; only verified text survives.

The retrieved text goes to the LLM (Claude by default, `claude-haiku-4-5`, or any callable) with
an extraction prompt that asks for passages copied word for word and forbids anything new. The
retrieved text is its own content block, marked `cache_control` when it is long enough for the
model to cache (asking several questions of one context then reads it at 0.1x). Every passage
that comes back is looked up in the retrieved chunks, whitespace-normalised; a passage found
nowhere is dropped and counted (`PruningReport.unverified`), so the compressor can only ever
return text that was retrieved, with the chunk id and character span it came from. A quoted
part of a line ("... 'passage' ...") counts as a passage of its own when the line as a whole is
not found. No verified passage at all returns the input unchanged, with the reason.

Example:
    >>> from contextual_retrieval_core import Chunk, ContextualChunk
    >>> chunk = ContextualChunk(Chunk("c1", "r.md", "Revenue grew 3%.  Costs fell. Staff grew."), "")
    >>> def llm(prompt):  # any callable: prompt -> text
    ...     return "<passage>Revenue grew 3%. Costs fell.</passage>\\n<passage>Profit tripled.</passage>"
    >>> result = LLMContextCompressor(llm).compress("How did revenue change?", [chunk])
    >>> result.chunks[0].text, result.report.unverified
    ('Revenue grew 3%.  Costs fell.', 1)
"""

from __future__ import annotations

import asyncio
import inspect
import re
import time
from collections.abc import Callable, Sequence
from typing import Any

from contextual_retrieval_core._sdk import LoopClients, import_sdk
from contextual_retrieval_core.checks import positive_int
from contextual_retrieval_core.errors import InputError, InputTypeError, RunError
from contextual_retrieval_core.generators.usage import estimate_tokens, model_info
from contextual_retrieval_core.pruning.pruner import _as_contextual, _line
from contextual_retrieval_core.pruning.result import (
    Piece,
    PrunedChunk,
    PruningReport,
    PruningResult,
    TokenCounter,
    regex_token_counter,
)
from contextual_retrieval_core.types import Chunk, ContextualChunk

__all__ = ["LLMContextCompressor", "EXTRACTION_INSTRUCTIONS", "CHUNK_SEPARATOR"]

DEFAULT_MODEL = "claude-haiku-4-5"
#: between two retrieved chunks in the prompt
CHUNK_SEPARATOR = "\n\n---\n\n"
EXTRACTION_INSTRUCTIONS = (
    "<question>\n{question}\n</question>\n"
    "Copy from the retrieved text in the <document> above the passages needed to answer the question, "
    "word for word. Do not answer the question, do not summarise, paraphrase or explain, and do not add "
    "any information that is not in the retrieved text. Put each passage in its own "
    "<passage></passage> tags, in the order they appear. If nothing in the text helps, answer <none/>."
)
_PASSAGE = re.compile(r"<passage>(.*?)</passage>", re.DOTALL)
_QUOTED = re.compile(r"'([^'\n]{8,})'|\"([^\"\n]{8,})\"|“([^”\n]{8,})”")
_MISSING_KEY = (
    "ANTHROPIC_API_KEY is not set; pass client=anthropic.Anthropic(api_key=...), or llm=<any callable "
    "prompt -> text>"
)


class LLMContextCompressor:
    """Passages extracted by an LLM, each verified against the retrieved chunks.

    Args:
        llm: any callable ``prompt -> str`` (sync or async); None for Claude through the
            anthropic SDK.
        model: the Claude model (default "claude-haiku-4-5").
        client / async_client: ready `anthropic.Anthropic` / `AsyncAnthropic` clients (built from
            ANTHROPIC_API_KEY when omitted; the SDK retries on its own).
        max_tokens: the longest answer (default 2048).
        instructions: the extraction instructions, with a ``{question}`` slot.
        token_counter: counts tokens in the report (default `regex_token_counter`).
    """

    def __init__(
        self,
        llm: Callable[[str], Any] | None = None,
        *,
        model: str = DEFAULT_MODEL,
        client: Any = None,
        async_client: Any = None,
        max_tokens: int = 2048,
        instructions: str = EXTRACTION_INSTRUCTIONS,
        token_counter: TokenCounter | None = None,
        max_retries: int = 2,
        timeout: float | None = None,
    ) -> None:
        if llm is not None and not callable(llm):
            raise InputTypeError(f"llm must be a callable prompt -> text, got {type(llm).__name__}")
        if "{question}" not in instructions:
            raise InputError("instructions need a {question} slot")
        positive_int("max_tokens", max_tokens)
        self.llm, self.model, self.max_tokens, self.instructions = llm, model, max_tokens, instructions
        self.token_counter = token_counter or regex_token_counter
        self._client, self._async_client = client, async_client
        self._max_retries, self._timeout = max_retries, timeout
        #: async clients built here, one per event loop (closed when it shuts down)
        self._loop_clients = LoopClients(self._build_async)
        if llm is None and client is None and async_client is None:
            from contextual_retrieval_core._sdk import require_env_key

            require_env_key(("ANTHROPIC_API_KEY",), _MISSING_KEY)

    # -- public -----------------------------------------------------------------------------------

    def compress(self, query: str, chunks: Sequence[ContextualChunk | Chunk]) -> PruningResult:
        """The verified passages of `chunks` that answer `query` (chunks in rank order)."""
        items, report, started = self._start(query, chunks)
        if not items:
            return _unchanged(items, report, started, "no chunks to compress")
        document, question = self._prompt_parts(query, items)
        if self.llm is not None:
            if _is_async(self.llm):
                raise InputTypeError("llm is async; call acompress (or await it from async code)")
            answer = self.llm(document + "\n\n" + question)
        else:
            answer = self._claude(self._sync_client(), document, question, report)
        return self._finish(items, str(answer), report, started)

    async def acompress(self, query: str, chunks: Sequence[ContextualChunk | Chunk]) -> PruningResult:
        """Async `compress` (an async callable is awaited; a sync one runs in a worker thread)."""
        items, report, started = self._start(query, chunks)
        if not items:
            return _unchanged(items, report, started, "no chunks to compress")
        document, question = self._prompt_parts(query, items)
        if self.llm is not None:
            answer = self.llm(document + "\n\n" + question) if _is_async(self.llm) else await asyncio.to_thread(self.llm, document + "\n\n" + question)
            if inspect.isawaitable(answer):
                answer = await answer
        elif self._async_client is None and self._client is not None:
            answer = await asyncio.to_thread(self._claude, self._client, document, question, report)
        else:
            answer = await self._aclaude(document, question, report)
        return self._finish(items, str(answer), report, started)

    # -- steps ------------------------------------------------------------------------------------

    def _start(self, query: str, chunks: Sequence[ContextualChunk | Chunk]) -> tuple[list[ContextualChunk], PruningReport, float]:
        if not isinstance(query, str) or not query.strip():
            raise InputError("query must be a non-empty str: the LLM extracts what answers it")
        items = [_as_contextual(c, i) for i, c in enumerate(chunks)]
        report = PruningReport(self.token_counter.name, tokens_before=sum(self.token_counter.count(c.text) for c in items))
        return items, report, time.perf_counter()

    def _prompt_parts(self, query: str, items: list[ContextualChunk]) -> tuple[str, str]:
        document = "<document>\n" + CHUNK_SEPARATOR.join(c.text for c in items) + "\n</document>"
        return document, self.instructions.format(question=query)

    def _request(self, document: str, question: str) -> dict[str, Any]:
        block: dict[str, Any] = {"type": "text", "text": document}
        minimum = model_info(self.model).cache_min_tokens
        if minimum is not None and estimate_tokens(document) >= minimum:
            block["cache_control"] = {"type": "ephemeral"}
        return {
            "model": self.model, "max_tokens": self.max_tokens,
            "messages": [{"role": "user", "content": [block, {"type": "text", "text": question}]}],
        }

    def _claude(self, client: Any, document: str, question: str, report: PruningReport) -> str:
        message = client.messages.create(**self._request(document, question))
        return _text_and_usage(message, report)

    async def _aclaude(self, document: str, question: str, report: PruningReport) -> str:
        message = await self._aio_client().messages.create(**self._request(document, question))
        return _text_and_usage(message, report)

    def _sync_client(self) -> Any:
        if self._client is None:
            if self._async_client is not None:
                raise RunError("this compressor was given only an async client; use acompress, or pass client=")
            sdk = import_sdk("anthropic", "anthropic", "Anthropic")
            self._client = sdk.Anthropic(max_retries=self._max_retries, timeout=self._timeout)
        return self._client

    def _aio_client(self) -> Any:
        """The injected async client, or the one built for the running event loop."""
        if self._async_client is not None:
            return self._async_client
        return self._loop_clients.get()

    def _build_async(self) -> Any:
        sdk = import_sdk("anthropic", "anthropic", "Anthropic")
        return sdk.AsyncAnthropic(max_retries=self._max_retries, timeout=self._timeout)

    def _finish(self, items: list[ContextualChunk], answer: str, report: PruningReport, started: float) -> PruningResult:
        haystacks = [_normalised(c.text) for c in items]
        spans: dict[int, list[tuple[int, int]]] = {}
        for passage in _passages(answer):
            found = _locate(passage, haystacks)
            if found is None:
                quoted = [next(g for g in m.groups() if g) for m in _QUOTED.finditer(passage)]
                hits = [(q, _locate(q, haystacks)) for q in quoted]
                report.unverified += 1 if not any(h for _, h in hits) or len(_normalised(passage)[0]) > sum(len(q) for q, h in hits if h) + 2 else 0
                for _, h in hits:
                    if h is not None:
                        spans.setdefault(h[0], []).append(h[1])
                continue
            spans.setdefault(found[0], []).append(found[1])
        if not spans:
            return _unchanged(items, report, started, "the LLM returned no passage found in the retrieved text")
        out = []
        for ci, c in enumerate(items):
            if ci not in spans:
                report.chunks_dropped.append(c.id)
                continue
            merged = _merge(spans[ci])
            pieces = tuple(Piece(a, b, c.text[a:b], _line(c.text, a), _line(c.text, b - 1)) for a, b in merged)
            out.append(PrunedChunk(c, ci, pieces, len(pieces), len(pieces)))
        report.tokens_after = sum(self.token_counter.count(c.text) for c in out)
        report.units_kept = {c.id: (c.units_kept, c.units_total) for c in out}
        report.elapsed_s = time.perf_counter() - started
        return PruningResult(out, report)


def _is_async(fn: Any) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None))  # noqa: B004 - the method is asked, not called


def _text_and_usage(message: Any, report: PruningReport) -> str:
    usage = getattr(message, "usage", None)
    if usage is not None:
        for name in ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"):
            report.usage[name] = report.usage.get(name, 0) + int(getattr(usage, name, 0) or 0)
    return "".join(getattr(b, "text", "") for b in message.content if getattr(b, "type", "") == "text")


def _passages(answer: str) -> list[str]:
    tagged = _PASSAGE.findall(answer)
    if tagged or "<none/>" in answer:
        return [p for p in tagged if p.strip()]
    return [line for line in answer.splitlines() if line.strip()]


def _normalised(text: str) -> tuple[str, list[int]]:
    """`text` with every whitespace run made one space and the ends trimmed; and, per character
    of the result, its position in `text`."""
    out: list[str] = []
    index: list[int] = []
    space = False
    for i, ch in enumerate(text):
        if ch.isspace():
            space = bool(out)
            continue
        if space:
            out.append(" ")
            index.append(i - 1)
            space = False
        out.append(ch)
        index.append(i)
    return "".join(out), index


def _locate(passage: str, haystacks: list[tuple[str, list[int]]]) -> tuple[int, tuple[int, int]] | None:
    """(chunk index, (start, end) in the chunk's text) of the first chunk holding `passage`."""
    needle = _normalised(passage)[0]
    if len(needle) < 2:
        return None
    for ci, (hay, index) in enumerate(haystacks):
        pos = hay.find(needle)
        if pos >= 0:
            return ci, (index[pos], index[pos + len(needle) - 1] + 1)
    return None


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _unchanged(items: list[ContextualChunk], report: PruningReport, started: float, reason: str) -> PruningResult:
    out = [PrunedChunk(c, i, (Piece(0, len(c.text), c.text, 1, _line(c.text, max(0, len(c.text) - 1))),), 1, 1) for i, c in enumerate(items)]
    report.unchanged_reason = reason
    report.tokens_after = report.tokens_before
    report.elapsed_s = time.perf_counter() - started
    return PruningResult(out, report)
