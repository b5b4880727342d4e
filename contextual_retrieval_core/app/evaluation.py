"""Evaluation: the cookbook dataset format, precomputed contexts, metrics and the config runner.

- `load_cookbook(dir)`: ``codebase_chunks.json`` + ``evaluation_set.jsonl`` (Anthropic's cookbook
  format) -> documents, chunks and queries with golden chunk ids.
- `load_contexts_jsonl(path)`: contexts keyed by (doc_id, original_index), as in
  ``contexts_claude-3-haiku.jsonl``.
- Metrics: `pass_at_k` exactly as the cookbook defines "Pass@k" (mean over queries of the fraction
  of golden chunks found in the top k), `recall_at_k` (golden chunks found in the top k over all
  golden chunks, pooled across queries) and `mrr` (reciprocal rank of the first golden chunk).
- `evaluate(...)`: runs the named configurations with the library's defaults: plain chunks,
  chunks with the offline structural contexts (`structural-*`), and chunks with precomputed
  LLM contexts (`contextual-*`). Each distinct text (chunk or query) is embedded once per run,
  shared by every configuration that needs it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from contextual_retrieval_core.checks import positive_int
from contextual_retrieval_core.contextualize.config import ContextualizeConfig
from contextual_retrieval_core.embeddings.base import Embedder
from contextual_retrieval_core.errors import InputError, MissingDependencyError, NotFoundError
from contextual_retrieval_core.types import Chunk, ContextualChunk, Document

__all__ = [
    "DATASET_ENV",
    "EvalQuery",
    "EvalDataset",
    "ConfigResult",
    "CONFIGS",
    "structural_contexts",
    "headed_contexts",
    "load_cookbook",
    "load_cookbook_chunks",
    "load_contexts_jsonl",
    "pass_at_k",
    "recall_at_k",
    "mrr",
    "evaluate",
    "format_table",
    "results_to_json",
    "plot_results",
    "resolve_dataset",
]

#: environment variable naming the dataset directory when --dataset is not given
DATASET_ENV = "CONTEXTUAL_RETRIEVAL_DATASET"
K_VALUES = (5, 10, 20)


@dataclass(frozen=True)
class EvalQuery:
    """A query and the ids of the chunks that answer it."""

    query: str
    golden: tuple[str, ...]


@dataclass
class EvalDataset:
    """Documents, their chunks, and labelled queries."""

    documents: list[Document]
    chunks: list[Chunk]
    queries: list[EvalQuery]
    #: (doc_id, original_index) -> chunk id, for joining precomputed contexts
    chunk_keys: dict[tuple[str, int], str] = field(default_factory=dict)


def resolve_dataset(path: str | os.PathLike[str] | None) -> Path:
    """The dataset directory: `path`, else $CONTEXTUAL_RETRIEVAL_DATASET; a clear error if neither."""
    chosen = path or os.environ.get(DATASET_ENV)
    if not chosen:
        raise InputError(f"no dataset: pass --dataset DIR or set {DATASET_ENV}=DIR")
    folder = Path(chosen)
    for name in ("codebase_chunks.json", "evaluation_set.jsonl"):
        if not (folder / name).is_file():
            raise NotFoundError(
                f"{folder / name} not found: the dataset directory needs codebase_chunks.json and "
                "evaluation_set.jsonl (Anthropic's cookbook format)"
            )
    return folder


def load_cookbook(path: str | os.PathLike[str] | None = None) -> EvalDataset:
    """Load a dataset in the cookbook's format (see module docstring)."""
    folder = resolve_dataset(path)
    corpus = load_cookbook_chunks(folder / "codebase_chunks.json")
    by_uuid: dict[tuple[str, int], str] = {}
    docs = {d.id: d for d in corpus.documents}
    for chunk in corpus.chunks:
        uuid = docs[chunk.document_id].metadata.get("uuid")
        if uuid:
            by_uuid[(uuid, chunk.index)] = chunk.id
    queries = []
    with (folder / "evaluation_set.jsonl").open(encoding="utf-8") as fh:
        for line_no, line in enumerate(fh, 1):
            if not line.strip():
                continue
            item = json.loads(line)
            golden = []
            for uuid, index in item["golden_chunk_uuids"]:
                cid = by_uuid.get((uuid, int(index)))
                if cid is None:
                    raise InputError(
                        f"evaluation_set.jsonl line {line_no}: golden chunk ({uuid}, {index}) is not "
                        "in codebase_chunks.json"
                    )
                golden.append(cid)
            queries.append(EvalQuery(item["query"], tuple(golden)))
    corpus.queries = queries
    return corpus


def load_cookbook_chunks(path: str | os.PathLike[str]) -> EvalDataset:
    """The documents and chunks of a cookbook ``codebase_chunks.json`` (no queries).

    Each document's ``original_uuid`` is kept as its metadata ``uuid`` (what
    ``evaluation_set.jsonl`` names golden chunks by).
    """
    raw = json.loads(Path(path).read_text(encoding="utf-8"))
    documents, chunks = [], []
    keys: dict[tuple[str, int], str] = {}
    for doc in raw:
        documents.append(Document(doc["doc_id"], doc["content"], {"uuid": doc.get("original_uuid")}))
        for c in doc["chunks"]:
            chunk = Chunk(c["chunk_id"], doc["doc_id"], c["content"], int(c["original_index"]))
            chunks.append(chunk)
            keys[(doc["doc_id"], chunk.index)] = chunk.id
    return EvalDataset(documents, chunks, [], keys)


def load_contexts_jsonl(path: str | os.PathLike[str], dataset: EvalDataset | None = None) -> dict[str, str]:
    """Contexts from JSONL lines with `doc_id`, `original_index` and `context`.

    Returns chunk id -> context. With `dataset`, a line's id is resolved through its
    (doc_id, original_index) keys first, and the line's own `chunk_id` is the fallback; without
    `dataset`, every line needs a `chunk_id`.
    """
    out: dict[str, str] = {}
    with Path(path).open(encoding="utf-8") as fh:
        for line_no, line in enumerate(fh, 1):
            if not line.strip():
                continue
            item = json.loads(line)
            try:
                key = (str(item["doc_id"]), int(item["original_index"]))
                context = item["context"]
            except KeyError as exc:
                raise InputError(f"{path} line {line_no}: missing field {exc}; need doc_id, original_index, context") from exc
            cid = dataset.chunk_keys.get(key) if dataset is not None else item.get("chunk_id")
            if cid is None:
                cid = item.get("chunk_id")
            if cid is None:
                raise InputError(f"{path} line {line_no}: chunk {key} is not in the dataset")
            out[cid] = context
    return out


# -- metrics -------------------------------------------------------------------------------


def pass_at_k(ranked: Sequence[Sequence[str]], golden: Sequence[Sequence[str]], k: int) -> float:
    """The cookbook's Pass@k: mean over queries of (golden chunks in the top k / golden chunks)."""
    _check_pairs(ranked, golden, k)
    return sum(len(set(r[:k]) & set(g)) / len(g) for r, g in zip(ranked, golden)) / len(golden)


def recall_at_k(ranked: Sequence[Sequence[str]], golden: Sequence[Sequence[str]], k: int) -> float:
    """Golden chunks found in the top k over all golden chunks, pooled across queries."""
    _check_pairs(ranked, golden, k)
    return sum(len(set(r[:k]) & set(g)) for r, g in zip(ranked, golden)) / sum(len(g) for g in golden)


def mrr(ranked: Sequence[Sequence[str]], golden: Sequence[Sequence[str]]) -> float:
    """Mean reciprocal rank of the first golden chunk (0 where none is retrieved)."""
    _check_pairs(ranked, golden, 1)
    total = 0.0
    for r, g in zip(ranked, golden):
        gs = set(g)
        total += next((1.0 / i for i, item in enumerate(r, 1) if item in gs), 0.0)
    return total / len(golden)


def _check_pairs(ranked: Sequence[Sequence[str]], golden: Sequence[Sequence[str]], k: int) -> None:
    if len(ranked) != len(golden):
        raise InputError(f"{len(ranked)} rankings for {len(golden)} queries")
    if not golden:
        raise InputError("no queries to score")
    if any(not g for g in golden):
        raise InputError("a query has no golden chunks; drop it or label it")
    positive_int("k", k)


# -- runner --------------------------------------------------------------------------------


@dataclass
class ConfigResult:
    """Scores of one configuration, in percent."""

    name: str
    pass_at: dict[int, float]
    recall_at: dict[int, float]
    mrr: float

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "pass_at": {str(k): round(v, 2) for k, v in self.pass_at.items()},
            "recall_at": {str(k): round(v, 2) for k, v in self.recall_at.items()},
            "mrr": round(self.mrr, 2),
        }


#: configuration name -> (contexts: None, "structural" (offline, computed here) or "llm" (the
#: precomputed `contexts`), uses dense, uses BM25)
CONFIGS: dict[str, tuple[str | None, bool, bool]] = {
    "dense": (None, True, False),
    "bm25": (None, False, True),
    "hybrid": (None, True, True),
    "structural-dense": ("structural", True, False),
    "structural-bm25": ("structural", False, True),
    "structural-hybrid": ("structural", True, True),
    "contextual-dense": ("llm", True, False),
    "contextual-bm25": ("llm", False, True),
    "contextual-hybrid": ("llm", True, True),
}


class _EmbedOnce:
    """An in-run memo in front of an `Embedder`: each distinct text reaches it once per kind
    (document, query), whichever configuration asks first."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self.model_name = embedder.model_name
        self.normalized = embedder.normalized
        self._seen: dict[tuple[str, str], np.ndarray] = {}
        inner: Any = embedder
        while inner is not None and not callable(getattr(inner, "embed_grouped", None)):
            inner = getattr(inner, "embedder", None)  # through wrappers such as CachedEmbedder
        if inner is not None:  # a grouped vector depends on its document: whole calls are memoised
            grouped_calls: dict[tuple[tuple[str, ...], tuple[str, ...]], np.ndarray] = {}

            def embed_grouped(texts: Sequence[str], groups: Sequence[str]) -> np.ndarray:
                key = (tuple(texts), tuple(groups))
                if key not in grouped_calls:
                    grouped_calls[key] = np.asarray(inner.embed_grouped(texts, groups), dtype=np.float32)
                return grouped_calls[key]

            self.embed_grouped = embed_grouped

    def _embed(self, kind: str, texts: Sequence[str], compute: Callable[[Sequence[str]], Any]) -> np.ndarray:
        todo = list(dict.fromkeys(t for t in texts if (kind, t) not in self._seen))
        if todo:
            for text, vector in zip(todo, np.asarray(compute(todo), dtype=np.float32)):
                self._seen[(kind, text)] = vector
        if not texts:
            return np.asarray(compute([]), dtype=np.float32)
        return np.stack([self._seen[(kind, t)] for t in texts])

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed("document", texts, self.embedder.embed_documents)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed("query", texts, self.embedder.embed_queries)

    async def aembed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self.embed_documents(texts)

    async def aembed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self.embed_queries(texts)


def structural_contexts(dataset: EvalDataset, *, show_progress: bool = False) -> dict[str, str]:
    """Chunk id -> the offline `StructuralContextGenerator`'s context (no LLM, no network)."""
    from contextual_retrieval_core.contextualize.contextualizer import Contextualizer
    from contextual_retrieval_core.generators.structural import StructuralContextGenerator

    result = Contextualizer(StructuralContextGenerator(), None, config=ContextualizeConfig(show_progress=show_progress)).contextualize(
        dataset.documents, dataset.chunks)
    return {c.id: c.context for c in result.chunks}


def headed_contexts(dataset: EvalDataset, contexts: Mapping[str, str], structural: Mapping[str, str] | None = None) -> dict[str, str]:
    """Chunk id -> the LLM context with the chunk's structural context on a line before it: what
    `Contextualizer(structural_header=True)` (the default) indexes for these contexts.
    `structural`: `structural_contexts(dataset)` when already computed."""
    from contextual_retrieval_core.generators.structural import with_structural_header

    found = structural if structural is not None else structural_contexts(dataset)
    return {c.id: with_structural_header(found[c.id], contexts[c.id]) for c in dataset.chunks if c.id in contexts}


def score_rankings(name: str, ranked: Sequence[Sequence[str]], golden: Sequence[Sequence[str]], ks: Iterable[int] = K_VALUES) -> ConfigResult:
    ks = tuple(ks)
    return ConfigResult(
        name,
        {k: 100 * pass_at_k(ranked, golden, k) for k in ks},
        {k: 100 * recall_at_k(ranked, golden, k) for k in ks},
        100 * mrr(ranked, golden),
    )


def evaluate(
    dataset: EvalDataset,
    embedder: Embedder,
    contexts: Mapping[str, str] | None = None,
    configs: Sequence[str] | None = None,
    *,
    ks: Sequence[int] = K_VALUES,
    show_progress: bool = False,
    windows: Any = True,
    structural_header: bool = True,
    dense_prf: float | None = None,
    reranker: Any = None,
) -> list[ConfigResult]:
    """Run configurations (default: all that the inputs allow) with the library's defaults.

    `contextual-*` configurations need `contexts` (chunk id -> LLM context) covering every chunk;
    `structural-*` ones compute the offline structural contexts here. Each distinct text is
    embedded once per call, whichever configurations share it (with an embedder that embeds a
    document's chunks together, `embed_grouped`, each distinct set of texts once). `windows`: how
    long texts are embedded (`HybridSearcher`'s: default whole, as windows; False: truncated).
    `structural_header`: the `contextual-*` configurations put each chunk's structural context on a
    line before its LLM context (as `Contextualizer(structural_header=True)` does). `dense_prf`:
    `FusionConfig(dense_prf=...)` for every configuration (default: the library's 0.5, which
    runs where a dense side is fused with BM25; 0: off). `reranker`: a `Reranker`; every
    configuration is then scored twice, as fused and reranked (its row named ``NAME+rerank``).
    """
    if configs is None:
        configs = [c for c, (ctx, _, _) in CONFIGS.items() if contexts is not None or ctx != "llm"]
    unknown = [c for c in configs if c not in CONFIGS]
    if unknown:
        raise InputError(f"unknown configurations {unknown}; choose from {list(CONFIGS)}")
    if contexts is not None:
        missing = [c.id for c in dataset.chunks if c.id not in contexts]
        if missing:
            raise InputError(
                f"{len(missing)} chunks have no context (first: {missing[0]}); the contexts file "
                "must cover every chunk of the dataset"
            )
    golden = [q.golden for q in dataset.queries]
    queries = [q.query for q in dataset.queries]
    depth = max(max(ks), 20)
    for name in configs:
        if CONFIGS[name][0] == "llm" and contexts is None:
            raise InputError(f"configuration {name!r} needs contexts: pass --contexts FILE")
    sources: dict[str | None, Mapping[str, str] | None] = {None: None, "llm": contexts}
    header = structural_header and contexts is not None and any(CONFIGS[name][0] == "llm" for name in configs)
    if header or any(CONFIGS[name][0] == "structural" for name in configs):
        sources["structural"] = structural_contexts(dataset, show_progress=show_progress)
    if header:
        sources["llm"] = headed_contexts(dataset, contexts, sources["structural"])  # type: ignore[arg-type]
    from contextual_retrieval_core.search.config import FusionConfig
    from contextual_retrieval_core.search.hybrid import HybridSearcher  # here: the CLI's parser reads this module

    once = _EmbedOnce(embedder)
    results = []
    for name in configs:
        source, use_dense, use_bm25 = CONFIGS[name]
        found = sources[source]
        chunks = [ContextualChunk(c, found[c.id] if found is not None else "") for c in dataset.chunks]
        for rerank in (None, reranker) if reranker is not None else (None,):
            config = FusionConfig.from_settings(None, {"dense_prf": dense_prf, "reranker": rerank})
            searcher = HybridSearcher(chunks, once if use_dense else None, use_bm25=use_bm25, show_progress=show_progress,
                                      windows=windows, config=config)
            ranked = [[h.id for h in hits] for hits in searcher.search_many(queries, top_k=depth)]
            results.append(score_rankings(name + ("+rerank" if rerank is not None else ""), ranked, golden, ks))
    return results


def format_table(results: Sequence[ConfigResult]) -> str:
    """A fixed-width table: one row per configuration."""
    ks = sorted(next(iter(results)).pass_at) if results else list(K_VALUES)
    head = ["configuration"] + [f"Pass@{k}" for k in ks] + [f"R@{k}" for k in ks] + ["MRR"]
    rows = [
        [r.name] + [f"{r.pass_at[k]:.2f}" for k in ks] + [f"{r.recall_at[k]:.2f}" for k in ks] + [f"{r.mrr:.2f}"]
        for r in results
    ]
    widths = [max(len(row[i]) for row in [head] + rows) for i in range(len(head))]
    fmt = lambda row: "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))  # noqa: E731
    return "\n".join([fmt(head), fmt(["-" * w for w in widths])] + [fmt(r) for r in rows])


def results_to_json(results: Sequence[ConfigResult], **extra: object) -> dict:
    return {"configs": [r.to_json() for r in results], **extra}


def plot_results(results: Sequence[ConfigResult], path: str | os.PathLike[str], title: str = "Pass@k") -> Path:
    """A grouped bar chart of Pass@k per configuration, written as PNG."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise MissingDependencyError("plotting needs matplotlib: pip install 'contextual-retrieval-kit[plot]'") from exc
    ks = sorted(results[0].pass_at)
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(results)), 4))
    width = 0.8 / len(ks)
    for j, k in enumerate(ks):
        xs = [i + (j - (len(ks) - 1) / 2) * width for i in range(len(results))]
        bars = ax.bar(xs, [r.pass_at[k] for r in results], width, label=f"Pass@{k}")
        ax.bar_label(bars, fmt="%.1f", fontsize=7)
    ax.set_xticks(range(len(results)), [r.name for r in results], rotation=20, ha="right")
    ax.set_ylabel("%")
    ax.set_ylim(0, 100)
    ax.set_title(title)
    ax.legend(loc="lower right")
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out
