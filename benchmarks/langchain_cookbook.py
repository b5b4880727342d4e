"""The LangChain path on the cookbook codebase set, beside the core and LangChain's stock ensemble.

Rows (same contexts, same texts, same embedder: the offline all-MiniLM-L6-v2 through the
`CachedEmbedder` the quality benchmark fills, so nothing is re-embedded):

- "langchain ContextualEnsembleRetriever": the cookbook chunks go through
  `ContextualDocumentTransformer` (already-split chunks + their whole documents; the contexts are
  the Claude 3 Haiku ones from the dataset, served by a `CallableContextGenerator`), then
  `ContextualEnsembleRetriever.from_documents` (embedded Chroma + `ContextualBM25Retriever`,
  library defaults: weights 0.5/0.5, RRF k=0, 150 candidates per side, top 20), sync `invoke`;
  the async `ainvoke` run is checked to return the same rankings.
- "core contextual-hybrid": the core `HybridSearcher` with its defaults (what `evaluate(...,
  configs=["contextual-hybrid"])` runs), scored on its top 20.
- "langchain EnsembleRetriever (stock)": `benchmarks/peers.py`'s setup (InMemoryVectorStore +
  BM25Retriever, weights 0.5/0.5, c=60, first 20 fused docs).

Run:  python benchmarks/langchain_cookbook.py [--dataset DIR] [--json benchmarks/langchain_cookbook.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
for p in (str(REPO), str(HERE)):
    if p not in sys.path:
        sys.path.insert(0, p)

from _paths import DEFAULT_DATASET  # noqa: E402

from contextual_retrieval_core.app.evaluation import (  # noqa: E402
    format_table,
    headed_contexts,
    load_contexts_jsonl,
    load_cookbook,
    results_to_json,
    score_rankings,
)
from contextual_retrieval_core.embeddings.cache import CachedEmbedder  # noqa: E402
from contextual_retrieval_core.generators import CallableContextGenerator, Generation  # noqa: E402
from contextual_retrieval_core.types import ContextualChunk  # noqa: E402

TOLERANCE = 0.5  # Pass@k points the LangChain path may differ from the core's contextual-hybrid


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, default=Path(DEFAULT_DATASET))
    parser.add_argument("--contexts", type=Path, default=None, help="default: DATASET/contexts_claude-3-haiku.jsonl")
    parser.add_argument("--cache", type=Path, default=HERE / "out" / "embeddings.sqlite3", help="embedding cache (SQLite)")
    parser.add_argument("--json", type=Path, default=HERE / "langchain_cookbook.json")
    args = parser.parse_args(argv)

    from langchain_core.documents import Document as LCDocument
    from peers import run_langchain

    from contextual_retrieval_core.embeddings.minilm import LocalMiniLMEmbedder
    from contextual_retrieval_langchain import ContextualDocumentTransformer, ContextualEnsembleRetriever, EmbedderEmbeddings

    dataset = load_cookbook(args.dataset)
    contexts_path = args.contexts or args.dataset / "contexts_claude-3-haiku.jsonl"
    contexts = load_contexts_jsonl(contexts_path, dataset)
    embedder = CachedEmbedder(LocalMiniLMEmbedder(), args.cache)
    queries = [q.query for q in dataset.queries]
    golden = [q.golden for q in dataset.queries]
    print(f"dataset: {args.dataset} ({len(dataset.chunks)} chunks, {len(queries)} queries); contexts: {contexts_path.name}")
    seconds: dict[str, float] = {}

    # -- the LangChain path -------------------------------------------------------------------------
    start = time.perf_counter()
    chunks = [LCDocument(c.text, id=c.id, metadata={"doc_id": c.document_id, "chunk_index": c.index}) for c in dataset.chunks]
    parents = {d.id: d.text for d in dataset.documents}
    # the dataset's contexts, returned verbatim (a str would be stripped; the core uses them as they are)
    generator = CallableContextGenerator(lambda doc, chunk: Generation(contexts[chunk.id]), name="cookbook-contexts-file", is_llm=False)
    transformer = ContextualDocumentTransformer(generator=generator, parent_id_key="doc_id", show_progress=False)
    docs = transformer.transform_documents(chunks, parents=parents)
    headed = headed_contexts(dataset, contexts)  # what the transformer indexes by default
    core_texts = {c.id: ContextualChunk(c, headed[c.id]).indexed_text for c in dataset.chunks}
    assert all(d.page_content == core_texts[d.id] for d in docs), "page_content must be the core's indexed_text"
    retriever = ContextualEnsembleRetriever.from_documents(docs, EmbedderEmbeddings(embedder=embedder))
    seconds["langchain ingest (transform + Chroma + BM25)"] = round(time.perf_counter() - start, 2)

    start = time.perf_counter()
    ours = [[d.id for d in retriever.invoke(q)] for q in queries]
    seconds["langchain queries (sync)"] = round(time.perf_counter() - start, 2)

    async def run_async() -> list[list[str]]:
        out = []
        for q in queries:
            out.append([d.id for d in await retriever.ainvoke(q)])
        return out

    start = time.perf_counter()
    ours_async = asyncio.run(run_async())
    seconds["langchain queries (async)"] = round(time.perf_counter() - start, 2)

    # the same retriever with long chunks truncated (windows=False), the default before issue 41: the
    # queries' cost of embedding every word, in the same run
    plain = ContextualEnsembleRetriever.from_documents(docs, EmbedderEmbeddings(embedder=embedder), windows=False)
    start = time.perf_counter()
    for q in queries:
        plain.invoke(q)
    seconds["langchain queries (sync), windows=False"] = round(time.perf_counter() - start, 2)

    # -- references ---------------------------------------------------------------------------------
    from contextual_retrieval_core.search.hybrid import HybridSearcher

    start = time.perf_counter()
    searcher = HybridSearcher([ContextualChunk(c, headed[c.id]) for c in dataset.chunks], embedder)
    core_ranked = [[h.id for h in hits] for hits in searcher.search_many(queries, top_k=20)]
    core = score_rankings("core contextual-hybrid", core_ranked, golden)
    seconds["core contextual-hybrid"] = round(time.perf_counter() - start, 2)

    start = time.perf_counter()
    stock_ranked, _ = run_langchain([ContextualChunk(c, headed[c.id]) for c in dataset.chunks], queries, embedder)
    seconds["langchain EnsembleRetriever (stock)"] = round(time.perf_counter() - start, 2)

    results = [
        score_rankings("langchain ContextualEnsembleRetriever", ours, golden),
        core,
        score_rankings("langchain EnsembleRetriever (stock)", stock_ranked, golden),
    ]
    same_top20 = sum(a == b for a, b in zip(ours, core_ranked))
    delta = {k: round(results[0].pass_at[k] - core.pass_at[k], 2) for k in sorted(core.pass_at)}
    print(format_table(results))
    print("\nLangChain path vs core contextual-hybrid: " + ", ".join(f"Pass@{k} {d:+.2f}" for k, d in delta.items()))
    print(f"identical top-20 id lists (LangChain vs core HybridSearcher): {same_top20}/{len(queries)}")
    print(f"async rankings equal sync: {ours_async == ours}")
    print(f"embedding cache: {embedder.hits} hits, {embedder.misses} misses")
    print("wall time (s): " + ", ".join(f"{k} {v}" for k, v in seconds.items()))
    within = all(abs(d) <= TOLERANCE for d in delta.values())
    payload = results_to_json(
        results,
        dataset=args.dataset.name,
        contexts=contexts_path.name,
        embedder=embedder.model_name,
        vector_store="chromadb (embedded, cosine)",
        defaults={"weights": [0.5, 0.5], "rrf_k": 0, "candidates": 150, "k": 20},
        queries=len(queries),
        delta_vs_core_pass_at={str(k): v for k, v in delta.items()},
        within_tolerance=within,
        tolerance_points=TOLERANCE,
        identical_top20_vs_core=same_top20,
        async_equals_sync=ours_async == ours,
        wall_seconds=seconds,
    )
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.json}")
    embedder.close()
    return 0 if within else 1


if __name__ == "__main__":
    raise SystemExit(main())
