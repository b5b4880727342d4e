"""`contextual-retrieval query` start-up: wall time and peak memory of one query, before and after.

    python benchmarks/query_startup.py [--before-tree DIR] [--runs 5] [--json PATH] [--index-dir DIR]
                                       [--question TEXT] [--dataset DIR]

The demo corpus (`contextual-retrieval demo --save-corpus`) is indexed once with this checkout
(offline: structural contexts, the local embedder), then `contextual-retrieval query INDEX QUESTION`
runs `--runs` times per tree, the trees alternating (in ABBA order, so a rising or falling machine
load favours neither): "before"
with the code and .venv of `--before-tree` (a checkout of the commit before the change), "after"
with this checkout. Each run is a fresh process under /usr/bin/time: wall seconds (as the user
waits, interpreter start included) and peak resident memory. Reported per tree: median, min and
max wall, peak RSS, and whether every run printed the same output as the first. One more run of
each tree with ``python -X importtime`` lists what its start-up spends on imports, by top-level
package (`imports_before`, `imports_after`). `--dataset` is accepted for symmetry with the other scripts
and unused: the demo corpus is built in.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
QUESTION = "How much did ACME's revenue grow in Q2 2023?"
# the command line of either layout: contextual_retrieval_core.app.cli now, contextual_retrieval_core.cli before
MAIN = ("import sys\ntry:\n    from contextual_retrieval_core.app.cli import main\nexcept ImportError:\n"
        "    from contextual_retrieval_core.cli import main\nsys.exit(main())")


def build_index(index_dir: Path, work: Path) -> None:
    from contextual_retrieval_core.app._demo import write_corpus

    corpus = work / "corpus"
    write_corpus(corpus)
    subprocess.run([sys.executable, "-c", MAIN, "index", str(corpus), "--index-dir", str(index_dir), "--contexts", "structural",
                    "--embedder", "local", "--no-progress"], check=True, capture_output=True, text=True,
                   env={**os.environ, "XDG_CACHE_HOME": str(work / "cache")})


def run_query(python: str, tree: Path, index_dir: Path, question: str, work: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree), "XDG_CACHE_HOME": str(work / "cache")}
    out = subprocess.run(["/usr/bin/time", "-f", "%e %M", python, "-c", MAIN, "query", str(index_dir), question],
                         cwd=tree, env=env, capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(out.stderr[-2000:])
    wall, kb = out.stderr.strip().splitlines()[-1].split()
    return {"wall_s": float(wall), "rss_peak_mb": round(int(kb) / 1024), "stdout": out.stdout}


def import_costs(python: str, tree: Path, index_dir: Path, question: str, work: Path, top: int = 12) -> list[dict]:
    """Self import time by top-level package in one run with -X importtime, largest first."""
    env = {**os.environ, "PYTHONPATH": str(tree), "XDG_CACHE_HOME": str(work / "cache")}
    out = subprocess.run([python, "-X", "importtime", "-c", MAIN, "query", str(index_dir), question],
                         cwd=tree, env=env, capture_output=True, text=True, check=True)
    spent: Counter[str] = Counter()
    for line in out.stderr.splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+\d+ \|\s*(\S+)", line)
        if m:
            spent[m[2].split(".")[0]] += int(m[1])
    total = sum(spent.values())
    rows = [{"package": name, "ms": round(us / 1000)} for name, us in spent.most_common(top)]
    return [{"package": "(all imports)", "ms": round(total / 1000)}] + rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before-tree", default=None, help="a checkout of the commit before (with .venv); none: after only")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", default=str(HERE / "query_startup.json"))
    parser.add_argument("--index-dir", default=None, help="an index to query (default: the demo corpus, indexed here)")
    parser.add_argument("--question", default=QUESTION)
    parser.add_argument("--dataset", default=None, help="unused (the demo corpus is built in)")
    args = parser.parse_args(argv)
    trees = {}
    if args.before_tree:
        before = Path(args.before_tree).resolve()
        trees["before"] = (str(before / ".venv" / "bin" / "python"), before)
    trees["after"] = (sys.executable, HERE.parent)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        index_dir = Path(args.index_dir) if args.index_dir else work / "index"
        if not args.index_dir:
            build_index(index_dir, work)
        runs: dict[str, list[dict]] = {tree: [] for tree in trees}
        for i in range(args.runs):
            order = list(trees.items())
            for tree, (python, path) in order if i % 2 == 0 else order[::-1]:  # ABBA: a load trend favours neither
                row = run_query(python, path, index_dir, args.question, work)
                runs[tree].append(row)
                print(f"{i} {tree:6s} {row['wall_s']:.2f} s  {row['rss_peak_mb']} MB", flush=True)
        imports = {tree: import_costs(python, path, index_dir, args.question, work) for tree, (python, path) in trees.items()}
    first = runs["after"][0]["stdout"]
    summary = {tree: {"median_s": round(statistics.median(r["wall_s"] for r in rs), 3), "min_s": min(r["wall_s"] for r in rs),
                      "max_s": max(r["wall_s"] for r in rs), "rss_peak_mb": max(r["rss_peak_mb"] for r in rs),
                      "same_output": all(r["stdout"] == first for r in rs)} for tree, rs in runs.items()}
    if "before" in summary:
        summary["after"]["median_ratio"] = round(summary["after"]["median_s"] / summary["before"]["median_s"], 3)
    payload = {"question": args.question, "runs": args.runs, "cpus": os.cpu_count(),
               "load_average": [round(x, 2) for x in os.getloadavg()], "trees": summary, "imports_after": imports["after"], "imports_before": imports.get("before"),
               "walls": {tree: [r["wall_s"] for r in rs] for tree, rs in runs.items()}}
    Path(args.json).write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    print(json.dumps({"trees": summary, "imports": imports}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
