"""Shared fixtures: the cookbook dataset path and a tiny dataset written in its format."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
COOKBOOK = Path(os.environ.get("CONTEXTUAL_RETRIEVAL_DATASET", REPO.parent / "shared" / "data" / "cookbook-codebase"))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--ci",
        action="store_true",
        help="run everything CI runs: the slow whole-corpus tests too, and fail (instead of skip) when "
        "the cookbook data or a server a test needs is missing. .ci/run and the README's test command pass it.",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--ci") or config.option.markexpr:
        return  # CI, or the caller chose with -m
    later = pytest.mark.skip(reason="slow whole-corpus test: run with --ci (as .ci/run does) or -m slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(later)


def require(config: pytest.Config, ok: bool, reason: str) -> None:
    """Skip the test when a prerequisite is missing, naming it; under --ci (CI), fail instead."""
    if ok:
        return
    if config.getoption("--ci") or os.environ.get("CONTEXTUAL_RETRIEVAL_REQUIRE_DATASET") == "1":
        pytest.fail(f"{reason} (--ci makes this a failure)")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def cookbook_dir(pytestconfig: pytest.Config) -> Path:
    require(
        pytestconfig,
        (COOKBOOK / "codebase_chunks.json").is_file(),
        f"cookbook dataset not found at {COOKBOOK}; put it at ../shared/data/cookbook-codebase or set CONTEXTUAL_RETRIEVAL_DATASET",
    )
    return COOKBOOK


TINY_DOCS = [
    (
        "doc_g",
        "uuid-g",
        ["Revenue grew by 3% over the previous quarter.", "Globex opened two new plants."],
    ),
    (
        "doc_a",
        "uuid-a",
        [
            "class DiffExecutor:\n    def run_target(self, input):\n        return self.primary.run(input)",
            "def compare_outputs(a, b):\n    return a == b",
        ],
    ),
    (
        "doc_b",
        "uuid-b",
        [
            "Revenue grew by 3% over the previous quarter.",
            "The company's headcount stayed flat at 1,200 employees.",
        ],
    ),
    (
        "doc_c",
        "uuid-c",
        ["信息检索是从大量文档中找到相关信息的过程。", "向量数据库存储嵌入向量。"],
    ),
]
TINY_CONTEXTS = {
    ("doc_g", 0): "Globex Inc's 2021 annual report, on yearly revenue.",
    ("doc_g", 1): "Globex Inc's 2021 annual report, on manufacturing.",
    ("doc_a", 0): "The DiffExecutor class of a differential fuzzer.",
    ("doc_a", 1): "A helper that compares the two executors' outputs.",
    ("doc_b", 0): "ACME Corp's Q2 2023 SEC filing, on quarterly revenue.",
    ("doc_b", 1): "ACME Corp's Q2 2023 SEC filing, on staffing.",
    ("doc_c", 0): "中文文档：信息检索的定义。",
    ("doc_c", 1): "中文文档：向量数据库。",
}
TINY_QUERIES = [
    ("What does DiffExecutor run_target do?", [("uuid-a", 0)]),
    ("How did ACME's revenue change in Q2 2023?", [("uuid-b", 0)]),
    ("什么是信息检索", [("uuid-c", 0)]),
    ("How are the executors' outputs compared?", [("uuid-a", 1)]),
]


@pytest.fixture()
def tiny_dataset(tmp_path: Path) -> Path:
    """A three-document dataset in the cookbook format, plus contexts.jsonl."""
    docs = []
    for doc_id, uuid, chunks in TINY_DOCS:
        docs.append(
            {
                "doc_id": doc_id,
                "original_uuid": uuid,
                "content": "\n".join(chunks),
                "chunks": [
                    {"chunk_id": f"{doc_id}_chunk_{i}", "original_index": i, "content": c}
                    for i, c in enumerate(chunks)
                ],
            }
        )
    (tmp_path / "codebase_chunks.json").write_text(json.dumps(docs), encoding="utf-8")
    with (tmp_path / "evaluation_set.jsonl").open("w", encoding="utf-8") as fh:
        for query, golden in TINY_QUERIES:
            fh.write(json.dumps({"query": query, "golden_chunk_uuids": golden}) + "\n")
    with (tmp_path / "contexts.jsonl").open("w", encoding="utf-8") as fh:
        for (doc_id, index), context in TINY_CONTEXTS.items():
            fh.write(json.dumps({"doc_id": doc_id, "original_index": index, "context": context}) + "\n")
    return tmp_path


@pytest.fixture(scope="session")
def cookbook_embedder(tmp_path_factory):
    """The offline embedder behind one SQLite cache for the whole session: the cookbook-scale
    tests embed each text once between them."""
    from contextual_retrieval_core.embeddings.cache import CachedEmbedder
    from contextual_retrieval_core.embeddings.minilm import LocalMiniLMEmbedder

    return CachedEmbedder(LocalMiniLMEmbedder(), tmp_path_factory.mktemp("embeddings") / "cache.sqlite3")


HOSTED_KEYS = ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "VOYAGE_API_KEY", "COHERE_API_KEY", "CO_API_KEY")


@pytest.fixture()
def offline_env(monkeypatch, tmp_path):
    """No hosted API keys in the environment, and a private cache folder (the default context store)."""
    for name in HOSTED_KEYS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


@pytest.fixture()
def cohere_server():
    """Cohere's rerank API on a loopback port (`tests/fakes/cohere_server.py`); `.reranker()` gives
    a core `CohereReranker` on real SDK clients pointed at it."""
    from tests.fakes.cohere_server import FakeCohereServer

    with FakeCohereServer() as server:
        yield server
