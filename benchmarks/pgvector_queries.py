"""Query latency over PostgreSQL with pgvector, each framework's own store, dense PRF on and off.

    python benchmarks/pgvector_queries.py [--json PATH] [--dataset DIR] [--server-dir DIR] [--rounds 2]

The script starts a PostgreSQL server with pgvector itself (`contextual_retrieval_core.app.pgvector_server`,
the `pgserver` wheel; a throwaway folder unless `--server-dir`). For each framework one process
builds the store from the cookbook corpus (737 chunks, the offline structural contexts, the
offline MiniLM model): LangChain's `PGVector` collection, LlamaIndex's `PGVectorStore` table. Then
each configuration runs in fresh processes, as a user's script meets it: load the corpus, open
the store and build the retriever over it (LangChain: `ContextualEnsembleRetriever.from_documents(
docs, vectorstore=store)`; LlamaIndex: `HybridRetriever.from_defaults(index, nodes=nodes)` with its
defaults, windows for the nodes longer than the model's window, written at construction), then
ask the 248 queries one by one, timing each (wall; each query embedded in that process, no
embedding cache). Configurations: each framework with dense PRF at its default (0.5) and with
``dense_prf=0``. The two run as a pair of fresh processes, both made ready first, then asked the
queries in turn, one query at a time (A then B on even queries, B then A on odd), so a load that
changes during the run (a shared machine) weighs on both alike; `--rounds` pairs per framework.
Reported per configuration: median, p90 and mean ms per query over all its processes' queries,
each process's median, and the chunk texts embedded while querying (dense feedback reads the
stored vectors back: 0). `ratio_default_over_prf0`: median with the default
over median with ``dense_prf=0``, per framework.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
for p in (str(REPO), str(HERE)):
    if p not in sys.path:
        sys.path.insert(0, p)

from _paths import DEFAULT_DATASET  # noqa: E402

#: the cookbook's queries
QUERIES = 248


class CountingEmbedder:
    """The offline embedder, counting the texts it embeds as documents and as queries."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.documents = 0
        self.queries = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def embed_documents(self, texts: list[str]) -> Any:
        self.documents += len(texts)
        return self.inner.embed_documents(texts)

    def embed_queries(self, texts: list[str]) -> Any:
        self.queries += len(texts)
        return self.inner.embed_queries(texts)


def langchain_retriever(url: str, chunks: list, embedder: Any, dense_prf: float | None, table: str, build: bool) -> tuple[Any, Any]:
    from langchain_postgres import PGVector

    from contextual_retrieval_langchain import ContextualEnsembleRetriever, EmbedderEmbeddings
    from contextual_retrieval_langchain._documents import contextual_document

    docs = [contextual_document(c, {"source": c.chunk.document_id}) for c in chunks]
    store = PGVector(EmbedderEmbeddings(embedder=embedder), connection=url.replace("postgresql://", "postgresql+psycopg://", 1),
                     collection_name=table, embedding_length=384, pre_delete_collection=build)
    if build:
        store.add_documents(docs, ids=[d.id for d in docs])
    kwargs = {} if dense_prf is None else {"dense_prf": dense_prf}
    retriever = ContextualEnsembleRetriever.from_documents(docs, vectorstore=store, k=20, **kwargs)
    return retriever, lambda q: [d.metadata["chunk_id"] for d in retriever.invoke(q)]


def llamaindex_retriever(url: str, chunks: list, embedder: Any, dense_prf: float | None, table: str, build: bool) -> tuple[Any, Any]:
    from llama_index.core import StorageContext, VectorStoreIndex
    from llama_index.core.schema import TextNode
    from llama_index.vector_stores.postgres import PGVectorStore

    from contextual_retrieval_llamaindex import CoreEmbedding, HybridRetriever
    from contextual_retrieval_llamaindex._convert import set_context

    nodes = [set_context(TextNode(id_=c.id, text=c.chunk.text, metadata={"source": c.chunk.document_id},
                                  excluded_embed_metadata_keys=["source"], excluded_llm_metadata_keys=["source"]), c.context)
             for c in chunks]
    store = PGVectorStore.from_params(connection_string=url.replace("postgresql://", "postgresql+psycopg://", 1),
                                      async_connection_string=url.replace("postgresql://", "postgresql+asyncpg://", 1),
                                      table_name=table, embed_dim=384)
    model = CoreEmbedding(embedder)
    if build:
        store.clear()
        index = VectorStoreIndex(nodes, storage_context=StorageContext.from_defaults(vector_store=store), embed_model=model)
    else:
        index = VectorStoreIndex.from_vector_store(store, embed_model=model)
    kwargs = {} if dense_prf is None else {"dense_prf": dense_prf}
    retriever = HybridRetriever.from_defaults(index, nodes=nodes, similarity_top_k=20, **kwargs)  # windows: written here
    return retriever, lambda q: [r.node.node_id for r in retriever.retrieve(q)]


def worker(mode: str, framework: str, dense_prf: float | None, url: str, dataset_dir: str, table: str) -> dict:
    """One process: `mode` "build" writes the store; "measure" opens it and times every query."""
    from contextual_retrieval_core.app.evaluation import load_cookbook, structural_contexts
    from contextual_retrieval_core.embeddings.minilm import LocalMiniLMEmbedder
    from contextual_retrieval_core.types import ContextualChunk

    dataset = load_cookbook(dataset_dir)
    contexts = structural_contexts(dataset)
    chunks = [ContextualChunk(c, contexts.get(c.id, "")) for c in dataset.chunks]
    embedder = CountingEmbedder(LocalMiniLMEmbedder())
    started = time.perf_counter()
    make = langchain_retriever if framework == "langchain" else llamaindex_retriever
    retriever, ask = make(url, chunks, embedder, dense_prf, table, mode == "build")
    ready_s = time.perf_counter() - started
    embedded_before = embedder.documents
    out = {"framework": framework, "dense_prf": retriever.dense_prf, "chunks": len(chunks), "ready_s": round(ready_s, 1),
           "texts_embedded_before_querying": embedded_before}
    if mode == "build":
        return out
    # "measure": ready; then each line on stdin is a query number to ask now, answered with its ms
    print(json.dumps(out), flush=True)
    ms = []
    for line in sys.stdin:
        q = dataset.queries[int(line)]
        t = time.perf_counter()
        ids = ask(q.query)
        ms.append((time.perf_counter() - t) * 1000)
        assert len(ids) == 20, (q.query, len(ids))
        print(f"{ms[-1]:.3f}", flush=True)
    return {**out, "queries": len(ms), "chunk_texts_embedded_while_querying": embedder.documents - embedded_before,
            "queries_embedded": embedder.queries, "ms": [round(x, 2) for x in ms]}


def _command(args: list[str], dataset: str) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), "--dataset", dataset, "--worker", *args]


def build(args: list[str], dataset: str) -> dict:
    out = subprocess.run(_command(args, dataset), capture_output=True, text=True, cwd=REPO)
    if out.returncode:
        raise RuntimeError(out.stderr[-3000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure_pair(framework: str, url: str, table: str, dataset: str, queries: int) -> list[dict]:
    """One fresh process per configuration (default, then dense_prf=0), both started and made
    ready first; then query by query, each asks it in turn (the first asking first on even
    queries, second on odd), one query at a time: a load that changes meanwhile weighs on both."""
    logs = [tempfile.TemporaryFile("w+") for _ in range(2)]  # noqa: SIM115 - closed below; a pipe nobody reads would fill and stop the worker
    procs = [subprocess.Popen(_command(["measure", framework, prf, url, table], dataset), stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=log, text=True, cwd=REPO)
             for prf, log in zip(("default", "0"), logs)]

    def failed(n: int) -> RuntimeError:
        logs[n].seek(0)
        return RuntimeError(logs[n].read()[-3000:])

    try:
        for n, proc in enumerate(procs):
            if not proc.stdout.readline():  # type: ignore[union-attr]
                raise failed(n)
        for i in range(queries):
            for n in ((0, 1) if i % 2 == 0 else (1, 0)):
                procs[n].stdin.write(f"{i}\n")  # type: ignore[union-attr]
                procs[n].stdin.flush()  # type: ignore[union-attr]
                if not procs[n].stdout.readline():  # type: ignore[union-attr]
                    raise failed(n)
        results = []
        for n, proc in enumerate(procs):
            out, _ = proc.communicate()  # stdin closed: the worker reports
            if proc.returncode:
                raise failed(n)
            results.append(json.loads(out.strip().splitlines()[-1]))
        return results
    finally:
        for proc, log in zip(procs, logs):
            if proc.poll() is None:
                proc.kill()
            log.close()


def summary(ms: list[float]) -> dict:
    ordered = sorted(ms)
    return {"median_ms": round(statistics.median(ms), 1), "p90_ms": round(ordered[int(0.9 * (len(ordered) - 1))], 1),
            "mean_ms": round(statistics.fmean(ms), 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", default=str(HERE / "pgvector_queries.json"))
    parser.add_argument("--dataset", default=DEFAULT_DATASET)
    parser.add_argument("--server-dir", default=None, help="the PostgreSQL cluster's folder (default: a temporary one)")
    parser.add_argument("--rounds", type=int, default=2, help="pairs of fresh processes per framework")
    parser.add_argument("--worker", nargs=5, metavar=("MODE", "FRAMEWORK", "DENSE_PRF", "URL", "TABLE"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        mode, framework, prf, url, table = args.worker
        print(json.dumps(worker(mode, framework, None if prf == "default" else float(prf), url, args.dataset, table)))
        return 0

    from contextual_retrieval_core.app import pgvector_server

    runs: dict[str, list[dict]] = {}
    builds: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="pgvector-bench-") as tmp:
        folder = Path(args.server_dir or Path(tmp) / "pgdata")
        if os.geteuid() == 0:
            Path(tmp).chmod(0o755)  # the server's own user reaches its folder
        url = pgvector_server.start(folder)
        try:
            for framework in ("langchain", "llamaindex"):
                table = f"bench_{framework}"
                builds[framework] = build(["build", framework, "default", url, table], args.dataset)
                print(f"{framework}: built in {builds[framework]['ready_s']} s", file=sys.stderr)
                for _ in range(args.rounds):
                    for prf, result in zip((None, 0.0), measure_pair(framework, url, table, args.dataset, QUERIES)):
                        name = f"{framework}, dense_prf={result['dense_prf']:g}" + (" (default)" if prf is None else "")
                        runs.setdefault(name, []).append(result)
                        print(f"{name}: median {statistics.median(result['ms']):.1f} ms", file=sys.stderr)
        finally:
            pgvector_server.stop(folder)
    configs = []
    for name, results in runs.items():
        ms = [x for r in results for x in r["ms"]]
        first = results[0]
        configs.append({
            "name": name, "framework": first["framework"], "dense_prf": first["dense_prf"], "processes": len(results),
            "chunks": first["chunks"], "queries": first["queries"], **summary(ms),
            "process_medians_ms": [round(statistics.median(r["ms"]), 1) for r in results],
            "ready_s": [r["ready_s"] for r in results],
            "chunk_texts_embedded_while_querying": sum(r["chunk_texts_embedded_while_querying"] for r in results),
        })
    ratios = {}
    for framework in ("langchain", "llamaindex"):
        on, off = (next(c for c in configs if c["framework"] == framework and (c["dense_prf"] == 0) == z) for z in (False, True))
        ratios[framework] = round(on["median_ms"] / off["median_ms"], 2)
    data = {
        "setup": {"dataset": "cookbook codebase (737 chunks, 248 queries)", "contexts": "structural (offline)",
                  "embedder": "LocalMiniLMEmbedder (offline, no cache)", "server": "pgserver wheel, loopback, exact scan",
                  "python": platform.python_version(), "cpus": os.cpu_count(), "rounds": args.rounds,
                  "build_s": {f: b["ready_s"] for f, b in builds.items()}},
        "configs": configs,
        "ratio_default_over_prf0": ratios,
    }
    Path(args.json).write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    print(json.dumps({"configs": [{k: c[k] for k in ("name", "median_ms", "p90_ms", "process_medians_ms")} for c in configs],
                      "ratios": ratios}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
