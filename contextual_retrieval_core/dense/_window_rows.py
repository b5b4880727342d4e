"""Windowed chunks as rows of a vector store that keeps one row per chunk id.

`windows` plans the windows; here they become store rows for the stores that key a chunk by its
id (the on-disk `ContextualIndex`, a LlamaIndex vector store, a LangChain vector store): a
chunk's first window is the chunk's own row (same id, its metadata, so everything that looks a
chunk up by id still finds it), each further window an extra row ``<chunk id> + WINDOW_MARK + n``
carrying ``metadata[WINDOW_OF_KEY] = <chunk id>``. A chunk that fits its window stays exactly
one row of its indexed text. The rows of a chunk hold the same vectors as `HybridSearcher`'s
(first window included), so a search collapsed per chunk (`collapse_rows`) ranks the chunks
exactly as the core does.

Everything a framework adapter needs is here, once: `windowable` (a chunk from its indexed text
and the part windows split), `plan_rows`, `row_id` / `row_owner` / `row_window` (a row's id and
back), `collapse_rows` and `stale_rows`, and `RowLedger` for a store that keeps no list of its
own rows (a LangChain vector store): which rows each chunk has there, under which store id.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from contextual_retrieval_core.dense.windows import WINDOW_MARK, WindowConfig, embed_texts, first_per_owner, window_texts
from contextual_retrieval_core.errors import InputError, InputTypeError
from contextual_retrieval_core.types import Chunk, ContextualChunk

__all__ = ["WINDOW_OF_KEY", "WindowRow", "RowLedger", "LedgerChange", "windowable", "plan_rows", "embed_rows", "row_owner", "collapse_rows", "stale_rows",
           "windows_setting", "windows_from_setting", "requested_windows", "store_payload",
           "max_pooling_only"]

#: metadata key of a window row: the id of the chunk it belongs to
WINDOW_OF_KEY = "window_of"


@dataclass(frozen=True)
class WindowRow:
    """One store row: `id` (the chunk id for a chunk's first row), `owner` (the chunk id),
    `number` (0 for the chunk's own row) and the `text` to embed."""

    id: str
    owner: str
    number: int
    text: str

    @property
    def extra(self) -> bool:
        """A row beyond the chunk's own."""
        return self.number > 0


def windowable(chunk_id: str, indexed: str, body: str, document_id: str = "") -> ContextualChunk:
    """The `ContextualChunk` whose indexed text is `indexed` and whose text is `body` (what the
    windows split; compared without its surrounding whitespace, which stays with the body where
    `indexed` holds it and a separator is left between it and the context): the rest of
    `indexed`, before or after `body`, is the context every window carries, so the windows are
    the core's for the same chunk and context. When `body` is neither the end nor the
    start of `indexed`, the whole indexed text is the body (windowed without a context)."""
    trimmed = body.strip()  # a framework may strip the text it renders (LlamaIndex's templates do)
    if trimmed and indexed.strip() != trimmed:
        start = indexed.rfind(trimmed)
        if start > 0 and not indexed[start + len(trimmed):].strip():
            lead = body[: len(body) - len(body.lstrip())]  # the body's own indentation stays with it
            kept = indexed[: start - len(lead)]  # the context, when the indent goes with the body
            if lead and indexed[:start].endswith(lead) and kept.strip() and kept[-1].isspace():
                start -= len(lead)
            return ContextualChunk(Chunk(chunk_id, document_id, indexed[start:]), indexed[:start], "before", "")
        start = indexed.find(trimmed)
        if start >= 0 and not indexed[:start].strip():
            end = start + len(trimmed)
            trail = body[len(body.rstrip()):]
            rest = indexed[end + len(trail):]
            if trail and indexed[end:].startswith(trail) and rest.strip() and rest[0].isspace():
                end += len(trail)
            return ContextualChunk(Chunk(chunk_id, document_id, indexed[:end]), indexed[end:], "after", "")
    return ContextualChunk(Chunk(chunk_id, document_id, indexed), "")


def plan_rows(embedder: Any, chunks: Sequence[ContextualChunk], windows: WindowConfig | None) -> list[list[WindowRow]]:
    """The rows of each chunk (one row of its indexed text when it fits, or when `windows` is None
    or the embedder reports no window)."""
    texts = window_texts(embedder, chunks, windows)
    return [
        [WindowRow(row_id(c.id, n), c.id, n, t) for n, t in enumerate(per)]
        for c, per in zip(chunks, texts)
    ]


def embed_rows(
    embedder: Any, chunks: Sequence[ContextualChunk], windows: WindowConfig | None, *, batch_size: int = 64,
    show_progress: bool = False,
) -> tuple[list[WindowRow], np.ndarray]:
    """`plan_rows` embedded (grouped by document for contextualized embedders, as `embed_texts`
    does); with ``pooling="mean"`` a windowed chunk's vectors are averaged into its own row."""
    planned = plan_rows(embedder, chunks, windows)
    rows = [r for per in planned for r in per]
    groups = [c.document_id for c, per in zip(chunks, planned) for _ in per]
    vectors = embed_texts(embedder, [r.text for r in rows], groups, batch_size, show_progress)
    if windows is None or windows.pooling != "mean" or len(rows) == len(chunks):
        return rows, vectors
    pooled, start = [], 0
    for per in planned:
        pooled.append(vectors[start : start + len(per)].mean(axis=0))
        start += len(per)
    return [WindowRow(c.id, c.id, 0, c.indexed_text) for c in chunks], np.asarray(pooled, dtype=np.float32)


def row_id(chunk_id: str, n: int) -> str:
    """The id of a chunk's row for its window `n` (0: the chunk's own id)."""
    return chunk_id if n == 0 else f"{chunk_id}{WINDOW_MARK}{n}"


def row_owner(row_id: str) -> str:
    """The chunk id of a row id (the id itself for a chunk's own row)."""
    return row_id.split(WINDOW_MARK, 1)[0]


def row_window(row_id: str) -> int:
    """The window number of a row id (0 for a chunk's own row): ``row_id(owner, n)`` gives it back."""
    return int(row_id.split(WINDOW_MARK, 1)[1]) if WINDOW_MARK in row_id else 0


def collapse_rows(hits: Iterable[tuple[str, float]], depth: int, listed: set[str] | None = None) -> list[tuple[str, float]]:
    """Row hits (best first) to chunk hits: each chunk once, at its best row's score, at most
    `depth`; chunks not in `listed` (when given) are dropped."""
    if listed is not None:
        hits = (h for h in hits if row_owner(h[0]) in listed)
    return [(owner, score) for owner, (_, score) in first_per_owner(hits, lambda h: row_owner(h[0]), depth)]


def stale_rows(have: Iterable[str], wanted: set[str], redone: set[str], fresh: set[str]) -> list[str]:
    """The rows to delete from a store holding `have`: rows of chunks not `wanted`, and rows of
    chunks embedded again in this run (`redone`) that this run did not write (`fresh`), such as
    the windows a chunk no longer has."""
    out = []
    for row in have:
        owner = row_owner(row)
        if owner not in wanted or (owner in redone and row not in fresh):
            out.append(row)
    return sorted(out)


def requested_windows(request: WindowConfig | bool | None, recorded: dict[str, Any] | None) -> WindowConfig | None:
    """The windows an index update uses: `request` (True: `WindowConfig()`, False: none), or when
    it is None the setting the index `recorded` (none for a new index)."""
    if request is None:
        return windows_from_setting(recorded)
    if request is True:
        return WindowConfig()
    if request is False:
        return None
    if not isinstance(request, WindowConfig):
        raise InputTypeError(f"windows must be a WindowConfig, True, False or None, got {type(request).__name__}")
    return request


def store_payload(rows: Sequence[WindowRow], documents: dict[str, str], metadatas: dict[str, dict]) -> tuple[list[str], list[str], list[dict]]:
    """(ids, documents, metadatas) for `rows`: a chunk's own row gets its document and metadata
    (`documents` and `metadatas` are keyed by chunk id), an extra row its window text and the
    chunk's metadata with `WINDOW_OF_KEY` added."""
    docs = [documents[r.owner] if not r.extra else r.text for r in rows]
    metas = [metadatas[r.owner] if not r.extra else {**metadatas[r.owner], WINDOW_OF_KEY: r.owner} for r in rows]
    return [r.id for r in rows], docs, metas


def windows_setting(windows: WindowConfig | None) -> dict[str, Any] | None:
    """A `WindowConfig` as recorded in an index manifest (None: not windowed)."""
    if windows is None:
        return None
    return {"size": windows.size, "overlap": windows.overlap, "pooling": windows.pooling}


def windows_from_setting(setting: Any) -> WindowConfig | None:
    """The `WindowConfig` a manifest records (`windows_setting`); ValueError when it is not one."""
    if setting is None:
        return None
    if not isinstance(setting, dict):
        raise InputError(f"bad windows setting {setting!r}")
    return WindowConfig(size=setting.get("size"), overlap=setting.get("overlap"), pooling=setting.get("pooling", "max"))


def max_pooling_only(windows: WindowConfig | None, where: str) -> WindowConfig | None:
    """`windows`, checked to be a `WindowConfig` with max pooling (what a store of texts can hold)."""
    if windows is None:
        return None
    if not isinstance(windows, WindowConfig):
        raise InputTypeError(f"windows must be a WindowConfig (e.g. WindowConfig()) or None, got {type(windows).__name__}")
    if windows.pooling != "max":
        raise InputError(f"{where} stores windows as rows and scores a chunk by its best window: use "
                         "WindowConfig(pooling='max'); mean pooling is HybridSearcher(windows=...) and "
                         "ContextualIndex(windows=...) only")
    return windows


_UNSET, _GONE = object(), object()


@dataclass
class LedgerChange:
    """What one `RowLedger.stage` asks of the store, and the ledger it leads to once `commit`-ted.

    Attributes:
        write: (row, payload, alone) to write, each row id once (a chunk or store id repeated in
            the batch: the last version wins); `alone` when the row is its chunk's only one.
        before: row ids to delete before the write: rows the write replaces (a store that does not
            upsert refuses an id it holds) and the own row of a chunk that becomes windows (the
            store may hold the whole chunk there).
        after: row ids to delete once the write is in: rows no chunk has any more (kept until
            then, so a failed write leaves the version before searchable).
    """

    write: list[tuple[WindowRow, Any, bool]]
    before: list[str]
    after: list[str]
    rows: dict[str, Any]
    owner: dict[str, Any]
    payload: dict[str, Any]


class RowLedger:
    """The rows each chunk has in a store keyed by row id, under its store id: one version per
    chunk, its own row's id being its store id (the chunk id, or another id such as LangChain's
    indexing API's hashes). Adding a chunk again replaces its version before (under any store id),
    and a store id given to another chunk replaces the chunk it held. `stage` plans a batch
    without changing the ledger; `commit` applies it once the store write succeeded.

    Example:
        >>> ledger = RowLedger()
        >>> change = ledger.stage([("c1", "h1", [WindowRow("h1", "h1", 0, "a"), WindowRow("h1~w1", "h1", 1, "b")], "doc", True)])
        >>> [r.id for r, _, _ in change.write], ledger.rows_of("c1")
        (['h1', 'h1~w1'], ['c1'])
        >>> ledger.commit(change); ledger.rows_of("c1"), ledger.chunk_of("h1"), ledger.extra
        (['h1', 'h1~w1'], 'c1', 1)
        >>> ledger.remove(["h1"]), ledger.extra
        (['h1', 'h1~w1'], 0)
    """

    def __init__(self) -> None:
        self._rows: dict[str, list[str]] = {}  # chunk id -> row ids, own row (its store id) first
        self._owner: dict[str, str] = {}  # store id -> chunk id
        self._payload: dict[str, Any] = {}  # chunk id -> what the adapter returns for it
        self._extra = 0

    @property
    def extra(self) -> int:
        """Rows beyond one per chunk (how much deeper a search must go to cover the windows)."""
        return self._extra

    def rows_of(self, chunk_id: str) -> list[str]:
        """The chunk's row ids, its own first (``[chunk_id]`` for a chunk the ledger lacks)."""
        return list(self._rows.get(chunk_id, [chunk_id]))

    def chunk_of(self, store_id: str) -> str | None:
        return self._owner.get(store_id)

    def held(self) -> dict[str, list[str]]:
        """Every chunk's row ids (a copy)."""
        return {c: list(r) for c, r in self._rows.items()}

    def store_ids(self) -> dict[str, str]:
        """Store id -> chunk id, for every chunk (a copy)."""
        return dict(self._owner)

    def payload(self, chunk_id: str, default: Any = None) -> Any:
        return self._payload.get(chunk_id, default)

    def stage(self, entries: Iterable[tuple[str, str, Sequence[WindowRow], Any, bool]]) -> LedgerChange:
        """Plan a batch of (chunk id, store id, its rows (`plan_rows` on the store id), payload,
        write a chunk that fits one row) entries; a chunk whose row held a window of its version
        before, or another chunk, is written even when told not to."""
        rows: dict[str, Any] = {}
        owner: dict[str, Any] = {}
        payload: dict[str, Any] = {}
        pending: dict[str, tuple[WindowRow, str, bool]] = {}
        long: list[str] = []
        stale: list[str] = []
        chunks: list[str] = []

        def forget(chunk: str) -> list[str]:
            had = _view(rows, self._rows, chunk) or []
            rows[chunk] = payload[chunk] = _GONE
            if had and _view(owner, self._owner, had[0]) == chunk:
                owner[had[0]] = _GONE
            return had

        for cid, key, chunk_rows, value, fitting in entries:
            replaced = _view(owner, self._owner, key)
            taken = forget(replaced) if replaced is not None and replaced != cid else []  # the store id held another chunk: it goes
            stale += taken
            had = forget(cid)
            stale += [r for r in had if r not in {w.id for w in chunk_rows}]  # its own rows are rewritten in place
            rows[cid], owner[key], payload[cid] = [r.id for r in chunk_rows], cid, value
            chunks.append(cid)
            if len(chunk_rows) == 1:
                if fitting or len(had) > 1 or taken:  # else the row holds a window, or another chunk
                    pending[chunk_rows[0].id] = (chunk_rows[0], cid, True)
                continue
            long.append(key)
            pending.update((r.id, (r, cid, False)) for r in chunk_rows)
        live = {r for c in dict.fromkeys(chunks) for r in _view(rows, self._rows, c) or []}
        write = [(r, payload[c], alone) for rid, (r, c, alone) in pending.items() if rid in live]
        before = [k for k in long if k in live and len(_view(rows, self._rows, _view(owner, self._owner, k)) or []) > 1]
        before += [r for r in dict.fromkeys(stale) if r in live and r not in before]
        after = list(dict.fromkeys(r for r in stale if r not in live))
        return LedgerChange(write, before, after, rows, owner, payload)

    def commit(self, change: LedgerChange) -> None:
        """Apply a staged batch (after the store write succeeded)."""
        for chunk, value in change.rows.items():
            self._extra -= max(0, len(self._rows.get(chunk, [])) - 1)
            if value is _GONE:
                self._rows.pop(chunk, None)
            else:
                self._rows[chunk] = value
                self._extra += len(value) - 1
        _apply(self._owner, change.owner)
        _apply(self._payload, change.payload)

    def remove(self, store_ids: Iterable[str]) -> list[str]:
        """Forget the chunks stored under these ids; returns the row ids to delete (an id no
        chunk is stored under comes back as it is)."""
        out: list[str] = []
        for key in store_ids:
            chunk = self._owner.pop(key, None)
            if chunk is None:
                out.append(key)
                continue
            had = self._rows.pop(chunk, [])
            self._payload.pop(chunk, None)
            self._extra -= max(0, len(had) - 1)
            out += had
        return out


def _view(overlay: dict[str, Any], base: dict[str, Any], key: str) -> Any:
    value = overlay.get(key, _UNSET)
    if value is _UNSET:
        return base.get(key)
    return None if value is _GONE else value


def _apply(base: dict[str, Any], overlay: dict[str, Any]) -> None:
    for key, value in overlay.items():
        if value is _GONE:
            base.pop(key, None)
        else:
            base[key] = value
