"""The pruned text `ContextPruner`'s defaults give, per query, on the demo corpus and the cookbook set.

    python benchmarks/pruning_golden.py [--dataset DIR] [--limit 40] [--json PATH] [--embedding-cache PATH]

Writes, per query, the ids of the unpruned input (the default contextual-hybrid top 10, as in
`benchmarks/pruning.py`) and a sha256 of the pruned output ([[chunk id, text], ...]). Run in the
tree before a change to pruning and commit the JSON (tests/data/pruning_selection.json):
tests/integration/test_pruning_selection.py then checks that the current code prunes the same
inputs to the same text. Imports work in both the stage layout and the flat one before it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
from _paths import DEFAULT_DATASET  # noqa: E402

TOP_K = 10


def _imports():
    try:
        from contextual_retrieval_core.app import _demo as demo
    except ImportError:  # an earlier layout: app/demo.py (0.2), or the flat one (0.1)
        try:
            from contextual_retrieval_core.app import demo
        except ImportError:
            from contextual_retrieval_core import demo
    try:
        from contextual_retrieval_core.app import demo_corpus, evaluation
        from contextual_retrieval_core.search.hybrid import HybridSearcher
    except ImportError:  # the flat layout
        from contextual_retrieval_core import demo_corpus, evaluation
        from contextual_retrieval_core.hybrid import HybridSearcher
    return demo, demo_corpus, evaluation, HybridSearcher


def digest(result) -> str:
    """sha256 of the pruned output: [[chunk id, pruned text], ...] in output order."""
    pairs = [[c.id, c.text] for c in result.chunks]
    return hashlib.sha256(json.dumps(pairs, ensure_ascii=False).encode("utf-8")).hexdigest()


def demo_inputs(embedder):
    """(query, contextual chunks) for each demo query: the default hybrid top 10, structural contexts."""
    from contextual_retrieval_core.generators.structural import StructuralContextGenerator
    from contextual_retrieval_core.types import ContextualChunk

    demo, demo_corpus, _, HybridSearcher = _imports()
    documents, chunks = demo.demo_chunks()
    docs = {d.id: d for d in documents}
    generator = StructuralContextGenerator()
    contextual = [ContextualChunk(c, generator.generate(docs[c.document_id], c).context) for c in chunks]
    searcher = HybridSearcher(contextual, embedder)
    return contextual, [(q.query, [h.chunk for h in searcher.search(q.query, top_k=TOP_K)]) for q in demo_corpus.DEMO_QUERIES]


def cookbook_chunks(dataset_dir: str):
    """Every cookbook chunk with its context as indexed by default, by id."""
    from contextual_retrieval_core.types import ContextualChunk

    _, _, evaluation, _ = _imports()
    dataset = evaluation.load_cookbook(dataset_dir)
    contexts_path = str(Path(dataset_dir) / "contexts_claude-3-haiku.jsonl")
    contexts = evaluation.headed_contexts(dataset, evaluation.load_contexts_jsonl(contexts_path, dataset))
    return dataset, {c.id: ContextualChunk(c, contexts[c.id]) for c in dataset.chunks}


def main(argv: list[str] | None = None) -> int:
    from contextual_retrieval_core.embeddings.cache import CachedEmbedder
    from contextual_retrieval_core.embeddings.minilm import LocalMiniLMEmbedder
    from contextual_retrieval_core.pruning import ContextPruner

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default=DEFAULT_DATASET)
    parser.add_argument("--limit", type=int, default=40)
    parser.add_argument("--json", default=str(HERE.parent / "tests" / "data" / "pruning_selection.json"))
    parser.add_argument("--embedding-cache", default=str(HERE / "out" / "embeddings.sqlite3"))
    args = parser.parse_args(argv)
    embedder = CachedEmbedder(LocalMiniLMEmbedder(), args.embedding_cache)
    pruner = ContextPruner(embedder)
    _, demo = demo_inputs(embedder)
    rows = {"demo": [{"query": q, "chunks": [c.id for c in chunks], "pruned": digest(pruner.prune(q, chunks))} for q, chunks in demo]}
    _, _, _, HybridSearcher = _imports()
    dataset, by_id = cookbook_chunks(args.dataset)
    queries = dataset.queries[: args.limit]
    hits = HybridSearcher(list(by_id.values()), embedder).search_many([q.query for q in queries], top_k=TOP_K)
    rows["cookbook"] = [{"query": q.query, "chunks": [h.chunk.id for h in hs], "pruned": digest(pruner.prune(q.query, [h.chunk for h in hs]))}
                        for q, hs in zip(queries, hits)]
    Path(args.json).write_text(json.dumps(rows, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{len(rows['demo'])} demo and {len(rows['cookbook'])} cookbook queries -> {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
