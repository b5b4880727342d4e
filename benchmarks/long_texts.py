"""How a text longer than the embedder's window is embedded, on the cookbook set's own 737 chunks
(issue 41): every design measured against today's quality.py configurations.

    python benchmarks/long_texts.py [--dataset DIR] [--json PATH] [--cache FILE]

The nine configurations of `contextual-retrieval eval` with the Claude 3 Haiku contexts and the
library's fusion defaults (dense PRF on), offline MiniLM (256 tokens; 471 of the 737 contextual
texts are longer), one run per design:

- `truncated`: one vector per chunk, the text cut at the window (the library before; `windows=False`).
- `windows`: the library's default, `WindowConfig()`: a long chunk keeps its one-vector row (its
  text as the model reads it) and gets one extra row per further overlapping window (256 tokens,
  64 shared, each with the chunk's context); a chunk scores as its best row.
- `windows-first-cut`: the same, with the chunk's own row being its first window cut at a
  whitespace piece (the opt-in windows before this change).
- `windows-mean`: `WindowConfig(pooling="mean")`: one row, the mean of the rows above.
- `whole-token-mean`: one vector per chunk, the mean of every token's output over consecutive
  runs of at most 254 tokens, each run read by the model on its own (what the model's own mean
  pooling would give with a longer window; built here, not in the library).

`worst_drop` is the largest fall from `truncated` over the configurations that embed (the BM25
rows cannot move) and every k, with where it is. Writes benchmarks/long_texts.json (or --json).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
from _paths import DEFAULT_DATASET  # noqa: E402

from contextual_retrieval_core.app.evaluation import evaluate, load_contexts_jsonl, load_cookbook  # noqa: E402
from contextual_retrieval_core.dense import windows as W  # noqa: E402
from contextual_retrieval_core.embeddings.cache import CachedEmbedder  # noqa: E402
from contextual_retrieval_core.embeddings.minilm import LocalMiniLMEmbedder  # noqa: E402
from contextual_retrieval_core.search import hybrid  # noqa: E402

DESIGNS = ("truncated", "windows", "windows-first-cut", "windows-mean", "whole-token-mean")


class WholeTokenMean(LocalMiniLMEmbedder):
    """MiniLM whose long texts are read in consecutive runs of the window, every token's output
    averaged (the runs are equal, each within 254 tokens plus [CLS] and [SEP])."""

    model_name = "all-MiniLM-L6-v2-onnx-int8+whole-token-mean"

    def embed(self, texts: Any) -> np.ndarray:
        texts = list(texts)
        self._load()
        tok = self._tokenizer.__class__.from_str(self._tokenizer.to_str())
        tok.no_truncation()
        out = np.zeros((len(texts), 384), dtype=np.float32)
        for n, e in enumerate(tok.encode_batch(texts)):
            ids = e.ids
            room = self.max_tokens - 2
            body = ids[1:-1]
            parts = max(1, -(-len(body) // room))
            size = max(1, -(-len(body) // parts))
            runs = [[ids[0], *body[s:s + size], ids[-1]] for s in range(0, max(1, len(body)), size)]
            total, count = np.zeros(384), 0
            for run in runs:
                feeds = {"input_ids": np.asarray([run]), "attention_mask": np.ones((1, len(run)), dtype=np.int64)}
                if "token_type_ids" in self._inputs:
                    feeds["token_type_ids"] = np.zeros((1, len(run)), dtype=np.int64)
                hidden = self._session.run(None, feeds)[0][0]
                total += hidden.sum(axis=0)
                count += len(run)
            v = total / count
            out[n] = v / np.linalg.norm(v)
        return out


def _first_cut_rows(embedder: Any, chunks: Any, windows: Any, *, batch_size: int = 64, show_progress: bool = False) -> W.DenseRows:
    """`build_dense_rows` with each long chunk's own row its first window (the rows before)."""
    plan = windows.window_for(embedder)
    size, overlap = plan
    pieces = sorted({p for c in chunks for text in (c.chunk.text, c.context or "") for p in W._PIECE.findall(text)})
    count = W._through(embedder, "count_tokens")
    special = int(count([""])[0])
    counts = {p: max(0, int(k) - special) for p, k in zip(pieces, count(pieces))}
    per = [W.chunk_windows(c, counts, special, size, overlap) for c in chunks]
    flat = [t for texts in per for t in texts]
    vectors = W.embed_texts(embedder, flat, None, batch_size, False)
    ids, owners = [], []
    for c, texts in zip(chunks, per):
        ids.extend([c.id] if len(texts) == 1 else [f"{c.id}{W.WINDOW_MARK}{k}" for k in range(len(texts))])
        owners.extend([c.id] * len(texts))
    return W.DenseRows(ids, owners, vectors)


def run(design: str, dataset: Any, contexts: Any, cache: str) -> list[dict]:
    base = WholeTokenMean() if design == "whole-token-mean" else LocalMiniLMEmbedder(warn_truncated=False)
    embedder = CachedEmbedder(base, cache)
    windows: Any = {"truncated": False, "whole-token-mean": False, "windows": W.WindowConfig(),
                    "windows-first-cut": W.WindowConfig(), "windows-mean": W.WindowConfig(pooling="mean")}[design]
    original = hybrid.build_dense_rows
    if design == "windows-first-cut":
        hybrid.build_dense_rows = _first_cut_rows  # type: ignore[assignment]
    try:
        return [r.to_json() for r in evaluate(dataset, embedder, contexts, windows=windows)]
    finally:
        hybrid.build_dense_rows = original  # type: ignore[assignment]


def worst_drop(base: list[dict], other: list[dict]) -> dict:
    drops = [(round(o["pass_at"][k] - b["pass_at"][k], 2), b["name"], k)
             for b, o in zip(base, other) for k in b["pass_at"] if b["name"].split("-")[-1] != "bm25"]
    low = min(drops)
    return {"points": low[0], "config": low[1], "k": int(low[2]),
            "cells_below_minus_0.3": sum(d < -0.3 for d, _, _ in drops), "cells_above_plus_0.3": sum(d > 0.3 for d, _, _ in drops)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default=DEFAULT_DATASET)
    parser.add_argument("--json", default=str(HERE / "long_texts.json"))
    parser.add_argument("--cache", default=str(HERE / "out" / "embeddings.sqlite3"))
    args = parser.parse_args()
    dataset = load_cookbook(args.dataset)
    contexts = load_contexts_jsonl(Path(args.dataset) / "contexts_claude-3-haiku.jsonl", dataset)
    results: dict[str, Any] = {}
    for design in DESIGNS:
        started = time.perf_counter()
        configs = run(design, dataset, contexts, args.cache)
        results[design] = {"configs": configs, "elapsed_s": round(time.perf_counter() - started, 1)}
        print(design, " ".join(f"{c['name']} {c['pass_at']['5']}/{c['pass_at']['10']}/{c['pass_at']['20']}" for c in configs), flush=True)
    for design in DESIGNS[1:]:
        results[design]["worst_drop"] = worst_drop(results["truncated"]["configs"], results[design]["configs"])
        print(f"{design}: worst drop from truncated {results[design]['worst_drop']}")
    Path(args.json).write_text(json.dumps({"dataset": "cookbook-codebase", "chunks": len(dataset.chunks),
                                           "queries": len(dataset.queries), "designs": results}, indent=1) + "\n")


if __name__ == "__main__":
    main()
