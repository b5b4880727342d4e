"""Chunking time against the text's size (issue 43, item 4): `chunk_to_fit` at 100 KB and 1 MB
on text without whitespace, base64 (one line, and wrapped at 76 characters), minified JavaScript,
Markdown prose and Python, both ways the index chunks: the default (characters, 800, definitions
and headings first) and fitted to the offline MiniLM embedder's window (``--fit-chunks``: each
chunk with its structural context within 256 tokens, counted with MiniLM's tokenizer), and
fitted with a fixed reserve (an LLM's context, ``structural_header=False``: no structural context
is computed, so the time is the chunker's own).

    python benchmarks/chunk_linear.py [--json benchmarks/chunk_linear.json] [--repeats 3]

Per kind, size and way: CPU seconds of the process and wall seconds (of the run with the least CPU
time among `--repeats`, each with a fresh token window and context generator, so no count is
cached from an earlier run; CPU time, because the machine the figures come from is shared),
chunks, the longest chunk, whether the chunks hold every non-space character of the text in
order, and the characters handed to the tokenizer per character of text (1.0: each counted once);
per kind and way, the 1 MB CPU time over the 100 KB CPU time (10 when linear; none where the
100 KB time is under 5 ms). Then `read_changes` (what ``contextual-retrieval index`` runs per
file: read, chunk, line spans) on one file of each kind at both sizes, and a 100 KB notebook
with one base64 image output, chunked as read and with its payload replaced
(`chunking.payloads.omit_payloads`).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import platform
import random
import re
import string
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from contextual_retrieval_core import Document  # noqa: E402
from contextual_retrieval_core.chunking.budget import TokenWindow, window_of  # noqa: E402
from contextual_retrieval_core.chunking.payloads import omit_payloads  # noqa: E402
from contextual_retrieval_core.contextualize.fit import chunk_to_fit  # noqa: E402
from contextual_retrieval_core.embeddings.minilm import LocalMiniLMEmbedder  # noqa: E402
from contextual_retrieval_core.index._changes import read_changes  # noqa: E402
from contextual_retrieval_core.index.files import collect_files  # noqa: E402
from contextual_retrieval_core.index.report import IndexReport  # noqa: E402

SIZES = (100_000, 1_000_000)
PATHS = {"no whitespace": "blob.txt", "base64": "data.txt", "base64, 76-char lines": "key.pem.txt",
         "minified JavaScript": "bundle.min.js", "Markdown prose": "guide.md", "Python": "steps.py"}
BASE64_RUN = re.compile(r"[A-Za-z0-9+/]{100,}")
WORDS = ["the", "index", "reads", "each", "file", "and", "cuts", "it", "into", "chunks", "that", "fit", "window",
         "of", "embedder", "so", "every", "chunk", "is", "embedded", "whole", "with", "its", "context"]


def texts(size: int, seed: int = 43) -> dict[str, str]:
    """One text of each kind, `size` characters, deterministic."""
    rng = random.Random(seed)
    b64 = base64.b64encode(rng.randbytes(size * 3 // 4 + 3)).decode()[:size]
    js: list[str] = []
    prose: list[str] = []
    code: list[str] = []
    total = 0
    while total < size:
        n = len(js) + 1
        js.append(f"function f{n}(a,b){{var c=a+b*{n};if(c>{n}){{return g{n}(c,\"k{n}\")}}return c}};"
                  f"var v{n}=f{n}(1,2),w{n}=[v{n},{n}].map(function(x){{return x*2}});")
        total += len(js[-1])
    total = 0
    while total < size:
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(40, 160)))
        prose.append(f"## Section {len(prose) + 1}\n\n{words}.\n\n")
        total += len(prose[-1])
    total = 0
    while total < size:
        i = len(code) + 1
        code.append(f"def step_{i}(items, limit={i}):\n    \"\"\"Step {i}: the items over the limit, summed.\"\"\"\n"
                    f"    total = 0\n    for item in items:\n        if item > limit:\n            total += item\n"
                    f"    return total\n\n\n")
        total += len(code[-1])
    return {
        "no whitespace": "".join(rng.choices(string.ascii_letters + string.digits + "_-.", k=size)),
        "base64": b64,
        "base64, 76-char lines": "\n".join(b64[i:i + 76] for i in range(0, size, 77))[:size],
        "minified JavaScript": "".join(js)[:size],
        "Markdown prose": "".join(prose)[:size],
        "Python": "".join(code)[:size],
    }


class Counting:
    """The embedder's `count_tokens`, counting the calls and the characters it is given."""

    def __init__(self, count: Any) -> None:
        self.count, self.calls, self.chars = count, 0, 0

    def __call__(self, texts: Sequence[str]) -> list[int]:
        self.calls += 1
        self.chars += sum(map(len, texts))
        return list(self.count(texts))


class AnLLM:
    """Any generator but the structural one: its chunks get `LLM_CONTEXT_RESERVE` tokens (with
    ``structural_header=False``, no structural context is computed: the chunker's own work)."""


WAYS = (("default", False, None), ("fitted", True, None), ("fitted, fixed reserve", True, AnLLM()))


def run_once(text: str, path: str, embedder: Any | None,
             generator: Any = None) -> tuple[float, float, list[tuple[int, str]], Counting | None]:
    if embedder is None:
        counting, window = None, None
    else:
        counting = Counting(embedder.count_tokens)
        window = TokenWindow(embedder.max_tokens, counting)
    start, cpu = time.perf_counter(), time.process_time()
    pieces = chunk_to_fit(Document(path, text), window, path=path, generator=generator, structural_header=False)
    return time.process_time() - cpu, time.perf_counter() - start, pieces, counting


def measure(repeats: int) -> dict[str, Any]:
    embedder = LocalMiniLMEmbedder()
    assert window_of(embedder) is not None
    embedder.count_tokens(["warm up"])
    rows: list[dict[str, Any]] = []
    for size in SIZES:
        for kind, text in texts(size).items():
            for way, fitted, generator in WAYS:
                emb = embedder if fitted else None
                cpu, wall, pieces, counting = min((run_once(text, PATHS[kind], emb, generator) for _ in range(repeats)),
                                                  key=lambda r: r[0])
                covered = "".join(p for _, p in pieces)
                row = {"kind": kind, "size": size, "way": way, "cpu_seconds": round(cpu, 3), "seconds": round(wall, 3),
                       "chunks": len(pieces),
                       "longest_chunk": max(len(p) for _, p in pieces),
                       "covers_text": "".join(covered.split()) == "".join(text.split())}
                if counting is not None:
                    row["tokenizer_calls"] = counting.calls
                    row["tokenized_chars_per_char"] = round(counting.chars / len(text), 2)
                rows.append(row)
                print(json.dumps(row), flush=True)
    ratios = {}
    for kind in PATHS:
        for way, _, _ in WAYS:
            small, large = (next(r["cpu_seconds"] for r in rows if r["kind"] == kind and r["way"] == way and r["size"] == s)
                            for s in SIZES)
            ratios[f"{kind}, {way}"] = round(large / small, 1) if small >= 0.005 else None
    return {"rows": rows, "ratio_1mb_over_100kb": ratios}


def index_read(embedder: Any) -> list[dict[str, Any]]:
    """`read_changes` on one file of each kind at each size, default and fitted."""
    out = []
    for size in SIZES:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp) / "corpus"
            root.mkdir()
            for kind, text in texts(size).items():
                (root / PATHS[kind]).write_text(text, encoding="utf-8")
            for f in collect_files([root], max_file_bytes=2_000_000).files:
                kind = next(k for k, p in PATHS.items() if p == f.path.name)
                for way, window in (("default", None), ("fitted", window_of(embedder))):
                    start, cpu = time.perf_counter(), time.process_time()
                    _, _, chunks, _ = read_changes([f], {}, True, 800, IndexReport(), False, window=window)
                    row = {"kind": kind, "size": size, "way": way, "cpu_seconds": round(time.process_time() - cpu, 3),
                           "seconds": round(time.perf_counter() - start, 3), "chunks": len(chunks)}
                    out.append(row)
                    print(json.dumps(row), flush=True)
    return out


def notebook(embedder: Any) -> dict[str, Any]:
    """A 100 KB notebook with one base64 PNG output, chunked with and without payload omission."""
    rng = random.Random(7)
    png = base64.b64encode(rng.randbytes(72_000)).decode()
    cells = [{"cell_type": "markdown", "metadata": {}, "source": ["# Results\n", "\n", "The plot of the run.\n"]},
             {"cell_type": "code", "execution_count": 1, "metadata": {}, "source": ["plt.plot(xs, ys)\n", "plt.show()"],
              "outputs": [{"output_type": "display_data", "metadata": {},
                           "data": {"image/png": png + "\n", "text/plain": ["<Figure size 640x480 with 1 Axes>"]}}]}]
    text = json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}, indent=1)
    out: dict[str, Any] = {"characters": len(text)}
    for label, doc_text in (("as read", text), ("payloads omitted", omit_payloads(text, "run.ipynb")[0])):
        for way, window in (("default", None), ("fitted", window_of(embedder))):
            cpu = time.process_time()
            pieces = chunk_to_fit(Document("run.ipynb", doc_text), window, path="run.ipynb")
            out[f"{label}, {way}"] = {"cpu_seconds": round(time.process_time() - cpu, 3), "chunks": len(pieces),
                                      "base64_chunks": sum(bool(BASE64_RUN.search(p)) for _, p in pieces)}
    print(json.dumps(out), flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", default=str(HERE / "chunk_linear.json"))
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    result: dict[str, Any] = {"machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
                                         f"Python {platform.python_version()}",
                              "repeats": args.repeats, "load_average_at_start": round(os.getloadavg()[0], 1)}
    result.update(measure(args.repeats))
    embedder = LocalMiniLMEmbedder()
    result["index_read"] = index_read(embedder)
    result["notebook_100kb"] = notebook(embedder)
    result["load_average_at_end"] = round(os.getloadavg()[0], 1)
    Path(args.json).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(result["ratio_1mb_over_100kb"], indent=1))


if __name__ == "__main__":
    main()
