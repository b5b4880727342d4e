"""Dense-side options on the cookbook set (issue 14): windowed contextual embeddings and friends.

    python benchmarks/dense_options.py [--dataset DIR] [--json PATH] [--cache FILE]

Offline MiniLM embedder (256-token window), library fusion defaults, Pass@5/10/20. Rows:

- `table`: the nine configurations of `contextual-retrieval eval` without dense PRF
  (`dense_prf=0`: each option below is measured against it), with one vector per chunk
  (`windows=None`, the library's default) and windowed (`WindowConfig()`: max-sim over overlapping
  windows of 256 tokens, a quarter of overlap, each window with the chunk's context); and
  mean-pooled windows (`WindowConfig(pooling="mean")`).
- `options`: `prf` (the hybrid, structural-hybrid and contextual-hybrid rows, over both indexes):
  the library's dense pseudo-relevance feedback, `HybridSearcher(dense_prf=0.5, prf_top=3)` (the
  library's default since it passed the adoption rule): the query vector moved toward the
  best-matching rows of the fused top 3 (Rocchio, alpha 1, beta 0.5, the outside probe's
  setting), dense searched again and fused with BM25; `dense prf` (the three dense-only rows,
  one-vector): the same feedback from the dense top 3 alone, which the library never runs (it
  lowers the no-context dense row); `context_vector`
  (contextual-hybrid, over the windowed index): a vector of the context alone as a third fusion
  source (equal weights).
- `latency`: p50 / p90 of one `HybridSearcher.search` (contextual-hybrid, top 20), interleaved in
  the same run: the one-vector index without PRF, the windowed index without PRF, and the
  one-vector index with PRF (the default); `index_rows` and `index_bytes` of each; and the whole
  query's p50 (`whole_query_p50_ms`: the query embedded by MiniLM without a cache, then searched).

Writes benchmarks/dense_options.json (or --json).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
import numpy as np  # noqa: E402
from _paths import DEFAULT_DATASET  # noqa: E402

from contextual_retrieval_core.app.evaluation import (  # noqa: E402
    CONFIGS,
    headed_contexts,
    load_contexts_jsonl,
    load_cookbook,
    score_rankings,
    structural_contexts,
)
from contextual_retrieval_core.dense.vectors import VectorIndex  # noqa: E402
from contextual_retrieval_core.dense.windows import WindowConfig, collapse_hits  # noqa: E402
from contextual_retrieval_core.embeddings.cache import CachedEmbedder  # noqa: E402
from contextual_retrieval_core.embeddings.minilm import LocalMiniLMEmbedder  # noqa: E402
from contextual_retrieval_core.search.config import FusionConfig  # noqa: E402
from contextual_retrieval_core.search.feedback import feedback_rows  # noqa: E402
from contextual_retrieval_core.search.hybrid import HybridSearcher  # noqa: E402
from contextual_retrieval_core.types import ContextualChunk  # noqa: E402

KS = (5, 10, 20)
DEPTH = 20
PRF_BETA, PRF_TOP = 0.5, 3  # the outside probe's setting, named in issue 14; not fitted here


def scores(name: str, ranked: list[list[str]], golden: list[list[str]]) -> dict:
    r = score_rankings(name, ranked, golden, KS)
    return {"name": name, "pass_at": {str(k): round(v, 2) for k, v in r.pass_at.items()}, "mrr": round(r.mrr, 2)}


def context_vector_run(searcher: HybridSearcher, embedder, chunks, queries) -> list[list[str]]:
    """Dense (windowed), BM25 and a context-only vector, fused with equal weights."""
    ctx_ids = [c.id for c in chunks if c.context]
    ctx_index = VectorIndex(ctx_ids, embedder.embed_documents([c.context for c in chunks if c.context]))
    qv = embedder.embed_queries(queries)
    rows = searcher.vectors.search_many(qv, searcher.depth + searcher._extra_rows)
    ctx_hits = ctx_index.search_many(qv, searcher.depth)
    config = searcher.config.replace(weights=None)
    out = []
    for q, row_hits, c_hits in zip(queries, rows, ctx_hits):
        sources = [("dense", collapse_hits(row_hits, searcher._owners, searcher.depth)),
                   ("bm25", searcher.bm25.search(q, searcher.depth)), ("context", c_hits)]
        out.append([h.id for h in config.fuse(sources)[:DEPTH]])
    return out


def latency(searchers: dict[str, HybridSearcher], queries: list[str], embedder, rounds: int = 2) -> dict:
    """p50 / p90 of each searcher's `search` (its query vector from the cache: the search alone),
    interleaved; then, in a loop of its own (the embedder's threads would disturb the searches'
    timing), each query embedded by `embedder` without a cache: the whole query is the two summed."""
    times: dict[str, list[float]] = {name: [] for name in searchers}
    for _ in range(rounds):
        for q in queries:
            for name, s in searchers.items():  # interleaved: same load on both
                t = time.perf_counter()
                s.search(q, top_k=DEPTH)
                times[name].append(time.perf_counter() - t)
    embedding: list[float] = []
    for _ in range(rounds):
        for q in queries:
            t = time.perf_counter()
            embedder.embed_queries([q])
            embedding.append(time.perf_counter() - t)
    whole = {name: [e + t for e, t in zip(embedding, ts)] for name, ts in times.items()}
    out = {}
    for name, ts in times.items():
        ts.sort()
        v = searchers[name].vectors
        out[name] = {"p50_ms": round(1000 * statistics.median(ts), 3), "p90_ms": round(1000 * ts[int(0.9 * len(ts))], 3),
                     "index_rows": len(v.ids), "index_bytes": int(v.vectors.nbytes)}
    base, win, prf = out["one-vector"]["p50_ms"], out["windowed"]["p50_ms"], out["one-vector + prf"]["p50_ms"]
    out["p50_ratio_windowed_to_one_vector"] = round(win / base, 3)
    out["p50_ratio_prf_to_one_vector"] = round(prf / base, 3)
    p50 = {name: 1000 * statistics.median(ts) for name, ts in whole.items()}
    out["whole_query_p50_ms"] = {name: round(v, 3) for name, v in p50.items()}
    out["whole_query_p50_ratio_prf_to_one_vector"] = round(p50["one-vector + prf"] / p50["one-vector"], 3)
    return out


def dense_only_prf_run(searcher: HybridSearcher, queries: list[str]) -> list[list[str]]:
    """Rocchio feedback from the dense top 3 alone (no BM25 to fuse with): what the library does
    not run, measured for the adoption rule."""
    qv = np.asarray(searcher.embedder.embed_queries(queries))
    rows = feedback_rows(searcher.vectors.ids, searcher.vectors.vectors, searcher._owners)
    first = searcher._dense_rows(qv)
    moved = rows.moved(qv, [[c for c, _ in hits[:PRF_TOP]] for hits in first], PRF_BETA)
    return [[c for c, _ in hits[:DEPTH]] for hits in searcher._dense_rows(moved)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dataset", default=DEFAULT_DATASET)
    ap.add_argument("--json", default=str(HERE / "dense_options.json"))
    ap.add_argument("--cache", default=None, help="an embedding cache file (SQLite) to reuse between runs")
    args = ap.parse_args(argv)
    started = time.perf_counter()
    dataset = load_cookbook(args.dataset)
    llm = load_contexts_jsonl(Path(args.dataset) / "contexts_claude-3-haiku.jsonl", dataset)
    structural = structural_contexts(dataset)
    # the LLM contexts as indexed by default: the structural header, then Claude's context
    sources = {None: None, "llm": headed_contexts(dataset, llm, structural), "structural": structural}
    minilm = LocalMiniLMEmbedder()
    embedder = CachedEmbedder(minilm, args.cache or ":memory:")
    queries = [q.query for q in dataset.queries]
    golden = [q.golden for q in dataset.queries]
    variants = {"one-vector": None, "windowed": WindowConfig(), "windowed-mean": WindowConfig(pooling="mean")}
    table: dict[str, list[dict]] = {v: [] for v in variants}
    options: list[dict] = []
    keep: dict[str, HybridSearcher] = {}
    for name, (source, use_dense, use_bm25) in CONFIGS.items():
        found = sources[source]
        chunks = [ContextualChunk(c, found[c.id] if found is not None else "") for c in dataset.chunks]
        for vname, windows in variants.items():
            if not use_dense and vname != "one-vector":
                table[vname].append(dict(table["one-vector"][-1]))  # BM25 alone: no dense side
                continue
            s = HybridSearcher(chunks, embedder if use_dense else None, use_bm25=use_bm25, windows=windows, config=FusionConfig(dense_prf=0))
            ranked = [[h.id for h in hits] for hits in s.search_many(queries, top_k=DEPTH)]
            table[vname].append(scores(name, ranked, golden))
            print(vname, table[vname][-1], flush=True)
            if name in ("hybrid", "structural-hybrid", "contextual-hybrid") and vname in ("one-vector", "windowed"):
                keep[f"{name}/{vname}"] = s
            if use_dense and not use_bm25 and vname == "one-vector":
                options.append(scores(f"{name} + dense prf", dense_only_prf_run(s, queries), golden) | {"over": vname})
                print(options[-1], flush=True)
        if name in ("hybrid", "structural-hybrid", "contextual-hybrid"):
            for over in ("one-vector", "windowed"):  # the library's dense PRF: HybridSearcher(dense_prf=0.5)
                s = HybridSearcher(chunks, embedder, windows=variants[over], config=FusionConfig(dense_prf=PRF_BETA, prf_top=PRF_TOP))
                ranked = [[h.id for h in hits] for hits in s.search_many(queries, top_k=DEPTH)]
                options.append(scores(f"{name} + prf", ranked, golden) | {"over": over})
                print(options[-1], flush=True)
                if name == "contextual-hybrid" and over == "one-vector":
                    keep["contextual-hybrid/one-vector + prf"] = s
            s = keep[f"{name}/windowed"]
            if name == "contextual-hybrid":
                options.append(scores(f"{name} + context vector", context_vector_run(s, embedder, chunks, queries), golden)
                               | {"over": "windowed"})
                print(options[-1], flush=True)
    lat = latency({"one-vector": keep["contextual-hybrid/one-vector"], "windowed": keep["contextual-hybrid/windowed"],
                   "one-vector + prf": keep["contextual-hybrid/one-vector + prf"]}, queries, minilm)
    out = {
        "dataset": Path(args.dataset).name, "queries": len(queries), "chunks": len(dataset.chunks),
        "embedder": minilm.model_name, "max_tokens": minilm.max_tokens, "window": {"size": 256, "overlap": 64},
        "table": table, "options": options, "latency": lat, "elapsed_s": round(time.perf_counter() - started, 1),
    }
    Path(args.json).write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(lat, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
