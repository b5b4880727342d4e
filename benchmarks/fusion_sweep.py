"""Sensitivity of contextual-hybrid to the fusion settings, on the cookbook codebase set.

    python benchmarks/fusion_sweep.py [--dataset DIR] [--contexts FILE] [--json PATH]

Not used to pick the defaults (those are set on principle: see hybrid.DEFAULT_WEIGHTS); this shows
how far any fixed setting moves Pass@k with the offline embedder, i.e. what limits the figure.
Writes benchmarks/fusion_sweep.json.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
from _paths import DEFAULT_DATASET  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    from contextual_retrieval_core import DEFAULT_RRF_K, DEFAULT_WEIGHTS, BM25Index, ContextualChunk, FusionConfig, HybridSearcher
    from contextual_retrieval_core.app.evaluation import headed_contexts, load_contexts_jsonl, load_cookbook, score_rankings
    from contextual_retrieval_core.embeddings import LocalMiniLMEmbedder
    from contextual_retrieval_core.embeddings.cache import CachedEmbedder

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default=DEFAULT_DATASET)
    parser.add_argument("--contexts", default=None, help="default: DATASET/contexts_claude-3-haiku.jsonl")
    parser.add_argument("--embedding-cache", default=str(HERE / "out" / "embeddings.sqlite3"))
    parser.add_argument("--json", default=str(HERE / "fusion_sweep.json"))
    args = parser.parse_args(argv)

    ds = load_cookbook(args.dataset)
    # as indexed by default: the structural header, then Claude's context
    contexts = headed_contexts(ds, load_contexts_jsonl(args.contexts or Path(args.dataset) / "contexts_claude-3-haiku.jsonl", ds))
    chunks = [ContextualChunk(c, contexts[c.id]) for c in ds.chunks]
    embedder = CachedEmbedder(LocalMiniLMEmbedder(), args.embedding_cache)
    queries = [q.query for q in ds.queries]
    golden = [q.golden for q in ds.queries]
    ids, texts = [c.id for c in chunks], [c.indexed_text for c in chunks]

    rows = []
    for k1 in (1.2, 1.5):
        bm25 = BM25Index(k1=k1).index(ids, texts)  # one index per k1, over the same chunk ids
        for mode in ("rrf", "relative_score"):
            for weights in ((0.8, 0.2), (0.5, 0.5), (0.3, 0.7)):
                for rrf_k in ((0.0, 60.0) if mode == "rrf" else (0.0,)):
                    # the embedder is cached: only the first searcher embeds the chunks
                    searcher = HybridSearcher(chunks, embedder, bm25=bm25, config=FusionConfig(weights=weights, mode=mode, rrf_k=rrf_k))
                    ranked = [[h.id for h in hits] for hits in searcher.search_many(queries, top_k=20)]
                    r = score_rankings("contextual-hybrid", ranked, golden)
                    default = (k1, mode, weights, rrf_k) == (1.2, "rrf", DEFAULT_WEIGHTS, DEFAULT_RRF_K)
                    rows.append({"bm25_k1": k1, "mode": mode, "weights": list(weights), "rrf_k": rrf_k if mode == "rrf" else None,
                                 "default": default, "pass_at": {str(k): round(v, 2) for k, v in r.pass_at.items()}})
    print(f"{'k1':>4} {'mode':<15} {'weights':<11} {'rrf k':>5}  Pass@5  Pass@10  Pass@20")
    for row in rows:
        p = row["pass_at"]
        mark = "  <- library default" if row["default"] else ""
        print(f"{row['bm25_k1']:>4} {row['mode']:<15} {str(tuple(row['weights'])):<11} {str(row['rrf_k'] if row['rrf_k'] is not None else '-'):>5}"
              f"  {p['5']:>6.2f}  {p['10']:>7.2f}  {p['20']:>7.2f}{mark}")
    best = {k: max(r["pass_at"][k] for r in rows) for k in ("5", "10", "20")}
    print(f"best of the grid, per k (each from its own setting): {best}")
    Path(args.json).write_text(json.dumps({"rows": rows, "best_per_k": best}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
