"""The `contextual-retrieval` command.

    contextual-retrieval eval --dataset DIR [--contexts FILE] [--json PATH] [--plot PATH]

Every subcommand has --help. Exit codes: 0 success, 2 bad usage or input (with a message that
names the fix).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Sequence

__all__ = ["main", "build_parser"]


def _default_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "contextual-retrieval" / "embeddings.sqlite3"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="contextual-retrieval",
        description="Contextual Retrieval (contextual embeddings + contextual BM25 + rank fusion) tools.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    ev = sub.add_parser(
        "eval",
        help="score retrieval configurations on a labelled dataset (cookbook format)",
        description=(
            "Run the configurations dense, bm25, hybrid and, with --contexts, contextual-dense, "
            "contextual-bm25, contextual-hybrid with the library's defaults, and print Pass@k "
            "(the cookbook's definition), recall@k and MRR. Offline: the local MiniLM embedder."
        ),
    )
    ev.add_argument(
        "--dataset",
        metavar="DIR",
        help="folder with codebase_chunks.json and evaluation_set.jsonl "
        "(default: $CONTEXTUAL_RETRIEVAL_DATASET)",
    )
    ev.add_argument("--contexts", metavar="FILE", help="JSONL of precomputed contexts (doc_id, original_index, context)")
    ev.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    ev.add_argument("--plot", metavar="PATH", help="also write a PNG bar chart of Pass@k")
    ev.add_argument(
        "--configs",
        metavar="NAME,...",
        help="comma-separated subset of configurations (default: all the inputs allow)",
    )
    ev.add_argument(
        "--embedding-cache",
        metavar="PATH",
        default=None,
        help=f"SQLite embedding cache (default: {_default_cache()}); 'none' disables it",
    )
    ev.add_argument("--no-progress", action="store_true", help="hide progress bars")
    ev.set_defaults(func=_cmd_eval)
    return parser


def _version() -> str:
    from . import __version__

    return __version__


def _cmd_eval(args: argparse.Namespace) -> int:
    from .embeddings.minilm import LocalMiniLMEmbedder
    from .evaluation import evaluate, format_table, load_contexts_jsonl, load_cookbook, plot_results, results_to_json

    dataset = load_cookbook(args.dataset)
    contexts = load_contexts_jsonl(args.contexts, dataset) if args.contexts else None
    embedder = LocalMiniLMEmbedder()
    cache = args.embedding_cache
    if cache is None:
        cache = str(_default_cache())
    if cache.lower() != "none":
        from .embeddings.cache import CachedEmbedder

        embedder = CachedEmbedder(embedder, cache)  # type: ignore[assignment]
    configs = [c.strip() for c in args.configs.split(",") if c.strip()] if args.configs else None
    started = time.perf_counter()
    results = evaluate(dataset, embedder, contexts, configs, show_progress=not args.no_progress)
    elapsed = time.perf_counter() - started
    print(
        f"dataset: {len(dataset.documents)} documents, {len(dataset.chunks)} chunks, "
        f"{len(dataset.queries)} queries; embedder: {embedder.model_name}; "
        f"contexts: {Path(args.contexts).name if args.contexts else 'none'}"
    )
    print(format_table(results))
    print(f"({elapsed:.1f} s)")
    if args.json:
        payload = results_to_json(
            results,
            dataset=str(args.dataset or os.environ.get("CONTEXTUAL_RETRIEVAL_DATASET")),
            embedder=embedder.model_name,
            contexts=Path(args.contexts).name if args.contexts else None,
        )
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    if args.plot:
        plot_results(results, args.plot, title=f"Pass@k, {len(dataset.queries)} queries, {embedder.model_name}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return args.func(args)
    except (ValueError, FileNotFoundError, ImportError, TypeError) as exc:
        print(f"contextual-retrieval {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
