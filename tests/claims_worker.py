"""One ingestion worker process, for the multi-worker tests and benchmarks/workers.py.

    python tests/claims_worker.py --store PATH_OR_URL --url http://127.0.0.1:PORT --corpus corpus.json
        --out report.json [--concurrency 4] [--lease 60] [--renew S] [--poll 1] [--mode realtime|batch]
        [--grouped] [--go FILE]

Reads a corpus written by `write_corpus` ({"documents": [[id, text]], "chunks": [[id, doc_id, text,
index]]}), runs a real `Contextualizer` with the real anthropic SDK pointed at a loopback fake
Anthropic server (started by the parent, which counts every request), and writes the run's
`UsageReport` plus its start and end times (time.time(), taken after `--go FILE` exists, so that
imports are not timed) to --out as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from contextual_retrieval_core.contextualize.config import ContextualizeConfig

HERE = Path(__file__).resolve().parent

MODEL = "claude-3-haiku-20240307"


def write_corpus(path: Path, documents: Sequence, chunks: Sequence) -> None:
    """Write Document and Chunk objects as the JSON this worker reads."""
    path.write_text(json.dumps({
        "documents": [[d.id, d.text] for d in documents],
        "chunks": [[c.id, c.document_id, c.text, c.index] for c in chunks],
    }))


def start_workers(n: int, store: str, url: str, tmp: Path, documents: Sequence, chunks: Sequence,
                  **opts: Any) -> tuple[list[subprocess.Popen], list[Path]]:
    """Start `n` worker processes on one corpus and store; they begin together once all are up
    (options: this script's flags, e.g. concurrency=2, grouped=True)."""
    write_corpus(tmp / "corpus.json", documents, chunks)
    go = tmp / f"go-{uuid.uuid4().hex}"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE.parent), os.environ.get("PYTHONPATH", "")])}
    procs, outs = [], []
    for _ in range(n):
        out = tmp / f"worker-{uuid.uuid4().hex[:8]}.json"
        cmd = [sys.executable, str(HERE / "claims_worker.py"), "--store", store, "--url", url,
               "--corpus", str(tmp / "corpus.json"), "--out", str(out), "--go", str(go)]
        for name, value in opts.items():
            cmd += [f"--{name}"] if value is True else [f"--{name}", str(value)]
        procs.append(subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE))
        outs.append(out)
    while not all(out.with_suffix(".ready").exists() or p.poll() is not None for out, p in zip(outs, procs)):
        time.sleep(0.05)
    go.touch()
    return procs, outs


def finish(procs: list[subprocess.Popen], outs: list[Path], timeout: float = 600) -> list[dict]:
    """Wait for the workers; their reports (AssertionError with a worker's stderr if it failed)."""
    reports = []
    for proc, out in zip(procs, outs):
        _, err = proc.communicate(timeout=timeout)
        assert proc.returncode == 0, err.decode(errors="replace")[-3000:]
        reports.append(json.loads(out.read_text()))
    return reports


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--store", required=True)
    p.add_argument("--url", required=True)
    p.add_argument("--corpus", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--lease", type=float, default=60.0)
    p.add_argument("--renew", type=float, default=None)
    p.add_argument("--poll", type=float, default=1.0)
    p.add_argument("--mode", default="realtime")
    p.add_argument("--grouped", action="store_true")
    p.add_argument("--go", default=None)
    args = p.parse_args()

    import anthropic

    from contextual_retrieval_core import Chunk, Document
    from contextual_retrieval_core.contextualize.contextualizer import Contextualizer
    from contextual_retrieval_core.generators import AnthropicContextGenerator

    data = json.loads(Path(args.corpus).read_text())
    documents = [Document(i, text) for i, text in data["documents"]]
    chunks = [Chunk(i, d, text, index) for i, d, text, index in data["chunks"]]
    client = anthropic.Anthropic(api_key="test-key", base_url=args.url, max_retries=6)
    async_client = anthropic.AsyncAnthropic(api_key="test-key", base_url=args.url, max_retries=6)
    gen = AnthropicContextGenerator(MODEL, client=client, async_client=async_client,
                                    cache_ttl="1h" if args.mode == "batch" else "5m")
    ctx = Contextualizer(gen, args.store, config=ContextualizeConfig(concurrency=args.concurrency, mode=args.mode, grouped=args.grouped, show_progress=False, batch_poll_interval=0.2, claim_lease_s=args.lease, claim_renew_s=args.renew, claim_poll_s=args.poll))
    Path(args.out).with_suffix(".ready").touch()
    if args.go:
        while not Path(args.go).exists():
            time.sleep(0.01)
    started = time.time()
    result = ctx.contextualize(documents, chunks)
    ended = time.time()
    Path(args.out).write_text(json.dumps({
        "started": started, "ended": ended, "report": result.report.to_dict(),
        "with_context": sum(1 for c in result.chunks if c.context.strip()),
    }))


if __name__ == "__main__":
    main()
