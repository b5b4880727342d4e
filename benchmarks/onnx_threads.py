"""Two processes embedding at once on one 2-core machine: the offline MiniLM with onnxruntime's
default threads (all cores each) against one thread each (``CONTEXTUAL_RETRIEVAL_ONNX_THREADS=1``,
what each pytest-xdist worker uses).

    python benchmarks/onnx_threads.py [--texts 200] [--json benchmarks/onnx_threads.json]

Each process embeds the first `--texts` cookbook chunks once (the model loaded and warmed first,
outside the timing); reported: each process's wall and CPU seconds, per setting, and the ratio of
the slower process's wall time, default threads over one thread.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _paths import DEFAULT_DATASET  # noqa: E402

CHILD = """
import json, sys, time
from contextual_retrieval_core.app.evaluation import load_cookbook
from contextual_retrieval_core.embeddings.minilm import LocalMiniLMEmbedder
texts = [c.text for c in load_cookbook(sys.argv[1]).chunks][: int(sys.argv[2])]
e = LocalMiniLMEmbedder(warn_truncated=False)
e.embed_documents(["warm"])
print("ready", flush=True)
sys.stdin.readline()
wall, cpu = time.perf_counter(), time.process_time()
e.embed_documents(texts)
print(json.dumps({"threads": e.threads, "wall_s": round(time.perf_counter() - wall, 2), "cpu_s": round(time.process_time() - cpu, 2)}))
"""


def pair(dataset: str, texts: int, threads: str | None) -> list[dict]:
    env = {**os.environ, "PYTHONPATH": str(HERE.parent)}
    env.pop("CONTEXTUAL_RETRIEVAL_ONNX_THREADS", None)
    if threads:
        env["CONTEXTUAL_RETRIEVAL_ONNX_THREADS"] = threads
    procs = [subprocess.Popen([sys.executable, "-c", CHILD, dataset, str(texts)], env=env, text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE) for _ in range(2)]
    for p in procs:  # both loaded, then both started together
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    return [json.loads(p.communicate()[0].strip().splitlines()[-1]) for p in procs]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default=str(DEFAULT_DATASET))
    parser.add_argument("--texts", type=int, default=200)
    parser.add_argument("--json", default=str(HERE / "onnx_threads.json"))
    args = parser.parse_args()
    default, one = pair(args.dataset, args.texts, None), pair(args.dataset, args.texts, "1")
    result = {"cpus": os.cpu_count(), "texts": args.texts, "load_average": os.getloadavg(),
              "default_threads": default, "one_thread": one,
              "ratio_default_over_one_thread": round(max(r["wall_s"] for r in default) / max(r["wall_s"] for r in one), 2)}
    Path(args.json).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
