"""Evaluate contextual retrieval on your own corpus: generated questions, an estimate, the table.

`evaluate_own_corpus(path, n)` does what ``contextual-retrieval eval --generate-questions N PATH``
does:

1. reads the corpus (`load_corpus`): a folder of files (walked and chunked as `index` does), an
   index folder (its files, chunked with its chunk size) or a cookbook-format folder
   (``codebase_chunks.json``, its own chunks);
2. samples `n` chunks stratified over documents (`sample_chunks`, seeded) and asks Claude for
   one question per chunk (`AnthropicQuestionGenerator`, through the `Contextualizer` and its
   store: every question is stored as it arrives and never paid for twice; Message Batches with
   ``mode="batch"``). A question that quotes more than `max_quoted_words` consecutive words of
   its chunk is rejected and asked once more with `RETRY_QUESTION_PROMPT`; one rejected twice is
   dropped. Both counts are reported;
3. situates every chunk (the same store: contexts paid for by an earlier `index` or `eval` run
   cost nothing) unless `contexts` are given;
4. writes the set in the cookbook's format (`write_evaluation_set`: ``codebase_chunks.json``,
   ``evaluation_set.jsonl``, and the contexts as ``contexts.jsonl``), so that ``contextual-retrieval
   eval --dataset OUT --contexts OUT/contexts.jsonl`` scores it again, and
5. runs `evaluate` on it: plain hybrid against contextual hybrid by default.

`estimate_cost` says what steps 2 and 3 will cost before anything is paid: token counts from the
requests themselves (4 characters a token), one cache write per document and reads for the rest,
and an assumed answer length (`QUESTION_OUTPUT_TOKENS`, `CONTEXT_OUTPUT_TOKENS`).

Example:
    >>> corpus = load_corpus(folder)  # doctest: +SKIP
    >>> estimate = estimate_cost(corpus, 50, AnthropicQuestionGenerator(), AnthropicContextGenerator(),
    ...                          ContextStore(default_store_path()))  # doctest: +SKIP
    >>> print(estimate.format())  # doctest: +SKIP
    questions: 50 to generate, ~61,000 input tokens ... $0.0420
    >>> result = evaluate_own_corpus(folder, 50, out="my-eval")  # doctest: +SKIP
    >>> print(result.format())  # doctest: +SKIP
"""

from __future__ import annotations

import copy
import json
import os
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from contextual_retrieval_core.app.evaluation import (
    ConfigResult,
    EvalDataset,
    EvalQuery,
    evaluate,
    format_table,
    load_cookbook_chunks,
)
from contextual_retrieval_core.embeddings.base import Embedder
from contextual_retrieval_core.errors import InputError, NotFoundError
from contextual_retrieval_core.generators.anthropic import AnthropicContextGenerator
from contextual_retrieval_core.generators.base import TokenUsage
from contextual_retrieval_core.generators.questions import (
    DEFAULT_MAX_QUOTED_WORDS,
    RETRY_QUESTION_PROMPT,
    AnthropicQuestionGenerator,
    quoted_words,
    sample_chunks,
)
from contextual_retrieval_core.generators.usage import UsageReport, cost_usd, estimate_tokens
from contextual_retrieval_core.store.context_store import ContextStore
from contextual_retrieval_core.types import Chunk, Document

__all__ = [
    "QUESTION_OUTPUT_TOKENS",
    "CONTEXT_OUTPUT_TOKENS",
    "DEFAULT_CONFIGS",
    "GeneratedQuestion",
    "QuestionSet",
    "CostEstimate",
    "OwnCorpusEvaluation",
    "load_corpus",
    "estimate_cost",
    "generate_questions",
    "write_evaluation_set",
    "evaluate_own_corpus",
]

#: the answer length the estimate assumes for one question / one context, in tokens
QUESTION_OUTPUT_TOKENS = 25
CONTEXT_OUTPUT_TOKENS = 80
#: the before / after configurations run on a generated set
DEFAULT_CONFIGS = ("hybrid", "contextual-hybrid")
Mode = Literal["realtime", "batch"]


@dataclass(frozen=True)
class GeneratedQuestion:
    """One generated question and the chunk that answers it.

    Attributes:
        chunk_id, document_id: the chunk it was asked about.
        question: the question, whitespace collapsed.
        quoted_words: the longest run of the chunk's words it repeats.
        attempt: 1, or 2 when the first question was rejected.
    """

    chunk_id: str
    document_id: str
    question: str
    quoted_words: int
    attempt: int


@dataclass
class QuestionSet:
    """The outcome of `generate_questions`.

    Attributes:
        questions: the accepted questions, in sample order.
        sampled: chunks sampled; rejected: first questions that quoted too much (asked again);
        dropped: chunks whose second question quoted too much as well (left out of the set).
        reports: the `UsageReport` of the first round and, when there was one, of the retry round.
    """

    questions: list[GeneratedQuestion]
    sampled: int
    rejected: int
    dropped: int
    reports: list[UsageReport] = field(default_factory=list)

    @property
    def usage(self) -> TokenUsage:
        total = TokenUsage()
        for r in self.reports:
            total += r.usage
        return total

    def cost_usd(self) -> float | None:
        costs = [r.cost_usd() for r in self.reports]
        return None if any(c is None for c in costs) else sum(c for c in costs if c is not None)


@dataclass
class CostEstimate:
    """What generating the questions (and the missing contexts) will cost, before it is paid.

    Attributes:
        questions, contexts: estimated token usage; questions_to_generate / contexts_to_generate:
        requests not served by the store; model; batch: priced at the 50% batch rate.
        chunks: the corpus' chunks, each one context request unless the store holds its context.
    """

    model: str
    batch: bool
    questions_to_generate: int
    questions: TokenUsage
    contexts_to_generate: int
    contexts: TokenUsage
    chunks: int = 0

    @property
    def questions_cost_usd(self) -> float | None:
        return cost_usd(self.questions, self.model, batch=self.batch)

    @property
    def contexts_cost_usd(self) -> float | None:
        return cost_usd(self.contexts, self.model, batch=self.batch)

    @property
    def total_tokens(self) -> int:
        return _tokens(self.questions) + _tokens(self.contexts)

    @property
    def total_cost_usd(self) -> float | None:
        q, c = self.questions_cost_usd, self.contexts_cost_usd
        return None if q is None or c is None else q + c

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model, "batch": self.batch,
            "questions_to_generate": self.questions_to_generate, "questions": self.questions.to_dict(),
            "questions_cost_usd": self.questions_cost_usd,
            "contexts_to_generate": self.contexts_to_generate, "contexts": self.contexts.to_dict(),
            "contexts_cost_usd": self.contexts_cost_usd, "chunks": self.chunks,
            "total_tokens": self.total_tokens, "total_cost_usd": self.total_cost_usd,
        }

    def format(self) -> str:
        """What the command prints before asking to go on."""
        rate = " at the 50% batch rate" if self.batch else ""
        lines = [f"estimate ({self.model}{rate}; ~4 characters a token):",
                 f"  chunks: {self.chunks} (one context request each, unless the store holds it)"]
        for what, count, usage, cost in (
            ("questions", self.questions_to_generate, self.questions, self.questions_cost_usd),
            ("contexts", self.contexts_to_generate, self.contexts, self.contexts_cost_usd),
        ):
            lines.append(
                f"  {what}: {count} to generate, ~{_tokens(usage):,} tokens (input {usage.input_tokens:,}, cache write "
                f"{usage.cache_write_tokens + usage.cache_write_1h_tokens:,}, cache read {usage.cache_read_tokens:,}, "
                f"output {usage.output_tokens:,}), {_dollars(cost)}"
            )
        lines.append(f"  total: ~{self.total_tokens:,} tokens, {_dollars(self.total_cost_usd)}")
        return "\n".join(lines)


@dataclass
class OwnCorpusEvaluation:
    """The outcome of `evaluate_own_corpus`.

    Attributes:
        dataset: the corpus with the generated queries; questions: the `QuestionSet`;
        contexts_report: the contexts run's `UsageReport` (None when contexts were given);
        estimate: the `CostEstimate` made before; results: the configurations' scores;
        out: the folder the set was written to (None: not written); elapsed_s: wall time.
    """

    dataset: EvalDataset
    questions: QuestionSet
    contexts_report: UsageReport | None
    estimate: CostEstimate
    results: list[ConfigResult]
    out: Path | None
    elapsed_s: float

    @property
    def paid_usage(self) -> TokenUsage:
        total = TokenUsage()
        total += self.questions.usage
        if self.contexts_report is not None:
            total += self.contexts_report.usage
        return total

    def paid_cost_usd(self) -> float | None:
        costs = [self.questions.cost_usd(), self.contexts_report.cost_usd() if self.contexts_report else 0.0]
        return None if any(c is None for c in costs) else sum(c for c in costs if c is not None)

    def format(self) -> str:
        q = self.questions
        u = self.paid_usage
        lines = [
            f"questions: {len(q.questions)} of {q.sampled} sampled chunks ({q.rejected} rejected for quoting their "
            f"chunk and asked again, {q.dropped} dropped after the second try)",
            f"paid: {u.requests} requests, {_tokens(u):,} tokens (input {u.input_tokens:,}, cache write "
            f"{u.cache_write_tokens + u.cache_write_1h_tokens:,}, cache read {u.cache_read_tokens:,}, output "
            f"{u.output_tokens:,}), {_dollars(self.paid_cost_usd())}; estimated {_dollars(self.estimate.total_cost_usd)}",
        ]
        if self.out is not None:
            lines.append(f"set written to {self.out} (contextual-retrieval eval --dataset {self.out} "
                         f"--contexts {self.out / 'contexts.jsonl'} scores it again)")
        lines.append(format_table(self.results))
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "questions": len(self.questions.questions), "sampled": self.questions.sampled,
            "rejected": self.questions.rejected, "dropped": self.questions.dropped,
            "estimate": self.estimate.to_dict(), "paid_usage": self.paid_usage.to_dict(),
            "paid_cost_usd": self.paid_cost_usd(), "elapsed_s": round(self.elapsed_s, 2),
            "configs": [r.to_json() for r in self.results],
        }


def _tokens(u: TokenUsage) -> int:
    return u.input_tokens + u.cache_write_tokens + u.cache_write_1h_tokens + u.cache_read_tokens + u.output_tokens


def _dollars(cost: float | None) -> str:
    return "unknown price" if cost is None else f"${cost:.4f}"


# -- the corpus ------------------------------------------------------------------------------


def load_corpus(path: str | os.PathLike[str], *, chunk_chars: int | None = None, fit_chunks: bool | None = None,
                embedder: Embedder | None = None, generator: Any = None) -> EvalDataset:
    """The documents and chunks of a folder of files, an index folder or a cookbook folder.

    A folder is walked and chunked as ``contextual-retrieval index`` does, by the same function
    with the same options: `chunk_chars` (default the library's) and `fit_chunks` (each chunk,
    with the context `generator` will give it, fitting `embedder`'s window; default off). An index
    folder (one with ``manifest.json``) gives its files, chunked with its own settings unless
    these are given; a folder with ``codebase_chunks.json`` gives its own chunks. Raises
    FileNotFoundError for a missing path and ValueError naming the file for one that cannot be
    read, or when there is nothing to chunk.
    """
    from contextual_retrieval_core.chunking.split import DEFAULT_CHUNK_CHARS
    from contextual_retrieval_core.index._changes import read_changes
    from contextual_retrieval_core.index.files import SourceFile, collect_files
    from contextual_retrieval_core.index.manifest import MANIFEST_NAME, IndexManifest
    from contextual_retrieval_core.index.report import IndexReport

    folder = Path(path).expanduser()
    if not folder.exists():
        raise NotFoundError(f"{path} does not exist; pass a folder of files, an index folder or a cookbook dataset folder")
    if (folder / "codebase_chunks.json").is_file():
        corpus = load_cookbook_chunks(folder / "codebase_chunks.json")
        if not corpus.chunks:
            raise InputError(f"{folder / 'codebase_chunks.json'} has no chunks")
        return corpus
    left_out: list[tuple[str, str]] = []  # (file, why) of the files a folder's walk leaves out
    scan = None
    if (folder / MANIFEST_NAME).is_file():
        manifest = IndexManifest.read(folder)
        files = [SourceFile(Path(e.file), doc_id, Path(e.root)) for doc_id, e in sorted(manifest.files.items())]
        missing = [f.path for f in files if not f.path.is_file()]
        if missing:
            raise NotFoundError(f"{missing[0]} is in the index {folder} but no longer on disk; run "
                                    f"`contextual-retrieval index --prune-missing` first, or pass the folder itself")
        size = chunk_chars or manifest.chunk_chars
        fit_chunks = manifest.chunk_tokens is not None if fit_chunks is None else fit_chunks
    else:
        scan = collect_files([folder])
        bad = [s for s in scan.skipped if s.reason.startswith(("unreadable", "undecodable"))]
        if bad:
            raise InputError(f"cannot read {bad[0].path}: {bad[0].reason}; fix its permissions or encoding "
                             "(UTF-8), or move it out of the folder")
        files, size = scan.files, chunk_chars or DEFAULT_CHUNK_CHARS
        left_out = [(str(s.path), s.reason) for s in scan.skipped]
    window = None
    if fit_chunks:
        from contextual_retrieval_core.chunking.budget import window_of
        from contextual_retrieval_core.embeddings.minilm import LocalMiniLMEmbedder

        window = window_of(embedder if embedder is not None else LocalMiniLMEmbedder())
    report = IndexReport()
    entries, documents, chunks, _ = read_changes(files, {}, True, size, report, False, window=window, generator=generator)
    if report.skipped:
        where, why = report.skipped[0]
        raise InputError(f"cannot read {where}: {why}; convert it to UTF-8, or move it out of the folder")
    if not chunks:
        empty = [(e.file, "empty (whitespace only)") for e in entries.values() if not e.chunks]
        raise InputError(_nothing_to_chunk(path, left_out + empty, Counter() if scan is None else scan.other_extensions))
    for d in documents:
        d.metadata["uuid"] = d.id
    keys = {(c.document_id, c.index): c.id for c in chunks}
    return EvalDataset(documents, chunks, [], keys)


def _nothing_to_chunk(path: str | os.PathLike[str], left_out: list[tuple[str, str]], other: Counter) -> str:
    """`load_corpus`'s error for a folder that gives no chunk: which files were left out and why
    (`left_out`: (file, reason) pairs; `other`: the count of files by extension not indexed), and
    how to include them (eval reads files up to `index.files.MAX_FILE_BYTES`; an index folder's
    files are read whatever their size)."""
    from contextual_retrieval_core.index.files import MAX_FILE_BYTES

    parts = []
    if left_out:
        parts.append("left out: " + "; ".join(f"{file} ({why.split('; ')[0]})" for file, why in left_out[:10])
                     + (f"; and {len(left_out) - 10} more" if len(left_out) > 10 else ""))
    if other:
        common = ", ".join(f"{ext or '(no extension)'} ({n})" for ext, n in other.most_common(8))
        count = sum(other.values())
        parts.append(f"{count} file{'' if count == 1 else 's'} of types eval does not read: {common}")
    if any(why.startswith("too large") for _, why in left_out):
        parts.append(f"eval reads files up to {MAX_FILE_BYTES / 1e6:g} MB: split a larger file, or index it "
                     "(contextual-retrieval index PATH... --max-file-size MB --index-dir DIR) and pass DIR to eval")
    if any(why.startswith("binary") for _, why in left_out):
        parts.append("binary files are not read")
    if not left_out:
        parts.append("pass a folder of text, markdown or code files with content")
    return f"{path}: no text to chunk; " + "; ".join(parts)


# -- the estimate ----------------------------------------------------------------------------


def _todo(chunks: Sequence[Chunk], docs: Mapping[str, Document], generator: Any, store: ContextStore | None) -> list[Chunk]:
    """The chunks whose answer `store` does not hold yet, each distinct (document, text) once."""
    from contextual_retrieval_core.contextualize.contextualizer import store_keys

    keys = store_keys(generator, docs, chunks)
    keyed: dict[str, Chunk] = {}
    for c in chunks:
        keyed.setdefault(keys[c.id], c)
    found = store.get_many(keyed) if store is not None else {}
    return [c for k, c in keyed.items() if k not in found]


def _estimate_requests(chunks: Sequence[Chunk], docs: Mapping[str, Document], generator: AnthropicContextGenerator,
                       output_tokens: int, batch: bool, written: set[str]) -> TokenUsage:
    """Estimated usage of one request per chunk: a document's first cached request writes its
    prefix, the others read it (`written`: documents whose prefix an earlier step wrote; the
    question and the context prompts share the document block, so contexts read what questions wrote)."""
    usage = TokenUsage()
    minimum = generator.cache_min_tokens
    for c in chunks:
        request = generator.build_request(docs[c.document_id], c, cache_ttl="1h" if batch else None)
        blocks = request.params["messages"][0]["content"]
        tokens = [estimate_tokens(b["text"]) for b in blocks]
        cached_blocks = [i for i, b in enumerate(blocks) if "cache_control" in b]
        prefix = sum(tokens[: cached_blocks[-1] + 1]) if cached_blocks else 0
        if cached_blocks and (minimum is None or prefix >= minimum):
            if c.document_id in written:
                usage.cache_read_tokens += prefix
            elif batch:
                usage.cache_write_1h_tokens += prefix
            else:
                usage.cache_write_tokens += prefix
            written.add(c.document_id)
            usage.input_tokens += sum(tokens) - prefix
        else:
            usage.input_tokens += sum(tokens)
        usage.output_tokens += min(output_tokens, generator.max_tokens)
        usage.requests += 1
    return usage


def estimate_cost(
    corpus: EvalDataset,
    n: int,
    question_generator: AnthropicContextGenerator,
    context_generator: AnthropicContextGenerator | None,
    store: ContextStore | None,
    *,
    seed: int = 0,
    mode: Mode = "realtime",
) -> CostEstimate:
    """What `evaluate_own_corpus` will pay for `n` questions (and for the contexts that `store`
    does not hold yet, unless `context_generator` is None), before any request is made.

    Questions already in the store cost nothing. The figure assumes every first question is
    accepted (a rejected one costs one request more).
    """
    docs = {d.id: d for d in corpus.documents}
    sample = sample_chunks(corpus.chunks, n, seed)
    batch = mode == "batch"
    q_todo = _todo(sample, docs, question_generator, store)
    written: set[str] = set()
    questions = _estimate_requests(q_todo, docs, question_generator, QUESTION_OUTPUT_TOKENS, batch, written)
    c_todo = _todo(corpus.chunks, docs, context_generator, store) if context_generator is not None else []
    contexts = (_estimate_requests(c_todo, docs, context_generator, CONTEXT_OUTPUT_TOKENS, batch, written)
                if context_generator is not None else TokenUsage())
    return CostEstimate(question_generator.model, batch, len(q_todo), questions, len(c_todo), contexts, len(corpus.chunks))


# -- questions -------------------------------------------------------------------------------


def _retry_generator(generator: AnthropicContextGenerator) -> AnthropicContextGenerator:
    """`generator` with `RETRY_QUESTION_PROMPT` (its clients shared): its own store keys."""
    retry = copy.copy(generator)
    retry.prompt = RETRY_QUESTION_PROMPT
    retry.prompt_identity = RETRY_QUESTION_PROMPT.identity
    return retry


def _ask(generator: AnthropicContextGenerator, store: ContextStore, docs: Mapping[str, Document], chunks: list[Chunk],
         options: dict[str, Any]) -> tuple[dict[str, str], UsageReport]:
    from contextual_retrieval_core.contextualize.config import ContextualizeConfig
    from contextual_retrieval_core.contextualize.contextualizer import Contextualizer

    documents = [docs[d] for d in dict.fromkeys(c.document_id for c in chunks)]
    contextualizer = Contextualizer(generator, store, config=ContextualizeConfig(structural_header=False, **options))
    try:
        result = contextualizer.contextualize(documents, chunks)
    finally:
        contextualizer.close()
    return {c.id: " ".join(c.context.split()) for c in result.chunks}, result.report


def generate_questions(
    corpus: EvalDataset,
    n: int,
    generator: AnthropicContextGenerator,
    store: ContextStore,
    *,
    seed: int = 0,
    mode: Mode = "realtime",
    max_quoted_words: int = DEFAULT_MAX_QUOTED_WORDS,
    concurrency: int = 8,
    show_progress: bool = False,
    batch_poll_interval: float = 30.0,
) -> QuestionSet:
    """One question for each of `n` chunks sampled from `corpus` (see the module docstring).

    Every question is stored in `store` as it arrives (a rerun after a crash pays only for the
    missing ones); a question quoting more than `max_quoted_words` consecutive words of its chunk
    is asked once more, and dropped if the second one quotes too much as well. `mode="batch"`:
    Message Batches (50% off), polled every `batch_poll_interval` seconds.
    """
    docs = {d.id: d for d in corpus.documents}
    sample = sample_chunks(corpus.chunks, n, seed)
    options: dict[str, Any] = {"mode": mode, "concurrency": concurrency, "show_progress": show_progress,
                               "batch_poll_interval": batch_poll_interval}
    first, report = _ask(generator, store, docs, sample, options)
    reports = [report]
    accepted: dict[str, GeneratedQuestion] = {}
    rejected = []
    for c in sample:
        quoted = quoted_words(first[c.id], c.text)
        if quoted > max_quoted_words:
            rejected.append(c)
        else:
            accepted[c.id] = GeneratedQuestion(c.id, c.document_id, first[c.id], quoted, 1)
    dropped = 0
    if rejected:
        second, retry_report = _ask(_retry_generator(generator), store, docs, rejected, options)
        reports.append(retry_report)
        for c in rejected:
            quoted = quoted_words(second[c.id], c.text)
            if quoted > max_quoted_words:
                dropped += 1
            else:
                accepted[c.id] = GeneratedQuestion(c.id, c.document_id, second[c.id], quoted, 2)
    questions = [accepted[c.id] for c in sample if c.id in accepted]
    return QuestionSet(questions, len(sample), len(rejected), dropped, reports)


# -- the set on disk -------------------------------------------------------------------------


def write_evaluation_set(
    corpus: EvalDataset,
    questions: Sequence[GeneratedQuestion],
    folder: str | os.PathLike[str],
    contexts: Mapping[str, str] | None = None,
    *,
    model: str = "",
) -> Path:
    """Write `corpus` and `questions` in the cookbook's format into `folder`.

    ``codebase_chunks.json``: every document and chunk (doc_id, original_uuid, content, chunks
    [{chunk_id, original_index, content}]); ``evaluation_set.jsonl``: one line per question (query,
    answer (empty: none is generated), golden_doc_uuids, golden_chunk_uuids [[uuid, index]],
    golden_documents, golden_chunks, meta); with `contexts`, ``contexts.jsonl`` (doc_id,
    original_index, chunk_id, context). `load_cookbook(folder)` reads it back.
    """
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    docs = {d.id: d for d in corpus.documents}
    chunks = {c.id: c for c in corpus.chunks}
    by_doc: dict[str, list[Chunk]] = {}
    for c in corpus.chunks:
        by_doc.setdefault(c.document_id, []).append(c)

    def uuid(doc_id: str) -> str:
        return str(docs[doc_id].metadata.get("uuid") or doc_id)

    raw = [
        {"doc_id": d.id, "original_uuid": uuid(d.id), "content": d.text,
         "chunks": [{"chunk_id": c.id, "original_index": c.index, "content": c.text} for c in by_doc.get(d.id, [])]}
        for d in corpus.documents
    ]
    _write_atomic(out / "codebase_chunks.json", json.dumps(raw, ensure_ascii=False, indent=1) + "\n")
    lines = []
    for q in questions:
        c, d = chunks[q.chunk_id], docs[q.document_id]
        lines.append(json.dumps({
            "query": q.question, "answer": "",
            "golden_doc_uuids": [uuid(d.id)],
            "golden_chunk_uuids": [[uuid(d.id), c.index]],
            "golden_documents": [{"uuid": uuid(d.id), "content": d.text}],
            "golden_chunks": [{"doc_uuid": uuid(d.id), "index": c.index, "content": c.text}],
            "meta": {"generated_by": model, "attempt": q.attempt, "quoted_words": q.quoted_words},
        }, ensure_ascii=False))
    _write_atomic(out / "evaluation_set.jsonl", "".join(line + "\n" for line in lines))
    if contexts is not None:
        rows = [json.dumps({"doc_id": c.document_id, "original_index": c.index, "chunk_id": c.id, "context": contexts[c.id]},
                           ensure_ascii=False) for c in corpus.chunks if c.id in contexts]
        _write_atomic(out / "contexts.jsonl", "".join(r + "\n" for r in rows))
    return out


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


# -- the whole flow --------------------------------------------------------------------------


def evaluate_own_corpus(
    path: str | os.PathLike[str] | EvalDataset,
    n: int,
    *,
    question_generator: AnthropicContextGenerator | None = None,
    context_generator: AnthropicContextGenerator | None = None,
    contexts: Mapping[str, str] | None = None,
    store: ContextStore | str | os.PathLike[str] | None = None,
    embedder: Embedder | None = None,
    out: str | os.PathLike[str] | None = None,
    seed: int = 0,
    mode: Mode = "realtime",
    max_quoted_words: int = DEFAULT_MAX_QUOTED_WORDS,
    configs: Sequence[str] = DEFAULT_CONFIGS,
    concurrency: int = 8,
    show_progress: bool = False,
    batch_poll_interval: float = 30.0,
    estimate: CostEstimate | None = None,
    **evaluate_options: Any,
) -> OwnCorpusEvaluation:
    """Generate `n` questions on a corpus, situate its chunks, and score before against after.

    Args:
        path: a folder of files, an index folder, a cookbook folder (`load_corpus`) or an
            `EvalDataset` already loaded.
        n: how many questions (chunks sampled, stratified over documents, by `seed`).
        question_generator: default `AnthropicQuestionGenerator()` (ANTHROPIC_API_KEY).
        context_generator: default `AnthropicContextGenerator` on the question generator's model.
        contexts: chunk id -> context to use instead of generating them.
        store: the context store questions and contexts go through (default: the library's
            default file, the one ``contextual-retrieval index`` uses).
        embedder: default the offline MiniLM. out: write the set there (`write_evaluation_set`).
        mode: "realtime" or "batch" (Message Batches, 50% off; polled every `batch_poll_interval`
            seconds). max_quoted_words: the bias guard.
        configs: the `evaluate` configurations (default plain and contextual hybrid).
        estimate: the `estimate_cost` made before (made here when None).
        evaluate_options: passed to `evaluate` (windows, structural_header, dense_prf).
    """
    from contextual_retrieval_core.contextualize.contextualizer import default_store_path

    started = time.perf_counter()
    corpus = path if isinstance(path, EvalDataset) else load_corpus(path)
    question_generator = question_generator or AnthropicQuestionGenerator()
    if contexts is None and context_generator is None:
        context_generator = AnthropicContextGenerator(question_generator.model)
    owned = not isinstance(store, ContextStore)
    the_store = store if isinstance(store, ContextStore) else ContextStore(store or default_store_path())
    try:
        if estimate is None:
            estimate = estimate_cost(corpus, n, question_generator, None if contexts is not None else context_generator,
                                     the_store, seed=seed, mode=mode)
        questions = generate_questions(corpus, n, question_generator, the_store, seed=seed, mode=mode,
                                       max_quoted_words=max_quoted_words, concurrency=concurrency,
                                       show_progress=show_progress, batch_poll_interval=batch_poll_interval)
        if not questions.questions:
            raise InputError(f"all {questions.sampled} questions quoted their chunk at length and were dropped; "
                             "raise max_quoted_words (--max-quoted-words) or use another model")
        report = None
        if contexts is None:
            assert context_generator is not None
            docs = {d.id: d for d in corpus.documents}
            contexts, report = _ask(context_generator, the_store, docs, list(corpus.chunks),
                                    {"mode": mode, "concurrency": concurrency, "show_progress": show_progress,
                                     "batch_poll_interval": batch_poll_interval})
    finally:
        if owned:
            the_store.close()
    dataset = EvalDataset(corpus.documents, corpus.chunks,
                          [EvalQuery(q.question, (q.chunk_id,)) for q in questions.questions], corpus.chunk_keys)
    written = write_evaluation_set(corpus, questions.questions, out, contexts, model=question_generator.model) if out else None
    if embedder is None:
        from contextual_retrieval_core.embeddings.minilm import LocalMiniLMEmbedder

        embedder = LocalMiniLMEmbedder()
    results = evaluate(dataset, embedder, contexts, list(configs), show_progress=show_progress, **evaluate_options)
    return OwnCorpusEvaluation(dataset, questions, report, estimate, results, written, time.perf_counter() - started)
