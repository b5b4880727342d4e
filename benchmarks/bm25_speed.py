"""BM25 query time against rank_bm25, and fusion time against corpus size, on synthetic data.

Part 1: a synthetic corpus (default 100k chunks of ~120 tokens over a 50k-term Zipf vocabulary,
exponent 1.1, fixed seed) and 10-term queries drawn from the same distribution. `BM25Index` and
`rank_bm25.BM25Okapi` index the SAME token lists; we time a top-150 query on each (ours:
``search(terms, k=150)``; rank_bm25: ``get_scores`` + argsort, as its ``get_top_n``) and report the
per-query means and their ratio. An index built with ``method="robertson"`` (rank_bm25's idf) is
checked to return the same top 150 as rank_bm25 on the timed rank_bm25 queries.

Part 2: `reciprocal_rank_fusion` of two 150-id lists drawn from range(N), for N = 10k, 100k, 1M:
the median time per fusion should not depend on N (ratio 1M / 10k ~ 1).

Part 3: the library's `fuse_sources` (what `HybridSearcher`, `ContextualIndex` and both framework
retrievers run) against the pure-Python fusion it replaced (benchmarks/fusion_reference.py, the
code before the speed-up), on the same two 150-(id, score) lists of string ids drawn from 100k,
timed alternately; the figure is the ratio reference / library, and the results are checked equal
(ids, order, float scores with ==, ranks).

Run:  python benchmarks/bm25_speed.py [--json benchmarks/bm25_speed.json] [--only fusion]
(``--only fusion`` runs parts 2 and 3 and updates just those keys of an existing JSON.)
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from contextual_retrieval_core.search.bm25 import BM25Index  # noqa: E402
from contextual_retrieval_core.search.rank_fusion import reciprocal_rank_fusion  # noqa: E402

SEED = 20240919
TOP_K = 150


# -- synthetic data -------------------------------------------------------------------------


def zipf_probs(vocab_size: int, exponent: float) -> np.ndarray:
    """P(term of rank r) proportional to r ** -exponent, r = 1..vocab_size."""
    weights = np.arange(1, vocab_size + 1, dtype=np.float64) ** -exponent
    return weights / weights.sum()


def make_corpus(n_docs: int, *, vocab_size: int = 50_000, exponent: float = 1.1, **options) -> tuple[list[str], list[list[str]], np.ndarray]:
    """(ids, token lists, term probabilities): `iter_corpus`'s corpus (Zipf-distributed terms,
    normal lengths, clipped; the same `options`), held whole."""
    ids: list[str] = []
    tokens: list[list[str]] = []
    for block_ids, block_tokens in iter_corpus(n_docs, vocab_size=vocab_size, exponent=exponent, **options):
        ids.extend(block_ids)
        tokens.extend(block_tokens)
    return ids, tokens, zipf_probs(vocab_size, exponent)


def iter_corpus(
    n_docs: int,
    *,
    vocab_size: int = 50_000,
    exponent: float = 1.1,
    mean_len: float = 120.0,
    sd_len: float = 30.0,
    min_len: int = 10,
    max_len: int = 400,
    seed: int = SEED,
    block: int = 50_000,
):
    """`make_corpus`'s corpus in blocks of (ids, token lists), so it is never held whole: the same
    texts, drawn from the same random stream (the lengths first, then every term in order)."""
    rng = np.random.default_rng(seed)
    probs = zipf_probs(vocab_size, exponent)
    lengths = np.clip(np.rint(rng.normal(mean_len, sd_len, n_docs)), min_len, max_len).astype(np.int64)
    vocab = np.array([f"w{i}" for i in range(vocab_size)], dtype=object)
    for start in range(0, n_docs, block):
        part = lengths[start : start + block]
        flat = vocab[rng.choice(vocab_size, size=int(part.sum()), p=probs)]
        bounds = np.concatenate([[0], np.cumsum(part)])
        yield [f"doc{start + i}" for i in range(len(part))], [flat[bounds[i] : bounds[i + 1]].tolist() for i in range(len(part))]


def make_queries(n: int, probs: np.ndarray, *, terms: int = 10, seed: int = SEED + 1) -> list[list[str]]:
    """`n` queries of `terms` distinct terms, drawn from the corpus' term distribution."""
    rng = np.random.default_rng(seed)
    return [[f"w{i}" for i in rng.choice(len(probs), size=terms, replace=False, p=probs)] for _ in range(n)]


# -- part 1: BM25 ---------------------------------------------------------------------------


def rank_bm25_top(bm25, terms: Sequence[str], k: int = TOP_K) -> tuple[np.ndarray, np.ndarray]:
    """rank_bm25's top k (indices, scores), as its get_top_n does: get_scores, then argsort."""
    scores = bm25.get_scores(terms)
    top = np.argsort(scores)[::-1][:k]
    return top, scores


def compare_top(ours: list[tuple[str, float]], ref_scores: np.ndarray, ids: Sequence[str], scale: float, k: int = TOP_K) -> dict:
    """How our top k (robertson) matches rank_bm25's full score vector.

    `identical`: same ids in the same order, rank_bm25 ties broken by index as ours are;
    `equal_up_to_ties`: at every position the two scores agree (so any difference is a tie);
    `max_rel_err`: largest relative gap between our score * (k1 + 1) and rank_bm25's, over our top k.
    """
    pos = {doc_id: i for i, doc_id in enumerate(ids)}
    order = np.lexsort((np.arange(len(ref_scores)), -ref_scores))[:k]
    order = order[ref_scores[order] > 0]
    ours_idx = np.array([pos[doc_id] for doc_id, _ in ours], dtype=np.int64)
    ours_scores = np.array([s for _, s in ours]) * scale
    same_len = len(ours_idx) == len(order)
    ref_at = ref_scores[ours_idx] if len(ours_idx) else np.zeros(0)
    rel = np.abs(ours_scores - ref_at) / np.maximum(np.abs(ref_at), 1e-12) if len(ours_idx) else np.zeros(1)
    return {
        "identical": bool(same_len and np.array_equal(ours_idx, order)),
        "equal_up_to_ties": bool(same_len and np.allclose(ours_scores, ref_scores[order], rtol=1e-9, atol=1e-12)),
        "overlap": len(set(ours_idx.tolist()) & set(order.tolist())) / max(len(order), 1),
        "max_rel_err": float(rel.max()),
    }


def bench_bm25(
    n_docs: int = 100_000,
    *,
    n_queries: int = 50,
    n_rank_queries: int = 10,
    vocab_size: int = 50_000,
    exponent: float = 1.1,
    mean_len: float = 120.0,
    k: int = TOP_K,
    seed: int = SEED,
    log=print,
) -> dict:
    from rank_bm25 import BM25Okapi

    t0 = time.perf_counter()
    ids, tokens, probs = make_corpus(n_docs, vocab_size=vocab_size, exponent=exponent, mean_len=mean_len, seed=seed)
    queries = make_queries(max(n_queries, n_rank_queries), probs, seed=seed + 1)
    n_tokens = sum(len(t) for t in tokens)
    log(f"corpus: {n_docs:,} chunks, {n_tokens:,} tokens ({n_tokens / n_docs:.1f}/chunk), "
        f"vocabulary {vocab_size:,} (Zipf {exponent}); built in {time.perf_counter() - t0:.1f}s")

    t0 = time.perf_counter()
    ours = BM25Index().index_tokens(ids, tokens)
    build_ours = time.perf_counter() - t0
    t0 = time.perf_counter()
    ref = BM25Okapi(tokens)  # rank_bm25 defaults: k1=1.5, b=0.75, epsilon=0.25
    build_ref = time.perf_counter() - t0
    # rank_bm25's idf and parameters, for the agreement check (scores = rank_bm25's / (k1 + 1))
    t0 = time.perf_counter()
    robertson = BM25Index(method="robertson", k1=ref.k1, b=ref.b, epsilon=ref.epsilon).index_tokens(ids, tokens)
    build_robertson = time.perf_counter() - t0
    log(f"index build: ours {build_ours:.1f}s (robertson {build_robertson:.1f}s), rank_bm25 {build_ref:.1f}s")
    del tokens

    ours.search(queries[0], k)  # warm-up
    times_ours = []
    for q in queries[:n_queries]:
        t0 = time.perf_counter()
        ours.search(q, k)
        times_ours.append(time.perf_counter() - t0)

    rank_bm25_top(ref, queries[0][:1], k)  # warm-up
    times_ref, agreement = [], []
    for q in queries[:n_rank_queries]:
        t0 = time.perf_counter()
        _, scores = rank_bm25_top(ref, q, k)
        times_ref.append(time.perf_counter() - t0)
        agreement.append(compare_top(robertson.search(q, k), scores, ids, scale=ref.k1 + 1, k=k))

    mean_ours = statistics.fmean(times_ours)
    mean_ref = statistics.fmean(times_ref)
    return {
        "n_docs": n_docs,
        "n_tokens": n_tokens,
        "vocab_size": vocab_size,
        "zipf_exponent": exponent,
        "query_terms": len(queries[0]),
        "top_k": k,
        "build_seconds": {"ours": round(build_ours, 3), "ours_robertson": round(build_robertson, 3), "rank_bm25": round(build_ref, 3)},
        "queries": {"ours": len(times_ours), "rank_bm25": len(times_ref)},
        "ms_per_query": {
            "ours_mean": round(1e3 * mean_ours, 4),
            "ours_median": round(1e3 * statistics.median(times_ours), 4),
            "rank_bm25_mean": round(1e3 * mean_ref, 4),
            "rank_bm25_median": round(1e3 * statistics.median(times_ref), 4),
        },
        "speedup_mean": round(mean_ref / mean_ours, 1),
        "agreement": {
            "queries": len(agreement),
            "identical": sum(a["identical"] for a in agreement),
            "equal_up_to_ties": sum(a["equal_up_to_ties"] for a in agreement),
            "min_overlap": min(a["overlap"] for a in agreement),
            "max_rel_err": max(a["max_rel_err"] for a in agreement),
        },
    }


# -- part 2: fusion -------------------------------------------------------------------------


def bench_fusion(
    sizes: Sequence[int] = (10_000, 100_000, 1_000_000),
    *,
    depth: int = TOP_K,
    pairs: int = 50,
    repeats: int = 20,
    seed: int = SEED + 2,
) -> dict:
    """Median seconds per `reciprocal_rank_fusion` of two `depth`-id lists drawn from range(N).

    The sizes are timed round-robin (one list pair of each size in turn), so a burst of load on
    the machine hits every size alike.
    """
    if min(sizes) < depth:
        raise ValueError(f"every corpus size must hold at least depth={depth} ids, got {min(sizes)}")
    rng = np.random.default_rng(seed)
    inputs = {
        n: [
            [rng.choice(n, size=depth, replace=False).tolist(), rng.choice(n, size=depth, replace=False).tolist()]
            for _ in range(pairs)
        ]
        for n in sizes
    }
    samples: dict[int, list[float]] = {n: [] for n in sizes}
    for n in sizes:  # warm-up
        reciprocal_rank_fusion(inputs[n][0], [0.5, 0.5], rrf_k=0, depth=depth)
    for p in range(pairs):
        for n in sizes:
            lists = inputs[n][p]
            t0 = time.perf_counter()
            for _ in range(repeats):
                reciprocal_rank_fusion(lists, [0.5, 0.5], rrf_k=0, depth=depth)
            samples[n].append((time.perf_counter() - t0) / repeats)
    out = {n: statistics.median(samples[n]) for n in sizes}
    return {
        "depth": depth,
        "fusions_timed_per_size": pairs * repeats,
        "us_per_fusion": {str(n): round(1e6 * s, 2) for n, s in out.items()},
        "ratio_largest_smallest": round(out[max(sizes)] / out[min(sizes)], 3),
    }


def bench_fusion_speedup(n: int = 100_000, *, depth: int = TOP_K, pairs: int = 50, repeats: int = 20,
                         seed: int = SEED + 3) -> dict:
    """Median microseconds per `fuse_sources` of two `depth`-hit lists, library vs reference, and
    their ratio; the sample pairs alternate between the two so load on the machine hits both alike."""
    from contextual_retrieval_core.search.ranked import fuse_sources

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import fusion_reference

    rng = np.random.default_rng(seed)
    inputs = []
    for _ in range(pairs):
        lists = []
        for scale in (1.0, 20.0):  # cosine-like and BM25-like scores, best first
            ids = rng.choice(n, size=depth, replace=False)
            scores = np.sort(rng.random(depth) * scale)[::-1]
            lists.append([(f"doc{i}", float(v)) for i, v in zip(ids, scores)])
        inputs.append([("dense", lists[0], 0.8), ("bm25", lists[1], 0.2)])
    peers = {"library": fuse_sources, "reference": fusion_reference.fuse_sources}
    identical = all(
        [tuple(h) for h in fuse_sources(src, depth=depth)] == [tuple(h) for h in fusion_reference.fuse_sources(src, depth=depth)]
        for src in inputs
    )
    samples: dict[str, list[float]] = {name: [] for name in peers}
    for fn in peers.values():  # warm-up
        fn(inputs[0], depth=depth)
    for p, sources in enumerate(inputs):
        order = list(peers.items()) if p % 2 == 0 else list(peers.items())[::-1]
        for name, fn in order:
            t0 = time.perf_counter()
            for _ in range(repeats):
                fn(sources, depth=depth)
            samples[name].append((time.perf_counter() - t0) / repeats)
    us = {name: 1e6 * statistics.median(v) for name, v in samples.items()}
    return {
        "n": n,
        "depth": depth,
        "fusions_timed_each": pairs * repeats,
        "us_per_fusion": {name: round(v, 2) for name, v in us.items()},
        "speedup_reference_over_library": round(us["reference"] / us["library"], 2),
        "identical_results": identical,
    }


def format_speedup(result: dict) -> str:
    us = result["us_per_fusion"]
    return "\n".join([
        f"fuse_sources, 2 lists x {result['depth']} (id, score) hits from {result['n']:,} ids, median of "
        f"{result['fusions_timed_each']} fusions each",
        f"library {us['library']:.1f} us, reference (before the speed-up) {us['reference']:.1f} us: "
        f"{result['speedup_reference_over_library']:.1f}x faster; identical results: {result['identical_results']}",
    ])


# -- main -----------------------------------------------------------------------------------


def format_report(bm25: dict, fusion: dict) -> str:
    ms = bm25["ms_per_query"]
    ag = bm25["agreement"]
    lines = [
        f"BM25 top-{bm25['top_k']} query, {bm25['query_terms']}-term queries, {bm25['n_docs']:,} chunks",
        f"{'':12}{'queries':>8}  {'mean ms':>10}  {'median ms':>10}",
        f"{'ours':12}{bm25['queries']['ours']:>8}  {ms['ours_mean']:>10.3f}  {ms['ours_median']:>10.3f}",
        f"{'rank_bm25':12}{bm25['queries']['rank_bm25']:>8}  {ms['rank_bm25_mean']:>10.3f}  {ms['rank_bm25_median']:>10.3f}",
        f"speed-up (rank_bm25 mean / ours mean): {bm25['speedup_mean']:.1f}x",
        f"top-{bm25['top_k']} agreement with rank_bm25 (ours method='robertson', same k1/b/epsilon): "
        f"{ag['identical']}/{ag['queries']} identical, {ag['equal_up_to_ties']}/{ag['queries']} equal up to ties, "
        f"min overlap {ag['min_overlap']:.3f}, max relative score error {ag['max_rel_err']:.1e}",
        "",
        format_fusion(fusion),
    ]
    return "\n".join(lines)


def format_fusion(fusion: dict) -> str:
    lines = [
        f"reciprocal_rank_fusion, 2 lists x {fusion['depth']} ids, median of {fusion['fusions_timed_per_size']} fusions per size",
        f"{'corpus size':>12}  {'us/fusion':>10}",
    ]
    lines += [f"{int(n):>12,}  {us:>10.1f}" for n, us in fusion["us_per_fusion"].items()]
    sizes = [int(n) for n in fusion["us_per_fusion"]]
    lines.append(f"ratio {max(sizes):,} / {min(sizes):,}: {fusion['ratio_largest_smallest']:.3f}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=100_000, help="synthetic corpus size (default 100000)")
    parser.add_argument("--queries", type=int, default=50, help="queries timed on ours (default 50)")
    parser.add_argument("--rank-queries", type=int, default=10, help="queries timed on rank_bm25 and checked for agreement (default 10)")
    parser.add_argument("--fusion-sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--json", type=Path, default=None, help="write the figures as JSON")
    parser.add_argument("--only", choices=["fusion"], default=None,
                        help="run only the fusion parts (2 and 3), updating just their keys in --json")
    args = parser.parse_args(argv)

    start = time.perf_counter()
    bm25 = None if args.only else bench_bm25(args.docs, n_queries=args.queries, n_rank_queries=args.rank_queries)
    fusion = bench_fusion(args.fusion_sizes)
    speedup = bench_fusion_speedup()
    print()
    print(format_report(bm25, fusion) if bm25 is not None else format_fusion(fusion))
    print(format_speedup(speedup))
    total = time.perf_counter() - start
    print(f"\ntotal {total:.0f}s on {platform.processor() or platform.machine()}, Python {platform.python_version()}")
    if args.json:
        payload = {"bm25": bm25, "fusion": fusion, "fusion_speedup": speedup, "seed": SEED,
                   "python": platform.python_version(), "total_seconds": round(total, 1)}
        if bm25 is None:
            payload = {**json.loads(args.json.read_text(encoding="utf-8")), "fusion": fusion, "fusion_speedup": speedup}
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
