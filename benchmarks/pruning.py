"""Context pruning on the cookbook set: ours against LlamaIndex's and LangChain's compressors.

    python benchmarks/pruning.py [--dataset DIR] [--contexts FILE] [--json PATH] [--timing-queries N]

For every query the unpruned input U is the library's default contextual-hybrid top 10
(`HybridSearcher` with the offline MiniLM embedder and BM25 over context + chunk, fused with the
default weights) over the dataset, contexts from the given JSONL. Every configuration prunes the
same U with the same embedder (MiniLM, wrapped for each framework). Per configuration:

- token_reduction = 1 - tokens(pruned) / tokens(U), counted with MiniLM's own tokenizer (no
  truncation) over the source text handed to the LLM (contexts not counted);
- answer_recall: mean over queries of |E & P| / |E|, E = the reference answer's content terms
  (the library's BM25 tokenizer: lower-cased, stop words dropped, stemmed) that occur in the
  golden chunks present in U, P = the terms of the pruned text; queries with empty E are skipped
  and counted (`skipped_queries`);
- answer_term_recall: the same over every answer term that occurs anywhere in U;
- golden_kept: golden chunks in U that keep at least one unit, over golden chunks in U (pooled);
Peers: LlamaIndex `SentenceEmbeddingOptimizer` at percentile cut-offs 0.25 and 0.5, with no window
(`context_before = context_after = 0`) and with its default window of one sentence each side
(which repeats overlapping windows, so it can return more text than it got);
LangChain `DocumentCompressorPipeline([EmbeddingsRedundantFilter, EmbeddingsFilter])` at similarity
thresholds 0.2 and 0.3 (whole chunks kept or dropped). These settings prune lightly (0.2 or less
for all but one), so each peer also runs matched to ours: at the two settings of `MATCH_GRID` whose
token reductions bracket ours-default's, picked on token reduction alone (the sweep is in the JSON
as `matched_sweeps`); for LlamaIndex that is `threshold_cutoff` (a node with no sentence over it
makes the optimizer raise "returned zero sentences", so it is run node by node and such a node is
dropped). Ours: the defaults, other budget shares (the frontier `comparison` interpolates on), and
the defaults without neighbours.

- ms_per_query: wall time per query on the first `--timing-queries` queries, all configurations
  in one run, with a fresh embedder (no embedding cache). The peers embed what they need at query
  time, as they do in use. Ours prunes as the library does in use: the chunks' units, vectors,
  terms and token counts prepared once ahead of the queries (`ContextPruner.prepare` into one
  `UnitCache`, as ingestion does), and the query vector retrieval computed passed in. The one-off
  preparation is reported apart (`ingestion`: seconds and bytes per chunk), and ours-default is
  also timed cold (`ms_per_query_cold`: nothing prepared, the query embedded, a fresh cache per
  query: what every query cost before unit vectors were kept).
- selection: ours-default's pruned text on every query, prepared/warm against cold and against a
  float16 `UnitCache` (identical or not, and how many queries differ).
  The quality figures use a shared embedding cache (same vectors, just not recomputed).

Writes benchmarks/pruning.json: {"dataset", "configs": [{"name", "token_reduction",
"answer_recall", "answer_term_recall", "golden_kept", "ms_per_query"}, ...], "comparison": ...,
"speed", "ingestion", "selection"}.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
from _paths import DEFAULT_DATASET  # noqa: E402

TOP_K = 10
OUR_FRONTIER = (0.1, 0.15, 0.2, 0.45, 0.6, 0.8, 1.0)  # budget shares besides the default 0.3
LLAMAINDEX_PERCENTILES = (0.25, 0.5)
LANGCHAIN_THRESHOLDS = (0.2, 0.3)
# Matched settings: each peer also runs at the two settings of this grid whose token reductions
# bracket ours-default's (nearest below, nearest above; the two highest when it never gets there),
# chosen on token reduction alone, never on recall. LlamaIndex's percentile cut-off cannot reach it
# on code (punkt finds few "sentences" per chunk, and a cut-off that rounds to 0 keeps them all), so
# its matched rows use the optimizer's other knob, `threshold_cutoff`.
MATCH_GRID = tuple(round(0.15 + 0.05 * i, 2) for i in range(12))  # 0.15 .. 0.70


@dataclass
class Case:
    query: str
    answer: str
    golden: tuple[str, ...]
    chunks: list  # ContextualChunk, rank order
    query_vector: np.ndarray | None = None  # the query's vector, as retrieval computed it


def minilm_counter(embedder):
    """MiniLM's own tokenizer as a `TokenCounter`, truncation off (so long texts count fully)."""
    from tokenizers import Tokenizer as HFTokenizer

    from contextual_retrieval_core.pruning import TokenCounter

    embedder._load()
    tok = HFTokenizer.from_str(embedder._tokenizer.to_str())
    tok.no_truncation()
    return TokenCounter("all-MiniLM-L6-v2 wordpiece", lambda text: len(tok.encode(text, add_special_tokens=False).ids))


def load_cases(dataset_dir: str, contexts_path: str, embedder) -> list[Case]:
    from contextual_retrieval_core.app.evaluation import headed_contexts, load_contexts_jsonl, load_cookbook
    from contextual_retrieval_core.search.hybrid import HybridSearcher
    from contextual_retrieval_core.types import ContextualChunk

    dataset = load_cookbook(dataset_dir)
    contexts = headed_contexts(dataset, load_contexts_jsonl(contexts_path, dataset))  # as indexed by default
    answers = [json.loads(line).get("answer", "") for line in (Path(dataset_dir) / "evaluation_set.jsonl").open(encoding="utf-8") if line.strip()]
    chunks = [ContextualChunk(c, contexts[c.id]) for c in dataset.chunks]
    searcher = HybridSearcher(chunks, embedder)
    hits = searcher.search_many([q.query for q in dataset.queries], top_k=TOP_K)
    vectors = embedder.embed_queries([q.query for q in dataset.queries])  # what retrieval embedded (cache hits)
    return [Case(q.query, a, q.golden, [h.chunk for h in hs], v) for q, a, hs, v in zip(dataset.queries, answers, hits, vectors)]


# -- configurations: each maps (query, chunks) -> {chunk id: pruned source text} ----------------------


def ours(embedder, counter, unit_cache=None, **settings) -> Callable:
    """Ours; with a prepared `unit_cache`, the query vector retrieval computed is passed in too."""
    from contextual_retrieval_core.pruning import ContextPruner, PruningConfig

    pruner = ContextPruner(embedder, config=PruningConfig(**settings), token_counter=counter, unit_cache=unit_cache)

    def run(query, chunks, query_vector=None):
        qv = query_vector if unit_cache is not None else None
        return {c.id: c.text for c in pruner.prune(query, chunks, query_vector=qv).chunks}

    return run


def ours_cold(embedder, counter) -> Callable:
    """Ours-default with nothing kept between queries: a fresh pruner (and cache) per query, the query embedded."""
    from contextual_retrieval_core.pruning import ContextPruner

    def run(query, chunks, query_vector=None):
        return {c.id: c.text for c in ContextPruner(embedder, token_counter=counter).prune(query, chunks).chunks}

    return run


def llamaindex_optimizer(embedder, percentile: float, window: int = 0) -> Callable:
    from llama_index.core.postprocessor import SentenceEmbeddingOptimizer
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

    from contextual_retrieval_llamaindex.embeddings import CoreEmbedding

    model = CoreEmbedding(embedder)

    def run(query, chunks):
        optimizer = SentenceEmbeddingOptimizer(
            embed_model=model, percentile_cutoff=percentile, context_before=window, context_after=window
        )
        nodes = [NodeWithScore(node=TextNode(id_=c.id, text=c.text), score=1.0) for c in chunks]
        out = {}
        for n in optimizer.postprocess_nodes(nodes, query_bundle=QueryBundle(query)):
            out[n.node.node_id] = n.node.get_content()
        return out

    return run


def llamaindex_threshold(embedder, threshold: float) -> Callable:
    """`SentenceEmbeddingOptimizer(threshold_cutoff=...)`, no window, node by node (see the docstring)."""
    from llama_index.core.postprocessor import SentenceEmbeddingOptimizer
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

    from contextual_retrieval_llamaindex.embeddings import CoreEmbedding

    model = CoreEmbedding(embedder)

    def run(query, chunks):
        optimizer = SentenceEmbeddingOptimizer(embed_model=model, threshold_cutoff=threshold, context_before=0, context_after=0)
        bundle = QueryBundle(query)
        out = {}
        for c in chunks:
            try:
                (n,) = optimizer.postprocess_nodes([NodeWithScore(node=TextNode(id_=c.id, text=c.text), score=1.0)], query_bundle=bundle)
            except ValueError as exc:  # "Optimizer returned zero sentences."
                if "zero sentences" not in str(exc):
                    raise
                continue
            out[n.node.node_id] = n.node.get_content()
        return out

    return run


def bracket(sweep: list[dict], target: float) -> list[dict]:
    """The two sweep points whose token reductions bracket `target` (nearest below, nearest above);
    the two nearest under it when none reaches it, the two nearest over it when all pass it."""
    rows = sorted(sweep, key=lambda r: r["token_reduction"])
    below = [r for r in rows if r["token_reduction"] <= target]
    above = [r for r in rows if r["token_reduction"] > target]
    if below and above:
        return [below[-1], above[0]]
    return (below[-2:] if below else above[:2])


def langchain_pipeline(embedder, threshold: float) -> Callable:
    from langchain_classic.retrievers.document_compressors import DocumentCompressorPipeline, EmbeddingsFilter
    from langchain_community.document_transformers import EmbeddingsRedundantFilter
    from langchain_core.documents import Document as LCDocument

    from contextual_retrieval_langchain.embeddings import EmbedderEmbeddings

    emb = EmbedderEmbeddings(embedder=embedder)
    pipeline = DocumentCompressorPipeline(transformers=[
        EmbeddingsRedundantFilter(embeddings=emb), EmbeddingsFilter(embeddings=emb, similarity_threshold=threshold),
    ])

    def run(query, chunks):
        docs = [LCDocument(page_content=c.text, metadata={"id": c.id}) for c in chunks]
        return {d.metadata["id"]: d.page_content for d in pipeline.compress_documents(docs, query)}

    return run


def no_pruning(query, chunks):
    return {c.id: c.text for c in chunks}


# -- metrics -------------------------------------------------------------------------------------------


def score(cases: list[Case], outputs: list[dict[str, str]], counter, tokenizer) -> dict:
    before = after = 0
    recalls, term_recalls, skipped = [], [], 0
    golden_in, golden_kept = 0, 0
    losing = golden_emptied = 0  # queries that lose an evidence term; of them, with every golden chunk emptied
    for case, out in zip(cases, outputs):
        before += sum(counter.count(c.text) for c in case.chunks)
        after += sum(counter.count(t) for t in out.values())
        answer = set(tokenizer.tokenize(case.answer))
        golden = [c for c in case.chunks if c.id in set(case.golden)]
        golden_terms = set().union(*(tokenizer.tokenize(c.text) for c in golden)) if golden else set()
        all_terms = set().union(*(tokenizer.tokenize(c.text) for c in case.chunks))
        kept_terms = set().union(*(tokenizer.tokenize(t) for t in out.values())) if out else set()
        evidence = answer & golden_terms
        if evidence:
            recalls.append(len(evidence & kept_terms) / len(evidence))
            if evidence - kept_terms:
                losing += 1
                golden_emptied += all(not out.get(c.id, "").strip() for c in golden)
        else:
            skipped += 1
        anywhere = answer & all_terms
        if anywhere:
            term_recalls.append(len(anywhere & kept_terms) / len(anywhere))
        golden_in += len(golden)
        golden_kept += sum(1 for c in golden if out.get(c.id, "").strip())
    return {
        "tokens_per_query": round(after / len(cases), 1),
        "token_reduction": round(1 - after / before, 4),
        "answer_recall": round(float(np.mean(recalls)), 4),
        "answer_term_recall": round(float(np.mean(term_recalls)), 4),
        "golden_kept": round(golden_kept / golden_in, 4) if golden_in else None,
        "skipped_queries": skipped,
        "queries_losing_evidence": losing,
        "of_which_golden_emptied": golden_emptied,
    }


def interpolate(frontier: list[dict], reduction: float) -> tuple[float, bool]:
    """Our answer_recall at `reduction`, linear between frontier points; (value, inside range)."""
    pts = sorted((c["token_reduction"], c["answer_recall"]) for c in frontier)
    xs, ys = [p[0] for p in pts], [p[1] for p in pts]
    return float(np.interp(reduction, xs, ys)), xs[0] <= reduction <= xs[-1]


def markdown_table(payload: dict) -> str:
    """The configurations as a Markdown table (README and RESULTS.md show this)."""
    rows = ["| configuration | token reduction | answer recall | answer-term recall | golden kept | ms / query |",
            "|---|---:|---:|---:|---:|---:|"]
    for c in payload["configs"]:
        rows.append(f"| {c['name']} | {c['token_reduction']:.3f} | {c['answer_recall']:.3f} | {c['answer_term_recall']:.3f} "
                    f"| {c['golden_kept']:.3f} | {c['ms_per_query']:.0f} |")
    return "\n".join(rows)


def speed_table(payload: dict) -> str:
    """Per-query time of every configuration in one run, and ours' one-off preparation (RESULTS.md shows this)."""
    speed, ingestion, selection = payload["speed"], payload["ingestion"], payload["selection"]
    fastest = speed["fastest_peer_ms"]
    rows = ["| configuration | ms / query | x fastest peer |", "|---|---:|---:|"]
    for c in payload["configs"]:
        if c["name"] != "no-pruning":
            rows.append(f"| {c['name']} | {c['ms_per_query']:.1f} | {c['ms_per_query'] / fastest:.3f} |")
    rows.append(f"| ours-default, cold (nothing prepared, the query embedded) | {speed['ours_default_cold_ms']:.1f} | "
                f"{speed['ours_default_cold_ms'] / fastest:.3f} |")
    rows += ["", f"Preparation, once per chunk: {ingestion['ms_per_chunk']:.0f} ms over {ingestion['chunks']} chunks "
             f"({ingestion['texts_embedded']} texts embedded); vectors kept: {ingestion['float32_bytes_per_chunk']} bytes "
             f"per chunk as float32, {ingestion['float16_bytes_per_chunk']} as float16. Selection over the "
             f"{selection['queries']} timed queries: prepared vs cold differ on {selection['warm_vs_cold_differ']}, "
             f"float16 vs float32 on {selection['float16_vs_float32_differ']}."]
    return "\n".join(rows)


def comparison_table(payload: dict) -> str:
    """Each peer against our frontier interpolated at the peer's token reduction ("matched": a
    setting picked to bracket ours-default's token reduction)."""
    rows = ["| peer | its token reduction | its answer recall | ours at that reduction | margin (points) |",
            "|---|---:|---:|---:|---:|"]
    for c in payload["comparison"]:
        note = "" if c["inside_our_frontier"] else " (outside our frontier: nearest point)"
        matched = " (matched)" if c.get("matched") else ""
        rows.append(f"| {c['peer']}{matched} | {c['token_reduction']:.3f} | {c['peer_answer_recall']:.3f} | "
                    f"{c['ours_answer_recall']:.3f}{note} | {c['margin_points']:+.1f} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    from contextual_retrieval_core.chunking.tokenizer import Tokenizer
    from contextual_retrieval_core.embeddings.cache import CachedEmbedder
    from contextual_retrieval_core.embeddings.minilm import LocalMiniLMEmbedder

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default=DEFAULT_DATASET)
    parser.add_argument("--contexts", default=None, help="default: DATASET/contexts_claude-3-haiku.jsonl")
    parser.add_argument("--json", default=str(HERE / "pruning.json"))
    parser.add_argument("--embedding-cache", default=str(HERE / "out" / "embeddings.sqlite3"))
    parser.add_argument("--timing-queries", type=int, default=20)
    parser.add_argument("--limit", type=int, default=None, help="only the first N queries (smoke runs)")
    parser.add_argument("--tables", action="store_true", help="print the Markdown tables of --json and exit")
    args = parser.parse_args(argv)
    if args.tables:
        payload = json.loads(Path(args.json).read_text(encoding="utf-8"))
        print(markdown_table(payload) + "\n\n" + comparison_table(payload) + ("\n\n" + speed_table(payload) if "speed" in payload else ""))
        return 0
    contexts = args.contexts or str(Path(args.dataset) / "contexts_claude-3-haiku.jsonl")

    base = LocalMiniLMEmbedder()
    cached = CachedEmbedder(base, args.embedding_cache)
    counter = minilm_counter(base)
    cases = load_cases(args.dataset, contexts, cached)[: args.limit]
    tokenizer = Tokenizer()

    def configs(embedder, unit_cache=None):
        yield "no-pruning", no_pruning
        yield "ours-default", ours(embedder, counter, unit_cache)
        for share in OUR_FRONTIER:
            yield f"ours-budget-{share:g}", ours(embedder, counter, unit_cache, budget_share=share)
        for share in (0.2, 0.3):
            yield f"ours-no-neighbours-budget-{share:g}", ours(embedder, counter, unit_cache, budget_share=share, neighbours=False)
        for p in LLAMAINDEX_PERCENTILES:
            yield f"llamaindex-sentence-optimizer-p{p:g}", llamaindex_optimizer(embedder, p)
        for p in LLAMAINDEX_PERCENTILES:  # its default window: one sentence each side of every pick
            yield f"llamaindex-sentence-optimizer-p{p:g}-window1", llamaindex_optimizer(embedder, p, window=1)
        for t in LANGCHAIN_THRESHOLDS:
            yield f"langchain-redundant+embeddings-filter-t{t:g}", langchain_pipeline(embedder, t)

    def measured(name: str, run: Callable, **extra) -> dict:
        row = {"name": name, **score(cases, [run(c.query, c.chunks) for c in cases], counter, tokenizer), **extra}
        print(f"{name:48s} reduction {row['token_reduction']:.3f}  recall {row['answer_recall']:.3f}  "
              f"term recall {row['answer_term_recall']:.3f}  golden kept {row['golden_kept']}", flush=True)
        return row

    results = [measured(name, run) for name, run in configs(cached)]
    # matched settings: sweep each peer's knob on token reduction alone, keep the two bracketing ours-default
    target = next(r["token_reduction"] for r in results if r["name"] == "ours-default")
    peers = {"llamaindex-sentence-optimizer-threshold": llamaindex_threshold, "langchain-redundant+embeddings-filter": langchain_pipeline}
    sweeps: dict[str, list[dict]] = {}
    matched: list[tuple[str, Callable, float]] = []
    already = {r["name"]: r for r in results}
    for peer, make in peers.items():
        rows = {t: measured(f"{peer}-t{t:g}", make(cached, t), matched=True) for t in MATCH_GRID}
        sweeps[peer] = [{"setting": t, "token_reduction": row["token_reduction"]} for t, row in rows.items()]
        for point in bracket(sweeps[peer], target):
            t = point["setting"]
            name = f"{peer}-t{t:g}"
            if name in already:  # a light setting that is also a matched one: one row, flagged
                already[name]["matched"] = True
            else:  # the sweep already measured it
                results.append(rows[t])
                matched.append((name, make, t))

    def timed_configs(embedder, unit_cache):
        yield from configs(embedder, unit_cache)
        for name, make, t in matched:
            yield name, make(embedder, t)
    timing = cases[: args.timing_queries]
    fresh = LocalMiniLMEmbedder()
    fresh.embed(["load the model before timing"])  # the model load is not any configuration's cost
    # ingestion: every chunk the queries retrieve, prepared once (units, vectors, terms, counts)
    from contextual_retrieval_core.pruning import ContextPruner, UnitCache

    corpus = list({c.id: c for case in cases for c in case.chunks}.values())
    unit_cache = UnitCache()
    started = time.perf_counter()
    embedded = ContextPruner(fresh, token_counter=counter, unit_cache=unit_cache).prepare(corpus)
    prepare_s = time.perf_counter() - started
    ingestion = {
        "chunks": len(corpus), "texts_embedded": embedded, "seconds": round(prepare_s, 2),
        "ms_per_chunk": round(1000 * prepare_s / len(corpus), 1),
        "float32_bytes_per_chunk": round(unit_cache.vector_bytes / len(corpus)),
        "float16_bytes_per_chunk": round(unit_cache.vector_bytes / 2 / len(corpus)),
    }
    print(f"ingestion: {ingestion}", flush=True)
    outputs: dict[str, list] = {}
    for (name, run), row in zip(timed_configs(fresh, unit_cache), results):
        started = time.perf_counter()
        outputs[name] = [run(c.query, c.chunks, c.query_vector) if name.startswith("ours") else run(c.query, c.chunks) for c in timing]
        row["ms_per_query"] = round(1000 * (time.perf_counter() - started) / max(1, len(timing)), 1)
        print(f"{name:48s} {row['ms_per_query']:8.1f} ms/query", flush=True)
    default = next(r for r in results if r["name"] == "ours-default")
    cold = ours_cold(fresh, counter)
    started = time.perf_counter()
    cold_out = [cold(c.query, c.chunks) for c in timing]
    default["ms_per_query_cold"] = round(1000 * (time.perf_counter() - started) / max(1, len(timing)), 1)
    half = UnitCache(dtype=np.float16)
    ContextPruner(fresh, token_counter=counter, unit_cache=half).prepare(corpus)
    half_out = [ours(fresh, counter, half)(c.query, c.chunks, c.query_vector) for c in timing]
    warm_out = outputs["ours-default"]
    peers = [r["ms_per_query"] for r in results if r["name"].startswith(("llamaindex", "langchain"))]
    selection = {
        "queries": len(timing),
        "warm_vs_cold_differ": sum(a != b for a, b in zip(warm_out, cold_out)),
        "float16_vs_float32_differ": sum(a != b for a, b in zip(warm_out, half_out)),
    }
    speed = {"ours_default_ms": default["ms_per_query"], "ours_default_cold_ms": default["ms_per_query_cold"],
             "fastest_peer_ms": min(peers), "ratio_to_fastest_peer": round(default["ms_per_query"] / min(peers), 4)}
    print(f"selection: {selection}; speed: {speed}", flush=True)

    frontier = [r for r in results if r["name"] == "ours-default" or r["name"].startswith("ours-budget-")]
    comparison = []
    for peer in results:
        if peer["name"].startswith(("llamaindex", "langchain")):
            value, inside = interpolate(frontier, peer["token_reduction"])
            comparison.append({
                "peer": peer["name"], "token_reduction": peer["token_reduction"], "peer_answer_recall": peer["answer_recall"],
                "ours_answer_recall": round(value, 4), "margin_points": round(100 * (value - peer["answer_recall"]), 2),
                "inside_our_frontier": inside, "matched": bool(peer.get("matched")),
            })
    payload = {
        "dataset": Path(args.dataset).name, "contexts": Path(contexts).name, "queries": len(cases), "top_k": TOP_K,
        "tokenizer": counter.name, "timing_queries": len(timing), "configs": results, "comparison": comparison,
        "matched_target": target, "matched_sweeps": sweeps,
        "speed": speed, "ingestion": ingestion, "selection": selection,
    }
    Path(args.json).write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    for c in comparison:
        print(f"at {c['token_reduction']:.3f}: ours {c['ours_answer_recall']:.3f} vs {c['peer']} {c['peer_answer_recall']:.3f} "
              f"({c['margin_points']:+.1f} points{'' if c['inside_our_frontier'] else ', outside our frontier'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
