"""Whether two runs of a benchmark agree on every figure but the timings.

    python benchmarks/same_quality.py benchmarks/quality.json /tmp/rerun/quality.json

Compares every number and string in the two JSON files, leaves whose key names a time, a speed,
a memory figure or the machine aside; prints the leaves that differ and exits 1 when any does.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

#: key fragments of figures that differ between runs of the same code
TIMING = ("time", "elapsed", "seconds", "_s", "ms", "wall", "cpu", "speed", "per_s", "date", "version",
          "python", "platform", "rss", "latency", "machine")


def leaves(obj: Any, path: str = "") -> dict[str, Any]:
    """{path: value} of every leaf; list items are named by their "name" or "config" when they have one."""
    if isinstance(obj, dict):
        return {k: v for key, value in obj.items() for k, v in leaves(value, f"{path}/{key}").items()}
    if isinstance(obj, list):
        out: dict[str, Any] = {}
        for i, item in enumerate(obj):
            name = (item.get("name") or item.get("config") or item.get("configuration") or i) if isinstance(item, dict) else i
            out.update(leaves(item, f"{path}[{name}]"))
        return out
    return {path: obj}


def differing(old: Any, new: Any) -> list[tuple[str, Any, Any]]:
    a, b = leaves(old), leaves(new)
    return [(k, a.get(k), b.get(k)) for k in sorted(set(a) | set(b))
            if a.get(k) != b.get(k) and not any(t in k.lower() for t in TIMING)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old")
    parser.add_argument("new")
    args = parser.parse_args()
    with open(args.old, encoding="utf-8") as f, open(args.new, encoding="utf-8") as g:
        found = differing(json.load(f), json.load(g))
    for key, before, after in found:
        print(f"{key}: {before!r} -> {after!r}")
    print(f"{len(found)} figures differ (timings aside)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
