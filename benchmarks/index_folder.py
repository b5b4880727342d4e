"""The index folder as `contextual-retrieval index` builds it, at 100,000 chunks (issue 43).

What is measured, per layout, each step in a fresh child process (so peak RSS is that step's):

- build: `ContextualIndex.update` on a synthetic corpus (wall time, peak RSS, folder size on disk);
- query: a fresh process opens the folder and runs `QUERIES` hybrid queries (p50 wall time per
  query after the first, peak RSS), and the recall@150 of the dense side against exact search over
  the same rows (the folder's rows read back);
- a read-only copy: the folder copied, every file and folder made read-only, queried by a fresh
  process (as the unprivileged user ``nobody`` when the benchmark runs as root, who could write
  anyway): whether it answers, and whether its top-10 are the writable folder's.

Layouts: ``files`` (what `index` writes: every row in the version folder, the calibrated IVF
index from `dense_index`'s 20,000-row threshold on) and, as the peer, ``embedded-chroma`` (the
layout `index` wrote before: an embedded Chroma in the folder, searched by Chroma's HNSW above
20,000 chunks; `ContextualIndex(chroma_url="embedded")`).

Corpus (stated parameters, fixed seed): `FILES` text files of `PARAGRAPHS` paragraphs each, a
paragraph being 45 words drawn from a 6,000-word vocabulary in 120 topics (each paragraph picks
two topics; Zipf-like word weights within a topic), one chunk a paragraph. The embedder is a
deterministic stub (`TopicEmbedder`): each word has a fixed 384-d vector, its topic's centroid
plus noise, and a text is the normalised sum of its words' vectors, so texts cluster by topic as
real embeddings do; queries are 8 words of one paragraph's topics. Structural contexts (offline).

Run:  python benchmarks/index_folder.py [--chunks 100000] [--json benchmarks/index_folder.json]
"""

from __future__ import annotations

import argparse
import contextlib
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

SEED, DIM, TOPICS, PER_TOPIC, WORDS_PER_PARAGRAPH, PARAGRAPHS = 20261207, 384, 120, 50, 45, 100
QUERIES, DEPTH = 200, 150
LAYOUTS = {"files": None, "embedded-chroma": "embedded"}


def words() -> list[str]:
    syllables = ["ka", "lo", "mi", "ne", "pu", "ra", "si", "to", "vu", "ze"]
    return [f"{syllables[t % 10]}{syllables[t // 10 % 10]}{syllables[w % 10]}{syllables[w // 10 % 10]}{t}x{w}"
            for t in range(TOPICS) for w in range(PER_TOPIC)]


class TopicEmbedder:
    """Deterministic 384-d stand-in for a text embedder: a word is its topic's centroid plus
    noise; a text, the normalised sum of its known words."""

    normalized = True

    def __init__(self) -> None:
        self.model_name = "topic-stub-384"
        rng = np.random.default_rng(SEED)
        centroids = rng.standard_normal((TOPICS, DIM)).astype(np.float32)
        table = np.repeat(centroids, PER_TOPIC, axis=0) + 0.9 * rng.standard_normal((TOPICS * PER_TOPIC, DIM)).astype(np.float32)
        self.table = table / np.linalg.norm(table, axis=1, keepdims=True)
        self.index = {w: i for i, w in enumerate(words())}

    def _embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        for i, text in enumerate(texts):
            rows = [self.index[w] for w in text.split() if w in self.index]
            if rows:
                out[i] = self.table[rows].sum(axis=0)
            else:
                out[i, i % DIM] = 1.0
        return out / np.linalg.norm(out, axis=1, keepdims=True)

    def embed_documents(self, texts):
        return self._embed(list(texts))

    def embed_queries(self, texts):
        return self._embed(list(texts))


def write_corpus(folder: Path, chunks: int) -> list[str]:
    """The corpus (`chunks` paragraphs) and `QUERIES` queries, seeded."""
    rng = np.random.default_rng(SEED + 1)
    vocab = np.array(words())
    weights = 1.0 / np.arange(1, PER_TOPIC + 1) ** 0.8
    weights /= weights.sum()
    folder.mkdir(parents=True)
    queries = []
    files = -(-chunks // PARAGRAPHS)
    for f in range(files):
        paragraphs = []
        for p in range(min(PARAGRAPHS, chunks - f * PARAGRAPHS)):
            topics = rng.integers(0, TOPICS, 2)
            picks = topics[rng.integers(0, 2, WORDS_PER_PARAGRAPH)] * PER_TOPIC + rng.choice(PER_TOPIC, WORDS_PER_PARAGRAPH, p=weights)
            paragraphs.append(f"Record {f}-{p}. " + " ".join(vocab[picks]))
            if len(queries) < QUERIES and rng.random() < QUERIES * 3 / chunks:
                queries.append(" ".join(vocab[picks[:8]]))
        (folder / f"notes-{f:04d}.txt").write_text("\n\n".join(paragraphs) + "\n", encoding="utf-8")
    return queries


def peak_rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def folder_mb(folder: Path) -> float:
    return round(sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 1e6, 1)


# -- the child processes ----------------------------------------------------------------------


def child_build(corpus: str, ix: str, layout: str) -> dict:
    from contextual_retrieval_core.index.contextual_index import ContextualIndex

    started = time.perf_counter()
    report = ContextualIndex(ix, embedder=TopicEmbedder(), chroma_url=LAYOUTS[layout]).update([corpus], show_progress=False)
    return {"build_s": round(time.perf_counter() - started, 1), "build_peak_rss_mb": peak_rss_mb(),
            "chunks": report.chunks_total, "folder_mb": folder_mb(Path(ix))}


def child_query(ix: str, queries_file: str, with_recall: bool) -> dict:
    from contextual_retrieval_core.index.contextual_index import ContextualIndex

    queries = json.loads(Path(queries_file).read_text())
    index = ContextualIndex(ix, embedder=TopicEmbedder())
    opened = time.perf_counter()
    answers, times = [], []
    for q in queries:
        t = time.perf_counter()
        answers.append([h.id for h in index.search(q, top_k=10)])
        times.append(time.perf_counter() - t)
    out = {"first_query_ms": round(1000 * times[0], 1), "query_p50_ms": round(1000 * float(np.median(times[1:])), 2),
           "query_peak_rss_mb": peak_rss_mb(), "answers": answers, "open_and_queries_s": round(time.perf_counter() - opened, 1)}
    if with_recall:
        out["dense_recall_at_150"] = dense_recall(index, queries)
    return out


def dense_recall(index, queries: list[str]) -> float:
    """Recall of the folder's dense side (its top-150 rows per query) against exact search over the
    same rows."""
    manifest, _, dense = index._open_version()
    qv = TopicEmbedder().embed_queries(queries)
    if hasattr(dense, "searched"):  # the version's own rows (a Chroma-backed folder keeps them too up to 20,000 chunks)
        ids, rows = dense.rows.ids, np.asarray(dense.rows.vectors)
        found = dense.searched.search_many(qv, DEPTH)
    else:
        got = dense.collection.get(include=["embeddings"])
        ids, rows = got["ids"], np.asarray(got["embeddings"], dtype=np.float32)
        rows = rows / np.linalg.norm(rows, axis=1, keepdims=True)
        found = [dense.search(v, DEPTH) for v in qv]
    exact = np.argsort(-(qv @ rows.T), axis=1)[:, :DEPTH]
    hit = sum(len({ids[j] for j in e} & {i for i, _ in f}) for e, f in zip(exact, found))
    return round(hit / (len(queries) * DEPTH), 4)


def run_child(args: list[str], *, user: str | None = None) -> dict:
    command = [sys.executable, __file__, "--child", *args]
    if user and os.geteuid() == 0:
        command = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *command]
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd="/")
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def read_only_copy(ix: Path, where: Path) -> Path:
    copy = where / f"{ix.name}-read-only"
    shutil.copytree(ix, copy)
    for path in [*copy.rglob("*"), copy]:
        path.chmod(0o555 if path.is_dir() else 0o444)
    return copy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--json", default=str(HERE / "index_folder.json"))
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, *rest = args.child
        result = child_build(*rest) if kind == "build" else child_query(rest[0], rest[1], rest[2] == "recall")
        print(json.dumps(result))
        return
    work = Path(tempfile.mkdtemp(prefix="index-folder-bench-"))
    work.chmod(0o755)
    try:
        queries = write_corpus(work / "corpus", args.chunks)
        (work / "queries.json").write_text(json.dumps(queries))
        (work / "queries.json").chmod(0o644)
        results = {}
        for layout in LAYOUTS:
            ix = work / layout
            print(f"{layout}: building {args.chunks} chunks", file=sys.stderr)
            built = run_child(["build", str(work / "corpus"), str(ix), layout])
            queried = run_child(["query", str(ix), str(work / "queries.json"), "recall"])
            ro = run_child(["query", str(read_only_copy(ix, work)), str(work / "queries.json"), "plain"], user="nobody")
            answers = queried.pop("answers", None)
            results[layout] = {**built, **queried, "read_only_copy": {
                "answers": "error" not in ro, "same_top_10": ro.get("answers") == answers,
                **({"error": ro["error"]} if "error" in ro else {"query_p50_ms": ro["query_p50_ms"]})}}
            print(json.dumps(results[layout]), file=sys.stderr)
    finally:
        for path in [work, *work.rglob("*")]:
            with contextlib.suppress(OSError):
                path.chmod(0o755 if path.is_dir() else 0o644)
        shutil.rmtree(work, ignore_errors=True)
    payload = {"chunks": args.chunks, "queries": QUERIES, "depth": DEPTH, "layouts": results,
               "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
               "load_average": os.getloadavg()}
    Path(args.json).write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(payload, indent=2))


if __name__ == "__main__":
    main()
