"""Transient API faults with the user's own client: one ingestion run, counted from the server.

    python benchmarks/transient_faults.py [--dataset DIR] [--json PATH] [--rates 0.1 0.3] [--seed 11]

Corpus: the cookbook codebase set (90 documents, 737 chunks). API: the loopback fake Anthropic
server of tests/fakes, answering a seeded random share of /v1/messages requests with 429, 500 or
529 (retry-after-ms: 1). Clients, each with its library's default retries (2): the anthropic SDK's
`Anthropic()` given to `AnthropicContextGenerator`, LangChain's `ChatAnthropic` and llama-index's
`Anthropic` LLM (both become `AnthropicContextGenerator` on the model's own SDK clients). One
`Contextualizer` run per (client, fault rate), concurrency 5, a fresh store and server each.

Per case: whether the one run completed, HTTP requests, paid answers (200s), faults served,
transient failures the run rode out (requests that failed after the client's own retries), retry
rounds, cache writes against cacheable documents and the most writes of one prefix.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))  # the fake server lives with the tests

import anthropic  # noqa: E402
from _paths import DEFAULT_DATASET  # noqa: E402
from fakes.anthropic_server import FakeAnthropicServer  # noqa: E402

from contextual_retrieval_core.app.evaluation import load_cookbook  # noqa: E402
from contextual_retrieval_core.contextualize.config import ContextualizeConfig  # noqa: E402
from contextual_retrieval_core.contextualize.contextualizer import ContextualizationError, Contextualizer  # noqa: E402
from contextual_retrieval_core.generators import AnthropicContextGenerator  # noqa: E402

MODEL = "claude-3-haiku-20240307"


def anthropic_client(server: FakeAnthropicServer):
    return AnthropicContextGenerator(MODEL, client=anthropic.Anthropic(api_key=server.api_key, base_url=server.url))


def langchain_chat(server: FakeAnthropicServer):
    from langchain_anthropic import ChatAnthropic

    from contextual_retrieval_langchain.chat import chat_model_generator

    return chat_model_generator(ChatAnthropic(model=MODEL, api_key=server.api_key, base_url=server.url, max_tokens=300))


def llamaindex_llm(server: FakeAnthropicServer):
    from llama_index.llms.anthropic import Anthropic

    from contextual_retrieval_llamaindex.llm import llm_context_generator

    return llm_context_generator(Anthropic(model=MODEL, api_key=server.api_key, base_url=server.url, max_retries=2))


CLIENTS = {"anthropic.Anthropic()": anthropic_client, "langchain ChatAnthropic": langchain_chat,
           "llama-index Anthropic": llamaindex_llm}


def run_case(dataset, client: str, rate: float, seed: int, backoff: float) -> dict:
    with FakeAnthropicServer() as server, tempfile.TemporaryDirectory() as tmp:
        server.fail_rate(rate, statuses=(429, 500, 529), seed=seed)
        contextualizer = Contextualizer(CLIENTS[client](server), Path(tmp) / "contexts.sqlite3", config=ContextualizeConfig(concurrency=5, show_progress=False, structural_header=False, retry_backoff_s=backoff))
        started = time.perf_counter()
        error = None
        try:
            report = contextualizer.contextualize(dataset.documents, dataset.chunks).report
        except ContextualizationError as exc:
            error, report = str(exc), None
        stats = server.stats()
    writes = stats["writes_per_prefix"]
    return {
        "client": client, "fault_rate": rate, "chunks": len(dataset.chunks), "completed_in_one_run": error is None,
        "error": error, "http_requests": stats["requests"], "paid_answers": stats["messages"], "faults": stats["faults"],
        "transient_failures": report.transient_failures if report else None,
        "retry_rounds": report.retry_rounds if report else None,
        "sdk_retries": report.usage.retries if report else None,
        "cache_writes": stats["cache_writes"], "cacheable_documents": report.cacheable_documents if report else None,
        "max_writes_of_one_prefix": max(writes.values()) if writes else 0,
        "seconds": round(time.perf_counter() - started, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default=DEFAULT_DATASET)
    parser.add_argument("--json", default=str(HERE / "transient_faults.json"))
    parser.add_argument("--rates", type=float, nargs="+", default=[0.1, 0.3])
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--backoff", type=float, default=0.05, help="retry_backoff_s (the default is 1 s)")
    args = parser.parse_args()
    dataset = load_cookbook(args.dataset)
    cases = []
    for rate in args.rates:
        for client in CLIENTS:
            case = run_case(dataset, client, rate, args.seed, args.backoff)
            cases.append(case)
            print(json.dumps(case), flush=True)
    Path(args.json).write_text(json.dumps({"model": MODEL, "seed": args.seed, "cases": cases}, indent=2) + "\n")
    return 0 if all(c["completed_in_one_run"] and c["paid_answers"] == c["chunks"] for c in cases) else 1


if __name__ == "__main__":
    sys.exit(main())
