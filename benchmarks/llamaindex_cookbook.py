"""The LlamaIndex path on the cookbook codebase set, against the core's contextual-hybrid and
LlamaIndex's stock `QueryFusionRetriever` on the same nodes and index.

The LlamaIndex path, as a user would build it:

- the cookbook's Claude 3 Haiku contexts imported from the JSONL into a `ContextStore` under the
  keys of a generator that never runs (so every context is a store hit, none is generated);
- `IngestionPipeline([ContextualNodeParser(generator, splitter, store), embed_model],
  vector_store=embedded Chroma)`, where the splitter hands over the cookbook's own chunks;
- `HybridRetriever.from_defaults(VectorStoreIndex.from_vector_store(chroma), nodes=nodes)`:
  Chroma's vector top-150 + `ContextualBM25Retriever` top-150, weighted RRF, top 20.

The embedder is the offline all-MiniLM-L6-v2 behind the core `CachedEmbedder` (SQLite cache under
benchmarks/out/). The stock row: `QueryFusionRetriever([index.as_retriever(150),
llama_index BM25Retriever(150)], mode="reciprocal_rerank", num_queries=1, similarity_top_k=20)`
over the same nodes and the same Chroma index.

It also measures why the core's Chroma setup (`contextual_retrieval_core.dense.chroma.CHROMA_HNSW`) widens the
HNSW search beam: for every query, Chroma's top-150 candidate set against exact search (the core
`VectorIndex`) over the same vectors, at Chroma's default HNSW settings and at ours.

Run:  python benchmarks/llamaindex_cookbook.py [--dataset DIR] [--json benchmarks/llamaindex_cookbook.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from contextual_retrieval_core.app.evaluation import (  # noqa: E402
    ConfigResult,
    EvalDataset,
    format_table,
    headed_contexts,
    load_contexts_jsonl,
    load_cookbook,
    score_rankings,
)
from contextual_retrieval_core.generators import CallableContextGenerator, GenerationError  # noqa: E402
from contextual_retrieval_core.search.hybrid import HybridSearcher  # noqa: E402
from contextual_retrieval_core.store.context_store import ContextStore  # noqa: E402
from contextual_retrieval_core.types import ContextualChunk  # noqa: E402

DEPTH, TOP_K = 150, 20


def _never(document: Any, chunk: Any) -> str:
    raise GenerationError(f"no imported context for {chunk.id}: the benchmark generates nothing")


#: stands for the model that wrote the imported contexts; it never runs
IMPORTED = CallableContextGenerator(_never, name="cookbook-jsonl", model="claude-3-haiku-20240307")


def import_contexts(dataset: EvalDataset, contexts_jsonl: Path, store: ContextStore) -> int:
    """The JSONL's contexts into `store`, keyed as `ContextualNodeParser(IMPORTED)` looks them up."""
    docs = {d.id: d for d in dataset.documents}
    chunks = {(c.document_id, c.index): c for c in dataset.chunks}

    def resolve(item: dict) -> str | None:
        chunk = chunks.get((str(item["doc_id"]), int(item["original_index"])))
        if chunk is None:
            return None
        return ContextStore.key(IMPORTED.name, IMPORTED.model, IMPORTED.prompt_identity, docs[chunk.document_id].text, chunk.text)

    return store.import_jsonl(contexts_jsonl, resolve).imported


def cookbook_splitter(dataset: EvalDataset) -> Any:
    """A LlamaIndex NodeParser that returns the cookbook's own chunks of each document."""
    from llama_index.core.node_parser import NodeParser
    from llama_index.core.schema import BaseNode, NodeRelationship, TextNode

    by_doc: dict[str, list] = {}
    for c in dataset.chunks:
        by_doc.setdefault(c.document_id, []).append(c)

    class CookbookChunks(NodeParser):
        def _parse_nodes(self, nodes: Sequence[BaseNode], show_progress: bool = False, **kwargs: Any) -> list[BaseNode]:
            out: list[BaseNode] = []
            for doc in nodes:
                for c in by_doc.get(doc.node_id, []):
                    # the chunk id maps results back; kept out of the embedded / BM25 text (LlamaIndex's rules)
                    node = TextNode(
                        text=c.text,
                        metadata={"chunk_id": c.id},
                        excluded_embed_metadata_keys=["chunk_id"],
                        excluded_llm_metadata_keys=["chunk_id"],
                    )
                    node.relationships[NodeRelationship.SOURCE] = doc.as_related_node_info()
                    out.append(node)
            return out

    return CookbookChunks(include_metadata=False)


def build(dataset: EvalDataset, contexts_jsonl: Path, embedder: Any, workdir: Path, stock: bool = False) -> tuple[Any, list, Any]:
    """(HybridRetriever, nodes, VectorStoreIndex) built through the LlamaIndex parts; with `stock`,
    (None, nodes, index): the index as the pipeline wrote it, before `HybridRetriever` adds the
    windows of long nodes."""
    from llama_index.core import Document, VectorStoreIndex
    from llama_index.core.ingestion import IngestionPipeline

    from contextual_retrieval_llamaindex import ContextualNodeParser, CoreEmbedding, HybridRetriever, chroma_vector_store

    store = ContextStore(workdir / "contexts.sqlite3")
    import_contexts(dataset, contexts_jsonl, store)
    parser = ContextualNodeParser(IMPORTED, cookbook_splitter(dataset), store, show_progress=False)
    embed_model = CoreEmbedding(embedder)
    vector_store = chroma_vector_store(workdir / "chroma", "cookbook")
    pipeline = IngestionPipeline(transformations=[parser, embed_model], vector_store=vector_store)
    nodes = pipeline.run(documents=[Document(text=d.text, id_=d.id) for d in dataset.documents])
    report = parser.last_report
    assert report is not None and report.generated == 0 and report.store_hits == len(dataset.chunks), report
    index = VectorStoreIndex.from_vector_store(vector_store, embed_model=embed_model)
    if stock:
        return None, nodes, index
    return HybridRetriever.from_defaults(index, nodes=nodes, depth=DEPTH, similarity_top_k=TOP_K), nodes, index


def stock_fusion(index: Any, nodes: list) -> Any:
    from llama_index.core.llms import MockLLM
    from llama_index.core.retrievers import QueryFusionRetriever
    from llama_index.retrievers.bm25 import BM25Retriever

    bm25 = BM25Retriever.from_defaults(nodes=nodes, similarity_top_k=DEPTH)
    return QueryFusionRetriever(
        [index.as_retriever(similarity_top_k=DEPTH), bm25],
        llm=MockLLM(),
        mode="reciprocal_rerank",
        num_queries=1,
        similarity_top_k=TOP_K,
        use_async=False,
    )


def rankings(retriever: Any, queries: Sequence[str]) -> list[list[str]]:
    return [[r.node.metadata["chunk_id"] for r in retriever.retrieve(q)][:TOP_K] for q in queries]


#: Chroma's own HNSW defaults (chromadb 1.x), what a collection gets when none are passed
CHROMA_DEFAULT_HNSW = {"ef_construction": 100, "ef_search": 100}


def candidate_agreement(
    chunks: Sequence[ContextualChunk], queries: Sequence[str], embedder: Any, builds: int = 3
) -> dict[str, Any]:
    """For each HNSW setting, how many queries' Chroma top-`DEPTH` candidate sets differ from exact
    search (the core `VectorIndex`) over the same vectors, and the mean overlap. Chroma's HNSW build
    is not deterministic, so each setting is built `builds` times; every build is reported."""
    import numpy as np

    from contextual_retrieval_core.dense.chroma import ChromaVectorIndex, chroma_client, chroma_collection
    from contextual_retrieval_core.dense.vectors import VectorIndex

    ids = [c.id for c in chunks]
    vectors = np.asarray(embedder.embed_documents([c.indexed_text for c in chunks]), dtype=np.float32)
    qvecs = np.asarray(embedder.embed_queries(list(queries)), dtype=np.float32)
    exact = [{i for i, _ in hits} for hits in VectorIndex(ids, vectors).search_many(qvecs, DEPTH)]
    out: dict[str, Any] = {"depth": DEPTH, "queries": len(queries), "builds": builds}
    client = chroma_client()  # in memory
    settings_tried = (("chroma_default", CHROMA_DEFAULT_HNSW), ("ours_with_default_ef_search", {"ef_search": 100}), ("ours", {}))
    for label, hnsw in settings_tried:
        differ, overlap, settings = [], [], {}
        for _ in range(builds):
            collection = chroma_collection(client, hnsw=hnsw)
            got = [{i for i, _ in hits} for hits in ChromaVectorIndex(ids, vectors, collection=collection).search_many(qvecs, DEPTH)]
            settings = {k: v for k, v in collection.configuration["hnsw"].items() if k in ("space", "ef_construction", "ef_search")}
            differ.append(sum(a != b for a, b in zip(got, exact)))
            overlap.append(round(sum(len(a & b) for a, b in zip(got, exact)) / (DEPTH * len(exact)), 4))
            client.delete_collection(collection.name)
        out[label] = {
            "hnsw": settings,
            "queries_with_different_candidates": differ,
            "min": min(differ),
            "max": max(differ),
            "mean_overlap": overlap,
        }
    return out


def run(
    dataset: EvalDataset, contexts_jsonl: Path, embedder: Any, workdir: Path, contexts: dict[str, str] | None = None
) -> tuple[list[ConfigResult], dict[str, float], int]:
    """[core contextual-hybrid, LlamaIndex path, stock QueryFusionRetriever], seconds per row, and
    how many queries' top-20 id lists the LlamaIndex path and the core's HybridSearcher share.
    `contexts`: the JSONL already loaded (chunk id -> context), else it is loaded here."""
    if contexts is None:
        contexts = load_contexts_jsonl(contexts_jsonl, dataset)
    golden = [q.golden for q in dataset.queries]
    queries = [q.query for q in dataset.queries]
    seconds: dict[str, float] = {}
    start = time.perf_counter()
    headed = headed_contexts(dataset, contexts)  # what ContextualNodeParser indexes by default
    searcher = HybridSearcher([ContextualChunk(c, headed[c.id]) for c in dataset.chunks], embedder)
    core_ranked = [[h.id for h in hits] for hits in searcher.search_many(queries, TOP_K)]
    core = score_rankings("core contextual-hybrid (defaults)", core_ranked, golden)
    seconds["core"] = time.perf_counter() - start
    from contextual_retrieval_llamaindex import HybridRetriever

    start = time.perf_counter()
    _, nodes, index = build(dataset, contexts_jsonl, embedder, workdir, stock=True)
    seconds["llamaindex path"] = time.perf_counter() - start
    # the stock retriever first, over the index as the pipeline wrote it (before our windows go in)
    start = time.perf_counter()
    stock = score_rankings("LlamaIndex stock QueryFusionRetriever (same nodes, same Chroma index)", rankings(stock_fusion(index, nodes), queries), golden)
    seconds["stock"] = time.perf_counter() - start
    start = time.perf_counter()
    hybrid = HybridRetriever.from_defaults(index, nodes=nodes, depth=DEPTH, similarity_top_k=TOP_K)
    ranked = rankings(hybrid, queries)
    ours = score_rankings("LlamaIndex path: ContextualNodeParser + Chroma + HybridRetriever", ranked, golden)
    seconds["llamaindex path"] += time.perf_counter() - start
    identical = sum(a == b for a, b in zip(ranked, core_ranked))
    return [core, ours, stock], seconds, identical


def main(argv: Sequence[str] | None = None) -> int:
    from _paths import DEFAULT_DATASET

    from contextual_retrieval_core.embeddings.cache import CachedEmbedder
    from contextual_retrieval_core.embeddings.minilm import LocalMiniLMEmbedder

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, default=Path(DEFAULT_DATASET))
    parser.add_argument("--contexts", type=Path, default=None, help="default: DATASET/contexts_claude-3-haiku.jsonl")
    parser.add_argument("--json", type=Path, default=REPO / "benchmarks" / "llamaindex_cookbook.json")
    parser.add_argument("--embedding-cache", type=Path, default=REPO / "benchmarks" / "out" / "embeddings.sqlite3")
    args = parser.parse_args(argv)
    dataset = load_cookbook(args.dataset)
    contexts = args.contexts or args.dataset / "contexts_claude-3-haiku.jsonl"
    args.embedding_cache.parent.mkdir(parents=True, exist_ok=True)
    embedder = CachedEmbedder(LocalMiniLMEmbedder(), args.embedding_cache)
    loaded = load_contexts_jsonl(contexts, dataset)
    with tempfile.TemporaryDirectory() as tmp:
        results, seconds, identical = run(dataset, contexts, embedder, Path(tmp), contexts=loaded)
    start = time.perf_counter()
    headed = headed_contexts(dataset, loaded)
    candidates = candidate_agreement([ContextualChunk(c, headed[c.id]) for c in dataset.chunks],
                                     [q.query for q in dataset.queries], embedder)
    seconds["chroma vs exact candidates"] = time.perf_counter() - start
    print(format_table(results))
    core, ours = results[0].pass_at, results[1].pass_at
    gaps = {k: round(ours[k] - core[k], 2) for k in (5, 10, 20)}
    print("LlamaIndex path minus core, Pass@5/10/20:", gaps)
    print(f"identical top-20 id lists (LlamaIndex path vs core HybridSearcher): {identical}/{len(dataset.queries)}")
    for label in ("chroma_default", "ours_with_default_ef_search", "ours"):
        c = candidates[label]
        print(f"Chroma top-{DEPTH} candidates vs exact search, {label} HNSW {c['hnsw']}: "
              f"{c['min']}-{c['max']} of {candidates['queries']} queries differ over {candidates['builds']} builds "
              f"{c['queries_with_different_candidates']} (mean overlap {min(c['mean_overlap']):.4f}-{max(c['mean_overlap']):.4f})")
    out = {
        "dataset": str(args.dataset.name),
        "queries": len(dataset.queries),
        "chunks": len(dataset.chunks),
        "embedder": embedder.model_name,
        "results": [r.to_json() for r in results],
        "llamaindex_minus_core": {str(k): v for k, v in gaps.items()},
        "identical_top20_lists": identical,
        "chroma_candidates_vs_exact": candidates,
        "seconds": {k: round(v, 1) for k, v in seconds.items()},
    }
    args.json.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    raise SystemExit(main())
