"""How the IVF index's probe count rule was chosen: recall of the exact top 150 against the probe
count, for the real cookbook query vectors and for pseudo-queries of several kinds.

Corpus: `scale.py`'s embedding-like vectors (n of them, same seed; around the real MiniLM vectors of
the cookbook's 737 chunks). Index: `IVFIndex`'s layout (FAISS IVF-SQfp16, nlist = ceil(sqrt(n)),
k-means on at most 64 rows a cluster). Exact reference: FAISS flat inner product over the same
vectors. For each probe count: recall of the exact top 150 for the 248 real cookbook query vectors
(what the rule must serve, never seen at build) and for pseudo-queries that need no queries: single
indexed vectors, and normalised sums of 2, 3, 4 and 6 random indexed vectors (200 each). Then what
`IVFIndex`'s rule (the smallest power of two reaching 0.99 on sums of 4) picks, and the recall the
real queries get at that count.

Run:  python benchmarks/ivf_calibration.py [--n 100000] [--json benchmarks/ivf_calibration.json]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import scale  # noqa: E402  (benchmarks/scale.py: the corpus generator)

from contextual_retrieval_core.dense.ivf import IVFIndex, load_faiss  # noqa: E402

PROBES = (4, 8, 16, 32, 64, 128)
DEPTH = 150


def _recall(exact: np.ndarray, found: np.ndarray) -> float:
    return round(float(np.mean([len(set(e) & set(f)) / len(e) for e, f in zip(exact, found)])), 4)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    faiss = load_faiss()
    real = scale.cookbook_vectors()
    if real is None:
        raise SystemExit("the cookbook data set is missing: the real query vectors come from it")
    rng = np.random.default_rng(scale.SEED + 2)
    corpus = np.concatenate(list(scale.embedding_like(args.n, real[0], rng)))
    queries = np.ascontiguousarray(real[1] / np.linalg.norm(real[1], axis=1, keepdims=True), dtype=np.float32)
    nlist = math.ceil(math.sqrt(args.n))
    ivf = faiss.IndexIVFScalarQuantizer(faiss.IndexFlatIP(corpus.shape[1]), corpus.shape[1], nlist,
                                        faiss.ScalarQuantizer.QT_fp16, faiss.METRIC_INNER_PRODUCT)
    ivf.train(corpus[np.sort(rng.choice(args.n, min(args.n, 64 * nlist), replace=False))])
    ivf.add(corpus)
    flat = faiss.IndexFlatIP(corpus.shape[1])
    flat.add(corpus)
    kinds = {"real cookbook queries": queries, "single indexed vectors": corpus[rng.choice(args.n, 200, replace=False)]}
    for m in (2, 3, 4, 6):
        summed = corpus[rng.choice(args.n, (200, m))].sum(axis=1)
        kinds[f"sums of {m}"] = np.ascontiguousarray(summed / np.linalg.norm(summed, axis=1, keepdims=True), dtype=np.float32)
    table = {}
    for name, q in kinds.items():
        exact = flat.search(q, DEPTH)[1]
        row = {}
        for p in PROBES:
            ivf.nprobe = p
            row[str(p)] = _recall(exact, ivf.search(q, DEPTH)[1])
        table[name] = {"top1_similarity_median": round(float(np.median(flat.search(q, 1)[0])), 4), "recall_by_nprobe": row}
        print(f"{name:<24} top-1 sim {table[name]['top1_similarity_median']:.3f} | "
              + " ".join(f"{p}:{row[str(p)]:.4f}" for p in PROBES), flush=True)
    ids = [f"c{i}" for i in range(args.n)]
    index = IVFIndex(ids, corpus)
    ivf.nprobe = index.nprobe
    picked = {"calibration": index.calibration,
              "real_queries_recall_at_picked_nprobe": _recall(flat.search(queries, DEPTH)[1], ivf.search(queries, DEPTH)[1])}
    print("IVFIndex's rule:", picked, flush=True)
    result = {"n": args.n, "nlist": nlist, "depth": DEPTH, "seed": scale.SEED, "table": table, "rule": picked,
              "load_avg": [round(x, 1) for x in os.getloadavg()]}
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
