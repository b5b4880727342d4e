"""Image crops with and without their frame's context: retrieval on the demo frames, and what a
Claude crop context costs with the frame prompt-cached.

    python benchmarks/image_crops.py [--dataset DIR] [--json PATH]

The dataset is the crop demo (`contextual_retrieval_core.app.demo_frames`): 8 frames drawn with
Pillow from three cameras, day and night shifts, 18 crops of look-alike objects saved as
``crop_N.png``, and 6 questions whose answer is one crop. DIR is where the frames are drawn
(default benchmarks/out/crop_frames; drawn again each run, deterministic).

Retrieval: each crop is indexed as its own text, ``"crop_7.png: truck"`` ("plain": what a detector
leaves), or as its structural crop context then that text ("structural": the offline
`StructuralCropContextGenerator`), searched dense (the offline MiniLM), BM25 and hybrid (the
library's fusion defaults) with the core's `HybridSearcher`. Per row: answers in the top 1 and
top 3 of 6, and MRR@3.

Cost: the Claude crop context (`AnthropicCropContextGenerator`) over the same frames drawn at
1280x800, on the loopback Anthropic server of tests/fakes (its token and cache accounting: images
cost ceil(w * h / 750) tokens, a prefix under the model's minimum is not cached), for
claude-sonnet-4-5 (cache minimum 1024: each frame is cached) and claude-haiku-4-5 (4096: no single
frame is): input tokens, the share read from the cache, cache writes, and the run's cost at list
prices. These are the emulator's figures, not a billed run.

Writes {"dataset", "queries", "crops", "retrieval": [{"text", "search", "top1", "top3", "mrr3"}],
"cost": [{"model", "requests", "input_tokens", "cache_read_share", "cache_writes", "cost_usd"}]}.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from contextual_retrieval_core.contextualize.config import ContextualizeConfig

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))  # the fake server lives with the tests


def retrieval(demo, queries) -> list[dict]:
    from contextual_retrieval_core.chunking.frames import CropInput, FrameInput, crop_chunks
    from contextual_retrieval_core.contextualize.contextualizer import Contextualizer
    from contextual_retrieval_core.embeddings.minilm import LocalMiniLMEmbedder
    from contextual_retrieval_core.generators.crop_structural import StructuralCropContextGenerator
    from contextual_retrieval_core.search.hybrid import HybridSearcher
    from contextual_retrieval_core.types import ContextualChunk

    frame_id = {f.path: Path(f.path).name for f in demo.frames}
    batch = crop_chunks(
        [FrameInput(frame_id[f.path], f.path, {k: v for k, v in f.metadata.items() if k != "detections"}) for f in demo.frames],
        [CropInput(frame_id[c.frame_path], c.path, metadata=c.metadata) for c in demo.crops],
    )
    situated = Contextualizer(StructuralCropContextGenerator(), ":memory:", config=ContextualizeConfig(show_progress=False)).contextualize(
        batch.documents, batch.chunks).chunks
    texts = {"plain": [ContextualChunk(c.chunk, "") for c in situated], "structural": situated}
    answer = {}
    for q in queries:
        (hit,) = [c.id for c in batch.chunks if c.document_id == q.frame and c.text.endswith(": " + q.label)]
        answer[q.query] = hit
    embedder = LocalMiniLMEmbedder()
    rows = []
    for text, chunks in texts.items():
        for search, kw in (("dense", {"use_bm25": False}), ("bm25", {"embedder": None}), ("hybrid", {})):
            searcher = HybridSearcher(chunks, kw.get("embedder", embedder), use_bm25=kw.get("use_bm25", True))
            ranks = []
            for q in queries:
                ids = [h.id for h in searcher.search(q.query, top_k=3)]
                ranks.append(ids.index(answer[q.query]) + 1 if answer[q.query] in ids else None)
            rows.append({
                "text": text, "search": search,
                "top1": sum(r == 1 for r in ranks), "top3": sum(r is not None for r in ranks),
                "mrr3": round(sum(1 / r for r in ranks if r) / len(ranks), 3),
            })
    return rows


def cost(directory: Path) -> list[dict]:
    import anthropic
    from fakes.anthropic_server import FakeAnthropicServer

    from contextual_retrieval_core.app.demo_frames import write_demo_frames
    from contextual_retrieval_core.chunking.frames import FrameInput, crop_chunks
    from contextual_retrieval_core.contextualize.contextualizer import Contextualizer
    from contextual_retrieval_core.generators.anthropic_crops import AnthropicCropContextGenerator

    big = write_demo_frames(directory / "1280x800", size=(1280, 800))
    batch = crop_chunks([FrameInput(Path(f.path).name, f.path, f.metadata) for f in big.frames])
    out = []
    for model in ("claude-sonnet-4-5", "claude-haiku-4-5"):
        with FakeAnthropicServer() as server:
            client = anthropic.Anthropic(api_key=server.api_key, base_url=server.url, max_retries=0)
            report = Contextualizer(AnthropicCropContextGenerator(model, client=client), ":memory:", config=ContextualizeConfig(concurrency=4, show_progress=False)).contextualize(batch.documents, batch.chunks).report
        usage = report.usage
        total = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens + usage.cache_write_1h_tokens
        cost_usd = report.cost_usd()
        out.append({
            "model": model, "requests": usage.requests, "input_tokens": total,
            "cache_read_share": round(usage.cache_read_tokens / total, 3), "cache_writes": report.cache_writes,
            "cost_usd": None if cost_usd is None else round(cost_usd, 4),
        })
    return out


def main(argv: list[str] | None = None) -> int:
    from contextual_retrieval_core.app.demo_frames import DEMO_CROP_QUERIES, write_demo_frames

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default=str(HERE / "out" / "crop_frames"), help="where the demo frames are drawn")
    parser.add_argument("--json", default=str(HERE / "image_crops.json"))
    args = parser.parse_args(argv)
    directory = Path(args.dataset)
    demo = write_demo_frames(directory)
    result = {
        "dataset": "demo_frames (contextual_retrieval_core.app.demo_frames)",
        "queries": len(DEMO_CROP_QUERIES),
        "crops": len(demo.crops),
        "retrieval": retrieval(demo, DEMO_CROP_QUERIES),
        "cost": cost(directory),
    }
    print(f"{'text':<11} {'search':<7} top1 top3  mrr@3")
    for row in result["retrieval"]:
        print(f"{row['text']:<11} {row['search']:<7} {row['top1']:>4} {row['top3']:>4}  {row['mrr3']:.3f}")
    for row in result["cost"]:
        print(f"{row['model']}: {row['requests']} requests, {row['input_tokens']} input tokens, "
              f"{row['cache_read_share']:.1%} read from the cache, {row['cache_writes']} cache writes, ${row['cost_usd']}")
    Path(args.json).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
