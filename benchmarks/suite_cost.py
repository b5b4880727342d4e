"""The test suite's cost: wall time, CPU time, peak memory, test counts, line coverage and the
slowest tests of one pytest run of this tree, and, as its peer in the same run, of an earlier tree.

    python benchmarks/suite_cost.py [--dataset DIR] [--json PATH] [--base DIR] [--ci] [--coverage]
        [--workers N|auto] [--repeat N] [PATH ...]

Each run is `python -m pytest -q -p no:cacheprovider --durations=15 [--ci] [-n N] [--cov=<the three
packages>] PATH ...` in a child process started in the tree's folder with the tree's own
`.venv/bin/python` (else this interpreter). Wall time runs from its start to its exit; CPU time is
its user + system time and that of the processes it waited for; peak memory is the largest
resident set one of those processes reached (both from `os.wait4`). Counts and the TOTAL coverage
line are read from pytest's summary. `--base DIR` (for instance a `git worktree` of an earlier
commit with its own `.venv`) runs the same command there; base and tree runs alternate, and the
ratios are base / tree of the median wall and CPU times. The load average before and after each
run is recorded: on a shared machine the wall times mean little without it.

`--readme` measures what issue 44's acceptance names instead: the README's test command (the
line of its set-up block that runs pytest), pasted into bash in a clean clone of the tree's HEAD
(`git clone`, so only committed files), install included: a fresh `.venv`, the install the
command names (from the package index as configured, the installer's own cache as the machine has
it), then the tests. PATH, `--ci`, `--workers` and `--coverage` do not apply; the clone is deleted afterwards.

With no PATH the whole suite runs (what `pytest` collects from `testpaths`). `--dataset` sets
CONTEXTUAL_RETRIEVAL_DATASET for the runs (the cookbook tests read it).
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
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TREE = HERE.parent
sys.path.insert(0, str(HERE))
from _paths import DEFAULT_DATASET  # noqa: E402

PACKAGES = ("contextual_retrieval_core", "contextual_retrieval_llamaindex", "contextual_retrieval_langchain")
_COUNT = re.compile(r"(\d+) (passed|failed|skipped|errors?|deselected|xfailed|xpassed|warnings?)")
_TOTAL = re.compile(r"^TOTAL\s+(\d+)\s+(\d+)\s+(\d+(?:\.\d+)?)%", re.M)
_DURATION = re.compile(r"^(\d+\.\d+)s (call|setup|teardown)\s+(\S+)", re.M)


def python_of(tree: Path) -> str:
    venv = tree / ".venv" / "bin" / "python"
    return str(venv) if venv.is_file() else sys.executable


def pytest_command(tree: Path, paths: list[str], ci: bool, coverage: bool, workers: str | None = None) -> list[str]:
    cmd = [python_of(tree), "-m", "pytest", "-q", "-p", "no:cacheprovider", "--durations=15"]
    if ci:
        cmd.append("--ci")
    if workers:
        cmd += ["-n", workers]
    if coverage:
        cmd += [f"--cov={p}" for p in PACKAGES] + ["--cov-report=term"]
    return cmd + paths


def readme_test_command() -> str:
    """The README's test command: the line of its shell blocks that runs pytest."""
    text = (TREE / "README.md").read_text(encoding="utf-8")
    lines = [line.strip() for block in re.findall(r"```bash\n(.*?)```", text, re.S) for line in block.splitlines()]
    (line,) = [line for line in lines if "-m pytest" in line]
    return line


def readme_run(name: str, tree: Path, command: str, env: dict, log_dir: Path) -> dict:
    """`command` in bash in a fresh clone of `tree`'s HEAD; the clone is removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="clean-clone-") as tmp:
        os.chmod(tmp, 0o755)  # as a clone in a home folder: the tests' unprivileged reader reaches the venv
        clone = Path(tmp) / tree.name
        subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(tree), str(clone)], check=True)
        run = one_run(name, clone, ["bash", "-c", command], env, log_dir)
        run["head"] = subprocess.run(["git", "rev-parse", "HEAD"], cwd=clone, capture_output=True, text=True).stdout.strip()
        return run


def parse_summary(output: str) -> dict:
    """Counts from pytest's last summary line, the TOTAL coverage line, the slowest durations."""
    tail = [line for line in output.splitlines() if " in " in line and _COUNT.search(line)]
    counts: dict[str, int] = {}
    if tail:
        for n, what in _COUNT.findall(tail[-1]):
            key = {"error": "errors", "warning": "warnings"}.get(what, what)
            counts[key] = int(n)
    total = _TOTAL.search(output)
    slowest = []
    if "slowest 15 durations" in output:
        section = output.split("slowest 15 durations", 1)[1]
        slowest = [{"s": float(s), "phase": phase, "test": test} for s, phase, test in _DURATION.findall(section)][:15]
    return {
        "counts": counts,
        "tests": sum(counts.get(k, 0) for k in ("passed", "failed", "skipped", "errors", "xfailed", "xpassed")),
        "coverage_percent": float(total.group(3)) if total else None,
        "coverage_statements": int(total.group(1)) if total else None,
        "coverage_missed": int(total.group(2)) if total else None,
        "slowest": slowest,
    }


def one_run(name: str, tree: Path, cmd: list[str], env: dict, log_dir: Path) -> dict:
    log = log_dir / f"{name}-{time.time_ns()}.txt"
    load_before = os.getloadavg()
    with log.open("w", encoding="utf-8") as out:
        started = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=tree, env=env, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    output = log.read_text(encoding="utf-8", errors="replace")
    run = {
        "tree": name,
        "exit_code": proc.returncode,
        "wall_s": round(wall, 1),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
        "peak_rss_mb": round(usage.ru_maxrss / 1024),  # Linux: kilobytes
        "load_before": [round(x, 1) for x in load_before],
        "load_after": [round(x, 1) for x in os.getloadavg()],
        **parse_summary(output),
        "log": str(log),
    }
    print(json.dumps({k: v for k, v in run.items() if k != "slowest"}), flush=True)
    return run


def summary(runs: list[dict]) -> dict:
    return {
        "runs": len(runs),
        "median_wall_s": round(statistics.median(r["wall_s"] for r in runs), 1),
        "median_cpu_s": round(statistics.median(r["cpu_s"] for r in runs), 1),
        "peak_rss_mb": max(r["peak_rss_mb"] for r in runs),
        "tests": runs[-1]["tests"],
        "coverage_percent": runs[-1]["coverage_percent"],
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("paths", nargs="*", help="test paths (default: the whole suite)")
    p.add_argument("--dataset", default=DEFAULT_DATASET)
    p.add_argument("--json", default=None)
    p.add_argument("--base", default=None, help="an earlier tree (with its own .venv) run as the peer")
    p.add_argument("--ci", action="store_true", help="pass --ci (the slow tests too; missing servers fail)")
    p.add_argument("--coverage", action="store_true", help="measure line coverage of the three packages")
    p.add_argument("--workers", default=None, help="pytest-xdist workers (-n): a number or auto (the README's command)")
    p.add_argument("--readme", action="store_true", help="time the README's test command in a clean clone, install included")
    p.add_argument("--repeat", type=int, default=1)
    args = p.parse_args(argv)
    if args.repeat < 1:
        p.error("--repeat must be at least 1")
    env = {**os.environ, "CONTEXTUAL_RETRIEVAL_DATASET": str(args.dataset)}
    trees = ([("base", Path(args.base).resolve())] if args.base else []) + [("tree", TREE)]
    log_dir = Path(tempfile.mkdtemp(prefix="test-suite-"))
    runs: list[dict] = []
    for _ in range(args.repeat):
        for name, tree in trees:
            if args.readme:
                runs.append(readme_run(name, tree, readme_test_command(), env, log_dir))
            else:
                runs.append(one_run(name, tree, pytest_command(tree, args.paths, args.ci, args.coverage, args.workers), env, log_dir))
    result: dict = {
        "command": readme_test_command() + "  (in a clean clone)" if args.readme else
                   "pytest -q -p no:cacheprovider --durations=15" + (" --ci" if args.ci else "")
                   + (f" -n {args.workers}" if args.workers else "")
                   + (" --cov=<packages>" if args.coverage else "") + "".join(" " + x for x in args.paths),
        "cpus": os.cpu_count(),
        "trees": {name: str(tree) for name, tree in trees},
        "summary": {name: summary([r for r in runs if r["tree"] == name]) for name, _ in trees},
        "runs": runs,
    }
    if args.base:
        base, tree = result["summary"]["base"], result["summary"]["tree"]
        result["wall_ratio_base_over_tree"] = round(base["median_wall_s"] / tree["median_wall_s"], 2)
        result["cpu_ratio_base_over_tree"] = round(base["median_cpu_s"] / tree["median_cpu_s"], 2)
    print(json.dumps({k: v for k, v in result.items() if k != "runs"}, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0 if all(r["exit_code"] == 0 for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
