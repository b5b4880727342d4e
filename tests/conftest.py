"""Shared fixtures (the cookbook dataset path, a tiny dataset in its format, the offline embedder
for the whole session) and the layout by cost: every test under tests/unit, tests/integration or
tests/e2e carries that folder's marker (`-m unit`, ...); doctests in the packages count as unit."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest

# the real servers' session fixtures, defined here once so that each server starts once per run
from tests.milvus_server import milvus_server  # noqa: F401, E402
from tests.servers import chroma_server, pgvector_server, postgres_server  # noqa: F401, E402

#: one folder for the whole run, pytest-xdist's workers included (they inherit the environment of
#: the process that starts them, which imported this file first): the session's embedding cache
#: lives there, so the cookbook-scale tests embed each text once between all workers
RUN_FOLDER = Path(os.environ.setdefault("CONTEXTUAL_RETRIEVAL_TESTS_RUN", tempfile.mkdtemp(prefix="contextual-retrieval-tests-")))
#: the user's cache (the shared context store, the eval embedding cache) is never the tester's own:
#: one folder for the run (session fixtures, subprocesses), and each test gets its own (`_own_cache`)
os.environ["XDG_CACHE_HOME"] = str(RUN_FOLDER / "cache")

REPO = Path(__file__).resolve().parents[1]
COOKBOOK = Path(os.environ.get("CONTEXTUAL_RETRIEVAL_DATASET", REPO.parent / "shared" / "data" / "cookbook-codebase"))


@pytest.hookimpl(tryfirst=True, optionalhook=True)  # a hook of pytest-xdist's: unknown without it
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """`-n auto` (the README's test command): one worker more than pytest-xdist's own count (the
    physical cores). Several tests wait (a server restarting, a process killed and run again, a
    loopback API's latency) while using no core, and the extra worker runs meanwhile.
    PYTEST_XDIST_AUTO_NUM_WORKERS, when set, still decides."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    from xdist.plugin import pytest_xdist_auto_num_workers as cores

    return int(cores(config)) + 1


def pytest_configure(config: pytest.Config) -> None:
    """In a pytest-xdist worker, the offline model embeds on one thread (unless the tester set
    CONTEXTUAL_RETRIEVAL_ONNX_THREADS): each worker's onnxruntime would otherwise spin a thread on
    every core, and the workers would take turns on them."""
    if hasattr(config, "workerinput"):
        os.environ.setdefault("CONTEXTUAL_RETRIEVAL_ONNX_THREADS", "1")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--ci",
        action="store_true",
        help="run everything CI runs: the slow whole-corpus tests too, and fail (instead of skip) when "
        "the cookbook data or a server a test needs is missing. .ci/run and the README's test command pass it.",
    )


TESTS = Path(__file__).resolve().parent
#: the folders tests are laid out in, by cost; each is also the marker its tests carry
TIERS = ("unit", "integration", "e2e")


def tier_of(path: Path) -> str:
    """The cost tier of a collected file: its folder under tests/; "unit" for the doctests of the
    packages' modules and of the shared helpers (they run in process). A test file elsewhere
    under tests/ is refused."""
    try:
        parts = path.resolve().relative_to(TESTS).parts
    except ValueError:
        return "unit"
    if len(parts) > 1 and parts[0] in TIERS:
        return parts[0]
    if path.name.startswith("test_"):
        raise pytest.UsageError(f"{path} is not in a cost folder: move it to tests/unit, tests/integration or tests/e2e")
    return "unit"


#: the order files run in, dearest first (see `pytest_collection_modifyitems`)
COST_RANK = {"slow": 0, "e2e": 1, "integration": 2, "unit": 3}


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    tiers: dict[Path, pytest.MarkDecorator] = {}
    for item in items:
        if item.path not in tiers:
            tiers[item.path] = getattr(pytest.mark, tier_of(item.path))
        item.add_marker(tiers[item.path])
    # Files run dearest first (a file holding a whole-corpus test, then e2e, integration, unit and
    # the doctests), each file's tests together and in their own order: with pytest-xdist handing
    # out one file at a time (`--dist loadfile --no-loadscope-reorder`, the README's test command),
    # the long files start first and the short ones fill the gaps, instead of one long file
    # starting last. Without xdist the order only changes which failure shows first.
    rank: dict[Path, int] = {}
    for item in items:
        cost = COST_RANK["slow"] if "slow" in item.keywords else COST_RANK[tier_of(item.path)]
        rank[item.path] = min(rank.get(item.path, cost), cost)
    items.sort(key=lambda item: rank[item.path])  # stable: files and tests keep their order within a rank
    if config.getoption("--ci") or "slow" in (config.option.markexpr or ""):
        return  # CI, or the caller asked for the slow tests with -m
    later = pytest.mark.skip(reason="slow whole-corpus test: run with --ci (as .ci/run does) or -m slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(later)


#: a throwaway self-signed certificate (its key was never kept): the only CA the in-process tiers trust
LOOPBACK_CA = TESTS / "fakes" / "loopback_ca.pem"


@pytest.fixture(autouse=True)
def _loopback_only_trust(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """The SDK clients the tests build talk plain HTTP to loopback fakes, yet each one makes an SSL
    context and loads every CA certificate of SSL_CERT_FILE (or the system's bundle) into it: about
    25 ms a client, some 190 clients in tests/unit. Outside tests/e2e (which installs packages over
    HTTPS) the tests trust one throwaway certificate instead. A CERTIFICATE_VERIFY_FAILED in one of
    them means the test reached for the network, which no test outside tests/e2e may do."""
    if tier_of(request.path) != "e2e":
        monkeypatch.setenv("SSL_CERT_FILE", str(LOOPBACK_CA))
        monkeypatch.delenv("SSL_CERT_DIR", raising=False)


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
def offline_embedder():
    """The offline embedder (`LocalMiniLMEmbedder` with its defaults), one ONNX session for the
    whole run. For tests that only need "the offline embedder"; a test of its construction, its
    options or its counters (`embedded_count`, `truncated_count`) builds its own."""
    from contextual_retrieval_core.embeddings.minilm import LocalMiniLMEmbedder

    return LocalMiniLMEmbedder()


@pytest.fixture(scope="session")
def cookbook_embedder(offline_embedder):
    """The offline embedder behind one SQLite cache for the whole run (`RUN_FOLDER`, shared by
    pytest-xdist's workers): the cookbook-scale tests embed each text once between them."""
    from contextual_retrieval_core.embeddings.cache import CachedEmbedder

    return CachedEmbedder(offline_embedder, RUN_FOLDER / "embeddings.sqlite3")


@pytest.fixture(scope="session")
def core_embedder(offline_embedder):
    """The offline embedder behind a per-session in-memory cache: each text is embedded once for the
    whole run (the LangChain tests' corpus, tests/langchain_corpus.py)."""
    from contextual_retrieval_core.embeddings.cache import CachedEmbedder

    return CachedEmbedder(offline_embedder, ":memory:")


@pytest.fixture(scope="session")
def lc_embeddings(core_embedder):
    """`core_embedder` as LangChain `Embeddings`."""
    from contextual_retrieval_langchain import EmbedderEmbeddings

    return EmbedderEmbeddings(embedder=core_embedder)


@pytest.fixture(scope="session")
def contextual_docs():
    """tests/langchain_corpus.py's corpus through ContextualDocumentTransformer (chunks + parents)."""
    from contextual_retrieval_langchain import ContextualDocumentTransformer
    from tests.langchain_corpus import chunk_documents, context_generator, whole_documents

    transformer = ContextualDocumentTransformer(generator=context_generator(), show_progress=False)
    return transformer.transform_documents(chunk_documents(), parents=whole_documents())


@pytest.fixture(scope="session")
def core_chunks(contextual_docs):
    """The same chunks as the core's ContextualChunks (same ids, contexts and indexed text)."""
    from contextual_retrieval_core.types import Chunk, ContextualChunk

    return [
        ContextualChunk(Chunk(d.id, d.metadata["parent_id"], d.metadata["original_content"], d.metadata["chunk_index"]), d.metadata["context"])
        for d in contextual_docs
    ]


@pytest.fixture(autouse=True)
def _own_cache(monkeypatch, tmp_path_factory):
    """A cache folder of this test's own: what one test pays into the shared context store is not
    another test's store hit."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))


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
