"""BM25 top-150: the pruned search (MaxScore over term counts) against the summation it replaced,
same corpus, same queries, same run.

"before" is the code before issue 33's second step: every posting's float64 weight stored
(`Postings` with ``data``, int64 text numbers, as version 1 folders hold them), every posting of the
query's terms summed (`Postings.scores`), then the top 150 sorted out (ties by indexing order).
"now" is `BM25Index.search` on the index as built and saved today (uint16 term counts, weights
computed as they are read, MaxScore pruning). Both run on the saved folders, memory-mapped, so
both read their postings from the same page cache. The corpus and queries are scale.py's
(benchmarks/bm25_speed.py's Zipf generator, 50,000 terms, exponent 1.1, 10-term queries). Queries
alternate between the two, one at a time, single-threaded; every answer is checked equal (ids,
order and float scores with ==). Reported: p50 / p95 wall ms of each and the ratio before / now,
with how many queries the pruning proved (the others fell back to summing).

Run:  python benchmarks/bm25_pruning.py [--sizes 100000,1000000] [--json benchmarks/bm25_pruning.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
for path in (REPO, HERE):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

import bm25_speed  # noqa: E402
import scale  # noqa: E402

from contextual_retrieval_core.search.bm25 import BM25Index, Postings  # noqa: E402

DEPTH = 150


def before_search(index: BM25Index, engine: Postings, query: str, k: int) -> list[tuple[str, float]]:
    """BM25Index.search as it was: sum every posting, keep the positive scores, sort out the top k."""
    terms = index.tokenizer.tokenize(query)
    scores = engine.scores([index.vocab[t] for t in terms if t in index.vocab])
    positive = np.flatnonzero(scores > 0)
    if positive.size > k:
        kth = np.partition(scores[positive], positive.size - k)[positive.size - k]
        positive = positive[scores[positive] >= kth]
    order = np.lexsort((positive, -scores[positive]))[:k]
    return [(index.ids[i], float(scores[i])) for i in positive[order]]


def stored_weights(folder: Path, index: BM25Index) -> Postings:
    """The same index in version 1's layout: every posting's float64 weight and int64 text number
    in .npy files of their own, memory-mapped."""
    engine = index._engine
    n_terms = len(engine.indptr) - 1
    with open(folder / "data.npy", "wb") as fh:
        np.lib.format.write_array_header_2_0(fh, {"descr": "<f8", "fortran_order": False, "shape": (int(engine.indptr[-1]),)})
        for t in range(n_terms):
            engine.weights(t).tofile(fh)
    np.save(folder / "indices64.npy", np.asarray(engine.indices, dtype=np.int64), allow_pickle=False)
    data = np.load(folder / "data.npy", mmap_mode="r").view(np.ndarray)
    indices = np.load(folder / "indices64.npy", mmap_mode="r").view(np.ndarray)
    return Postings(data, indices, np.asarray(engine.indptr), engine.n_docs, engine.term_max, engine.nonnegative)


def one_size(n: int, n_queries: int) -> dict:
    work = Path(tempfile.mkdtemp(prefix="bm25-pruning-"))
    try:
        t0 = time.perf_counter()
        built = BM25Index().index_token_blocks(bm25_speed.iter_corpus(n, vocab_size=scale.VOCAB, exponent=scale.EXPONENT,
                                                                      mean_len=scale.MEAN_LEN, seed=scale.SEED))
        build_s = time.perf_counter() - t0
        built.save(work / "now")
        del built
        now = BM25Index.load(work / "now")
        old = stored_weights(work, now)
        queries = [" ".join(q) for q in bm25_speed.make_queries(n_queries, bm25_speed.zipf_probs(scale.VOCAB, scale.EXPONENT),
                                                                 terms=10, seed=scale.SEED + 1)]
        for q in queries[:20]:  # both read their pages once before timing
            now.search(q, DEPTH)
            before_search(now, old, q, DEPTH)
        t_now, t_old, proved = [], [], 0
        for q in queries:
            a = time.perf_counter()
            got = now.search(q, DEPTH)
            b = time.perf_counter()
            want = before_search(now, old, q, DEPTH)
            c = time.perf_counter()
            if got != want:
                raise AssertionError(f"pruned search differs from summing every posting on {q!r}")
            t_now.append(b - a)
            t_old.append(c - b)
            terms = [now.vocab[t] for t in now.tokenizer.tokenize(q) if t in now.vocab]
            proved += now._engine.top(terms, DEPTH) is not None
        p = lambda xs, q: round(float(np.percentile(np.asarray(xs) * 1000.0, q)), 3)  # noqa: E731
        return {"n": n, "queries": n_queries, "build_s": round(build_s, 2),
                "disk_mb_now": round(sum(f.stat().st_size for f in (work / "now").iterdir()) / 2**20, 1),
                "disk_mb_before": round(sum((work / f).stat().st_size for f in ("data.npy", "indices64.npy")) / 2**20
                                        + sum((work / "now" / f).stat().st_size for f in ("bm25.json", "indptr.npy")) / 2**20, 1),
                "before_p50_ms": p(t_old, 50), "before_p95_ms": p(t_old, 95), "now_p50_ms": p(t_now, 50), "now_p95_ms": p(t_now, 95),
                "ratio_p50_before_over_now": round(p(t_old, 50) / p(t_now, 50), 2), "proved": proved, "identical": True}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100000,1000000")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    result = {"machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                          "load_avg_at_start": [round(x, 1) for x in os.getloadavg()]}, "sizes": []}
    for n in (int(s) for s in args.sizes.split(",") if s.strip()):
        row = one_size(n, args.queries)
        print(f"n={n:>9,}: before p50 {row['before_p50_ms']:.2f} ms (p95 {row['before_p95_ms']:.2f}), now p50 {row['now_p50_ms']:.2f} ms "
              f"(p95 {row['now_p95_ms']:.2f}), before/now {row['ratio_p50_before_over_now']:.2f}x, proved {row['proved']}/{row['queries']}, "
              f"disk {row['disk_mb_before']:.0f} -> {row['disk_mb_now']:.0f} MB", flush=True)
        result["sizes"].append(row)
    result["machine"]["load_avg_at_end"] = [round(x, 1) for x in os.getloadavg()]
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
