"""The suite's time split between the tests an earlier tree had and the tests added since.

    python benchmarks/suite_split.py --junit RUN.xml --base DIR [--json PATH]

`RUN.xml` is the junit XML of one run of this tree's suite (for instance
``PYTEST_ADDOPTS=--junitxml=RUN.xml .ci/run``); `DIR` an earlier checkout with its own `.venv`,
whose test ids are read with ``pytest --collect-only -q --ci``. Tests are matched by name (the
function name with its parameters; a moved or renamed file keeps its tests' names), doctests by
the last part of their object's name. Writes the count and seconds of each side, the tests of
the run per tier (unit, integration, e2e, doctests) and the files of the added tests by time.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent


def base_names(base: Path) -> set[str]:
    """The test names (and doctest object names) the suite of `base` collects."""
    out = subprocess.run([str(base / ".venv" / "bin" / "python"), "-m", "pytest", "--collect-only", "-q", "--ci",
                          "-p", "no:cacheprovider"], cwd=base, capture_output=True, text=True)
    return {line.strip().split("::")[-1] for line in out.stdout.splitlines() if "::" in line}


def split(junit: Path, names: set[str]) -> dict:
    doc_names = {n.rsplit(".", 1)[-1] for n in names if "." in n}
    before, added = [0, 0.0], [0, 0.0]
    tiers: Counter[str] = Counter()
    added_files: Counter[str] = Counter()
    slowest_before: list[tuple[float, str]] = []
    root = ET.parse(junit).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    for case in root.iter("testcase"):
        name, cls, seconds = case.get("name", ""), case.get("classname", ""), float(case.get("time") or 0)
        parts = cls.split(".")
        tiers[parts[1] if parts[0] == "tests" and len(parts) > 1 else "doctests"] += seconds
        old = name in names or (not cls.startswith("tests") and name.rsplit(".", 1)[-1] in doc_names)
        side = before if old else added
        side[0] += 1
        side[1] += seconds
        if not old:
            added_files[parts[-1]] += seconds
        else:
            slowest_before.append((seconds, f"{parts[-1]}::{name}"))
    return {"run_seconds": round(float(suite.get("time", 0)) if suite is not None else 0.0, 1),"tests_before": {"count": before[0], "seconds": round(before[1], 1)},
            "tests_added": {"count": added[0], "seconds": round(added[1], 1)},
            "seconds_by_tier": {k: round(v, 1) for k, v in sorted(tiers.items())},
            "added_by_file": [{"file": f, "seconds": round(s, 1)} for f, s in added_files.most_common(15)],
            "slowest_before": [{"test": t, "seconds": round(s, 1)} for s, t in sorted(slowest_before, reverse=True)[:5]]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--junit", required=True)
    parser.add_argument("--base", required=True, help="an earlier checkout with its own .venv")
    parser.add_argument("--json", default=str(HERE / "suite_split.json"))
    args = parser.parse_args(argv)
    names = base_names(Path(args.base))
    result = {"junit": Path(args.junit).name, "base_tests": len(names), **split(Path(args.junit), names)}
    Path(args.json).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
