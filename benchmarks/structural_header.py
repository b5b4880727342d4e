"""The structural header on LLM contexts: cookbook set, Claude 3 Haiku contexts, offline defaults.

    python benchmarks/structural_header.py [--dataset DIR] [--contexts FILE] [--json PATH]

Runs the three `contextual-*` configurations of `contextual-retrieval eval` twice: with the
Claude 3 Haiku contexts as given, and with `structural_header=True` (each chunk's structural
context, the offline `StructuralContextGenerator`'s "From <file>, in <scope>; defines: <names>.",
on a line before the LLM's context; what `Contextualizer(structural_header=True)` indexes).
Everything else is the library's defaults (MiniLM, BM25, weighted RRF 0.5 / 0.5, one vector a
chunk). Writes benchmarks/structural_header.json: {"dataset", "contexts", "without": [...],
"with": [...], "delta": {config: {k: points}}, "header_tokens": {"mean", "median", "max"},
"failure_fall_vs_hybrid_percent": {"without", "with"}}, each list as `results_to_json` writes it;
header_tokens counts the header with the embedder's tokenizer; the fall is contextual-hybrid's
relative fall of 100 - Pass@20 against hybrid without contexts.

The no-context half of issue 14's adoption rule is the `hybrid` against `structural-hybrid` rows
of quality.json (the header alone is the structural context).
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

CONFIGS = ["contextual-dense", "contextual-bm25", "contextual-hybrid"]


def main(argv: list[str] | None = None) -> int:
    from contextual_retrieval_core.app.evaluation import (
        evaluate,
        format_table,
        load_contexts_jsonl,
        load_cookbook,
        results_to_json,
    )
    from contextual_retrieval_core.embeddings.cache import CachedEmbedder
    from contextual_retrieval_core.embeddings.minilm import LocalMiniLMEmbedder

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default=DEFAULT_DATASET)
    parser.add_argument("--contexts", default=None, help="default: DATASET/contexts_claude-3-haiku.jsonl")
    parser.add_argument("--json", default=str(HERE / "structural_header.json"))
    parser.add_argument("--embedding-cache", default=str(HERE / "out" / "embeddings.sqlite3"))
    args = parser.parse_args(argv)
    contexts_path = args.contexts or str(Path(args.dataset) / "contexts_claude-3-haiku.jsonl")
    dataset = load_cookbook(args.dataset)
    contexts = load_contexts_jsonl(contexts_path, dataset)
    embedder = CachedEmbedder(LocalMiniLMEmbedder(), args.embedding_cache)
    runs = {}
    for label, header in (("without", False), ("with", True)):
        results = evaluate(dataset, embedder, contexts, CONFIGS, structural_header=header)
        print(f"structural header {label}:\n{format_table(results)}\n", flush=True)
        runs[label] = results_to_json(results)["configs"]
    delta = {
        w["name"]: {k: round(w["pass_at"][k] - o["pass_at"][k], 2) for k in w["pass_at"]} | {"mrr": round(w["mrr"] - o["mrr"], 2)}
        for o, w in zip(runs["without"], runs["with"])
    }
    # what the header costs: its tokens per chunk, by the embedder's own tokenizer (special tokens not counted)
    from statistics import mean, median

    from contextual_retrieval_core.app.evaluation import structural_contexts

    structural = structural_contexts(dataset)
    special = embedder.embedder.count_tokens([""])[0]  # what the tokenizer adds to any text ([CLS], [SEP])
    tokens = [n - special for n in embedder.embedder.count_tokens([structural[c.id] for c in dataset.chunks])]
    header_tokens = {"mean": round(mean(tokens), 1), "median": median(tokens), "max": max(tokens)}
    print(f"header tokens per chunk: mean {header_tokens['mean']}, median {header_tokens['median']}, max {header_tokens['max']}")
    # failures at 20 (100 - Pass@20) against hybrid without contexts, with and without the header
    (base,) = evaluate(dataset, embedder, None, ["hybrid"])
    miss = 100 - base.pass_at[20]
    fall = {label: round(100 * (miss - (100 - next(r for r in rows if r["name"] == "contextual-hybrid")["pass_at"]["20"])) / miss, 1)
            for label, rows in runs.items()}
    print(f"contextual-hybrid failures at 20 against hybrid ({miss:.2f}%): {fall['without']}% fewer without the header, "
          f"{fall['with']}% with it")
    payload = {"dataset": Path(args.dataset).name, "contexts": Path(contexts_path).name, **runs, "delta": delta,
               "header_tokens": header_tokens, "failure_fall_vs_hybrid_percent": fall}
    Path(args.json).write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    for name, d in delta.items():
        print(f"{name:20s} " + "  ".join(f"{k}: {v:+.2f}" for k, v in d.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
