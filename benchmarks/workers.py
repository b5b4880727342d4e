"""Ingestion with 1, 2 and 4 worker processes on one context store (issue 15).

    python benchmarks/workers.py [--dataset DIR] [--json PATH] [--workers 1,2,4] [--latency 0.3]
        [--concurrency 5] [--documents N] [--stores sqlite,postgresql]

Each run starts N worker processes (tests/claims_worker.py: the real Contextualizer and the real
anthropic SDK) on the cookbook codebase corpus, all writing one fresh store (an SQLite file, or a
fresh database on a throwaway PostgreSQL server when its binaries are found), against one
loopback fake Anthropic server per run. Every request to the fake sleeps a fixed `--latency`
(0.3 s, no per-token time) before it answers, so wall time is bound by request latency as it is
with the real API, not by this machine's 2 shared cores. Each worker runs at the same
per-worker concurrency (`--concurrency`, 5 as in the cookbook). Wall time runs from the moment
every worker has started (imports done) to the last one's end.

Acceptance (issue 15): requests == chunks in every run (each chunk paid once), every chunk has
its context in the store, and 4 workers' wall time <= 0.35x one worker's.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import uuid
from contextlib import ExitStack
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))  # the fake server and the worker live with the tests

from _paths import DEFAULT_DATASET  # noqa: E402
from claims_worker import finish, start_workers  # noqa: E402
from fakes.anthropic_server import FakeAnthropicServer  # noqa: E402

from contextual_retrieval_core.app.evaluation import load_cookbook  # noqa: E402
from contextual_retrieval_core.store.context_store import ContextStore  # noqa: E402


def one_run(store: str, workers: int, docs: list, chunks: list, args: argparse.Namespace, tmp: Path) -> dict:
    with FakeAnthropicServer(latency_s=args.latency) as server:
        procs, outs = start_workers(workers, store, server.url, tmp, docs, chunks, concurrency=args.concurrency, poll=0.5)
        reports = finish(procs, outs)
        requests = server.stats()["requests"]
    with ContextStore(store) as s:
        stored = len(s)
    wall = max(r["ended"] for r in reports) - min(r["started"] for r in reports)
    run = {"store": "postgresql" if store.startswith("postgresql") else "sqlite", "workers": workers,
           "chunks": len(chunks), "requests": requests,
           "chunks_with_context": min(min(r["with_context"] for r in reports), stored), "wall_s": round(wall, 2),
           "generated_per_worker": [r["report"]["generated"] for r in reports],
           "left_to_other_workers": [r["report"]["left_to_other_workers"] for r in reports]}
    print(json.dumps(run), flush=True)
    return run


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", default=DEFAULT_DATASET)
    p.add_argument("--json", default=None)
    p.add_argument("--workers", default="1,2,4")
    p.add_argument("--latency", type=float, default=0.3)
    p.add_argument("--concurrency", type=int, default=5)
    p.add_argument("--documents", type=int, default=None, help="use only the first N documents (a stated subset)")
    p.add_argument("--stores", default="sqlite,postgresql")
    args = p.parse_args()

    data = load_cookbook(args.dataset)
    docs = list(data.documents)[: args.documents] if args.documents else list(data.documents)
    ids = {d.id for d in docs}
    chunks = [c for c in data.chunks if c.document_id in ids]
    counts = [int(n) for n in args.workers.split(",")]
    runs = []
    with tempfile.TemporaryDirectory() as tmp_name, ExitStack() as stack:
        tmp = Path(tmp_name)
        stores = args.stores.split(",")
        pg_url = None
        if "postgresql" in stores:
            from servers import pg_bin, running_postgres

            bin_dir = pg_bin()
            if bin_dir is None:
                print("no PostgreSQL server binaries: postgresql runs left out", file=sys.stderr)
            else:
                pg_url = stack.enter_context(running_postgres(bin_dir))
        for kind in stores:
            for n in counts:
                if kind == "sqlite":
                    store = str(tmp / f"sqlite-{n}-{uuid.uuid4().hex[:6]}.sqlite3")
                elif pg_url is not None:
                    import psycopg

                    name = f"bench_{n}_{uuid.uuid4().hex[:8]}"
                    with psycopg.connect(pg_url, autocommit=True) as conn:
                        conn.execute(f'CREATE DATABASE "{name}"')
                    store = pg_url.rsplit("/", 1)[0] + "/" + name
                else:
                    continue
                runs.append(one_run(store, n, docs, chunks, args, tmp))
    out = {"latency_s": args.latency, "per_worker_concurrency": args.concurrency,
           "documents": len(docs), "runs": runs}
    for kind in {r["store"] for r in runs}:
        by = {r["workers"]: r["wall_s"] for r in runs if r["store"] == kind}
        if 1 in by and 4 in by:
            out[f"{kind}_wall_ratio_4_vs_1"] = round(by[4] / by[1], 3)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps({k: v for k, v in out.items() if k != "runs"}))


if __name__ == "__main__":
    main()
