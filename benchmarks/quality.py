"""Quality on the cookbook codebase set: the six configurations with the library's defaults.

    python benchmarks/quality.py [--dataset DIR] [--json PATH] [--plot PATH]

Runs `contextual-retrieval eval` with the Claude 3 Haiku contexts and the offline MiniLM embedder,
and writes benchmarks/quality.json and benchmarks/quality.png next to this script (or --json /
--plot). It adds to the JSON, and prints:

- `failure_rate_at_20`: 100 - Pass@20 per configuration. Pass@20 (mean over queries of the
  fraction of golden chunks in the top 20) is the Anthropic blog's recall@20, so this is the blog's
  "top-20 retrieval failure rate"; and how much it falls from dense to contextual-hybrid, relative.
- `truncation`: how many chunks (plain and contextualized) exceed the embedder's token window,
  counted with the embedder's own tokenizer.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
from _paths import DEFAULT_DATASET  # noqa: E402


def failure_rates(configs: list[dict]) -> dict:
    """100 - Pass@20 per configuration, and the relative fall dense -> contextual-hybrid (if both ran)."""
    rates = {c["name"]: round(100 - c["pass_at"]["20"], 2) for c in configs}
    out: dict = {"definition": "100 - Pass@20 (the blog's top-20 retrieval failure rate)", "configs": rates}
    if "dense" in rates and "contextual-hybrid" in rates and rates["dense"] > 0:
        out["relative_fall_dense_to_contextual_hybrid_percent"] = round(
            100 * (rates["dense"] - rates["contextual-hybrid"]) / rates["dense"], 1
        )
    return out


def truncation(dataset_dir: str, contexts_path: str) -> dict:
    """Chunks longer than the local embedder's window, counted with its own tokenizer (truncation
    enabled at its max length: an encoding that overflows was cut)."""
    from contextual_retrieval_core.embeddings.minilm import LocalMiniLMEmbedder
    from contextual_retrieval_core.evaluation import load_contexts_jsonl, load_cookbook
    from contextual_retrieval_core.types import ContextualChunk

    dataset = load_cookbook(dataset_dir)
    contexts = load_contexts_jsonl(contexts_path, dataset)
    embedder = LocalMiniLMEmbedder()
    cut = embedder.count_truncated

    return {
        "max_tokens": embedder.max_tokens,
        "chunks": len(dataset.chunks),
        "contextualized_over_window": cut([ContextualChunk(c, contexts[c.id]).indexed_text for c in dataset.chunks]),
        "plain_over_window": cut([c.text for c in dataset.chunks]),
    }


def main(argv: list[str] | None = None) -> int:
    from contextual_retrieval_core.cli import main as cli_main

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default=DEFAULT_DATASET)
    parser.add_argument("--contexts", default=None, help="default: DATASET/contexts_claude-3-haiku.jsonl")
    parser.add_argument("--embedding-cache", default=str(HERE / "out" / "embeddings.sqlite3"))
    parser.add_argument("--json", default=str(HERE / "quality.json"))
    parser.add_argument("--plot", default=str(HERE / "quality.png"))
    args = parser.parse_args(argv)
    contexts = args.contexts or str(Path(args.dataset) / "contexts_claude-3-haiku.jsonl")
    code = cli_main([
        "eval", "--dataset", args.dataset, "--contexts", contexts,
        "--json", args.json, "--plot", args.plot,
        "--embedding-cache", args.embedding_cache, "--no-progress",
    ])
    if code != 0:
        return code
    payload = json.loads(Path(args.json).read_text(encoding="utf-8"))
    payload["failure_rate_at_20"] = failure_rates(payload["configs"])
    payload["truncation"] = truncation(args.dataset, contexts)
    Path(args.json).write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")

    rates = payload["failure_rate_at_20"]
    print("\ntop-20 failure rate (100 - Pass@20): " + ", ".join(f"{k} {v:.2f}%" for k, v in rates["configs"].items()))
    if "relative_fall_dense_to_contextual_hybrid_percent" in rates:
        print(f"failures fall by {rates['relative_fall_dense_to_contextual_hybrid_percent']:.1f}% from dense to contextual-hybrid")
    t = payload["truncation"]
    print(f"over the embedder's {t['max_tokens']}-token window: {t['contextualized_over_window']} of {t['chunks']} "
          f"contextualized chunks ({t['plain_over_window']} without contexts)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
