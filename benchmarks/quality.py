"""Quality on the cookbook codebase set: the nine configurations with the library's defaults
(no contexts, the offline structural contexts, Claude 3 Haiku's contexts).

    python benchmarks/quality.py [--dataset DIR] [--json PATH] [--plot PATH]

Runs `contextual-retrieval eval` with the Claude 3 Haiku contexts and the offline MiniLM embedder,
and writes benchmarks/quality.json and benchmarks/quality.png next to this script (or --json /
--plot). It adds to the JSON, and prints:

- `failure_rate_at_20`: 100 - Pass@20 per configuration. Pass@20 (mean over queries of the
  fraction of golden chunks in the top 20) is the Anthropic blog's recall@20, so this is the blog's
  "top-20 retrieval failure rate"; and how much it falls, relative, against the right baseline
  (hybrid without contexts) for the structural and the Claude contexts, and from dense to
  contextual-hybrid (the blog's framing).
- `elapsed_s` (the eval run) and `embedding_cache`: "cold" when the embedding cache file did not
  exist before the run, so the time includes embedding every distinct text once.
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
    """100 - Pass@20 per configuration, and relative falls: hybrid -> structural-hybrid and
    hybrid -> contextual-hybrid (the gain of contexts alone), dense -> contextual-hybrid (the
    blog's framing), where both configurations ran."""
    rates = {c["name"]: round(100 - c["pass_at"]["20"], 2) for c in configs}
    out: dict = {"definition": "100 - Pass@20 (the blog's top-20 retrieval failure rate)", "configs": rates}
    for base, target in (("hybrid", "structural-hybrid"), ("hybrid", "contextual-hybrid"), ("dense", "contextual-hybrid")):
        if base in rates and target in rates and rates[base] > 0:
            key = f"relative_fall_{base}_to_{target}_percent".replace("-", "_")
            out[key] = round(100 * (rates[base] - rates[target]) / rates[base], 1)
    return out


def truncation(dataset_dir: str, contexts_path: str) -> dict:
    """Chunks longer than the local embedder's window, counted with its own tokenizer (truncation
    enabled at its max length: an encoding that overflows was cut)."""
    from contextual_retrieval_core.app.evaluation import headed_contexts, load_contexts_jsonl, load_cookbook
    from contextual_retrieval_core.embeddings.minilm import LocalMiniLMEmbedder
    from contextual_retrieval_core.types import ContextualChunk

    dataset = load_cookbook(dataset_dir)
    contexts = headed_contexts(dataset, load_contexts_jsonl(contexts_path, dataset))  # as indexed by default
    embedder = LocalMiniLMEmbedder()
    cut = embedder.count_truncated

    return {
        "max_tokens": embedder.max_tokens,
        "chunks": len(dataset.chunks),
        "contextualized_over_window": cut([ContextualChunk(c, contexts[c.id]).indexed_text for c in dataset.chunks]),
        "plain_over_window": cut([c.text for c in dataset.chunks]),
    }


def main(argv: list[str] | None = None) -> int:
    from contextual_retrieval_core.app.cli import main as cli_main

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default=DEFAULT_DATASET)
    parser.add_argument("--contexts", default=None, help="default: DATASET/contexts_claude-3-haiku.jsonl")
    parser.add_argument("--embedding-cache", default=str(HERE / "out" / "embeddings.sqlite3"))
    parser.add_argument("--json", default=str(HERE / "quality.json"))
    parser.add_argument("--plot", default=str(HERE / "quality.png"))
    args = parser.parse_args(argv)
    contexts = args.contexts or str(Path(args.dataset) / "contexts_claude-3-haiku.jsonl")
    cold = not Path(args.embedding_cache).exists()
    code = cli_main([
        "eval", "--dataset", args.dataset, "--contexts", contexts,
        "--json", args.json, "--plot", args.plot,
        "--embedding-cache", args.embedding_cache, "--no-progress",
    ])
    if code != 0:
        return code
    payload = json.loads(Path(args.json).read_text(encoding="utf-8"))
    payload["embedding_cache"] = "cold" if cold else "warm"
    payload["failure_rate_at_20"] = failure_rates(payload["configs"])
    payload["truncation"] = truncation(args.dataset, contexts)
    Path(args.json).write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")

    rates = payload["failure_rate_at_20"]
    print("\ntop-20 failure rate (100 - Pass@20): " + ", ".join(f"{k} {v:.2f}%" for k, v in rates["configs"].items()))
    for key, value in rates.items():
        if key.startswith("relative_fall_"):
            base, target = key[len("relative_fall_"):-len("_percent")].replace("_", "-").split("-to-")
            print(f"failures fall by {value:.1f}% from {base} to {target}")
    print(f"eval run: {payload['elapsed_s']:.1f} s ({payload['embedding_cache']} embedding cache)")
    t = payload["truncation"]
    print(f"over the embedder's {t['max_tokens']}-token window: {t['contextualized_over_window']} of {t['chunks']} "
          f"contextualized chunks ({t['plain_over_window']} without contexts)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
