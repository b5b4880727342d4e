"""Query latency, build time, memory and disk of the core's index at 10k, 100k and 1M chunks.

Corpus (stated parameters, fixed seed): benchmarks/bm25_speed.py's synthetic Zipf corpus,
`VOCAB` = 50,000 terms, exponent 1.1, chunk length normal(120, 30) tokens clipped to [10, 400];
queries of 10 distinct terms drawn from the same distribution.

Vectors (384-d, as all-MiniLM-L6-v2), two kinds:
- "random": i.i.d. Gaussian, L2-normalised (the hardest case for an approximate index: no
  structure, every point about as far as every other).
- "embedding-like": drawn around REAL MiniLM vectors of the cookbook corpus's 737 chunks: a
  random real chunk vector plus Gaussian noise in the real vectors' principal-component basis
  (scaled by the components' standard deviations times `NOISE` = 0.6), L2-normalised. Query
  vectors are the real MiniLM vectors of the cookbook's 248 evaluation queries.

Each size runs in a child process of its own (so peak RSS is that size's): generate the corpus,
build `BM25Index` (from token lists) and the dense index that `HybridSearcher` builds
(`dense.hnsw.dense_index`: exact below 20k chunks, the calibrated IVF index above), save both
(on-disk size), then time, per
query, BM25 top-150, dense top-150 (query vector given), weighted RRF of the two lists
(`fuse_sources`, as `HybridSearcher`), and the whole hybrid query (the three in sequence, as
`HybridSearcher.search_many` runs them after embedding the query). Recall of the exact top 150
is measured for the dense index at each size (exact search over the same vectors), and on the
real MiniLM vectors of the cookbook and demo corpora with the HNSW index forced. Then a fresh
child process opens the saved indexes (memory-mapped) and runs the hybrid queries again: its
peak RSS (`query_process_peak_rss_mb`) is what a query server needs.

Peers at 100k, same run, same texts (tokens joined by spaces), top 150: our BM25Index built from
the texts, LlamaIndex's `BM25Retriever` (llama-index-retrievers-bm25) and LangChain's
`BM25Retriever` (langchain-community, rank_bm25); ratios are peer p50 / ours.

Queries run one at a time, single-threaded (OPENBLAS_NUM_THREADS=1 in the children, FAISS's
OpenMP pool set to one thread after the build). Each timing is taken twice: wall clock
(`*_p50_ms`, `*_p95_ms`: what a caller waits, including time the process spends waiting for a
core on a shared machine) and the query thread's own CPU time (`*_cpu_p50_ms`:
`time.thread_time`, what the query costs; the two agree on an idle machine). The load average
at start and end is recorded with the results.

Run:  python benchmarks/scale.py [--sizes 10000,100000,1000000] [--json benchmarks/scale.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
sys.path.insert(0, str(HERE))

from contextual_retrieval_core.dense.hnsw import ANN_THRESHOLD, HNSWIndex, dense_index  # noqa: E402
from contextual_retrieval_core.dense.vectors import VectorIndex  # noqa: E402
from contextual_retrieval_core.search.bm25 import BM25Index  # noqa: E402
from contextual_retrieval_core.search.ranked import fuse_sources  # noqa: E402

SEED = 20241204
VOCAB, EXPONENT, MEAN_LEN = 50_000, 1.1, 120.0
DIM, DEPTH, NOISE = 384, 150, 0.6
WEIGHTS = (0.8, 0.2)  # the cookbook's semantic / BM25 weights
CACHE = Path(os.environ.get("SCALE_CACHE", Path(tempfile.gettempdir()) / "contextual-retrieval-scale"))


def _bm25_speed():
    import bm25_speed  # benchmarks/bm25_speed.py: the corpus generator shared by both benchmarks

    return bm25_speed


# -- vectors --------------------------------------------------------------------------------


def cookbook_vectors() -> tuple[np.ndarray, np.ndarray] | None:
    """(chunk vectors, query vectors) of the cookbook corpus with the local MiniLM; cached."""
    cache = CACHE / "cookbook-minilm.npz"
    if cache.is_file():
        with np.load(cache, allow_pickle=False) as z:
            return z["chunks"], z["queries"]
    from _paths import DEFAULT_DATASET

    from contextual_retrieval_core.app.evaluation import load_cookbook
    from contextual_retrieval_core.embeddings import LocalMiniLMEmbedder

    if not (Path(DEFAULT_DATASET) / "codebase_chunks.json").is_file():
        return None
    data = load_cookbook(DEFAULT_DATASET)
    embedder = LocalMiniLMEmbedder()
    chunks = embedder.embed_documents([c.text for c in data.chunks])
    queries = embedder.embed_queries([q.query for q in data.queries])
    CACHE.mkdir(parents=True, exist_ok=True)
    np.savez(cache, chunks=chunks, queries=queries)
    return chunks, queries


def demo_vectors() -> tuple[np.ndarray, np.ndarray]:
    from contextual_retrieval_core.app._demo import demo_chunks
    from contextual_retrieval_core.app.demo_corpus import DEMO_QUERIES
    from contextual_retrieval_core.embeddings import LocalMiniLMEmbedder

    _, chunks = demo_chunks()
    embedder = LocalMiniLMEmbedder()
    queries = [q.query for q in DEMO_QUERIES] + [c.text.split(".")[0] for c in chunks]
    return embedder.embed_documents([c.text for c in chunks]), embedder.embed_queries(queries)


def embedding_like(n: int, real: np.ndarray, rng: np.random.Generator):
    """`n` vectors around real ones, with noise shaped like the real vectors' spread, in blocks
    of 100,000 (the same stream whatever the caller does with the blocks)."""
    centred = real - real.mean(axis=0)
    _, s, vt = np.linalg.svd(centred, full_matrices=False)
    sd = s / np.sqrt(max(len(real) - 1, 1))
    for start in range(0, n, 100_000):
        m = min(100_000, n - start)
        noise = (rng.standard_normal((m, len(sd))) * (sd * NOISE)) @ vt
        block = real[rng.integers(0, len(real), m)] + noise
        yield (block / np.linalg.norm(block, axis=1, keepdims=True)).astype(np.float32)


def random_vectors(n: int, rng: np.random.Generator) -> np.ndarray:
    out = rng.standard_normal((n, DIM), dtype=np.float32)
    return out / np.linalg.norm(out, axis=1, keepdims=True)


def recall(exact: list[list[tuple[str, float]]], approx: list[list[tuple[str, float]]]) -> float:
    hit = sum(len({i for i, _ in e} & {i for i, _ in a}) for e, a in zip(exact, approx))
    return round(hit / max(sum(len(e) for e in exact), 1), 4)


def real_recall() -> dict:
    """HNSW (forced) against exact top 150 on real MiniLM vectors of the cookbook and demo corpora."""
    out = {}
    cook = cookbook_vectors()
    sets = {"demo": demo_vectors()}
    if cook is not None:
        sets["cookbook"] = cook
    for name, (docs, queries) in sets.items():
        ids = [f"c{i}" for i in range(len(docs))]
        exact = VectorIndex(ids, docs).search_many(queries, DEPTH)
        approx = HNSWIndex(ids, docs).search_many(queries, DEPTH)
        out[name] = {"chunks": len(docs), "queries": len(queries), "recall_at_150": recall(exact, approx)}
    return out


# -- one size, in a child process -----------------------------------------------------------


def _pcts(samples: list[float]) -> tuple[float, float]:
    a = np.asarray(samples) * 1000.0
    return round(float(np.percentile(a, 50)), 3), round(float(np.percentile(a, 95)), 3)


def _single_threaded_queries() -> None:
    """One query per call, as a server thread runs it: FAISS's OpenMP pool down to one thread."""
    if "faiss" in sys.modules:
        sys.modules["faiss"].omp_set_num_threads(1)


def _du(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20


def _write_vectors(path: Path, n: int, blocks) -> None:
    """The vectors as a ``.npy`` file written a block at a time with plain writes (a writable map
    would keep every page written resident in this process)."""
    with open(path, "wb") as fh:
        np.lib.format.write_array_header_2_0(fh, {"descr": np.lib.format.dtype_to_descr(np.dtype(np.float32)),
                                                  "fortran_order": False, "shape": (n, DIM)})
        for block in blocks:
            np.ascontiguousarray(block, dtype=np.float32).tofile(fh)


def _exact_top(path: Path, ids: list[str], queries: np.ndarray, depth: int) -> list[list[tuple[str, float]]]:
    """Exact cosine top-`depth` over a ``.npy`` of normalised vectors, read a block at a time."""
    header = np.load(path, mmap_mode="r")
    offset, n = int(header.offset), header.shape[0]
    del header
    best_s = np.full((len(queries), 0), -np.inf, dtype=np.float32)
    best_i = np.zeros((len(queries), 0), dtype=np.int64)
    step = 65_536
    with open(path, "rb") as fh:
        fh.seek(offset)
        for start in range(0, n, step):
            rows = np.fromfile(fh, dtype=np.float32, count=min(step, n - start) * DIM).reshape(-1, DIM)
            sims = np.concatenate([best_s, queries @ rows.T], axis=1)
            cols = np.concatenate([best_i, np.broadcast_to(np.arange(start, start + len(rows)), (len(queries), len(rows)))], axis=1)
            keep = np.argsort(-sims, axis=1, kind="stable")[:, :depth]
            best_s, best_i = np.take_along_axis(sims, keep, 1), np.take_along_axis(cols, keep, 1)
    return [[(ids[int(i)], float(v)) for i, v in zip(ri, rs)] for ri, rs in zip(best_i, best_s)]


def one_size(n: int, n_queries: int, kinds: list[str]) -> list[dict]:
    """One corpus size, streamed: the corpus is generated a block at a time straight into
    `BM25Index.index_token_blocks`, the vectors a block at a time into a ``.npy`` file that the
    dense index reads through its file, so no step holds all texts or all vectors at once."""
    bm = _bm25_speed()
    probs = bm.zipf_probs(VOCAB, EXPONENT)
    query_terms = bm.make_queries(n_queries, probs, terms=10, seed=SEED + 1)
    query_texts = [" ".join(q) for q in query_terms]
    gen = [0.0]
    ids: list[str] = []

    def corpus():
        blocks = bm.iter_corpus(n, vocab_size=VOCAB, exponent=EXPONENT, mean_len=MEAN_LEN, seed=SEED)
        while True:
            t = time.perf_counter()
            block = next(blocks, None)
            gen[0] += time.perf_counter() - t
            if block is None:
                return
            ids.extend(block[0])
            yield block

    work = Path(tempfile.mkdtemp(prefix="scale-"))
    rows = []
    try:
        # the vectors first (the embedder's output, written to disk a block at a time), then the builds
        rng = np.random.default_rng(SEED + 2)
        real = cookbook_vectors() if "embedding-like" in kinds else None  # only embedding-like reads them
        query_vectors = {}
        for kind in kinds:
            if kind == "embedding-like":
                if real is None:
                    continue
                blocks = embedding_like(n, real[0], rng)
                query_vectors[kind] = real[1][np.arange(n_queries) % len(real[1])]
            else:
                blocks = [random_vectors(n, rng)]
                query_vectors[kind] = random_vectors(n_queries, rng)
            _write_vectors(work / f"{kind}.npy", n, blocks)
        t0 = time.perf_counter()
        bm25 = BM25Index().index_token_blocks(corpus())
        corpus_s = gen[0]
        bm25_build = time.perf_counter() - t0 - corpus_s
        bm25.save(work / "bm25")
        bm25_disk = _du(work / "bm25")
        for kind, qv in query_vectors.items():
            vectors_file = work / f"{kind}.npy"
            vectors = np.load(vectors_file, mmap_mode="r")
            t0 = time.perf_counter()
            dense = dense_index(ids, vectors)
            dense_build = time.perf_counter() - t0
            dense.save(work / kind)
            disk = bm25_disk + _du(work / kind)
            # recall of the exact top 150 on a sample of the queries
            sample = qv[: min(50, n_queries)]
            sample = sample / np.linalg.norm(sample, axis=1, keepdims=True)
            rec = recall(_exact_top(vectors_file, ids, sample.astype(np.float32), DEPTH), dense.search_many(sample, DEPTH))
            del vectors
            vectors_file.unlink()
            _single_threaded_queries()
            wall: dict[str, list[float]] = {k: [] for k in ("bm25", "dense", "fusion", "hybrid")}
            cpu: dict[str, list[float]] = {k: [] for k in wall}

            def timed(name, fn):
                w, c = time.perf_counter(), time.thread_time()
                out = fn()
                cpu[name].append(time.thread_time() - c)
                wall[name].append(time.perf_counter() - w)
                return out

            def hybrid(text, q):
                d = dense.search_many(q, DEPTH)[0]
                b = bm25.search(text, DEPTH)
                return fuse_sources([("dense", d, WEIGHTS[0]), ("bm25", b, WEIGHTS[1])], depth=DEPTH)

            for text, vec in zip(query_texts, qv):
                q = vec[None, :]
                b = timed("bm25", lambda: bm25.search(text, DEPTH))
                d = timed("dense", lambda: dense.search_many(q, DEPTH)[0])
                timed("fusion", lambda: fuse_sources([("dense", d, WEIGHTS[0]), ("bm25", b, WEIGHTS[1])], depth=DEPTH))
                timed("hybrid", lambda: hybrid(text, q))
            t_bm25, t_dense, t_fuse, t_hybrid = (wall[k] for k in ("bm25", "dense", "fusion", "hybrid"))
            rows.append({
                "n": n,
                "vectors": kind,
                "dense_index": type(dense).__name__,
                "build_s": round(bm25_build + dense_build, 2),
                "bm25_build_s": round(bm25_build, 2),
                "dense_build_s": round(dense_build, 2),
                "corpus_gen_s": round(corpus_s, 2),
                "peak_rss_mb": 0.0,  # filled below: the child's peak, over everything it did
                "disk_mb": round(disk, 1),
                "bm25_p50_ms": _pcts(t_bm25)[0],
                "bm25_p95_ms": _pcts(t_bm25)[1],
                "dense_p50_ms": _pcts(t_dense)[0],
                "dense_p95_ms": _pcts(t_dense)[1],
                "fusion_p50_ms": _pcts(t_fuse)[0],
                "hybrid_p50_ms": _pcts(t_hybrid)[0],
                "hybrid_p95_ms": _pcts(t_hybrid)[1],
                **{f"{k}_cpu_p50_ms": _pcts(v)[0] for k, v in cpu.items()},
                "hybrid_cpu_p95_ms": _pcts(cpu["hybrid"])[1],
                "dense_recall_at_150": rec,
                "queries": n_queries,
            })
            del dense
            np.save(work / "queries.npy", qv, allow_pickle=False)
            (work / "queries.json").write_text(json.dumps(query_texts), encoding="utf-8")
            rows[-1].update(_child(["--_query", str(work), "--kinds", kind]))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    peak = _own_peak_rss_mb()
    for row in rows:
        row["peak_rss_mb"] = round(peak, 1)
    return rows


def query_process(work: Path, kind: str) -> dict:
    """A fresh process that opens the saved indexes (memory-mapped) and runs every hybrid query:
    its peak RSS is what a query server needs, with nothing of the build in its heap."""
    from contextual_retrieval_core.dense.hnsw import load_dense_index

    t0 = time.perf_counter()
    bm25 = BM25Index.load(work / "bm25")
    dense = load_dense_index(work / kind)
    load_s = time.perf_counter() - t0
    _single_threaded_queries()
    qv = np.load(work / "queries.npy", allow_pickle=False)
    texts = json.loads((work / "queries.json").read_text(encoding="utf-8"))
    wall = []
    for text, vec in zip(texts, qv):
        t = time.perf_counter()
        d = dense.search_many(vec[None, :], DEPTH)[0]
        b = bm25.search(text, DEPTH)
        fuse_sources([("dense", d, WEIGHTS[0]), ("bm25", b, WEIGHTS[1])], depth=DEPTH)
        wall.append(time.perf_counter() - t)
    return {"query_process_load_s": round(load_s, 2), "query_process_hybrid_p50_ms": _pcts(wall)[0],
            "query_process_peak_rss_mb": _own_peak_rss_mb()}


def _own_peak_rss_mb() -> float:
    """This process's peak RSS from /proc (VmHWM): getrusage's ru_maxrss keeps the high-water mark
    of the process that started it across exec, which here is the whole build."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def peers(n: int, n_queries: int) -> list[dict]:
    """Our BM25Index, LlamaIndex's and LangChain's BM25Retriever over the same n texts."""
    bm = _bm25_speed()
    ids, tokens, probs = bm.make_corpus(n, vocab_size=VOCAB, exponent=EXPONENT, mean_len=MEAN_LEN, seed=SEED)
    # every library's tokenizer must keep a term whole: ours splits "w123" into w, 123, w123 (code
    # identifiers), so terms become words of consonants other than s and y, which no stemmer,
    # stop-word list or identifier splitter touches
    letters = "bcdfghjklmnpqrtvwxz"

    def word(term: str) -> str:
        i, out = int(term[1:]), "b"
        while True:
            i, r = divmod(i, len(letters))
            out += letters[r]
            if not i:
                return out

    words = {f"w{i}": word(f"w{i}") for i in range(VOCAB)}
    texts = [" ".join(words[w] for w in t) for t in tokens]
    del tokens
    queries = [" ".join(words[w] for w in q) for q in bm.make_queries(n_queries, probs, terms=10, seed=SEED + 1)]

    def timed(search) -> tuple[float, float, float]:
        samples, cpu = [], []
        for q in queries:
            t, c = time.perf_counter(), time.thread_time()
            search(q)
            cpu.append(time.thread_time() - c)
            samples.append(time.perf_counter() - t)
        return (*_pcts(samples), _pcts(cpu)[0])

    out = []
    t0 = time.perf_counter()
    ours = BM25Index().index(ids, texts)
    build = time.perf_counter() - t0
    p50, p95, cpu = timed(lambda q: ours.search(q, DEPTH))
    out.append({"name": "contextual_retrieval_core.BM25Index", "n": n, "build_s": round(build, 2), "p50_ms": p50, "p95_ms": p95, "cpu_p50_ms": cpu})
    base, base_cpu = p50, cpu
    del ours

    from llama_index.core.schema import TextNode
    from llama_index.retrievers.bm25 import BM25Retriever as LIBM25

    nodes = [TextNode(id_=i, text=t) for i, t in zip(ids, texts)]
    t0 = time.perf_counter()
    li = LIBM25.from_defaults(nodes=nodes, similarity_top_k=DEPTH)
    build = time.perf_counter() - t0
    p50, p95, cpu = timed(li.retrieve)
    out.append({"name": "llama_index.retrievers.bm25.BM25Retriever", "n": n, "build_s": round(build, 2), "p50_ms": p50, "p95_ms": p95, "cpu_p50_ms": cpu})
    del li, nodes

    from langchain_community.retrievers import BM25Retriever as LCBM25

    t0 = time.perf_counter()
    lc = LCBM25.from_texts(texts, metadatas=[{"id": i} for i in ids], k=DEPTH)
    build = time.perf_counter() - t0
    p50, p95, cpu = timed(lc.invoke)
    out.append({"name": "langchain_community.retrievers.BM25Retriever", "n": n, "build_s": round(build, 2), "p50_ms": p50, "p95_ms": p95, "cpu_p50_ms": cpu})
    for row in out:
        row["p50_ratio_to_ours"] = round(row["p50_ms"] / base, 2) if base else None
        row["cpu_p50_ratio_to_ours"] = round(row["cpu_p50_ms"] / base_cpu, 2) if base_cpu else None
    return out


# -- driver ---------------------------------------------------------------------------------


def _child(args: list[str]) -> object:
    # one query per call: single-threaded BLAS (threads fighting over 2 cores only add latency);
    # FAISS's OpenMP pool still builds the graph on every core
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"child {args} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def growth(rows: list[dict], key: str) -> float | None:
    """Least-squares exponent b of latency ~ n**b over the measured sizes."""
    pts = [(r["n"], r[key]) for r in rows if r.get(key)]
    if len({n for n, _ in pts}) < 2:
        return None
    x, y = np.log([p[0] for p in pts]), np.log([p[1] for p in pts])
    return round(float(np.polyfit(x, y, 1)[0]), 2)


def _growth_table(rows: list[dict]) -> dict:
    keys = ("bm25_p50_ms", "dense_p50_ms", "fusion_p50_ms", "hybrid_p50_ms",
            "bm25_cpu_p50_ms", "dense_cpu_p50_ms", "fusion_cpu_p50_ms", "hybrid_cpu_p50_ms")
    kinds = sorted({r["vectors"] for r in rows})
    return {kind: {key: growth([r for r in rows if r["vectors"] == kind], key) for key in keys} for kind in kinds}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000", help="comma-separated chunk counts (default 10000,100000)")
    ap.add_argument("--queries", type=int, default=200, help="timed queries per size (default 200)")
    ap.add_argument("--kinds", default="embedding-like,random", help="vector kinds (default both)")
    ap.add_argument("--peers-n", type=int, default=100_000, help="corpus size of the peer comparison (0: skip)")
    ap.add_argument("--peer-queries", type=int, default=30)
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--no-real-recall", action="store_true", help="skip the recall check on real MiniLM vectors")
    ap.add_argument("--combine", nargs="+", metavar="JSON",
                    help="merge the sizes of earlier runs' JSON files (the first's peers and recall kept), "
                         "recompute the growth exponents over all sizes, and write --json")
    ap.add_argument("--only-peers", action="store_true",
                    help="rerun only the peer comparison and replace `peers` in the --json file")
    ap.add_argument("--_one", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--_peers", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--_query", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    if args._one:
        print(json.dumps(one_size(args._one, args.queries, kinds)))
        return 0
    if args._query:
        print(json.dumps(query_process(Path(args._query), kinds[0])))
        return 0
    if args._peers:
        print(json.dumps(peers(args._peers, args.peer_queries)))
        return 0

    if args.combine:
        if not args.json:
            ap.error("--combine needs --json PATH to write")
        runs = [json.loads(Path(f).read_text(encoding="utf-8")) for f in args.combine]
        result = dict(runs[0])
        result["sizes"] = sorted((r for run in runs for r in run["sizes"]), key=lambda r: (r["vectors"], r["n"]))
        result["combined_from"] = {f: run.get("machine") for f, run in zip(args.combine, runs)}
        result["growth_exponent"] = _growth_table(result["sizes"])
        print("growth exponents (latency ~ n^b):", result["growth_exponent"], flush=True)
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        return 0
    if args.only_peers:
        if not args.json:
            ap.error("--only-peers needs --json PATH (the results file whose peers it replaces)")
        path = Path(args.json)
        result = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
        result["peers"] = _child(["--_peers", str(args.peers_n), "--peer-queries", str(args.peer_queries)])
        result["peers_load_avg_at_end"] = [round(x, 1) for x in os.getloadavg()]
        _print_peers(result["peers"])
        path.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        return 0
    try:
        sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    except ValueError:
        ap.error(f"--sizes takes comma-separated integers, got {args.sizes!r}")
    if not sizes or min(sizes) <= 0:
        ap.error("--sizes needs at least one positive chunk count")
    if "embedding-like" in kinds:
        cookbook_vectors()  # embed once, before the children read the cache
    result: dict = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "load_avg_at_start": [round(x, 1) for x in os.getloadavg()]},
        "parameters": {"vocab": VOCAB, "zipf_exponent": EXPONENT, "mean_len": MEAN_LEN, "dim": DIM,
                       "depth": DEPTH, "noise": NOISE, "weights": WEIGHTS, "ann_threshold": ANN_THRESHOLD,
                       "seed": SEED, "queries": args.queries},
        "recall_real_minilm": {} if args.no_real_recall else real_recall(),
        "sizes": [],
        "peers": [],
    }
    print("recall of exact top-150, HNSW on real MiniLM vectors:", result["recall_real_minilm"], flush=True)
    for n in sizes:
        rows = _child(["--_one", str(n), "--queries", str(args.queries), "--kinds", ",".join(kinds)])
        for r in rows:
            print(f"n={r['n']:>9,} {r['vectors']:<15} {r['dense_index']:<11} build {r['build_s']:>7.1f}s "
                  f"rss {r['peak_rss_mb']:>7.0f}MB disk {r['disk_mb']:>7.1f}MB | p50 ms: bm25 {r['bm25_p50_ms']:.2f} "
                  f"dense {r['dense_p50_ms']:.2f} fusion {r['fusion_p50_ms']:.2f} hybrid {r['hybrid_p50_ms']:.2f} "
                  f"(p95 {r['hybrid_p95_ms']:.2f}) | cpu p50 ms: bm25 {r['bm25_cpu_p50_ms']:.2f} dense {r['dense_cpu_p50_ms']:.2f} "
                  f"fusion {r['fusion_cpu_p50_ms']:.2f} hybrid {r['hybrid_cpu_p50_ms']:.2f} | recall@150 {r['dense_recall_at_150']}", flush=True)
        result["sizes"].extend(rows)
    result["growth_exponent"] = _growth_table(result["sizes"])
    print("growth exponents (latency ~ n^b):", result["growth_exponent"], flush=True)
    if args.peers_n:
        result["peers"] = _child(["--_peers", str(args.peers_n), "--peer-queries", str(args.peer_queries)])
        _print_peers(result["peers"])
    result["machine"]["load_avg_at_end"] = [round(x, 1) for x in os.getloadavg()]
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


def _print_peers(peers: list[dict]) -> None:
    for p in peers:
        print(f"peer {p['name']:<46} n={p['n']:,} build {p['build_s']:.1f}s p50 {p['p50_ms']:.2f} ms "
              f"p95 {p['p95_ms']:.2f} ms cpu p50 {p['cpu_p50_ms']:.2f} ms  x{p['p50_ratio_to_ours']} ours "
              f"(cpu x{p['cpu_p50_ratio_to_ours']})", flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
