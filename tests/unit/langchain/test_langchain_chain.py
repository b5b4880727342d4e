"""An LCEL chain: transformer -> Chroma + BM25 ensemble | format (context and source apart) | prompt |
a chat model, sync and async; the transformer's second run over the same documents generates nothing.
Plus the cookbook-scale check (slow): the LangChain path scores the core's contextual-hybrid."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.documents import Document as LCDocument
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableLambda, RunnablePassthrough

from contextual_retrieval_core.types import CONTEXT_LABEL, SOURCE_LABEL
from contextual_retrieval_langchain import (
    ContextualDocumentTransformer,
    ContextualEnsembleRetriever,
    format_docs_for_llm,
)
from tests.langchain_corpus import chunk_documents, whole_documents


class EchoChatModel(BaseChatModel):
    """A chat model double: answers with the text of the last message it was sent; counts calls."""

    calls: list = []

    @property
    def _llm_type(self) -> str:
        return "echo"

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        self.calls.append(messages)
        last = messages[-1]
        text = last.content if isinstance(last.content, str) else "Situated: " + last.content[-1]["text"][-40:]
        return ChatResult(generations=[ChatGeneration(message=AIMessage(text))])


PROMPT = ChatPromptTemplate.from_messages(
    [("system", "Answer from the sources. Context blocks are not sources."), ("human", "{context}\n\nQuestion: {question}")]
)


@pytest.fixture
def chain_parts(tmp_path, lc_embeddings):
    llm = EchoChatModel(calls=[])
    transformer = ContextualDocumentTransformer(generator=llm, store=tmp_path / "contexts.sqlite3", show_progress=False)
    docs = transformer.transform_documents(chunk_documents(), parents=whole_documents())
    assert len(llm.calls) == len(docs) == 8
    return transformer, docs, llm


def test_the_second_run_makes_zero_generation_requests(chain_parts) -> None:
    transformer, docs, llm = chain_parts
    assert transformer.transform_documents(chunk_documents(), parents=whole_documents()) == docs
    assert len(llm.calls) == 8 and transformer.last_report.generated == 0 and transformer.last_report.store_hits == 8


async def test_the_async_second_run_makes_zero_generation_requests(chain_parts) -> None:
    transformer, docs, llm = chain_parts
    assert await transformer.atransform_documents(chunk_documents(), parents=whole_documents()) == docs
    assert len(llm.calls) == 8 and transformer.last_report.generated == 0


async def test_lcel_chain_sync_and_async(chain_parts, lc_embeddings) -> None:
    _, docs, _ = chain_parts
    retriever = ContextualEnsembleRetriever.from_documents(docs, lc_embeddings, k=2)
    answer_llm = EchoChatModel(calls=[])
    chain = (
        {"context": retriever | RunnableLambda(format_docs_for_llm), "question": RunnablePassthrough()}
        | PROMPT
        | answer_llm
        | StrOutputParser()
    )
    question = "What does DiffExecutor run_target do?"
    answer = chain.invoke(question)
    assert await chain.ainvoke(question) == answer
    assert len(answer_llm.calls) == 2

    top = retriever.invoke(question)
    assert answer == f"{format_docs_for_llm(top)}\n\nQuestion: {question}"
    assert top[0].metadata["parent_id"] == "fuzzer.py"
    # each retrieved chunk: the generated context under its label, then the source text under its own
    first = answer.split("\n\n---\n\n")[0]
    assert first.startswith(CONTEXT_LABEL) and f"\n\n{SOURCE_LABEL}\n\n{top[0].metadata['original_content']}" in first
    assert first.index(top[0].metadata["context"]) < first.index(SOURCE_LABEL)


def test_format_docs_without_context_shows_the_text() -> None:
    assert format_docs_for_llm([LCDocument("plain text")]) == "plain text"
    doc = LCDocument("ctx\n\nsrc", metadata={"context": "", "original_content": "src"})
    assert format_docs_for_llm([doc]) == "src"
