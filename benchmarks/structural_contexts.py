"""The offline structural contexts, before and after they moved onto tree-sitter and markdown-it.

    python benchmarks/structural_contexts.py --label after [--dataset DIR] [--json PATH]

Measures, with the library's defaults and the offline MiniLM embedder:

- `eval`: Pass@k / recall@k / MRR of `hybrid` (no contexts) and the `structural-*`
  configurations on the cookbook codebase set (the contexts are computed by
  `StructuralContextGenerator` in this run);
- `coverage`: how many of the set's chunks get an enclosing scope (`in ...`) and how many a
  `defines: ...` list, i.e. how much the code parser found;
- `demo`: the offline `contextual-retrieval demo` (built-in corpus, k=3): answers found in the
  top 3, plain and contextual, and the rank of each answer.

Each run is stored under its `--label` in the JSON (other labels are kept), with the git commit
it ran on, so "before" was run on the commit before the parser change and "after" on the change.
`index_rerun.py` has its own JSON.
"""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(HERE))
from _paths import DEFAULT_DATASET  # noqa: E402

CONFIGS = ["hybrid", "structural-dense", "structural-bm25", "structural-hybrid"]


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def run(dataset_dir: str, cache: str) -> dict:
    from contextual_retrieval_core.app._demo import run_demo
    from contextual_retrieval_core.app.evaluation import evaluate, load_cookbook, structural_contexts
    from contextual_retrieval_core.embeddings.cache import CachedEmbedder
    from contextual_retrieval_core.embeddings.minilm import LocalMiniLMEmbedder

    dataset = load_cookbook(dataset_dir)
    Path(cache).parent.mkdir(parents=True, exist_ok=True)
    embedder = CachedEmbedder(LocalMiniLMEmbedder(), cache)
    start = time.perf_counter()
    contexts = structural_contexts(dataset)
    context_s = time.perf_counter() - start
    results = evaluate(dataset, embedder, configs=CONFIGS)
    coverage = {
        "chunks": len(contexts),
        "with_scope": sum(1 for c in contexts.values() if ", in " in c),
        "with_defines": sum(1 for c in contexts.values() if "; defines: " in c),
        "context_words_mean": round(sum(len(c.split()) for c in contexts.values()) / max(len(contexts), 1), 2),
    }
    demo = run_demo(offline=True, show_progress=False, out=io.StringIO())
    return {
        "commit": _commit(),
        "eval": {r.name: r.to_json() for r in results},
        "coverage": coverage,
        "contexts_seconds": round(context_s, 3),
        "demo": {
            "k": demo.queries[0].k if demo.queries else None,
            "plain_found": sum(o.plain_found for o in demo.queries),
            "contextual_found": sum(o.contextual_found for o in demo.queries),
            "queries": len(demo.queries),
            "chunks": demo.chunks,
            "ranks": [[o.plain_rank, o.contextual_rank] for o in demo.queries],
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--label", required=True, help="the key this run is stored under, e.g. before / after")
    parser.add_argument("--dataset", default=DEFAULT_DATASET)
    parser.add_argument("--embedding-cache", default=str(HERE / "out" / "embeddings.sqlite3"))
    parser.add_argument("--json", default=str(HERE / "structural_contexts.json"))
    args = parser.parse_args(argv)
    out = run(args.dataset, args.embedding_cache)
    path = Path(args.json)
    data = json.loads(path.read_text("utf-8")) if path.exists() else {}
    data[args.label] = out
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    print(json.dumps({args.label: out}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
