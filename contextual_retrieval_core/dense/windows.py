"""Windowed contextual embeddings: the dense side sees the whole chunk, not just its first window.

An embedder reads at most `max_tokens` tokens (the offline MiniLM: 256) and drops the rest, so a
long contextualized chunk would lose its tail. Here a chunk whose indexed text is longer than the
window keeps its own row, the vector one row per chunk gives it (its indexed text as the embedder
reads it: `window_prefixes` where the embedder has it), and gets one extra row per further
overlapping window of its text, each with the chunk's context in front (so every window carries
it); a chunk scores as its best row (max-sim), so windows only ever add to what one vector per
chunk finds. Dense hits are collapsed to one per chunk before fusion, so `depth` still counts
chunks. Chunks that fit stay one vector of exactly their indexed text.

`pooling="mean"` instead averages a chunk's row vectors into one row (no extra rows at query
time).

An embedder takes part by exposing `max_tokens` (its window) and `count_tokens(texts)` (tokens per
text, special tokens included); one without them is never windowed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import numpy as np

from contextual_retrieval_core.chunking.budget import TokenWindow, window_of
from contextual_retrieval_core.errors import InputError
from contextual_retrieval_core.types import ContextualChunk, compose_indexed_text

__all__ = ["WindowConfig", "DenseRows", "chunk_windows", "build_dense_rows", "collapse_hits", "first_per_owner", "embed_texts",
           "fetch_sizes"]

T = TypeVar("T")

Pooling = Literal["max", "mean"]
_PIECE = re.compile(r"\S+\s*|\s+")
#: the separator between a window's row id and its number; ids are chunk ids otherwise
WINDOW_MARK = "\x1fw"


@dataclass(frozen=True)
class WindowConfig:
    """How long chunks are windowed.

    Args:
        size: tokens per window, context included (default: the embedder's `max_tokens`).
        overlap: chunk tokens shared by consecutive windows (default: a quarter of `size`).
        pooling: "max" (one row per window, a chunk scores as its best window) or "mean" (the
            window vectors averaged into one row per chunk).
    """

    size: int | None = None
    overlap: int | None = None
    pooling: Pooling = "max"

    def __post_init__(self) -> None:
        if self.size is not None and (not isinstance(self.size, int) or self.size < 16):
            raise InputError(f"WindowConfig.size must be an int of at least 16 tokens, got {self.size!r}")
        if self.overlap is not None and (not isinstance(self.overlap, int) or self.overlap < 0):
            raise InputError(f"WindowConfig.overlap must be a non-negative int, got {self.overlap!r}")
        if self.size is not None and self.overlap is not None and self.overlap >= self.size // 2:
            raise InputError(f"WindowConfig.overlap ({self.overlap}) must be under half of size ({self.size})")
        if self.pooling not in ("max", "mean"):
            raise InputError(f"WindowConfig.pooling must be 'max' or 'mean', got {self.pooling!r}")

    def window_for(self, embedder: Any) -> tuple[int, int] | None:
        """(size, overlap) for `embedder`, or None when it cannot be windowed."""
        size = self.size or _through(embedder, "max_tokens")
        if not size or not callable(_through(embedder, "count_tokens")):
            return None
        overlap = self.overlap if self.overlap is not None else size // 4
        return int(size), min(int(overlap), int(size) // 2 - 1)


def chunk_windows(chunk: ContextualChunk, counts: dict[str, int], special: int, size: int, overlap: int,
                  parts: Mapping[str, list[str]] | None = None) -> list[str]:
    """The texts to embed for one chunk: its indexed text when it fits in `size` tokens, else
    overlapping windows of its text, each composed with the chunk's context.

    `counts` maps every whitespace-delimited piece of the chunk and context to its token count
    without special tokens; `special` is the count of an empty text (the special tokens); `parts`
    maps a piece that may be too long for a window (a long run without spaces) to the runs of
    characters it is cut into when it is, each counted in `counts` too.
    """
    pieces = _PIECE.findall(chunk.chunk.text)
    cost = [counts[p] for p in pieces]
    prefix, context = 0, chunk.context
    if context and chunk.position != "none":
        prefix = sum(counts[p] for p in _PIECE.findall(context)) + 1
    budget = size - special - prefix
    if sum(cost) <= budget:
        return [chunk.indexed_text]
    if budget < size // 4:  # a context that fills the window: each window carries its start, the chunk advances
        kept, room = [], size - special - size // 4 - 1
        for piece in _PIECE.findall(context):
            room -= counts[piece]
            if room < 0:
                break
            kept.append(piece)
        context = "".join(kept).rstrip() + context[len(context.rstrip()):]  # what joined it to the chunk stays
        budget = size // 4
    if parts and max(cost) > budget:  # a piece no window holds whole (a long run without spaces) is cut inside
        pieces = [q for p in pieces for q in (parts.get(p, (p,)) if counts[p] > budget else (p,))]
        cost = [counts[p] for p in pieces]
    windows, start, n = [], 0, len(pieces)
    while start < n:
        end, used = start, 0
        while end < n and (end == start or used + cost[end] <= budget):
            used += cost[end]
            end += 1
        text = "".join(pieces[start:end]).strip()
        windows.append(compose_indexed_text(context, text, chunk.position, chunk.separator) if text else "")
        if end >= n:
            break
        back, shared = end, 0
        while back - 1 > start and shared + cost[back - 1] <= overlap:
            back -= 1
            shared += cost[back]
        start = back
    return [w for w in windows if w] or [chunk.indexed_text]


@dataclass
class DenseRows:
    """The rows of a windowed vector index: `ids` (unique row ids), `owners` (the chunk of each
    row) and `vectors`; `extra` = rows beyond one per chunk."""

    ids: list[str]
    owners: list[str]
    vectors: np.ndarray

    @property
    def extra(self) -> int:
        return len(self.ids) - len(set(self.owners))


def embed_texts(embedder: Any, texts: list[str], groups: list[str] | None, batch_size: int, show_progress: bool) -> np.ndarray:
    """Document vectors for `texts`: grouped by document through `embed_grouped` when the
    embedder has it (contextualized embeddings), else in batches through `embed_documents`."""
    grouped = _through(embedder, "embed_grouped") if groups is not None else None
    if callable(grouped):  # past any text-keyed cache: a contextualized vector depends on its document
        return np.asarray(grouped(texts, groups), dtype=np.float32)
    from tqdm.auto import tqdm

    parts = []
    with tqdm(total=len(texts), desc=f"embedding ({embedder.model_name})", unit="text", disable=not show_progress) as bar:
        for start in range(0, len(texts), batch_size):
            batch = texts[start : start + batch_size]
            parts.append(np.asarray(embedder.embed_documents(batch), dtype=np.float32))
            bar.update(len(batch))
    return np.concatenate(parts) if parts else np.zeros((0, 0), dtype=np.float32)


def build_dense_rows(
    embedder: Any,
    chunks: Sequence[ContextualChunk],
    windows: WindowConfig | None,
    *,
    batch_size: int = 64,
    show_progress: bool = False,
) -> DenseRows:
    """Embed `chunks` (windowed per `windows`; None: one vector per chunk)."""
    texts_per_chunk = window_texts(embedder, chunks, windows)
    flat = [t for texts in texts_per_chunk for t in texts]
    owners = [c.id for c, texts in zip(chunks, texts_per_chunk) for _ in texts]
    groups = _document_groups(chunks, texts_per_chunk)
    vectors = embed_texts(embedder, flat, groups, batch_size, show_progress)
    if windows is not None and windows.pooling == "mean" and len(flat) > len(chunks):
        pooled = np.zeros((len(chunks), vectors.shape[1]), dtype=np.float32)
        start = 0
        for i, texts in enumerate(texts_per_chunk):
            pooled[i] = vectors[start : start + len(texts)].mean(axis=0)
            start += len(texts)
        return DenseRows([c.id for c in chunks], [c.id for c in chunks], pooled)
    ids = []
    for c, texts in zip(chunks, texts_per_chunk):
        ids.extend([c.id] if len(texts) == 1 else [f"{c.id}{WINDOW_MARK}{k}" for k in range(len(texts))])
    return DenseRows(ids, owners, vectors)


def window_texts(embedder: Any, chunks: Sequence[ContextualChunk], windows: WindowConfig | None) -> list[list[str]]:
    """The texts to embed per chunk (one each when `windows` is None or the embedder cannot count)."""
    plan = windows.window_for(embedder) if windows is not None else None
    if plan is None:
        return [[c.indexed_text] for c in chunks]
    size, overlap = plan
    pieces = sorted({p for c in chunks for text in (c.chunk.text, c.context or "") for p in _PIECE.findall(text)})
    # the chunker's piece counts: a piece the tokenizer caps counts as the whole window
    window = window_of(embedder) or TokenWindow(size, _through(embedder, "count_tokens"))
    count, special = window.count, window.special
    counts = dict(zip(pieces, window.piece_costs(pieces)))
    parts = _long_piece_parts(counts, count, special, max(1, size // 4))  # fits any window (budget >= size // 4)
    per = [chunk_windows(c, counts, special, size, overlap, parts) for c in chunks]
    long = [i for i, texts in enumerate(per) if len(texts) > 1]
    if long:  # a long chunk's own row is its one-vector row: its indexed text as the embedder reads it
        prefixes = _through(embedder, "window_prefixes")
        heads = [chunks[i].indexed_text for i in long]
        for i, head in zip(long, prefixes(heads) if callable(prefixes) else heads):
            per[i][0] = head
    return per


def _long_piece_parts(counts: dict[str, int], count: Callable[[Sequence[str]], Sequence[int]], special: int,
                      limit: int) -> dict[str, list[str]]:
    """Pieces of more than `limit` tokens cut into runs of characters of at most `limit` tokens
    each (their counts added to `counts`): a window then advances inside a long run without
    spaces instead of taking it whole past the window."""
    parts: dict[str, list[str]] = {}
    for piece in [p for p, n in counts.items() if n > limit]:
        width = max(1, len(piece) * limit // (2 * max(counts[piece], 1)))
        while True:
            runs = [piece[i : i + width] for i in range(0, len(piece), width)]
            got = [max(0, int(n) - special) for n in count(runs)]
            if max(got) <= limit or width == 1:
                break
            width = max(1, width // 2)
        parts[piece] = runs
        counts.update(zip(runs, got))
    return parts


def fetch_sizes(k: int, extra: int) -> list[int]:
    """How many rows to ask a store for, in turn, for the top `k` chunks when it holds `extra` rows
    beyond one a chunk: rows come best first, so `k` more rows than chunks wanted usually hold the
    answer; a query whose top rows are mostly a few chunks' windows asks for twice as many, up to
    every row it may need (`k + extra`). Stop at the first size whose rows hold `k` chunks, or
    that came back short (the store has no more).

    Example:
        >>> fetch_sizes(150, 795), fetch_sizes(150, 40)
        ([300, 600, 945], [190])
    """
    sizes = [k + min(extra, k)]
    while sizes[-1] < k + extra:
        sizes.append(min(k + extra, 2 * sizes[-1]))
    return sizes


def first_per_owner(items: Iterable[T], owner_of: Callable[[T], str], limit: int) -> list[tuple[str, T]]:
    """(owner, item) for the first item (best first) of each owner, at most `limit` owners: how a
    chunk's window rows collapse to the chunk, whatever the rows are (ids, nodes, Documents)."""
    seen: set[str] = set()
    out: list[tuple[str, T]] = []
    for item in items:
        owner = owner_of(item)
        if owner not in seen:
            seen.add(owner)
            out.append((owner, item))
            if len(out) == limit:
                break
    return out


def collapse_hits(hits: list[tuple[str, float]], owners: dict[str, str], depth: int) -> list[tuple[str, float]]:
    """Row hits (best first) to chunk hits: each chunk once, at its best row's score."""
    return [(chunk, score) for chunk, (_, score) in first_per_owner(hits, lambda h: owners.get(h[0], h[0]), depth)]


def _through(embedder: Any, name: str) -> Any:
    """`embedder.<name>`, looking through wrappers that keep the real one as `.embedder`
    (`CachedEmbedder`, the evaluation's in-run memo)."""
    for _ in range(8):
        if embedder is None:
            return None
        value = getattr(embedder, name, None)
        if value is not None:
            return value
        embedder = getattr(embedder, "embedder", None)
    return None


def _document_groups(chunks: Sequence[ContextualChunk], texts_per_chunk: list[list[str]]) -> list[str] | None:
    """A document key per text when chunks are in document order within each document (what
    contextualized embedders need), else None."""
    last: dict[str, int] = {}
    for c in chunks:
        if c.chunk.index < last.get(c.chunk.document_id, -1):
            return None
        last[c.chunk.document_id] = c.chunk.index
    return [c.chunk.document_id for c, texts in zip(chunks, texts_per_chunk) for _ in texts]
