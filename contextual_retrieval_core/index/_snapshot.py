"""A version's query snapshot: what a query of an index folder reads besides BM25.

An update writes the new version's folder (the one the manifest's ``bm25`` field names) whole
before the manifest switch: beside the BM25 index, the dense rows of that version (``vectors.npy``,
float32, L2-normalised, one row per chunk and per extra window, and ``vectors.json``, their ids:
the `VectorIndex` format), the shown fields of its chunks (``chunks.sqlite3``: the indexed text
and the metadata of each chunk) and, from `dense_index`'s threshold on, the calibrated IVF index
over the rows (``ivf.faiss`` + ``ivf.json``, `IVFIndex`, memory-mapped). A query then reads only
that folder:

- the dense search: exact cosine over the rows below the threshold, the IVF index above it, each
  chunk ranked at its best row; dense feedback from the same rows (`InMemoryDenseSide`);
- the hits' text and metadata, read from ``chunks.sqlite3`` (opened read-only and immutable).

It reads nothing another process changes after the switch: a version folder is written once,
before any manifest names it, and only ever deleted after (an update in another process never
mixes versions under a query). The rows are also what the next update copies for the chunks it
does not embed again (`RowWriter` writes them a block at a time).

An index whose rows live in Chroma (a server, or the embedded ``chroma/`` of folders written
before) keeps Chroma as the store of record: its versions get a snapshot up to
`SNAPSHOT_MAX_CHUNKS` chunks, and are searched in Chroma above (`ChromaSide`).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from contextlib import closing
from pathlib import Path
from urllib.parse import quote

import numpy as np

from contextual_retrieval_core.checks import IndexFileError
from contextual_retrieval_core.dense._window_rows import row_owner, row_window
from contextual_retrieval_core.dense.hnsw import ANN_THRESHOLD, dense_index
from contextual_retrieval_core.dense.ivf import IVFIndex
from contextual_retrieval_core.dense.vectors import VectorIndex
from contextual_retrieval_core.embeddings.base import Embedder
from contextual_retrieval_core.errors import InputError
from contextual_retrieval_core.index.manifest import IndexDamagedError
from contextual_retrieval_core.search._sides import InMemoryDenseSide
from contextual_retrieval_core.search.feedback import FeedbackRows, feedback_rows

__all__ = ["SNAPSHOT_MAX_CHUNKS", "CHUNKS_FILE", "RowWriter", "Snapshot", "write_snapshot", "has_snapshot", "snapshot_order"]

#: the most chunks a version keeps a snapshot for: exact search reads every row per query, which
#: stays cheap below the threshold where `HybridSearcher` switches to HNSW
SNAPSHOT_MAX_CHUNKS = ANN_THRESHOLD

CHUNKS_FILE = "chunks.sqlite3"
_FILES = ("vectors.npy", "vectors.json", CHUNKS_FILE)


def has_snapshot(folder: Path) -> bool:
    """Whether the version folder holds a snapshot (any of its files: a partial one is damage)."""
    return any((folder / name).exists() for name in _FILES)


def snapshot_order(row_ids: Sequence[str], chunk_ids: Sequence[str]) -> list[str]:
    """The rows of `chunk_ids` (a row not of one of them is left out), chunk by chunk in
    `chunk_ids` order, each chunk's own row first, then its windows in window order."""
    by_chunk: dict[str, list[str]] = {c: [] for c in chunk_ids}
    for row in row_ids:
        rows = by_chunk.get(row_owner(row))
        if rows is not None:
            rows.append(row)
    return [r for c in chunk_ids for r in sorted(by_chunk[c], key=row_window)]


def write_snapshot(folder: Path, row_ids: Sequence[str], vectors: np.ndarray, chunks: Mapping[str, tuple[str, dict]]) -> None:
    """Write a snapshot into the version `folder` (new, not yet named by a manifest): the rows
    `row_ids` with their `vectors` (normalised here), and for each chunk id its (indexed text,
    metadata)."""
    writer = RowWriter(folder, row_ids, np.asarray(vectors).shape[1] if len(row_ids) else 0)
    for start in range(0, len(row_ids), _BLOCK_ROWS):
        writer.put(start, np.asarray(vectors[start : start + _BLOCK_ROWS], dtype=np.float32))
    writer.finish(chunks.items())


#: rows normalised and written at a time (6 MB of 384-d float32)
_BLOCK_ROWS = 4096


class RowWriter:
    """Writes a version's dense rows block by block into ``vectors.npy`` (memory-mapped: the
    rows are never all in memory), then its ids, its chunk table and, from `dense_index`'s
    threshold on, the IVF index it searches (`finish`)."""

    def __init__(self, folder: Path, row_ids: Sequence[str], dim: int) -> None:
        self.folder, self.ids = folder, list(row_ids)
        folder.mkdir(parents=True, exist_ok=True)
        self.matrix = np.lib.format.open_memmap(folder / "vectors.npy", mode="w+", dtype=np.float32,
                                                shape=(len(self.ids), dim))

    def put(self, start: int, block: np.ndarray) -> None:
        """Rows `start`.. of the matrix, L2-normalised here; a zero or non-finite row is refused."""
        norms = np.linalg.norm(block, axis=1, keepdims=True)
        bad = ~np.isfinite(norms[:, 0]) | (norms[:, 0] == 0)
        if bad.any():
            raise InputError(f"the vector of row {self.ids[start + int(np.argmax(bad))]!r} is zero or not finite")
        self.matrix[start : start + len(block)] = block / norms

    def finish(self, chunks: Iterable[tuple[str, tuple[str, dict]]], *, show_progress: bool = False) -> None:
        self.matrix.flush()
        del self.matrix
        (self.folder / "vectors.json").write_text(json.dumps({"ids": self.ids}), encoding="utf-8")
        with closing(sqlite3.connect(self.folder / CHUNKS_FILE)) as db:
            db.execute("CREATE TABLE chunks (id TEXT PRIMARY KEY, document TEXT NOT NULL, metadata TEXT NOT NULL)")
            db.executemany("INSERT INTO chunks VALUES (?, ?, ?)",
                           ((cid, doc, json.dumps(meta, ensure_ascii=False)) for cid, (doc, meta) in chunks))
            db.commit()
        if len(self.ids) >= ANN_THRESHOLD:
            rows = np.load(self.folder / "vectors.npy", mmap_mode="r")
            index = dense_index(self.ids, rows, show_progress=show_progress)  # the calibrated IVF index (exact without faiss)
            if isinstance(index, IVFIndex):
                index.save(self.folder)


class Snapshot:
    """An open snapshot: `rows` (the normalised row vectors, memory-mapped), `owners` (window row ->
    its chunk), `feedback` (the rows as dense feedback reads them) and the chunks' shown fields,
    read on demand."""

    def __init__(self, folder: Path, rows: VectorIndex, fix: str, searched: VectorIndex | IVFIndex | None = None) -> None:
        self.folder, self.rows, self.fix = folder, rows, fix
        #: what the dense side searches: the IVF index of a large version, else the rows themselves
        self.searched = searched if searched is not None else rows
        self.owners = {rid: row_owner(rid) for rid in rows.ids if row_owner(rid) != rid}
        self.chunk_count = len(rows) - len(self.owners)
        self.feedback: FeedbackRows = feedback_rows(rows.ids, rows.vectors, self.owners, normalized=True)

    @classmethod
    def open(cls, folder: Path, chunk_ids: Sequence[str], *, fix: str) -> Snapshot | None:
        """The snapshot in `folder`, checked to hold exactly the rows of `chunk_ids` (the
        manifest's) and a readable chunk table; None when the folder has none."""
        if not has_snapshot(folder):
            return None
        for name in _FILES:
            if not (folder / name).is_file():
                raise IndexDamagedError(f"{folder / name} is missing; {fix}")
        try:
            rows = VectorIndex.load(folder)
            searched = IVFIndex.load(folder) if (folder / "ivf.faiss").exists() or (folder / "ivf.json").exists() else None
        except (IndexFileError, OSError, ValueError) as exc:
            raise IndexDamagedError(f"{folder} is damaged ({exc}); {fix}") from exc
        if searched is not None and searched.ids != rows.ids:
            raise IndexDamagedError(f"{folder / 'ivf.json'} does not list the rows of {folder / 'vectors.json'}; {fix}")
        owners = {row_owner(r) for r in rows.ids}
        if owners != set(chunk_ids) or not set(chunk_ids) <= set(rows.ids):
            raise IndexDamagedError(f"{folder / 'vectors.json'} does not hold this index's chunks ({len(owners)} chunks, "
                                    f"the manifest lists {len(chunk_ids)}); {fix}")
        snapshot = cls(folder, rows, fix, searched)
        snapshot.shown(chunk_ids[:1])  # the table is there and readable
        return snapshot

    def __len__(self) -> int:
        return len(self.rows)

    def side(self, name: str, embedder: Embedder, depth: int) -> InMemoryDenseSide:
        """The query flow's dense side over these rows: exact search, each chunk once at its best
        row, feedback from the same rows."""
        return InMemoryDenseSide(name, embedder, self.searched, depth, self.owners, len(self.owners), self.chunk_count,
                                 self.feedback)

    def rows_of(self, chunk_id: str) -> list[int]:
        """The row numbers of a chunk (its own row, then its windows); [] for a chunk not here."""
        return list(self.feedback.rows_of_chunk.get(chunk_id, ()))

    def shown(self, chunk_ids: Sequence[str]) -> dict[str, tuple[str, dict]]:
        """Chunk id -> (indexed text, metadata) for `chunk_ids`; every one must be there."""
        ids = list(dict.fromkeys(chunk_ids))
        if not ids:
            return {}
        file = self.folder / CHUNKS_FILE
        out: dict[str, tuple[str, dict]] = {}
        try:
            with closing(sqlite3.connect(f"file:{quote(str(file))}?mode=ro&immutable=1", uri=True)) as db:
                for start in range(0, len(ids), _SQL_BATCH):
                    part = ids[start : start + _SQL_BATCH]
                    got = db.execute(f"SELECT id, document, metadata FROM chunks WHERE id IN ({','.join('?' * len(part))})",
                                     part).fetchall()
                    out.update((cid, (doc, json.loads(meta))) for cid, doc, meta in got)
        except (sqlite3.Error, ValueError) as exc:
            raise IndexDamagedError(f"{file} is not readable ({type(exc).__name__}: {exc}); {self.fix}") from exc
        absent = [cid for cid in ids if cid not in out]
        if absent:
            raise IndexDamagedError(f"{file} lacks {len(absent)} chunks the manifest lists (first: {absent[0]}); {self.fix}")
        return out


#: ids per SELECT (SQLite allows 32,766 parameters)
_SQL_BATCH = 10_000
