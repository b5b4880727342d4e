"""Quality on the cookbook codebase set: the six configurations with the library's defaults.

    python benchmarks/quality.py [--dataset DIR]

Runs `contextual-retrieval eval` with the Claude 3 Haiku contexts and the offline MiniLM embedder,
and writes benchmarks/quality.json and benchmarks/quality.png next to this script.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
from _paths import DEFAULT_DATASET  # noqa: E402


def main() -> int:
    from contextual_retrieval.cli import main as cli_main

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default=DEFAULT_DATASET)
    parser.add_argument("--contexts", default=None, help="default: DATASET/contexts_claude-3-haiku.jsonl")
    parser.add_argument("--embedding-cache", default=str(HERE / "out" / "embeddings.sqlite3"))
    args = parser.parse_args()
    contexts = args.contexts or str(Path(args.dataset) / "contexts_claude-3-haiku.jsonl")
    return cli_main([
        "eval", "--dataset", args.dataset, "--contexts", contexts,
        "--json", str(HERE / "quality.json"), "--plot", str(HERE / "quality.png"),
        "--embedding-cache", args.embedding_cache, "--no-progress",
    ])


if __name__ == "__main__":
    sys.exit(main())
