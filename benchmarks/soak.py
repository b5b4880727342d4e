"""Soak: every query path under concurrent use, queries while `index` updates the folder, and
resident memory over many queries.

Cases (each one row of ``soak.json``):

- ``concurrent/<path>``: the query set answered serially once, then again by 8 threads sharing
  the one retriever (LangChain: ``batch`` and ``abatch`` with ``max_concurrency=8``); every answer
  (ids and scores) must equal the serial one. ``throughput_ratio``: queries per second with 8
  threads over queries per second serially, measured in the same run.
- ``read_during_write/<reader>``: one process runs ``contextual-retrieval index`` on the folder
  again and again, the files switching between two versions (A: the corpus; B: one file grown
  by a paragraph and another removed); meanwhile readers query it: ``ContextualIndex.search`` on
  one long-lived object in another process, the ``query`` command's entry point (``main``) in a
  loop in another, and real ``contextual-retrieval query`` processes. Every answer must be the
  answer of index A or of index B (computed beforehand), never an error or a third answer.
- ``memory/<path>``: `--memory-queries` queries (cycling the query set) through each path, each
  path in a process of its own; RSS after the first 1,000 against RSS at the end
  (``rss_growth_percent``). The ``query`` command is not among them: each run is a process that
  answers one query and exits.

Usage:
    python benchmarks/soak.py [--dataset DIR] [--json PATH] [--threads 8]
        [--memory-queries 10000] [--rw-queries 200] [--cases concurrent,read_during_write,memory]

The offline parts throughout: MiniLM embeddings, structural contexts, no reranker. The tests
(tests/integration/test_concurrent_queries.py, tests/integration/test_reads_during_writes.py) run the same functions on the demo corpus with fewer queries.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _paths import DEFAULT_DATASET  # noqa: E402

#: one answer: (id, score) pairs, best first
Answer = tuple[tuple[str, float], ...]

MEMORY_WARMUP = 1000


# -- the corpus --------------------------------------------------------------------------------


@dataclass
class Corpus:
    """Documents (doc id -> text), their chunks (doc id -> chunk texts, in order) and queries."""

    documents: dict[str, str]
    chunks: dict[str, list[str]]
    queries: list[str]


def cookbook_corpus(dataset: str | os.PathLike[str]) -> Corpus:
    from contextual_retrieval_core.app.evaluation import load_cookbook

    data = load_cookbook(dataset)
    chunks: dict[str, list[str]] = {d.id: [] for d in data.documents}
    for c in data.chunks:
        chunks[c.document_id].append(c.text)
    return Corpus({d.id: d.text for d in data.documents}, chunks, [q.query for q in data.queries])


def demo_corpus() -> Corpus:
    """The demo's documents, split as the index splits them, and its queries (small: for tests)."""
    from contextual_retrieval_core.app.demo_corpus import DEMO_DOCUMENTS, DEMO_QUERIES
    from contextual_retrieval_core.chunking.split import split_text

    documents = dict(DEMO_DOCUMENTS)
    chunks = {d: [piece for _, piece in split_text(text, max_chars=400)] for d, text in documents.items()}
    extra = ["fork server child process", "public holidays in Berlin", "battery life of the Widget Pro", "Initech headcount"]
    return Corpus(documents, chunks, [q.query for q in DEMO_QUERIES] + extra)


# -- the query paths ---------------------------------------------------------------------------


@dataclass
class QueryPath:
    """One way to ask: `search` answers one query; `many` (when set) answers a list the way the
    framework runs lists concurrently (LangChain's ``batch`` / ``abatch``)."""

    name: str
    search: Callable[[str], Answer]
    many: Callable[[list[str], int], list[Answer]] | None = None


def core_searcher(corpus: Corpus, embedder: Any) -> QueryPath:
    from contextual_retrieval_core import Chunk, Document, HybridSearcher
    from contextual_retrieval_core.contextualize.config import ContextualizeConfig
    from contextual_retrieval_core.contextualize.contextualizer import Contextualizer

    docs = [Document(d, text) for d, text in corpus.documents.items()]
    chunks = [Chunk(f"{d}#{i}", d, text, i) for d, texts in corpus.chunks.items() for i, text in enumerate(texts)]
    contextual = Contextualizer(None, None, config=ContextualizeConfig(show_progress=False)).contextualize(docs, chunks).chunks
    searcher = HybridSearcher(contextual, embedder)
    return QueryPath("HybridSearcher", lambda q: tuple((h.id, h.score) for h in searcher.search(q)))


def llamaindex_retriever(corpus: Corpus, embed_model: Any) -> QueryPath:
    from llama_index.core import Document as LIDocument
    from llama_index.core import VectorStoreIndex
    from llama_index.core.node_parser import SentenceSplitter

    from contextual_retrieval_llamaindex import ContextualNodeParser, HybridRetriever

    parser = ContextualNodeParser(node_parser=SentenceSplitter(chunk_size=256, chunk_overlap=0), show_progress=False)
    nodes = parser([LIDocument(text=text, id_=d) for d, text in corpus.documents.items()])
    index = VectorStoreIndex(nodes, embed_model=embed_model)
    retriever = HybridRetriever.from_defaults(index, nodes=nodes)
    return QueryPath("llamaindex.HybridRetriever",
                     lambda q: tuple((r.node.node_id, float(r.score)) for r in retriever.retrieve(q)))


def langchain_retrievers(corpus: Corpus, embeddings: Any) -> list[QueryPath]:
    from langchain_core.documents import Document as LCDocument

    from contextual_retrieval_langchain import ContextualDocumentTransformer, ContextualEnsembleRetriever

    chunks = [LCDocument(page_content=t, metadata={"source": d}) for d, texts in corpus.chunks.items() for t in texts]
    docs = ContextualDocumentTransformer(show_progress=False).transform_documents(chunks, parents=corpus.documents)
    retriever = ContextualEnsembleRetriever.from_documents(docs, embeddings)

    def answer(documents: list) -> Answer:
        return tuple((d.metadata["chunk_id"], float(d.metadata["score"])) for d in documents)

    def batch(queries: list[str], threads: int) -> list[Answer]:
        return [answer(r) for r in retriever.batch(queries, config={"max_concurrency": threads})]

    def abatch(queries: list[str], threads: int) -> list[Answer]:
        return [answer(r) for r in asyncio.run(retriever.abatch(queries, config={"max_concurrency": threads}))]

    def search(q: str) -> Answer:
        return answer(retriever.invoke(q))

    return [QueryPath("langchain.ContextualEnsembleRetriever.batch", search, batch),
            QueryPath("langchain.ContextualEnsembleRetriever.abatch", search, abatch)]


def write_files(corpus: Corpus, folder: Path) -> dict[str, Path]:
    """One text file per document under `folder` (doc id -> file)."""
    files = {}
    for n, (d, text) in enumerate(corpus.documents.items()):
        safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in d)[:60]
        file = folder / f"{n:03d}-{safe}.txt"
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(text, encoding="utf-8")
        files[d] = file
    return files


def index_command(src: Path, index_dir: Path, *extra: str) -> list[str]:
    return ["index", str(src), "--index-dir", str(index_dir), "--no-progress", "--embedder", "local",
            "--contexts", "structural", *extra]


def build_index(src: Path, index_dir: Path, *extra: str) -> None:
    from contextual_retrieval_core.app.cli import main

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as err:
        if main(index_command(src, index_dir, *extra)) != 0:
            raise RuntimeError(f"index failed: {err.getvalue()}")


def contextual_index(index_dir: Path, embedder: Any) -> QueryPath:
    from contextual_retrieval_core.index.contextual_index import ContextualIndex

    index = ContextualIndex(index_dir, embedder=embedder)
    return QueryPath("ContextualIndex", lambda q: tuple((h.id, h.score) for h in index.search(q)))


def cli_query(index_dir: Path) -> QueryPath:
    """The ``query`` command through its entry point, in this process (a fresh `ContextualIndex`
    per query, as each command run builds one), for the top 20 as `ContextualIndex.search`."""
    from contextual_retrieval_core.app.cli import main

    def search(q: str) -> Answer:
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()) as err:
            code = main(["query", str(index_dir), q, "-k", "20", "--json"])
        if code != 0:
            raise RuntimeError(err.getvalue().strip())
        return tuple((h["id"], h["score"]) for h in json.loads(out.getvalue()))

    return QueryPath("cli query", search)


PATH_NAMES = ("HybridSearcher", "llamaindex.HybridRetriever", "langchain.ContextualEnsembleRetriever.batch",
              "langchain.ContextualEnsembleRetriever.abatch", "ContextualIndex")


def build_paths(corpus: Corpus, workdir: Path, names: Sequence[str] = PATH_NAMES) -> list[QueryPath]:
    """The query paths `names` over `corpus` (the index built under `workdir`), offline parts."""
    from contextual_retrieval_core.embeddings.minilm import LocalMiniLMEmbedder

    embedder = LocalMiniLMEmbedder()
    out: list[QueryPath] = []
    if "HybridSearcher" in names:
        out.append(core_searcher(corpus, embedder))
    if "llamaindex.HybridRetriever" in names:
        from contextual_retrieval_llamaindex import LocalMiniLMEmbedding

        out.append(llamaindex_retriever(corpus, LocalMiniLMEmbedding()))
    if any(n.startswith("langchain.") for n in names):
        from contextual_retrieval_langchain import LocalMiniLMEmbeddings

        out.extend(p for p in langchain_retrievers(corpus, LocalMiniLMEmbeddings()) if p.name in names)
    if "ContextualIndex" in names:
        src, index_dir = workdir / "src", workdir / "index"
        write_files(corpus, src)
        build_index(src, index_dir)
        out.append(contextual_index(index_dir, embedder))
    return out


# -- case: concurrent queries -------------------------------------------------------------------


def concurrent_case(path: QueryPath, queries: Sequence[str], threads: int = 8) -> dict[str, Any]:
    """The queries serially, then by `threads` threads on the same object (or the path's `many`);
    mismatches: answers that differ from the serial one."""
    queries = list(queries)
    path.search(queries[0])  # warm (model and stores loaded) before timing
    started = time.perf_counter()
    serial = [path.search(q) for q in queries]
    serial_s = time.perf_counter() - started
    errors: list[str] = []
    started = time.perf_counter()
    if path.many is not None:
        try:
            got: list[Answer | None] = list(path.many(queries, threads))
        except Exception as exc:  # counted: the case must show none
            errors.append(f"{type(exc).__name__}: {exc}")
            got = [None] * len(queries)
    else:
        def one(q: str) -> Answer | None:
            try:
                return path.search(q)
            except Exception as exc:
                errors.append(f"{type(exc).__name__}: {exc}")
                return None

        with ThreadPoolExecutor(threads) as pool:
            got = list(pool.map(one, queries))
    concurrent_s = time.perf_counter() - started
    mismatches = sum(1 for a, b in zip(serial, got) if b is not None and a != b)
    return {"name": f"concurrent/{path.name}", "queries": len(queries), "threads": threads, "errors": len(errors),
            "mismatches": mismatches, "throughput_ratio": round(serial_s / concurrent_s, 3),
            "serial_s": round(serial_s, 3), "concurrent_s": round(concurrent_s, 3), "first_errors": errors[:3]}


# -- case: memory under load --------------------------------------------------------------------


def rss_bytes() -> int:
    """This process's resident set size now."""
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:  # not Linux
        import psutil  # type: ignore[import-untyped]

        return int(psutil.Process().memory_info().rss)


def memory_case(path: QueryPath, queries: Sequence[str], total: int = 10_000, warmup: int = MEMORY_WARMUP,
                seconds: float | None = None, report: Callable[[dict[str, Any]], None] | None = None,
                every: int = 500) -> dict[str, Any]:
    """`total` queries (cycling `queries`), or as many as `seconds` allow; RSS after the first
    `warmup` (a tenth of `total` when that is fewer) against RSS at the end. `report` gets the
    row so far every `every` queries after the warm-up; ``queries`` is the count actually run."""
    warmup = min(warmup, max(1, total // 10))
    errors, mismatches, first = 0, 0, {}
    base = 0
    started = time.perf_counter()

    def row(done: int) -> dict[str, Any]:
        now = rss_bytes()
        return {"name": f"memory/{path.name}", "queries": done, "errors": errors, "mismatches": mismatches,
                "rss_after_warmup_mb": round(base / 2**20, 1), "rss_end_mb": round(now / 2**20, 1),
                "rss_growth_percent": round(100.0 * (now - base) / base, 2) if base else None,
                "seconds": round(time.perf_counter() - started, 1)}

    done = 0
    for done in range(1, total + 1):
        q = queries[(done - 1) % len(queries)]
        try:
            got = path.search(q)
            if first.setdefault(q, got) != got:
                mismatches += 1
        except Exception:
            errors += 1
        if done == warmup:
            gc.collect()
            base = rss_bytes()
        elif done > warmup and done % every == 0:
            if report is not None:
                report(row(done))
            if seconds is not None and time.perf_counter() - started > seconds:
                break
    gc.collect()
    return row(done)


# -- case: reads during writes ------------------------------------------------------------------


@dataclass
class TwoVersions:
    """The folder's two versions: A (the corpus) and B (`grown` longer by a paragraph, `removed`
    gone); `expected[v][query]` is the answer of index v."""

    src: Path
    grown: Path
    grown_text: tuple[str, str]
    removed: Path
    removed_text: str

    def switch(self, version: str) -> None:
        self.grown.write_text(self.grown_text[0 if version == "A" else 1], encoding="utf-8")
        if version == "A":
            self.removed.write_text(self.removed_text, encoding="utf-8")
        else:
            self.removed.unlink(missing_ok=True)


def two_versions(corpus: Corpus, src: Path) -> TwoVersions:
    files = list(write_files(corpus, src).values())
    grown, removed = files[0], files[-1]
    text = grown.read_text(encoding="utf-8")
    extra = ("\n\nNote on the watchdog: the soak watchdog restarts a stalled worker after ninety "
             "seconds without a heartbeat and logs the restart count.\n")
    return TwoVersions(src, grown, (text, text + extra), removed, removed.read_text(encoding="utf-8"))


_WRITER = """
import sys, contextlib, io
sys.path.insert(0, {bench!r})
import soak
from contextual_retrieval_core.app.cli import main
v = soak.TwoVersions(**soak.json_to_versions({versions!r}))
stop, progress = soak.Path({stop!r}), soak.Path({progress!r})
n = 0
while not stop.exists():
    n += 1
    v.switch("B" if n % 2 else "A")
    with contextlib.redirect_stdout(io.StringIO()):
        code = main(soak.index_command(v.src, soak.Path({index!r}), "--lock-wait", "120"))
    if code != 0:
        sys.exit(code)
    progress.write_text(str(n))
print(n)
"""

_READER = """
import sys, json, time
sys.path.insert(0, {bench!r})
import soak
from contextual_retrieval_core.embeddings.minilm import LocalMiniLMEmbedder
index = soak.Path({index!r})
path = soak.contextual_index(index, LocalMiniLMEmbedder()) if {kind!r} == "search" else soak.cli_query(index)
queries = {queries!r}
progress = soak.Path({progress!r})
while not progress.exists():  # from the writer's first update on
    time.sleep(0.05)
with open({out!r}, "w") as fh:
    n = 0
    while n < {count!r} or int(progress.read_text() or 0) < {min_updates!r}:
        q = queries[n % len(queries)]
        n += 1
        try:
            fh.write(json.dumps({{"q": q, "answer": path.search(q)}}) + "\\n")
        except Exception as exc:
            fh.write(json.dumps({{"q": q, "error": type(exc).__name__ + ": " + str(exc)}}) + "\\n")
        fh.flush()
"""


def json_to_versions(data: dict) -> dict:
    return {"src": Path(data["src"]), "grown": Path(data["grown"]), "grown_text": tuple(data["grown_text"]),
            "removed": Path(data["removed"]), "removed_text": data["removed_text"]}


def _versions_json(v: TwoVersions) -> dict:
    return {"src": str(v.src), "grown": str(v.grown), "grown_text": list(v.grown_text), "removed": str(v.removed),
            "removed_text": v.removed_text}


def read_during_write_case(corpus: Corpus, workdir: Path, queries: Sequence[str], count: int = 200,
                           cli_processes: int = 0, min_updates: int = 2) -> list[dict[str, Any]]:
    """Readers query the index while a writer process re-indexes it between versions A and B:
    ``search`` (one long-lived `ContextualIndex` in another process) and ``cli-main`` (the query
    command's entry point in a loop in another process), each from the end of the writer's first
    update on, at least `count` queries and until the writer has made `min_updates` updates; and
    `cli_processes` real ``contextual-retrieval query`` runs. Every answer must be index A's or
    index B's."""
    from contextual_retrieval_core.embeddings.minilm import LocalMiniLMEmbedder

    src, index_dir = workdir / "rw-src", workdir / "rw-index"
    versions = two_versions(corpus, src)
    queries = list(queries)
    embedder = LocalMiniLMEmbedder()
    expected: dict[str, set[Answer]] = {q: set() for q in queries}
    for version in ("B", "A"):  # ends on A, as the writer's first update leaves B
        versions.switch(version)
        build_index(src, index_dir)
        path = contextual_index(index_dir, embedder)
        for q in queries:
            expected[q].add(path.search(q))
    differ = sum(1 for q in queries if len(expected[q]) == 2)
    bench = str(Path(__file__).resolve().parent)
    stop, progress = workdir / "rw-stop", workdir / "rw-updates"
    stop.unlink(missing_ok=True)
    progress.unlink(missing_ok=True)
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    writer = subprocess.Popen([sys.executable, "-c", _WRITER.format(bench=bench, versions=_versions_json(versions), stop=str(stop),
                                                                     index=str(index_dir), progress=str(progress))],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    readers = {}
    for kind in ("search", "cli-main"):
        out = workdir / f"rw-{kind}.jsonl"
        code = _READER.format(bench=bench, index=str(index_dir), kind=kind, queries=queries, out=str(out), count=count,
                              progress=str(progress), min_updates=min_updates)
        readers[kind] = (subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE, text=True, env=env), out)
    process_answers: list[tuple[str, Any]] = []
    exe = Path(sys.executable).with_name("contextual-retrieval")
    while cli_processes and not progress.exists() and writer.poll() is None:
        time.sleep(0.05)
    for n in range(cli_processes):
        q = queries[n % len(queries)]
        run = subprocess.run([str(exe), "query", str(index_dir), q, "-k", "20", "--json"], capture_output=True, text=True, env=env)
        process_answers.append((q, tuple((h["id"], h["score"]) for h in json.loads(run.stdout)) if run.returncode == 0
                                else {"error": run.stderr.strip()[-300:]}))
    while any(proc.poll() is None for proc, _ in readers.values()):
        if writer.poll() is not None:  # the writer stopped early: its error is the answer
            for proc, _ in readers.values():
                proc.kill()
            break
        time.sleep(0.1)
    stop.touch()
    writer_out, writer_err = writer.communicate(timeout=600)
    if writer.returncode != 0:
        raise RuntimeError(f"the index writer failed ({writer.returncode}): {writer_err[-2000:]}")
    updates = int(writer_out.strip() or 0)
    cases = []
    for kind, (proc, out) in readers.items():
        if proc.returncode != 0:
            raise RuntimeError(f"reader {kind} failed: {proc.stderr.read()[-2000:] if proc.stderr else ''}")
        rows = [json.loads(line) for line in out.read_text().splitlines()]
        answers = [(r["q"], tuple(tuple(p) for p in r["answer"]) if "answer" in r else {"error": r["error"]}) for r in rows]
        cases.append(_rw_row(kind, answers, expected, updates, differ))
    if cli_processes:
        cases.append(_rw_row("contextual-retrieval query", process_answers, expected, updates, differ))
    return cases


def _rw_row(kind: str, answers: list[tuple[str, Any]], expected: dict[str, set[Answer]], updates: int, differ: int) -> dict[str, Any]:
    errors = [a["error"] for _, a in answers if isinstance(a, dict)]
    odd = [(q, a) for q, a in answers if not isinstance(a, dict) and a not in expected[q]]
    mismatches = len(odd)
    seen = {v for q, a in answers if not isinstance(a, dict) for v, ans in zip("AB", sorted(expected[q])) if ans == a}
    return {"name": f"read_during_write/{kind}", "queries": len(answers), "errors": len(errors), "mismatches": mismatches,
            "updates": updates, "queries_whose_answer_changes": differ, "first_errors": errors[:3],
            "first_mismatches": [{"query": q, "answer": [i for i, _ in a][:8],
                                  "expected": [[i for i, _ in e][:8] for e in expected[q]]} for q, a in odd[:2]],
            "answers_of_both_versions_seen": len(seen) == 2}


# -- the run ------------------------------------------------------------------------------------


def memory_in_children(dataset: str, names: Sequence[str], total: int, jobs: int, seconds: float | None = None,
                       ) -> list[dict[str, Any]]:
    """`memory_case` for each path in a process of its own (its RSS is that path's alone), `jobs`
    at a time; each prints its row so far as it goes."""
    script = str(Path(__file__).resolve())
    limit = ["--memory-seconds", str(seconds)] if seconds else []

    def child(name: str) -> dict[str, Any]:
        run = subprocess.run([sys.executable, script, "--dataset", dataset, "--memory-child", name,
                              "--memory-queries", str(total), *limit], capture_output=True, text=True,
                             env={**os.environ, "PYTHONWARNINGS": "ignore"})
        if run.returncode != 0:
            return {"name": f"memory/{name}", "queries": 0, "errors": 1, "mismatches": 0,
                    "first_errors": [run.stderr[-1000:]]}
        return json.loads(run.stdout.strip().splitlines()[-1])

    with ThreadPoolExecutor(jobs) as pool:
        return list(pool.map(child, names))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default=DEFAULT_DATASET, help="the cookbook dataset folder")
    parser.add_argument("--json", default=str(Path(__file__).with_name("soak.json")), help="where to write the results")
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--memory-queries", type=int, default=10_000)
    parser.add_argument("--rw-queries", type=int, default=200, help="queries per reader during updates")
    parser.add_argument("--cli-processes", type=int, default=20, help="real `contextual-retrieval query` runs during updates")
    parser.add_argument("--cases", default="concurrent,read_during_write,memory")
    parser.add_argument("--paths", default=",".join(PATH_NAMES),
                        help="the query paths of the concurrent and memory cases (default: all); rows of other paths "
                             "already in --json are kept")
    parser.add_argument("--concurrent-queries", type=int, help="the first N queries in the concurrent case (default: all)")
    parser.add_argument("--concurrent-docs", type=int, help="the concurrent case on the first N documents only "
                        "(default: all; the builds of five paths dominate its time on a small machine)")
    parser.add_argument("--jobs", type=int, default=len(PATH_NAMES), help="memory cases run at once, each in its own process")
    parser.add_argument("--memory-seconds", type=float, help="stop each memory case after this long (its row "
                        "says how many queries ran); default: no limit")
    parser.add_argument("--memory-child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    wanted = set(args.cases.split(","))
    paths = [p for p in args.paths.split(",") if p]
    unknown = sorted(set(paths) - set(PATH_NAMES))
    if unknown:
        parser.error(f"unknown --paths {', '.join(unknown)}; choose from {', '.join(PATH_NAMES)}")
    corpus = cookbook_corpus(args.dataset)
    queries = corpus.queries
    if args.memory_child:
        with tempfile.TemporaryDirectory(prefix="soak-") as tmp:
            (path,) = build_paths(corpus, Path(tmp), [args.memory_child])
            report = lambda row: print(json.dumps(row), flush=True)  # noqa: E731
            print(json.dumps(memory_case(path, queries, args.memory_queries, seconds=args.memory_seconds, report=report)))
        return 0
    cases: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="soak-") as tmp:
        work = Path(tmp)
        if "memory" in wanted:  # first: its processes do not share this one's memory
            for row in memory_in_children(args.dataset, paths, args.memory_queries, args.jobs, args.memory_seconds):
                cases.append(row)
                print(json.dumps(row), flush=True)
        if "concurrent" in wanted:
            docs = list(corpus.documents)[: args.concurrent_docs]
            part = Corpus({d: corpus.documents[d] for d in docs}, {d: corpus.chunks[d] for d in docs}, queries)
            for path in build_paths(part, work, paths):
                cases.append(concurrent_case(path, queries[: args.concurrent_queries], args.threads))
                print(json.dumps(cases[-1]), flush=True)
        if "read_during_write" in wanted:
            rw_queries = queries[:20] + ["soak watchdog restarts a stalled worker after ninety seconds"]
            for row in read_during_write_case(corpus, work, rw_queries, args.rw_queries, args.cli_processes, min_updates=4):
                cases.append(row)
                print(json.dumps(row), flush=True)
    ran = {c["name"] for c in cases}
    if Path(args.json).is_file():  # the rows of cases and paths not run this time are kept
        kept = [c for c in json.loads(Path(args.json).read_text(encoding="utf-8")).get("cases", [])
                if c["name"] not in ran]
        cases = kept + cases
    out = {"dataset": Path(args.dataset).name, "threads": args.threads, "cpu_count": os.cpu_count(),
           "load_average_at_end": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
           "command": "python benchmarks/soak.py " + " ".join(sys.argv[1:] if argv is None else argv), "cases": cases}
    Path(args.json).write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    bad = [c["name"] for c in cases if c["errors"] or c["mismatches"] or (c.get("rss_growth_percent") or 0) >= 5]
    print(f"wrote {args.json}; {len(cases)} cases, {len(bad)} failing{': ' + ', '.join(bad) if bad else ''}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
