"""`contextual-retrieval demo`: plain and contextual retrieval side by side on a built-in corpus.

The corpus (`demo_corpus`) is a dozen short documents with look-alikes: reports of several
companies and quarters, handbooks of two offices, manuals of two products, three executors of a
fuzzer. Every chunk is situated within its document (structural contexts offline, Claude with
ANTHROPIC_API_KEY), then the chunks are indexed twice with the same embedder, BM25 and rank
fusion: once as they are (plain) and once with their contexts (contextual). Each sample query
is judged by the one chunk that answers it (found = that chunk in the top k); it also shows the
rank of the first chunk from the answering file, which can be higher (a sibling chunk of the
right file is not the answer), and which of the query's words only the context supplies.

Example:
    >>> from contextual_retrieval_core.app._demo import run_demo
    >>> result = run_demo(offline=True, show_progress=False)  # doctest: +SKIP
    >>> [q.query for q in result.queries if q.only_contextual_found]  # doctest: +SKIP
    ["How much did ACME's revenue grow in Q2 2023?", ...]
"""

from __future__ import annotations

import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from contextual_retrieval_core._factories import (
    choose_embedder,
    choose_generator,
    choose_reranker,
    installed,
    unused_keys,
    weights_for,
)
from contextual_retrieval_core.app.demo_corpus import DEMO_DOCUMENTS, DEMO_QUERIES, DemoQuery
from contextual_retrieval_core.checks import positive_int
from contextual_retrieval_core.chunking.code_outline import chunk_boundaries
from contextual_retrieval_core.chunking.split import split_text
from contextual_retrieval_core.chunking.tokenizer import Tokenizer
from contextual_retrieval_core.contextualize.config import ContextualizeConfig
from contextual_retrieval_core.contextualize.contextualizer import Contextualizer
from contextual_retrieval_core.generators.base import label_of
from contextual_retrieval_core.generators.usage import UsageReport
from contextual_retrieval_core.search.config import FusionConfig
from contextual_retrieval_core.search.hybrid import HybridSearcher, SearchHit
from contextual_retrieval_core.types import Chunk, ContextualChunk, Document, labelled, stable_chunk_id

__all__ = ["run_demo", "DemoResult", "QueryOutcome", "demo_chunks", "write_corpus", "DEMO_CHUNK_CHARS"]

#: Chunk size of the demo: about one section of its short documents per chunk.
DEMO_CHUNK_CHARS = 300


@dataclass
class QueryOutcome:
    """Where one sample query's answer ranked, plain and contextual.

    Attributes:
        query: the query; target: the answering chunk's id; path: its document.
        plain_rank, contextual_rank: 1-based rank of the answering chunk (None: not retrieved).
        plain_file_rank, contextual_file_rank: 1-based rank of the first chunk from the answering
            file (the answering chunk or a sibling of it).
        k: the cut-off for "found".
        context: the answer's context; added_words: the query's words that its context
            contains and its text does not.
        plain_top, contextual_top: the top-k (path, chunk id) of each side.
    """

    query: str
    target: str
    path: str
    plain_rank: int | None
    contextual_rank: int | None
    k: int
    context: str
    added_words: list[str] = field(default_factory=list)
    plain_top: list[tuple[str, str]] = field(default_factory=list)
    contextual_top: list[tuple[str, str]] = field(default_factory=list)
    plain_file_rank: int | None = None
    contextual_file_rank: int | None = None

    @property
    def plain_found(self) -> bool:
        """The answer is in plain retrieval's top k."""
        return self.plain_rank is not None and self.plain_rank <= self.k

    @property
    def contextual_found(self) -> bool:
        """The answer is in contextual retrieval's top k."""
        return self.contextual_rank is not None and self.contextual_rank <= self.k

    @property
    def only_contextual_found(self) -> bool:
        """Plain retrieval missed the answer and contextual retrieval found it."""
        return self.contextual_found and not self.plain_found


@dataclass
class DemoResult:
    """The demo's outcome: one `QueryOutcome` per sample query, the contexts' usage report, the
    parts used and the wall time."""

    queries: list[QueryOutcome]
    report: UsageReport
    embedder: str
    generator: str
    reranker: str | None
    documents: int
    chunks: int
    elapsed_s: float


def demo_chunks(chunk_chars: int = DEMO_CHUNK_CHARS) -> tuple[list[Document], list[Chunk]]:
    """The demo corpus as Documents and their Chunks (split by `chunking.split_text`)."""
    documents, chunks = [], []
    for path, text in DEMO_DOCUMENTS:
        documents.append(Document(path, text))
        for i, (_, piece) in enumerate(split_text(text, max_chars=chunk_chars, code=path.endswith(".py"),
                                                     boundaries=chunk_boundaries(text, path))):
            chunks.append(Chunk(stable_chunk_id(path, i, piece), path, piece, i))
    return documents, chunks


def write_corpus(folder: str | Path) -> list[Path]:
    """Write the demo corpus's files under `folder` (to try `contextual-retrieval index` on them)."""
    out = []
    for path, text in DEMO_DOCUMENTS:
        file = Path(folder) / path
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(text, encoding="utf-8")
        out.append(file)
    return out


def _target(query: DemoQuery, chunks: list[Chunk]) -> Chunk:
    for chunk in chunks:
        if chunk.document_id == query.path and query.marker in chunk.text:
            return chunk
    raise AssertionError(f"demo corpus: no chunk of {query.path} contains {query.marker!r}")  # pragma: no cover


def _rank(hits: list[SearchHit], chunk_id: str) -> int | None:
    return next((i for i, h in enumerate(hits, 1) if h.id == chunk_id), None)


def _file_rank(hits: list[SearchHit], path: str) -> int | None:
    return next((i for i, h in enumerate(hits, 1) if h.chunk.document_id == path), None)


def _added_words(query: str, context: str, text: str, tokenizer: Tokenizer) -> list[str]:
    in_context, in_text = set(tokenizer.tokenize(context)), set(tokenizer.tokenize(text))
    words: list[str] = []
    for word in re.findall(r"[\w']+", query):
        terms = set(tokenizer.tokenize(word))
        if terms & in_context - in_text and not terms <= in_text and word not in words:
            words.append(word.removesuffix("'s"))
    return words


def _snippet(text: str, width: int = 88) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    flat = " ".join(lines) or " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1].rstrip() + "…"


def _fmt_rank(rank: int | None, k: int, file_rank: int | None) -> str:
    verdict = "not retrieved  MISSED" if rank is None else f"rank {rank:<3} {'found ' if rank <= k else 'MISSED'}"
    return f"{verdict}  file rank {'-' if file_rank is None else file_rank:<3}"


def run_demo(
    *,
    offline: bool = False,
    k: int = 3,
    save_corpus: str | Path | None = None,
    show_progress: bool = True,
    out: TextIO | None = None,
) -> DemoResult:
    """Run the demo and print it to `out` (default stdout); returns the outcome.

    Args:
        offline: use the offline parts (structural contexts, local embedder, no reranker) even
            when API keys are set.
        k: an answer counts as found within the top `k`.
        save_corpus: also write the corpus's files under this folder.
        show_progress: progress bars (on stderr).
    """
    positive_int("k", k)
    stream = out or sys.stdout

    def say(line: str = "") -> None:
        print(line, file=stream)

    started = time.perf_counter()
    generator = choose_generator("structural" if offline else "auto")
    embedder = choose_embedder("local" if offline else "auto")
    reranker = choose_reranker("none" if offline else "auto")
    gen_label = label_of(generator) + (f" / {generator.model}" if generator.model else "")
    documents, chunks = demo_chunks()

    vectors = "chroma" if installed("chromadb") else "memory"
    _say_setup(say, gen_label, embedder, reranker, vectors, offline, generator.name == "structural", len(documents), len(chunks))
    if save_corpus:
        write_corpus(save_corpus)
        say(f"corpus written to {save_corpus}")
    say()

    # store=None: an in-memory store for structural contexts, the default file for an LLM's
    result = Contextualizer(generator, None, config=ContextualizeConfig(show_progress=show_progress)).contextualize(documents, chunks)
    contextual = result.chunks
    plain = [ContextualChunk(c.chunk, "") for c in contextual]
    say("1. every chunk is situated within its document, e.g.")
    example = next(c for c in contextual if c.document_id == DEMO_QUERIES[0].path and DEMO_QUERIES[0].marker in c.text)
    say(f"   chunk:   {_snippet(example.text)}")
    say(labelled("   context: ", example.context))
    say("   " + result.report.format().replace("\n", "\n   "))
    say()
    say("2. the chunks are indexed twice, with the same embedder, BM25 and rank fusion:")
    say("   plain = the chunk's text alone; contextual = its context + its text")
    weights = weights_for(embedder)  # 0.8 / 0.2 with Voyage, as the cookbook; 0.5 / 0.5 offline
    config = FusionConfig(weights=tuple(weights), reranker=reranker)
    plain_search = HybridSearcher(plain, embedder, config=config, show_progress=show_progress, vector_store=vectors)
    ctx_search = HybridSearcher(contextual, embedder, config=config, show_progress=show_progress, vector_store=vectors)
    say()

    queries = [q.query for q in DEMO_QUERIES]
    depth = len(chunks)
    plain_hits = plain_search.search_many(queries, top_k=depth)
    ctx_hits = ctx_search.search_many(queries, top_k=depth)
    tokenizer = Tokenizer()
    by_id = {c.id: c for c in contextual}
    outcomes = []
    say(f"3. sample queries, each judged by the one chunk that answers it: found = that chunk in the top {k};")
    say("   'file rank' is where the first chunk of the answering file ranks (it may be a sibling chunk, not the answer)")
    for n, (q, p_hits, c_hits) in enumerate(zip(DEMO_QUERIES, plain_hits, ctx_hits), 1):
        target = by_id[_target(q, chunks).id]
        outcome = QueryOutcome(
            q.query, target.id, q.path, _rank(p_hits, target.id), _rank(c_hits, target.id), k, target.context,
            _added_words(q.query, target.context, target.text, tokenizer),
            [(h.chunk.document_id, h.id) for h in p_hits[:k]], [(h.chunk.document_id, h.id) for h in c_hits[:k]],
            _file_rank(p_hits, q.path), _file_rank(c_hits, q.path),
        )
        outcomes.append(outcome)
        _say_outcome(say, n, q, outcome, target, k)

    _say_summary(say, outcomes, k)
    elapsed = time.perf_counter() - started
    say(f"({elapsed:.1f} s)")
    say()
    say("next: index your own folders and search them:")
    say("    contextual-retrieval index PATH...          (writes ./contextual-index; re-runs are incremental)")
    say('    contextual-retrieval query contextual-index "your question"')
    return DemoResult(
        outcomes, result.report, embedder.model_name, gen_label, reranker.model_name if reranker else None,
        len(documents), len(chunks), elapsed,
    )


def _say_setup(say: Any, gen_label: str, embedder: Any, reranker: Any, vectors: str, offline: bool, structural: bool,
               n_documents: int, n_chunks: int) -> None:
    """The demo's first lines: what writes the contexts, embeds, reranks and holds the vectors."""
    say("Contextual Retrieval demo")
    say("=" * 25)
    say(f"contexts: {gen_label}; embedder: {embedder.model_name}; "
        f"reranker: {reranker.model_name if reranker else 'none'}; "
        f"vectors: {'embedded Chroma' if vectors == 'chroma' else 'in-process (pip install chromadb for Chroma)'}; "
        "BM25 in-process")
    if not offline:
        for note in unused_keys():
            say(f"note: {note}")
    if structural:
        say("(offline: set ANTHROPIC_API_KEY for contexts written by Claude, VOYAGE_API_KEY for Voyage "
            "embeddings, COHERE_API_KEY for Cohere reranking)")
    say(f"corpus: {n_documents} documents with look-alikes (reports of several companies and quarters, "
        f"two offices' handbooks, two products' manuals, three fuzzer executors), {n_chunks} chunks")


def _say_outcome(say: Any, n: int, q: Any, outcome: QueryOutcome, target: ContextualChunk, k: int) -> None:
    """One sample query: the verdict, the answer, both rankings, the context and why it helped."""
    verdict = ("plain MISSED it, contextual FOUND it" if outcome.only_contextual_found
               else "both found it" if outcome.plain_found and outcome.contextual_found
               else "contextual missed it" if outcome.plain_found else "both missed it")
    say()
    say(f"Q{n}. {q.query}   -> {verdict}")
    say(f"    answer:     {q.path}: \"{_snippet(target.text)}\"")
    say(f"    plain       {_fmt_rank(outcome.plain_rank, k, outcome.plain_file_rank)}   top {k}: "
        + ", ".join(p for p, _ in outcome.plain_top))
    say(f"    contextual  {_fmt_rank(outcome.contextual_rank, k, outcome.contextual_file_rank)}   top {k}: "
        + ", ".join(p for p, _ in outcome.contextual_top))
    say(labelled("    context:    ", target.context))
    if outcome.added_words:
        say(f"    why: the context supplies {', '.join(repr(w) for w in outcome.added_words)} — "
            "words of the query the chunk never says")
    if outcome.only_contextual_found:
        look_alikes = sorted({p for p, _ in outcome.plain_top if p != q.path})
        if look_alikes:
            say(f"    without it, look-alike chunks from {', '.join(look_alikes)} ranked higher")


def _say_summary(say: Any, outcomes: list[QueryOutcome], k: int) -> None:
    """The counts over the sample queries: found in the top `k`, ranked first, the answering file."""
    n = len(outcomes)
    plain_n, ctx_n = sum(o.plain_found for o in outcomes), sum(o.contextual_found for o in outcomes)
    only = [i for i, o in enumerate(outcomes, 1) if o.only_contextual_found]
    plain_first, ctx_first = sum(o.plain_rank == 1 for o in outcomes), sum(o.contextual_rank == 1 for o in outcomes)
    plain_files = sum(o.plain_file_rank is not None and o.plain_file_rank <= k for o in outcomes)
    ctx_files = sum(o.contextual_file_rank is not None and o.contextual_file_rank <= k for o in outcomes)
    say()
    say(f"summary: answering chunks found in the top {k}: plain {plain_n}/{n}, contextual {ctx_n}/{n}"
        f"; ranked first: plain {plain_first}/{n}, contextual {ctx_first}/{n}")
    say(f"         a chunk of the answering file in the top {k}: plain {plain_files}/{n}, contextual {ctx_files}/{n}")
    if only:
        say(f"         plain retrieval missed and contextual retrieval found: {', '.join(f'Q{i}' for i in only)}")
