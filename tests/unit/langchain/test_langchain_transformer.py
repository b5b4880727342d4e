"""ContextualDocumentTransformer: both ways in, metadata, stable ids, the store, sync/async parity,
and chat models (ChatAnthropic against the fake Messages API, with prompt caching)."""

from __future__ import annotations

import asyncio
from typing import Any

import anthropic
import pytest
from langchain_anthropic import ChatAnthropic
from langchain_core.documents import BaseDocumentTransformer
from langchain_core.documents import Document as LCDocument
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_text_splitters import RecursiveCharacterTextSplitter

from contextual_retrieval_core.contextualize.config import ContextualizeConfig
from contextual_retrieval_core.generators import CallableContextGenerator, ChatContextGenerator, StructuralContextGenerator
from contextual_retrieval_core.types import Chunk, ContextualChunk, stable_chunk_id
from contextual_retrieval_langchain import ContextualDocumentTransformer, chat_model_generator
from tests.fakes.anthropic_server import FakeAnthropicServer
from tests.langchain_corpus import CORPUS, chunk_documents, context_generator, whole_documents

MODEL = "claude-3-haiku-20240307"


def part_generator() -> CallableContextGenerator:
    return CallableContextGenerator(lambda doc, chunk: f"From {doc.id}, part {chunk.index}.", name="parts", is_llm=False)


class RecordingChatModel(BaseChatModel):
    """A chat model double: answers with a fixed context and records every message list it gets."""

    calls: list = []
    answer: str = "Situating context."

    @property
    def _llm_type(self) -> str:
        return "recording"

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        self.calls.append(messages)
        return ChatResult(generations=[ChatGeneration(message=AIMessage(self.answer, usage_metadata={
            "input_tokens": 50, "output_tokens": 3, "total_tokens": 53}))])


def test_is_a_langchain_document_transformer() -> None:
    transformer = ContextualDocumentTransformer(show_progress=False)
    assert isinstance(transformer, BaseDocumentTransformer)
    assert BaseDocumentTransformer in type(transformer).__mro__


def test_whole_documents_with_a_splitter() -> None:
    splitter = RecursiveCharacterTextSplitter(chunk_size=60, chunk_overlap=0)
    transformer = ContextualDocumentTransformer(structural_header=False, text_splitter=splitter, generator=part_generator(), show_progress=False)
    docs = whole_documents()
    out = transformer.transform_documents(docs)

    expected_pieces = [(d.metadata["source"], i, p.page_content) for d in docs for i, p in enumerate(splitter.split_documents([d]))]
    assert [(o.metadata["parent_id"], o.metadata["chunk_index"], o.metadata["original_content"]) for o in out] == expected_pieces
    for o in out:
        context = f"From {o.metadata['parent_id']}, part {o.metadata['chunk_index']}." 
        core = ContextualChunk(Chunk(o.id, o.metadata["parent_id"], o.metadata["original_content"], o.metadata["chunk_index"]), context)
        assert o.page_content == core.indexed_text == f"{context}\n\n{o.metadata['original_content']}"
        assert o.metadata["context"] == context and o.metadata["source"] == o.metadata["parent_id"]
        assert o.id == o.metadata["chunk_id"] == stable_chunk_id(o.metadata["parent_id"], o.metadata["chunk_index"], o.metadata["original_content"])
    # ids are the same on every run, from a fresh transformer too
    again = ContextualDocumentTransformer(structural_header=False, text_splitter=splitter, generator=part_generator(), show_progress=False)
    assert [d.id for d in again.transform_documents(docs)] == [d.id for d in out]


def test_chunks_with_parents_as_list_or_mapping() -> None:
    chunks = chunk_documents()
    chunks[0].id = "my-own-id"  # a chunk's own id is kept
    transformer = ContextualDocumentTransformer(structural_header=False, generator=context_generator(), show_progress=False)
    from_list = transformer.transform_documents(chunks, parents=whole_documents())
    mapping = {d.metadata["source"]: d.page_content for d in whole_documents()}
    from_map = ContextualDocumentTransformer(structural_header=False, generator=context_generator(), show_progress=False).transform_documents(chunks, parents=mapping)

    assert from_list == from_map
    assert from_list[0].id == "my-own-id"
    expected = [(doc_id, i, ctx) for doc_id, cs in CORPUS for i, (_, ctx) in enumerate(cs)]
    assert [(d.metadata["parent_id"], d.metadata["chunk_index"], d.metadata["context"]) for d in from_list] == expected


def test_the_second_run_generates_nothing(tmp_path) -> None:
    calls: list = []
    store = tmp_path / "contexts.sqlite3"
    transformer = ContextualDocumentTransformer(generator=context_generator(calls), store=store, show_progress=False)
    first = transformer.transform_documents(chunk_documents(), parents=whole_documents())
    assert len(calls) == 8 and transformer.last_report.generated == 8
    second = transformer.transform_documents(chunk_documents(), parents=whole_documents())
    assert second == first and len(calls) == 8
    assert transformer.last_report.generated == 0 and transformer.last_report.store_hits == 8
    # a new transformer on the same store file pays nothing either
    fresh = ContextualDocumentTransformer(generator=context_generator(calls), store=store, show_progress=False)
    assert fresh.transform_documents(chunk_documents(), parents=whole_documents()) == first and len(calls) == 8


async def test_async_matches_sync() -> None:
    splitter = RecursiveCharacterTextSplitter(chunk_size=60, chunk_overlap=0)
    sync = ContextualDocumentTransformer(text_splitter=splitter, show_progress=False).transform_documents(whole_documents())
    transformer = ContextualDocumentTransformer(text_splitter=splitter, show_progress=False)
    assert await transformer.atransform_documents(whole_documents()) == sync
    assert transformer.last_report.generated == len(sync)
    # the default generator is the offline structural one
    assert sync[0].metadata["context"] == StructuralContextGenerator().generate(
        *_core_pair(whole_documents()[0], sync[0])).context


def _core_pair(doc: LCDocument, out: LCDocument):
    from contextual_retrieval_core.types import Document

    return Document(doc.metadata["source"], doc.page_content, dict(doc.metadata)), Chunk(out.id, doc.metadata["source"], out.metadata["original_content"], 0)


def test_errors_name_the_fix() -> None:
    with pytest.raises(ValueError, match="parent_id_key="):
        ContextualDocumentTransformer(show_progress=False).transform_documents([LCDocument("x")], parents={})
    with pytest.raises(ValueError, match="not in parents="):
        ContextualDocumentTransformer(show_progress=False).transform_documents([LCDocument("x", metadata={"source": "a"})], parents={})
    with pytest.raises(ValueError, match="llm"):  # a chat model is a generator= since 0.3
        ContextualDocumentTransformer(llm=RecordingChatModel())
    with pytest.raises(ValueError, match="generator must be a core ContextGenerator or a LangChain chat model"):
        ContextualDocumentTransformer(generator="claude")
    with pytest.raises(TypeError, match="text splitter"):
        ContextualDocumentTransformer(text_splitter=object())
    with pytest.raises(ValueError, match="prompt_caching=False"):
        chat_model_generator(RecordingChatModel(), prompt_caching=True)


def test_any_chat_model_gets_plain_text_blocks(tmp_path) -> None:
    llm = RecordingChatModel(calls=[])
    transformer = ContextualDocumentTransformer(structural_header=False, generator=llm, store=tmp_path / "c.sqlite3", show_progress=False, concurrency=1)
    out = transformer.transform_documents(chunk_documents()[:2], parents=whole_documents())
    assert [d.metadata["context"] for d in out] == ["Situating context."] * 2
    assert len(llm.calls) == 2
    (message,) = llm.calls[0]
    assert [b["type"] for b in message.content] == ["text", "text"]
    assert all("cache_control" not in b for b in message.content)
    assert "<document>" in message.content[0]["text"] and "<chunk>" in message.content[1]["text"]
    gen = transformer.contextualizer.generator
    assert gen.name == "langchain:RecordingChatModel" and isinstance(gen, ChatContextGenerator)
    assert transformer.last_report.usage.input_tokens == 100 and transformer.last_report.usage.requests == 2


def _long_document(doc_id: str, n: int) -> LCDocument:
    words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"]
    text = " ".join(f"{words[i % 8]}{i % 97}" for i in range(n))
    return LCDocument(text, metadata={"source": doc_id})


@pytest.mark.parametrize("use_async", [False, True])
def test_chat_anthropic_caches_the_document_and_pays_once(tmp_path, use_async: bool) -> None:
    with FakeAnthropicServer() as server:
        llm = ChatAnthropic(model=MODEL, api_key=server.api_key, base_url=server.url, max_retries=2, max_tokens=200)
        splitter = RecursiveCharacterTextSplitter(chunk_size=4000, chunk_overlap=0)
        doc = _long_document("long.md", 2600)  # ~16,000 characters: above Haiku 3's 2,048-token minimum
        transformer = ContextualDocumentTransformer(text_splitter=splitter, generator=llm, store=tmp_path / "c.sqlite3", show_progress=False)
        run = (lambda: asyncio.run(transformer.atransform_documents([doc]))) if use_async else (lambda: transformer.transform_documents([doc]))
        out = run()
        n = len(out)
        assert n >= 4
        stats = server.stats()
        assert stats["messages"] == n and stats["cache_writes"] == 1 and stats["cache_reads"] == n - 1
        bodies = [r.body for r in server.requests if r.path == "/v1/messages"]
        assert all(b["messages"][0]["content"][0]["cache_control"] == {"type": "ephemeral"} for b in bodies)
        assert all("cache_control" not in b["messages"][0]["content"][1] for b in bodies)
        usage = transformer.last_report.usage
        assert usage.cache_write_tokens > 0 and usage.cache_read_tokens == stats["cache_read_tokens"] > 0
        assert usage.input_tokens == stats["input_tokens"] and usage.output_tokens == stats["output_tokens"]
        gen = transformer.contextualizer.generator
        assert gen.name == "anthropic" and gen.model == MODEL  # the core generator on ChatAnthropic's clients

        # the second run over the same documents sends nothing
        assert run() == out
        assert server.stats()["requests"] == stats["requests"]
        assert transformer.last_report.generated == 0 and transformer.last_report.store_hits == n

        # the same model and prompt through the core (or LlamaIndex) reads the same stored contexts
        from contextual_retrieval_core.contextualize.contextualizer import Contextualizer
        from contextual_retrieval_core.generators import AnthropicContextGenerator
        from contextual_retrieval_core.types import Chunk, Document

        core = AnthropicContextGenerator(MODEL, client=anthropic.Anthropic(api_key=server.api_key, base_url=server.url))
        chunks = [Chunk(f"c{i}", "long.md", d.metadata["original_content"], i) for i, d in enumerate(out)]
        again = Contextualizer(core, tmp_path / "c.sqlite3", config=ContextualizeConfig(show_progress=False)).contextualize([Document("long.md", doc.page_content)], chunks)
        assert again.report.generated == 0 and server.stats()["requests"] == stats["requests"]


def test_parent_clashes_are_errors_and_blank_pieces_do_not_shift_ids(tmp_path) -> None:
    from contextual_retrieval_core.types import stable_chunk_id

    transformer = ContextualDocumentTransformer(show_progress=False)
    chunk = LCDocument("Revenue grew.", metadata={"source": "a"})
    with pytest.raises(ValueError, match="two different documents share the id 'a'"):
        transformer.transform_documents([chunk], parents=[LCDocument("Revenue grew.", metadata={"source": "a"}),
                                                          LCDocument("Other text.", metadata={"source": "a"})])
    pieces = [LCDocument("First part.", metadata={"source": "a"}), LCDocument("   ", metadata={"source": "a"}),
              LCDocument("Second part.", metadata={"source": "a"})]
    out = transformer.transform_documents(pieces, parents={"a": "First part.\n\n   \n\nSecond part."})
    assert [d.metadata["chunk_id"] for d in out] == [stable_chunk_id("a", 0, "First part."), stable_chunk_id("a", 1, "Second part.")]


def test_markdown_header_splitter_whose_split_text_returns_documents() -> None:
    from langchain_text_splitters import MarkdownHeaderTextSplitter

    kind = "md"
    splitter = MarkdownHeaderTextSplitter([("#", "h1"), ("##", "h2")])
    text = "# Guide\n\n## Linux\n\nRun make install.\n\n## Windows\n\nRun setup.exe."
    doc = LCDocument(text, metadata={"source": f"guide.{kind}", "team": "docs"})
    transformer = ContextualDocumentTransformer(structural_header=False, text_splitter=splitter, generator=part_generator(), show_progress=False)
    chunks = transformer.transform_documents([doc])
    windows = next(c for c in chunks if "setup.exe" in c.metadata["original_content"])
    # the splitter's header metadata and the document's own, the parent and a stable id
    assert windows.metadata["h2"] == "Windows" and windows.metadata["h1"] == "Guide" and windows.metadata["team"] == "docs"
    assert windows.metadata["parent_id"] == f"guide.{kind}"
    index = windows.metadata["chunk_index"]
    assert windows.id == stable_chunk_id(f"guide.{kind}", index, windows.metadata["original_content"])
    assert windows.page_content == f"From guide.{kind}, part {index}.\n\n" + windows.metadata["original_content"]
    assert transformer.transform_documents([doc]) == chunks


def test_a_splitter_whose_split_text_returns_strings_only_is_refused_by_name() -> None:
    class Bare:
        def split_text(self, text: str) -> list[str]:
            return text.split(".")

    with pytest.raises(TypeError, match="Bare.split_text returned text"):
        ContextualDocumentTransformer(text_splitter=Bare(), show_progress=False).transform_documents(whole_documents())
