"""The `_compat` modules: the only places that touch another package's internals (or rebuild what
it keeps private from its public fields). Each test pins the versions the accessor is written for:
a new major version fails here first, naming what to re-check."""

from __future__ import annotations

import importlib.metadata
import re
from pathlib import Path

import anthropic
import pytest
from packaging.version import Version

from contextual_retrieval_core._compat import chroma_max_batch_size

ROOT = Path(__file__).resolve().parents[3]


def version(dist: str) -> Version:
    return Version(importlib.metadata.version(dist))


@pytest.mark.parametrize(
    "dist, low, high",
    [
        ("chromadb", "1.0", "2"),
        ("llama-index-llms-anthropic", "0.8", "0.13"),
        ("llama-index-core", "0.12", "0.15"),
        ("llama-index-vector-stores-postgres", "0.5", "0.10"),
        ("langchain-anthropic", "0.3", "2"),
        ("voyageai", "0.3", "0.6"),
    ],
)
def test_installed_versions_are_the_supported_ones(dist, low, high):
    assert Version(low) <= version(dist) < Version(high), f"re-check the _compat accessor for {dist} {version(dist)}"
    declared = (ROOT / "pyproject.toml").read_text()
    assert f'"{dist}>={low},<{high}"' in declared  # the pin and the declared range agree


def test_chroma_max_batch_size_is_the_clients():
    from contextual_retrieval_core.dense.chroma import chroma_client, chroma_collection

    client = chroma_client()
    assert chroma_max_batch_size(chroma_collection(client)) == client.get_max_batch_size() > 0
    assert chroma_max_batch_size(object()) == 5000  # a look-alike without a client: Chroma's default


def test_llamaindex_anthropic_clients_are_the_llms_own():
    from llama_index.llms.anthropic import Anthropic

    from contextual_retrieval_llamaindex._compat import anthropic_llm_clients

    llm = Anthropic(model="claude-3-haiku-20240307", api_key="sk-test", base_url="http://127.0.0.1:9/", max_retries=4)
    client, aclient = anthropic_llm_clients(llm)
    assert isinstance(client, anthropic.Anthropic) and isinstance(aclient, anthropic.AsyncAnthropic)
    assert str(client.base_url).startswith("http://127.0.0.1:9") and client.max_retries == 4


def test_chat_anthropic_clients_are_configured_as_the_model():
    from langchain_anthropic import ChatAnthropic

    from contextual_retrieval_langchain._compat import chat_anthropic_clients

    llm = ChatAnthropic(
        model="claude-3-haiku-20240307",
        api_key="sk-test",
        base_url="http://127.0.0.1:9/",
        max_retries=5,
        default_request_timeout=7.0,
        default_headers={"X-Team": "search"},
    )
    for client in chat_anthropic_clients(llm):
        assert str(client.base_url).startswith("http://127.0.0.1:9")
        assert (client.max_retries, client.timeout, client.api_key) == (5, 7.0, "sk-test")
        assert client.default_headers["X-Team"] == "search"
    proxied = ChatAnthropic(model="claude-3-haiku-20240307", api_key="sk-test", anthropic_proxy="http://127.0.0.1:3128")
    assert all(c.api_key == "sk-test" for c in chat_anthropic_clients(proxied))


#: `x._name` where x is one of our own objects (the one module that owns the class reaching into it)
OWN_OBJECTS = {"index._engine", "index._mapped", "index._graph", "index._calibrate", "run._below_minimum", "store._rows", "store._write"}


def test_no_private_member_of_another_package_is_read_outside_compat():
    """`x._name` on anything but self / cls / our own objects, in the three packages."""
    access = re.compile(r"(?<![\w.])(?!self\b|cls\b)([a-z_][a-z0-9_]*)\._([a-z][a-z0-9_]*)")
    found = []
    for package in ("contextual_retrieval_core", "contextual_retrieval_llamaindex", "contextual_retrieval_langchain"):
        for path in (ROOT / package).rglob("*.py"):
            if path.name == "_compat.py":
                continue
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                code = line.split("#")[0]
                if code.lstrip().startswith((">>>", "...", "from ", "import ")):
                    continue
                for owner, name in access.findall(code):
                    if f"{owner}._{name}" in OWN_OBJECTS or name in ("replace", "asdict", "fields"):  # namedtuple API
                        continue
                    found.append(f"{path.relative_to(ROOT)}:{n}: {owner}._{name}")
    assert found == []


def test_retriever_ls_params_are_the_ones_invoke_traces():
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from langchain_core.vectorstores import InMemoryVectorStore

    from contextual_retrieval_langchain._compat import retriever_ls_params

    retriever = InMemoryVectorStore(DeterministicFakeEmbedding(size=4)).as_retriever()
    assert retriever_ls_params(retriever) == {
        "ls_retriever_name": "vectorstore",
        "ls_vector_store_provider": "InMemoryVectorStore",
        "ls_embedding_provider": "DeterministicFakeEmbedding",
    }
