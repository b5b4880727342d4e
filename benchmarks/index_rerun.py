"""`contextual-retrieval index` on this repository's own files, then again on the unchanged folder.

Two runs of the CLI's `ContextualIndex.update` on a copy of `contextual_retrieval_core/` and `README.md`:

- offline: structural contexts, the local MiniLM embedder, embedded Chroma;
- with Claude: the same, but contexts from `AnthropicContextGenerator` against the fake Anthropic
  API of tests/fakes (real SDK, 50 ms latency per request), counting the requests each run makes.

The second run must make no generation request, embed nothing, and take under 10% of the first
run's wall time (the issue's bar); the ratio is measured against the first run of the same process.

Run:  python benchmarks/index_rerun.py [--json benchmarks/index_rerun.json]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))  # the fake server lives with the tests

from contextual_retrieval_core.embeddings.minilm import LocalMiniLMEmbedder  # noqa: E402
from contextual_retrieval_core.index.contextual_index import ContextualIndex  # noqa: E402


def corpus(into: Path) -> Path:
    """A copy of the repository's own core package and README (what a user might index)."""
    folder = into / "repo-files"
    shutil.copytree(REPO / "contextual_retrieval_core", folder / "contextual_retrieval_core", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "README.md", folder / "README.md")
    return folder


def twice(folder: Path, index_dir: Path, embedder: Any, generator: Any = None, requests: Any = None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for run in ("first", "second"):
        before = requests() if requests else 0
        index = ContextualIndex(index_dir, embedder=embedder, generator=generator)
        report = index.update([folder], show_progress=False)
        out[run] = {
            "seconds": round(report.elapsed_s, 3),
            "files": report.files_new + report.files_changed + report.files_unchanged,
            "files_unchanged": report.files_unchanged,
            "chunks": report.chunks_total,
            "contexts_generated": report.generated,
            "texts_embedded": report.embedded,
            "generation_requests": (requests() - before) if requests else 0,
        }
    out["second_over_first"] = round(out["second"]["seconds"] / out["first"]["seconds"], 4)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, default=HERE / "index_rerun.json")
    args = parser.parse_args(argv)
    import anthropic
    from fakes.anthropic_server import FakeAnthropicServer

    from contextual_retrieval_core.generators import AnthropicContextGenerator

    embedder = LocalMiniLMEmbedder()
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = corpus(Path(tmp))
        results["offline (structural contexts)"] = twice(folder, Path(tmp) / "index-offline", embedder)
        with FakeAnthropicServer(latency_s=0.05) as server:
            client = anthropic.Anthropic(api_key=server.api_key, base_url=server.url, max_retries=0)
            generator = AnthropicContextGenerator("claude-haiku-4-5", client=client)
            results["Claude contexts (fake API, 50 ms)"] = twice(
                folder, Path(tmp) / "index-claude", embedder, generator,
                requests=lambda: len(server.requests_to("/v1/messages")),
            )
    print(f"{'run':36} {'files':>5} {'chunks':>6} {'1st s':>7} {'2nd s':>6} {'2nd/1st':>8} {'requests 1st/2nd':>17} {'embedded 2nd':>12}")
    for name, r in results.items():
        first, second = r["first"], r["second"]
        print(f"{name:36} {first['files']:>5} {first['chunks']:>6} {first['seconds']:>7.2f} {second['seconds']:>6.2f} "
              f"{r['second_over_first']:>8.4f} {first['generation_requests']:>8}/{second['generation_requests']:<8} {second['texts_embedded']:>12}")
        assert second["contexts_generated"] == second["generation_requests"] == second["texts_embedded"] == 0, r
        assert second["files_unchanged"] == first["files"], r
    args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
