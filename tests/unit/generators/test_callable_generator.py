"""CallableContextGenerator: sync and async callables as context generators."""

from __future__ import annotations

import asyncio
import threading
import warnings

import pytest

from contextual_retrieval_core import Chunk, Document
from contextual_retrieval_core.generators import (
    CallableContextGenerator,
    ContextGenerator,
    Generation,
    GenerationError,
    TokenUsage,
)
from contextual_retrieval_core.generators.prompts import DEFAULT_PROMPT

DOC = Document("notes.md", "# Billing\nInvoices are sent monthly.\n# Support\nEmail us.")
CHUNK = Chunk("n1", "notes.md", "Email us.", index=1)


def situate(document: Document, chunk: Chunk) -> str:
    return f"  {document.id} #{chunk.index}\n"


async def asituate(document: Document, chunk: Chunk) -> str:
    await asyncio.sleep(0)
    return f"async {document.id} #{chunk.index}"


def test_sync_fn_generate_and_agenerate():
    gen = CallableContextGenerator(situate, name="mine", model="m-1")
    assert isinstance(gen, ContextGenerator)
    assert (gen.name, gen.model, gen.prompt_identity, gen.is_llm) == ("mine", "m-1", "", True)
    out = gen.generate(DOC, CHUNK)
    assert out == Generation("notes.md #1", TokenUsage())
    assert asyncio.run(gen.agenerate(DOC, CHUNK)).context == "notes.md #1"


def test_async_fn_passed_as_fn():
    gen = CallableContextGenerator(asituate)
    assert gen.fn is None and gen.afn is asituate
    assert asyncio.run(gen.agenerate(DOC, CHUNK)).context == "async notes.md #1"
    # no running loop: generate runs the coroutine with asyncio.run
    assert gen.generate(DOC, CHUNK).context == "async notes.md #1"


def test_async_callable_object():
    class Situator:
        async def __call__(self, document: Document, chunk: Chunk) -> str:
            return "from an object"

    gen = CallableContextGenerator(Situator())
    assert gen.afn is not None and gen.fn is None
    assert asyncio.run(gen.agenerate(DOC, CHUNK)).context == "from an object"


def test_both_sync_and_async():
    calls = []

    def fn(document, chunk):
        calls.append("sync")
        return "sync"

    async def afn(document, chunk):
        calls.append("async")
        return "async"

    gen = CallableContextGenerator(fn, afn=afn)
    assert gen.generate(DOC, CHUNK).context == "sync"
    assert asyncio.run(gen.agenerate(DOC, CHUNK)).context == "async"
    assert calls == ["sync", "async"]


def test_afn_only_keyword():
    gen = CallableContextGenerator(afn=asituate, name="a")
    assert asyncio.run(gen.agenerate(DOC, CHUNK)).context == "async notes.md #1"


def test_generation_is_passed_through():
    usage = TokenUsage(input_tokens=120, output_tokens=30, requests=1)

    def fn(document, chunk):
        return Generation("  with usage  ", usage, windowed=True)

    out = CallableContextGenerator(fn).generate(DOC, CHUNK)
    assert out.context == "  with usage  " and out.usage is usage and out.windowed is True

    async def afn(document, chunk):
        return Generation("async usage", usage)

    assert asyncio.run(CallableContextGenerator(afn).agenerate(DOC, CHUNK)).usage == usage


@pytest.mark.parametrize("bad", [None, 42, b"bytes", ["a list"]])
def test_bad_return_type_names_the_callable(bad):
    def returns_bad(document, chunk):
        return bad

    gen = CallableContextGenerator(returns_bad, name="badgen")
    with pytest.raises(TypeError, match=r"returns_bad.*badgen.*str.*Generation"):
        gen.generate(DOC, CHUNK)
    with pytest.raises(TypeError, match="returns_bad"):
        asyncio.run(gen.agenerate(DOC, CHUNK))


async def test_generate_inside_running_loop_with_async_fn_raises_clear_error():
    gen = CallableContextGenerator(asituate)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "coroutine was never awaited"
        with pytest.raises(RuntimeError, match="use agenerate inside an event loop"):
            gen.generate(DOC, CHUNK)
    assert (await gen.agenerate(DOC, CHUNK)).context == "async notes.md #1"


async def test_generate_inside_running_loop_with_sync_fn_works():
    assert CallableContextGenerator(situate).generate(DOC, CHUNK).context == "notes.md #1"


async def test_agenerate_runs_sync_fn_in_a_worker_thread():
    seen = []

    def fn(document, chunk):
        seen.append(threading.get_ident())
        return "threaded"

    loop_thread = threading.get_ident()
    out = await CallableContextGenerator(fn).agenerate(DOC, CHUNK)
    assert out.context == "threaded"
    assert seen and seen[0] != loop_thread


def test_sync_fn_returning_a_coroutine():
    gen = CallableContextGenerator(lambda d, c: asituate(d, c))
    assert gen.fn is not None
    assert gen.generate(DOC, CHUNK).context == "async notes.md #1"
    assert asyncio.run(gen.agenerate(DOC, CHUNK)).context == "async notes.md #1"


def test_errors_from_the_callable_propagate():
    def fails(document, chunk):
        raise GenerationError("rate limited")

    gen = CallableContextGenerator(fails)
    with pytest.raises(GenerationError, match="rate limited"):
        gen.generate(DOC, CHUNK)
    with pytest.raises(GenerationError, match="rate limited"):
        asyncio.run(gen.agenerate(DOC, CHUNK))


def test_prompt_identity_from_prompt():
    gen = CallableContextGenerator(situate, prompt=DEFAULT_PROMPT)
    assert gen.prompt_identity == DEFAULT_PROMPT.identity
    assert CallableContextGenerator(situate, prompt_identity="v2").prompt_identity == "v2"
    with pytest.raises(ValueError, match="differ"):
        CallableContextGenerator(situate, prompt=DEFAULT_PROMPT, prompt_identity="other")
    with pytest.raises(TypeError, match="identity"):
        CallableContextGenerator(situate, prompt="not a prompt")


def test_is_llm_and_label():
    gen = CallableContextGenerator(situate, name="rules", is_llm=False)
    assert gen.is_llm is False and gen.label == "rules (no LLM)"
    assert CallableContextGenerator(situate, name="mine").label == "mine"


def test_constructor_validation():
    with pytest.raises(TypeError, match="fn="):
        CallableContextGenerator()
    with pytest.raises(TypeError, match="callable"):
        CallableContextGenerator("not callable")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="afn"):
        CallableContextGenerator(asituate, afn=asituate)
    with pytest.raises(ValueError, match="name"):
        CallableContextGenerator(situate, name="")


def test_lazy_anthropic_attribute():
    import contextual_retrieval_core.generators as g

    assert "AnthropicContextGenerator" in dir(g)
    with pytest.raises(AttributeError):
        g.NoSuchGenerator  # noqa: B018


def test_a_blank_context_is_a_generation_error():
    async def blank_async(document, chunk):
        return Generation("  \n", TokenUsage(requests=1))

    for gen in (CallableContextGenerator(lambda d, c: "   ", name="blank"), CallableContextGenerator(blank_async, name="blank")):
        with pytest.raises(GenerationError, match="returned no text"):
            gen.generate(DOC, CHUNK)
        with pytest.raises(GenerationError, match="returned no text"):
            asyncio.run(gen.agenerate(DOC, CHUNK))
