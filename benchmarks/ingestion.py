"""Ingestion cost and speed: our scheduler against a faithful copy of the cookbook's, same run.

    python benchmarks/ingestion.py [--dataset DIR] [--json PATH] [--latency 0.3] [--per-token 0.005]

Corpus: the cookbook codebase set (90 documents, 737 chunks). API: the loopback fake Anthropic
server of tests/fakes (prompt caching emulated exactly: exact-prefix match, Claude 3 Haiku's
2048-token minimum, an entry usable only once the response that wrote it has started), with
~300 ms + 5 ms per output token of latency. Both schedulers run at concurrency 5 with the
cookbook's prompt, each against a fresh server (no shared cache) and, for ours, a fresh store.

Runs:
- cookbook: ThreadPoolExecutor(5), every chunk submitted at once (the notebook's `load_data`).
- ours realtime / batch: the Contextualizer, per-chunk mode (the default).
- ours grouped realtime / batch: grouped mode for documents below the cache minimum.
Costs are priced at Claude 3 Haiku's and Claude Haiku 4.5's prices from the same token counts.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))  # the fake server lives with the tests

import anthropic  # noqa: E402
from _paths import DEFAULT_DATASET  # noqa: E402
from fakes.anthropic_server import FakeAnthropicServer, count_tokens  # noqa: E402

from contextual_retrieval_core.app.evaluation import load_cookbook  # noqa: E402
from contextual_retrieval_core.contextualize.config import ContextualizeConfig  # noqa: E402
from contextual_retrieval_core.contextualize.contextualizer import Contextualizer  # noqa: E402
from contextual_retrieval_core.generators import AnthropicContextGenerator, TokenUsage  # noqa: E402
from contextual_retrieval_core.generators.prompts import DEFAULT_PROMPT  # noqa: E402
from contextual_retrieval_core.generators.usage import cost_usd  # noqa: E402

MODEL = "claude-3-haiku-20240307"
PRICES = {"claude-3-haiku": "claude-3-haiku-20240307", "claude-haiku-4-5": "claude-haiku-4-5"}
THREADS = 5


def cookbook_copy(server: FakeAnthropicServer, dataset) -> float:
    """The cookbook notebook's ingestion: one thread pool, every chunk submitted at once.

    The notebook's `situate_context` also passes temperature=0.0, which the pinned SDK's
    messages.create no longer accepts; everything else is as written there.
    """
    client = anthropic.Anthropic(api_key=server.api_key, base_url=server.url, max_retries=6)
    docs = {d.id: d for d in dataset.documents}
    doc_tpl, chunk_tpl = DEFAULT_PROMPT.document_template, DEFAULT_PROMPT.chunk_template

    def situate_context(doc: str, chunk: str):
        response = client.messages.create(
            model=MODEL,
            max_tokens=1000,
            messages=[
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": doc_tpl.replace("{doc_content}", doc), "cache_control": {"type": "ephemeral"}},
                        {"type": "text", "text": chunk_tpl.replace("{chunk_content}", chunk)},
                    ],
                }
            ],
        )
        return response.content[0].text, response.usage

    started = time.perf_counter()
    lock = threading.Lock()
    results = []
    with ThreadPoolExecutor(max_workers=THREADS) as executor:
        futures = [executor.submit(situate_context, docs[c.document_id].text, c.text) for c in dataset.chunks]
        for future in as_completed(futures):
            with lock:
                results.append(future.result())
    return time.perf_counter() - started


def ours(server: FakeAnthropicServer, dataset, *, mode: str, grouped: bool) -> tuple[float, dict]:
    client = anthropic.Anthropic(api_key=server.api_key, base_url=server.url, max_retries=6)
    async_client = anthropic.AsyncAnthropic(api_key=server.api_key, base_url=server.url, max_retries=6)
    gen = AnthropicContextGenerator(
        MODEL, client=client, async_client=async_client, cache_ttl="1h" if mode == "batch" else "5m"
    )
    with tempfile.TemporaryDirectory() as tmp:
        ctx = Contextualizer(gen, Path(tmp) / "contexts.sqlite3", config=ContextualizeConfig(concurrency=THREADS, mode=mode, grouped=grouped, show_progress=False, batch_poll_interval=0.2))
        started = time.perf_counter()
        result = ctx.contextualize(dataset.documents, dataset.chunks)
        wall = time.perf_counter() - started
    assert len(result.chunks) == len(dataset.chunks) and all(c.context for c in result.chunks)
    return wall, {**result.report.to_dict(), "text": result.report.format()}


def measure(server: FakeAnthropicServer, dataset, wall: float, *, batch: bool) -> dict:
    """Figures from what the server saw (the same for both schedulers)."""
    stats = server.stats()
    per_doc: dict[str, int] = {}
    for c in dataset.chunks:
        per_doc[c.document_id] = per_doc.get(c.document_id, 0) + 1
    cacheable, ideal, writes = 0, 0, 0
    for doc in dataset.documents:
        block = DEFAULT_PROMPT.render_document(doc.text)
        prefix = count_tokens(block)
        if prefix >= server.min_cache_tokens(MODEL):
            cacheable += 1
            ideal += prefix * (per_doc.get(doc.id, 0) - 1)
            writes += server.cache_writes_containing(doc.text)
    tier = stats["by_tier"]["batch" if batch else "standard"]
    usage = TokenUsage(
        input_tokens=tier["input_tokens"],
        output_tokens=tier["output_tokens"],
        cache_write_tokens=tier["cache_write_5m_tokens"],
        cache_write_1h_tokens=tier["cache_write_1h_tokens"],
        cache_read_tokens=tier["cache_read_tokens"],
    )
    return {
        "cache_write_tokens": usage.cache_write_tokens + usage.cache_write_1h_tokens,
        "cache_read_tokens": usage.cache_read_tokens,
        "ideal_cache_read_tokens": ideal,
        "cache_read_share": round(usage.cache_read_tokens / ideal, 4) if ideal else None,
        "cacheable_documents": cacheable,
        "cache_writes_per_cacheable_document": round(writes / cacheable, 4) if cacheable else None,
        "requests": stats["messages"] + stats["batch_messages"],
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "wall_s": round(wall, 2),
        "cost_usd": {name: round(cost_usd(usage, model, batch=batch) or 0.0, 6) for name, model in PRICES.items()},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default=DEFAULT_DATASET)
    parser.add_argument("--json", default=str(HERE / "ingestion.json"))
    parser.add_argument("--latency", type=float, default=0.3, help="seconds before a response starts")
    parser.add_argument("--per-token", type=float, default=0.005, help="seconds per output token")
    args = parser.parse_args()
    dataset = load_cookbook(args.dataset)

    def server() -> FakeAnthropicServer:
        return FakeAnthropicServer(latency_s=args.latency, per_output_token_s=args.per_token).start()

    runs: dict[str, dict] = {}
    srv = server()
    wall = cookbook_copy(srv, dataset)
    runs["cookbook realtime"] = measure(srv, dataset, wall, batch=False)
    srv.stop()
    for name, mode, grouped in (
        ("ours realtime", "realtime", False),
        ("ours batch", "batch", False),
        ("ours grouped realtime", "realtime", True),
        ("ours grouped batch", "batch", True),
    ):
        srv = server()
        wall, report = ours(srv, dataset, mode=mode, grouped=grouped)
        runs[name] = measure(srv, dataset, wall, batch=mode == "batch")
        runs[name]["report"] = {k: report[k] for k in ("cache_writes", "cache_misses", "grouped_requests", "grouped_fallbacks", "windowed_documents", "text")}
        srv.stop()

    base = runs["cookbook realtime"]
    print(f"corpus: {len(dataset.documents)} documents, {len(dataset.chunks)} chunks; model {MODEL} (cache minimum 2048); "
          f"latency {args.latency}s + {args.per_token}s/output token; concurrency {THREADS}")
    head = f"{'run':<24}{'requests':>9}{'cache write':>13}{'cache read':>12}{'read/ideal':>11}{'writes/doc':>11}{'wall s':>8}{'$ haiku-3':>11}{'$ haiku-4.5':>12}{'x cookbook':>11}"
    print(head)
    print("-" * len(head))
    for name, r in runs.items():
        ratio = r["cost_usd"]["claude-3-haiku"] / base["cost_usd"]["claude-3-haiku"]
        r["cost_ratio_vs_cookbook"] = {k: round(r["cost_usd"][k] / base["cost_usd"][k], 4) for k in PRICES}
        share = "-" if r["cache_read_share"] is None else f"{100 * r['cache_read_share']:.1f}%"
        print(f"{name:<24}{r['requests']:>9}{r['cache_write_tokens']:>13,}{r['cache_read_tokens']:>12,}{share:>11}"
              f"{r['cache_writes_per_cacheable_document']:>11.2f}{r['wall_s']:>8.1f}{r['cost_usd']['claude-3-haiku']:>11.4f}"
              f"{r['cost_usd']['claude-haiku-4-5']:>12.4f}{ratio:>11.3f}")
    print(f"cacheable documents: {base['cacheable_documents']} of {len(dataset.documents)}; "
          f"ideal cache reads {base['ideal_cache_read_tokens']:,} tokens")
    print(f"wall time, ours realtime / cookbook: {runs['ours realtime']['wall_s'] / base['wall_s']:.3f}")
    print("\nour report, realtime run:\n" + runs["ours realtime"]["report"]["text"])
    payload = {
        "ours": {k.removeprefix("ours ").replace(" ", "_"): v for k, v in runs.items() if k.startswith("ours")},
        "cookbook": {"realtime": base},
        "settings": {"model": MODEL, "latency_s": args.latency, "per_output_token_s": args.per_token, "concurrency": THREADS},
    }
    Path(args.json).write_text(json.dumps(payload, indent=2) + "\n")
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
