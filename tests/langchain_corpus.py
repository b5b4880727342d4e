"""The LangChain tests' small corpus: four documents, their chunks and fixed contexts, as LangChain
Documents and as a core generator (the session fixtures over it are in tests/conftest.py)."""

from __future__ import annotations

from typing import Any

from langchain_core.documents import Document as LCDocument

from contextual_retrieval_core.generators import CallableContextGenerator, Generation
from contextual_retrieval_core.types import Chunk

#: (document id, [(chunk text, context), ...]); whole documents are the chunks joined by newlines
CORPUS = [
    ("acme-q2.md", [
        ("Revenue grew by 3% over the previous quarter.", "ACME Corp's Q2 2023 SEC filing, on quarterly revenue."),
        ("Headcount stayed flat at 1,200 employees.", "ACME Corp's Q2 2023 SEC filing, on staffing."),
    ]),
    ("globex-2021.md", [
        ("Revenue grew by 3% over the previous quarter.", "Globex Inc's 2021 annual report, on yearly revenue."),
        ("Globex opened two new plants in Ohio.", "Globex Inc's 2021 annual report, on manufacturing."),
    ]),
    ("fuzzer.py", [
        ("class DiffExecutor:\n    def run_target(self, input):\n        return self.primary.run(input)", "The DiffExecutor class of a differential fuzzer."),
        ("def compare_outputs(a, b):\n    return a == b", "A helper that compares the two executors' outputs."),
    ]),
    ("initech-q3.md", [
        ("Quarterly revenue fell 2% on weaker licence sales.", "Initech's Q3 2023 quarterly revenue report."),
        ("The revenue outlook for the next quarter is unchanged.", "Initech's Q3 2023 quarterly report, on guidance."),
    ]),
]
CONTEXTS = {(doc_id, i): ctx for doc_id, chunks in CORPUS for i, (_, ctx) in enumerate(chunks)}
QUERIES = [
    "How did ACME's revenue change in Q2 2023?",
    "What does DiffExecutor run_target do?",
    "quarterly revenue report",
    "How are the executors' outputs compared?",
]


def whole_documents() -> list[LCDocument]:
    return [LCDocument("\n".join(t for t, _ in chunks), metadata={"source": doc_id}) for doc_id, chunks in CORPUS]


def chunk_documents() -> list[LCDocument]:
    """Already-split chunks, each naming its parent by metadata["source"]."""
    return [LCDocument(t, metadata={"source": doc_id}) for doc_id, chunks in CORPUS for t, _ in chunks]


def context_generator(calls: list | None = None) -> CallableContextGenerator:
    """The fixed contexts above as a core generator (records each call when `calls` is given)."""

    def situate(document: Any, chunk: Chunk) -> Generation:
        if calls is not None:
            calls.append(chunk.id)
        return Generation(CONTEXTS[(document.id, chunk.index)])

    return CallableContextGenerator(situate, name="fixed-test-contexts", is_llm=False)
