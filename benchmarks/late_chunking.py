"""Late chunking against one vector per chunk, on the cookbook set.

    python benchmarks/late_chunking.py [--dataset DIR] [--json PATH] [--cache FILE] [--windows 512]

Offline MiniLM (all-MiniLM-L6-v2, int8 ONNX), library defaults (`evaluate`: weighted RRF, dense
PRF where a dense side is fused with BM25, the structural header before Claude's contexts). For
each configuration with a dense side (dense and hybrid over the chunks alone, with the offline
structural contexts, and with Claude 3 Haiku's contexts) three embedders index the same texts:

- `one-vector`: `LocalMiniLMEmbedder`, one vector per indexed text, truncated at 256 tokens (the
  library's default);
- `late-<w>`: `LateChunkingEmbedder(window=w)` (`--windows`, default 512, the model's limit; e.g.
  `--windows 512,256` adds a column within the 256 tokens the model was trained on): each document's indexed texts (context, when any,
  before its chunk) joined in order and run through the model in macro-windows of `w` positions
  (a quarter shared), each chunk mean-pooled over its own tokens. Queries are embedded by MiniLM in
  every column.

BM25-only rows do not depend on the embedder and are left out. `voyage-context-3` (Voyage's
contextualized chunk embeddings, the hosted counterpart) has its place in the table with no
figures: it needs VOYAGE_API_KEY, which this machine does not have.

`limits` in the JSON: per text set, the documents' lengths in model tokens (without special
tokens), how many need more than one macro-window, and the share of chunks whose document is longer
than one window (those chunks see a neighbourhood of their document, not all of it).

`adoption`: the rule for defaults (better on contextual-hybrid and on hybrid, no configuration more
than 0.5 points worse at any k), applied to each late column against `one-vector`.

Writes benchmarks/late_chunking.json (or --json).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
import numpy as np  # noqa: E402
from _paths import DEFAULT_DATASET  # noqa: E402

from contextual_retrieval_core.app.evaluation import (  # noqa: E402
    evaluate,
    format_table,
    headed_contexts,
    load_contexts_jsonl,
    load_cookbook,
    structural_contexts,
)
from contextual_retrieval_core.embeddings.cache import CachedEmbedder  # noqa: E402
from contextual_retrieval_core.embeddings.late_chunking import LateChunkingEmbedder, macro_windows  # noqa: E402
from contextual_retrieval_core.embeddings.minilm import LocalMiniLMEmbedder  # noqa: E402
from contextual_retrieval_core.types import compose_indexed_text  # noqa: E402

KS = (5, 10, 20)
CONFIGS = ["dense", "hybrid", "structural-dense", "structural-hybrid", "contextual-dense", "contextual-hybrid"]
RULE_POINTS = 0.5


def limits(dataset, sources: dict, window: int, overlap: int, tokenizer) -> dict:
    """Document lengths in tokens per text set, and how many chunks see only part of their document."""
    out = {}
    for name, found in sources.items():
        by_doc: dict[str, list[str]] = {}
        for c in dataset.chunks:
            by_doc.setdefault(c.document_id, []).append(
                compose_indexed_text(found[c.id], c.text) if found is not None else c.text)
        lengths = {d: len(tokenizer.encode("\n".join(t), add_special_tokens=False).ids) for d, t in by_doc.items()}
        sizes = np.array(list(lengths.values()))
        long_docs = {d for d, n in lengths.items() if n > window - 2}
        out[name] = {
            "documents": len(sizes), "tokens_median": int(np.median(sizes)), "tokens_max": int(sizes.max()),
            "tokens_total": int(sizes.sum()),
            "documents_over_one_window": len(long_docs),
            "macro_windows": sum(len(macro_windows(int(n), window=window, overlap=overlap)) for n in sizes),
            "chunks_in_documents_over_one_window": sum(1 for c in dataset.chunks if c.document_id in long_docs),
            "chunks": len(dataset.chunks),
        }
    return out


def adoption(base: dict[str, dict], late: dict[str, dict]) -> dict:
    """The rule for defaults, applied to one late column against one-vector."""
    delta = {name: {k: round(late[name]["pass_at"][str(k)] - base[name]["pass_at"][str(k)], 2) for k in KS} for name in base}
    better = {name: sum(delta[name].values()) > 0 and min(delta[name].values()) >= 0 for name in ("hybrid", "contextual-hybrid")}
    worst = min((d, name, k) for name, ds in delta.items() for k, d in ds.items())
    return {"delta_pass_at": delta, "better": better, "worst": {"points": worst[0], "config": worst[1], "k": worst[2]},
            "adopted": all(better.values()) and worst[0] >= -RULE_POINTS}


def write(args, dataset, minilm, columns, late_limits, seconds, started) -> dict:
    out = {
        "dataset": Path(args.dataset).name, "queries": len(dataset.queries), "chunks": len(dataset.chunks),
        "documents": len(dataset.documents), "embedder": minilm.model_name, "contexts": "contexts_claude-3-haiku.jsonl",
        "columns": columns,
        "voyage-context-3": None,  # not measured: needs VOYAGE_API_KEY
        "adoption": {name: adoption(columns["one-vector"], col) for name, col in columns.items() if name != "one-vector"},
        "limits": late_limits,
        "evaluate_seconds": seconds,
        "elapsed_s": round(time.perf_counter() - started, 1),
    }
    Path(args.json).write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dataset", default=DEFAULT_DATASET)
    ap.add_argument("--json", default=str(HERE / "late_chunking.json"))
    ap.add_argument("--cache", default=None, help="an embedding cache file (SQLite) for the one-vector column")
    ap.add_argument("--windows", default="512", help="macro-window sizes to run, comma-separated (at most 512)")
    args = ap.parse_args(argv)
    started = time.perf_counter()
    dataset = load_cookbook(args.dataset)
    llm = load_contexts_jsonl(Path(args.dataset) / "contexts_claude-3-haiku.jsonl", dataset)
    structural = structural_contexts(dataset)
    minilm = LocalMiniLMEmbedder()
    columns: dict[str, dict[str, dict]] = {}
    seconds: dict[str, float] = {}
    t = time.perf_counter()
    results = evaluate(dataset, CachedEmbedder(minilm, args.cache or ":memory:"), llm, CONFIGS, ks=KS)
    seconds["one-vector"] = round(time.perf_counter() - t, 1)
    columns["one-vector"] = {r.name: r.to_json() for r in results}
    print(format_table(results), flush=True)
    late_limits: dict[str, dict] = {}
    write(args, dataset, minilm, columns, late_limits, seconds, started)
    windows = [int(w) for w in args.windows.split(",") if w.strip()]
    for w in windows:
        late = LateChunkingEmbedder(window=w, query_embedder=minilm)
        t = time.perf_counter()
        results = evaluate(dataset, late, llm, CONFIGS, ks=KS)  # each grouped call embedded once
        seconds[f"late-{w}"] = round(time.perf_counter() - t, 1)
        columns[f"late-{w}"] = {r.name: r.to_json() for r in results}
        print(f"late-{w} ({late.model_name})\n{format_table(results)}", flush=True)
        late._load()
        sources = {"chunks": None, "structural": structural, "contextual": headed_contexts(dataset, llm, structural)}
        late_limits[f"late-{w}"] = {"window": w, "overlap": late.overlap,
                                    "text_sets": limits(dataset, sources, w, late.overlap, late._tokenizer)}
        write(args, dataset, minilm, columns, late_limits, seconds, started)  # after each column
    out = write(args, dataset, minilm, columns, late_limits, seconds, started)
    print(json.dumps(out["adoption"], indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
