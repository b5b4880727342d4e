"""Ours vs the stock hybrid retrievers of LangChain and LlamaIndex, on the cookbook codebase set.

Everyone indexes the same texts (context + "\\n\\n" + chunk, i.e. `ContextualChunk.indexed_text`)
and embeds with the same embedder (the offline all-MiniLM-L6-v2 through a `CachedEmbedder`, wrapped for each
framework by the adapters' `EmbedderEmbeddings` / `CoreEmbedding`), so
the rows differ only in BM25 (tokenizer, scoring) and fusion:

- ours: `evaluate(..., configs=["contextual-hybrid"])`, the library's defaults (plus the plain
  "hybrid" row, no contexts, for reference).
- LangChain stock: `EnsembleRetriever([InMemoryVectorStore.as_retriever(k=150),
  BM25Retriever(k=150)])`, default weights [0.5, 0.5] and c=60, scored on the first 20 fused docs.
- LlamaIndex stock: `QueryFusionRetriever([VectorStoreIndex.as_retriever(150),
  BM25Retriever.from_defaults(150)], mode="reciprocal_rerank", num_queries=1, similarity_top_k=20)`.

Run:  python benchmarks/peers.py [--dataset DIR] [--json benchmarks/peers.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from contextual_retrieval_core.app.evaluation import (  # noqa: E402
    DATASET_ENV,
    ConfigResult,
    EvalDataset,
    evaluate,
    format_table,
    headed_contexts,
    load_contexts_jsonl,
    load_cookbook,
    results_to_json,
    score_rankings,
)
from contextual_retrieval_core.embeddings.cache import CachedEmbedder  # noqa: E402
from contextual_retrieval_core.types import ContextualChunk  # noqa: E402

DEPTH = 150  # candidates per retriever, as the cookbook
TOP_K = 20  # scored: Pass@5/10/20
#: the stock LlamaIndex figures the issue reports for this embedder and these contexts
LLAMAINDEX_REFERENCE = {5: 80.84, 10: 87.90, 20: 91.70}


def default_dataset() -> Path:
    from _paths import DEFAULT_DATASET

    return Path(DEFAULT_DATASET)


# -- the peers ------------------------------------------------------------------------------


def run_langchain(chunks: Sequence[ContextualChunk], queries: Sequence[str], embedder: Any) -> tuple[list[list[str]], dict[str, list[list[str]]]]:
    """Fused top-20 rankings, and each side's own top-150 (for the components table)."""
    from langchain_classic.retrievers import EnsembleRetriever
    from langchain_community.retrievers import BM25Retriever
    from langchain_core.documents import Document
    from langchain_core.vectorstores import InMemoryVectorStore

    from contextual_retrieval_langchain import EmbedderEmbeddings

    docs = [Document(page_content=c.indexed_text, metadata={"chunk_id": c.id}, id=c.id) for c in chunks]
    store = InMemoryVectorStore(EmbedderEmbeddings(embedder=embedder))
    store.add_documents(docs, ids=[c.id for c in chunks])
    dense = store.as_retriever(search_kwargs={"k": DEPTH})
    bm25 = BM25Retriever.from_documents(docs, k=DEPTH)  # stock: text.split(), rank_bm25's BM25Okapi
    ensemble = EnsembleRetriever(retrievers=[dense, bm25])  # stock: weights [0.5, 0.5], c=60
    assert list(ensemble.weights) == [0.5, 0.5] and ensemble.c == 60, (ensemble.weights, ensemble.c)
    fused = [[d.metadata["chunk_id"] for d in ensemble.invoke(q)[:TOP_K]] for q in queries]
    sides = {"langchain BM25Retriever alone": [[d.metadata["chunk_id"] for d in bm25.invoke(q)] for q in queries]}
    return fused, sides


def run_llamaindex(chunks: Sequence[ContextualChunk], queries: Sequence[str], embedder: Any) -> tuple[list[list[str]], dict[str, list[list[str]]]]:
    """Fused top-20 rankings, and each side's own top-150 (for the components table)."""
    from llama_index.core import Settings, VectorStoreIndex
    from llama_index.core.llms import MockLLM
    from llama_index.core.retrievers import QueryFusionRetriever
    from llama_index.core.schema import TextNode
    from llama_index.retrievers.bm25 import BM25Retriever

    from contextual_retrieval_llamaindex import CoreEmbedding

    embed_model = CoreEmbedding(embedder)
    Settings.llm = MockLLM()  # never OpenAI: nothing here may call a hosted model
    Settings.embed_model = embed_model
    # chunk id in metadata (for mapping back) but out of the embedded/BM25 text
    nodes = [
        TextNode(
            id_=c.id,
            text=c.indexed_text,
            metadata={"chunk_id": c.id},
            excluded_embed_metadata_keys=["chunk_id"],
            excluded_llm_metadata_keys=["chunk_id"],
        )
        for c in chunks
    ]
    index = VectorStoreIndex(nodes, embed_model=embed_model)
    dense = index.as_retriever(similarity_top_k=DEPTH)
    bm25 = BM25Retriever.from_defaults(nodes=nodes, similarity_top_k=DEPTH)  # stock: English stemmer + stop words
    fusion = QueryFusionRetriever(
        [dense, bm25],
        llm=MockLLM(),
        mode="reciprocal_rerank",
        num_queries=1,
        similarity_top_k=TOP_K,
        use_async=False,
    )
    fused = [[n.node.metadata["chunk_id"] for n in fusion.retrieve(q)][:TOP_K] for q in queries]
    sides = {
        "llamaindex BM25Retriever alone": [[n.node.metadata["chunk_id"] for n in bm25.retrieve(q)] for q in queries],
        "llamaindex vector retriever alone": [[n.node.metadata["chunk_id"] for n in dense.retrieve(q)] for q in queries],
    }
    return fused, sides


# -- main -----------------------------------------------------------------------------------


def run(
    dataset: EvalDataset, contexts: dict[str, str], embedder: Any, plain: bool = True
) -> tuple[list[ConfigResult], list[ConfigResult], dict[str, float]]:
    """(fused results, single-retriever components, wall seconds per system)."""
    golden = [q.golden for q in dataset.queries]
    queries = [q.query for q in dataset.queries]
    chunks = [ContextualChunk(c, contexts[c.id]) for c in dataset.chunks]
    results: list[ConfigResult] = []
    components: list[ConfigResult] = []
    seconds: dict[str, float] = {}

    def timed(name: str, fn):
        start = time.perf_counter()
        out = fn()
        seconds[name] = round(time.perf_counter() - start, 2)
        return out

    configs = ["contextual-hybrid"] + (["hybrid"] if plain else [])
    for cfg in configs:
        (res,) = timed(f"ours {cfg}", lambda: evaluate(dataset, embedder, contexts, configs=[cfg], structural_header=False))
        res.name = f"ours {cfg} (defaults)" if cfg == "contextual-hybrid" else f"ours {cfg} (no contexts)"
        results.append(res)
    for cfg in ("contextual-dense", "contextual-bm25"):
        (res,) = evaluate(dataset, embedder, contexts, configs=[cfg], structural_header=False)
        res.name = f"ours {cfg} alone"
        components.append(res)
    for name, runner in (("langchain EnsembleRetriever (stock)", run_langchain), ("llamaindex QueryFusionRetriever (stock)", run_llamaindex)):
        ranked, sides = timed(name.split()[0], lambda: runner(chunks, queries, embedder))
        results.append(score_rankings(name, ranked, golden))
        components += [score_rankings(side, side_ranked, golden) for side, side_ranked in sides.items()]
    # keep the contextual rows together, the no-context reference last
    results.sort(key=lambda r: "no contexts" in r.name)
    return results, components, seconds


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, default=None, help=f"cookbook dataset dir (default: ${DATASET_ENV} or ../shared/data/cookbook-codebase)")
    parser.add_argument("--contexts", type=Path, default=None, help="contexts JSONL (default: DATASET/contexts_claude-3-haiku.jsonl)")
    parser.add_argument("--cache", type=Path, default=REPO / "benchmarks" / "out" / "embeddings.sqlite3", help="embedding cache (SQLite)")
    parser.add_argument("--no-plain", action="store_true", help="skip the no-context 'hybrid' reference row")
    parser.add_argument("--json", type=Path, default=None, help="write the results as JSON")
    args = parser.parse_args(argv)

    from contextual_retrieval_core.embeddings.minilm import LocalMiniLMEmbedder

    dataset_dir = args.dataset or default_dataset()
    dataset = load_cookbook(dataset_dir)
    contexts_path = args.contexts or dataset_dir / "contexts_claude-3-haiku.jsonl"
    # as the library indexes them by default: each chunk's structural header, then Claude's context;
    # every retriever gets the same text (evaluate is told they are headed already)
    contexts = headed_contexts(dataset, load_contexts_jsonl(contexts_path, dataset))
    embedder = CachedEmbedder(LocalMiniLMEmbedder(), args.cache)
    print(f"dataset: {dataset_dir} ({len(dataset.chunks)} chunks, {len(dataset.queries)} queries); contexts: {contexts_path.name}")
    print(f"embedder: {embedder.model_name} via CachedEmbedder({args.cache})")
    print(f"depth {DEPTH} per retriever, scored on the fused top {TOP_K}\n")

    results, components, seconds = run(dataset, contexts, embedder, plain=not args.no_plain)
    print(format_table(results))
    print(f"\nsingle retrievers (contexts; each side's own top {DEPTH}, same embedder):")
    print(format_table(components))
    print(f"\nembedding cache: {embedder.hits} hits, {embedder.misses} misses")
    print("wall time (s): " + ", ".join(f"{k} {v}" for k, v in seconds.items()))

    llama = next(r for r in results if r.name.startswith("llamaindex"))
    deltas = {k: round(llama.pass_at[k] - ref, 2) for k, ref in LLAMAINDEX_REFERENCE.items()}
    print(
        "llamaindex stock vs the issue's reference "
        + "/".join(f"{LLAMAINDEX_REFERENCE[k]:.2f}" for k in sorted(LLAMAINDEX_REFERENCE))
        + ": "
        + ", ".join(f"Pass@{k} {d:+.2f}" for k, d in sorted(deltas.items()))
    )
    if args.json:
        payload = results_to_json(
            results,
            dataset=dataset_dir.name,
            contexts=contexts_path.name,
            embedder=embedder.model_name,
            depth=DEPTH,
            top_k=TOP_K,
            queries=len(dataset.queries),
            llamaindex_reference_pass_at={str(k): v for k, v in LLAMAINDEX_REFERENCE.items()},
            llamaindex_delta_pass_at={str(k): v for k, v in deltas.items()},
            components=[r.to_json() for r in components],
            wall_seconds=seconds,
        )
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {args.json}")
    embedder.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
