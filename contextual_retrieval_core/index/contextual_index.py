"""`ContextualIndex`: a persistent, incremental contextual index of files on disk.

What `contextual-retrieval index` and `contextual-retrieval query` run. One folder holds:

- ``bm25-<token>/``: the version folder the manifest names, everything a query reads: a
  `BM25Index` over the indexed texts (context + chunk; JSON + .npy, no pickle), every dense row
  (``vectors.npy``, float32, L2-normalised: one row per chunk and per extra window, with
  ``vectors.json``, their ids), the chunks' shown fields (``chunks.sqlite3``: indexed text, path,
  context, chunk text, lines) and, from `dense_index`'s threshold (20,000 rows) on, the
  calibrated IVF index over the same rows (``ivf.faiss``, ``ivf.json``; exact search below it);
  see `index/_snapshot.py`;
- ``contexts.sqlite3``: the `ContextStore` of LLM-written contexts (structural contexts cost
  nothing and are not stored), shared with the user's store (`index/_shared_contexts.py`);
- ``embeddings.sqlite3``: the `CachedEmbedder` cache, so a chunk whose indexed text is unchanged
  is never embedded twice;
- ``manifest.json``: which files were indexed (size, mtime, sha256, chunk ids), with which
  embedder, context generator and chunk size, and the size and CRC-32 of every file of the
  version folder (`index/_file_checks.py`).

An index on a Chroma server (``chroma_url``) keeps its rows in a collection there instead, and
an index written before version folders held every row keeps them in an embedded Chroma
(``chroma/``) until ``index --rebuild`` moves them (``chroma_url="embedded"`` writes that layout).

Re-indexing skips every file whose size and mtime (or, failing that, content hash) are unchanged:
an unchanged folder makes no generation request and embeds nothing.

Updates are atomic: the new version folder is written whole (the rows of unchanged chunks copied
from the current version, the new ones embedded), and only then does ``manifest.json`` (which
names that folder and lists the chunk ids) replace the old one through `os.replace`; the old
version folder is removed after that. An update interrupted at any point leaves the previous
index fully queryable, and the next update finishes the clean-up. An update, a rebuild and a
removal hold an OS lock on the folder (`folder_lock`) before they touch anything. Queries open
the folder read-only: they never create or change a file in it, so a read-only copy serves.
Before a version answers, its files are checked against the sizes and checksums the manifest
recorded; damage is an `IndexDamagedError` naming the file, and the next update repairs it.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import threading
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from contextual_retrieval_core._factories import embedder_kind
from contextual_retrieval_core.checks import is_blank
from contextual_retrieval_core.chunking.budget import window_of
from contextual_retrieval_core.chunking.split import DEFAULT_CHUNK_CHARS
from contextual_retrieval_core.contextualize.config import ContextualizeConfig
from contextual_retrieval_core.dense._window_rows import (
    collapse_rows,
    embed_rows,
    requested_windows,
    row_owner,
    row_window,
    stale_rows,
    store_payload,
    windows_setting,
)
from contextual_retrieval_core.dense.chroma import ChromaVectorIndex
from contextual_retrieval_core.dense.windows import WindowConfig
from contextual_retrieval_core.embeddings.base import Embedder
from contextual_retrieval_core.errors import InputError, InputTypeError, NotFoundError
from contextual_retrieval_core.generators.base import ContextGenerator
from contextual_retrieval_core.index._snapshot import (
    SNAPSHOT_MAX_CHUNKS,
    Snapshot,
    has_snapshot,
    snapshot_order,
    write_snapshot,
)
from contextual_retrieval_core.index._storage import chunk_rows, clear_index, load_bm25, open_embedding_cache, open_vectors
from contextual_retrieval_core.index._version import client_for_version, manifest_stamp, read_retrying
from contextual_retrieval_core.index.chroma_server import open_server_vectors, uses_server
from contextual_retrieval_core.index.files import MAX_FILE_BYTES, TEXT_EXTENSIONS, collect_files
from contextual_retrieval_core.index.manifest import (
    MANIFEST_NAME,
    FileEntry,
    IndexDamagedError,
    IndexManifest,
    IndexMismatchError,
    generator_identity,
)
from contextual_retrieval_core.index.report import IndexHit, IndexReport
from contextual_retrieval_core.search._sides import BM25Side
from contextual_retrieval_core.search.bm25 import BM25Index
from contextual_retrieval_core.search.config import FusionConfig
from contextual_retrieval_core.search.feedback import FeedbackRows, stored_feedback_rows
from contextual_retrieval_core.search.flow import QueryFlow, SyncDenseSide
from contextual_retrieval_core.search.ranked import DEFAULT_WEIGHTS

if TYPE_CHECKING:  # the update machinery is imported by update(), never by a query
    from contextual_retrieval_core.contextualize.contextualizer import ContextualizeResult
    from contextual_retrieval_core.index.space import UpdateSpace
    from contextual_retrieval_core.types import Chunk, Document

__all__ = ["ContextualIndex", "IndexMismatchError", "IndexDamagedError"]

_COLLECTION = "chunks"


class ContextualIndex:
    """A contextual index (dense rows + BM25 + context store + manifest) in one folder.

    Args:
        path: the index folder (created on the first `update`).
        embedder: the `Embedder` for chunks and queries; it must be the one the index was built
            with (its `model_name` is checked). While indexing it is wrapped in a `CachedEmbedder`
            on ``path/embeddings.sqlite3``.
        generator: the `ContextGenerator` for new or changed files (default: the offline
            `StructuralContextGenerator`). Changing it re-situates every file on the next update.
        chunk_chars: the chunk size for `split_text`; changing it re-chunks every file.
        concurrency: generation requests in flight at once (None: `ContextualizeConfig`'s default).
        weights: (dense, BM25) fusion weights at query time.
        chroma_url: keep the vectors on a Chroma server (``http://host:port``) instead of the
            index's own files; remembered in the folder (`chroma_server`). ``"embedded"``
            (`EMBEDDED_CHROMA`): in an embedded Chroma in the folder (``chroma/``), the layout of
            indexes written before version folders held every row. Both apply to a new index (or
            a rebuild); an existing one keeps where its rows are.
        windows: how chunks longer than the embedder's window are embedded: a `WindowConfig`
            (True: `WindowConfig()`: whole, as extra rows for the windows past it), False
            (truncated), or None (default): as recorded, and windowed for a new index.
        fit_chunks: cut chunks so that each, with its context, fits the embedder's window
            (`contextualize.fit.chunk_to_fit`: the structural context counted exactly, an LLM's
            given `LLM_CONTEXT_RESERVE` tokens; more chunks, so more LLM requests); False:
            `chunk_chars` alone, structure first; None (default): as recorded, and off for a new
            index. Changing it re-chunks every file.

    Threads and other processes: `search` may be called from many threads at once (they share
    the open BM25 index, the version's query snapshot or Chroma client, and the embedder's ONNX
    session, none of which a query changes). While another process (or another `ContextualIndex` on the folder) updates it, each
    query answers from the version before or the version after the update, never from a mix and
    never with an error (`index/_version.py`). `update` and `remove` take the folder's lock; do not
    call them while other threads search the same object: search from another `ContextualIndex`.

    Example:
        >>> from contextual_retrieval_core.embeddings import LocalMiniLMEmbedder
        >>> index = ContextualIndex("my-index", embedder=LocalMiniLMEmbedder())  # doctest: +SKIP
        >>> print(index.update(["docs", "src"]).format())  # doctest: +SKIP
        >>> for hit in index.search("how is the cache invalidated?", k=5):  # doctest: +SKIP
        ...     print(hit.path, hit.score, hit.context)
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        embedder: Embedder,
        generator: ContextGenerator | None = None,
        chunk_chars: int = DEFAULT_CHUNK_CHARS,
        concurrency: int | None = None,
        weights: Sequence[float] = DEFAULT_WEIGHTS,
        chroma_url: str | None = None,
        windows: WindowConfig | bool | None = None,
        fit_chunks: bool | None = None,
    ) -> None:
        if fit_chunks is not None and not isinstance(fit_chunks, bool):
            raise InputTypeError(f"fit_chunks must be True, False or None (as recorded), got {fit_chunks!r}")
        self.fit_chunks = fit_chunks
        self.path = Path(path)
        self.embedder = embedder
        self._generator = generator
        self.chunk_chars = int(chunk_chars)
        self.contextualize = ContextualizeConfig() if concurrency is None else ContextualizeConfig(concurrency=concurrency)
        self.weights = FusionConfig(weights=cast("tuple[float, ...] | None", weights)).weights_for(2, per="side (dense, BM25)")
        if not any(self.weights):
            raise InputError(f"weights {tuple(weights)} leave both sides out: give the dense side, BM25 or both a "
                             "positive weight (the default is the embedder's, e.g. (0.8, 0.2))")
        self._cached: Any = None
        self.chroma_url = chroma_url
        requested_windows(windows, None)  # checked here, resolved against the manifest by update
        self.windows = windows
        self._vector_index: ChromaVectorIndex | None = None
        self._bm25: BM25Index | None = None
        self._snapshot: Snapshot | None = None
        self.manifest: IndexManifest | None = None
        self._version_lock = threading.Lock()
        self._stamp = manifest_stamp(self.path)
        self._reload_manifest(check_embedder=False)  # checked when the index is used: `update(rebuild=True)` may change it

    @property
    def generator(self) -> ContextGenerator:
        """The context generator of updates (the offline `StructuralContextGenerator` unless one
        was given; made on first use: a query never needs one)."""
        if self._generator is None:
            from contextual_retrieval_core.generators.structural import StructuralContextGenerator

            self._generator = StructuralContextGenerator()
        return self._generator

    @generator.setter
    def generator(self, generator: ContextGenerator) -> None:
        self._generator = generator

    def _open_version(self) -> tuple[IndexManifest | None, BM25Index | None, Snapshot | ChromaVectorIndex | None]:
        """The manifest, BM25 index and dense rows (the version's `Snapshot`, or else Chroma) of
        the folder's current version, opened once per version and shared by the threads searching
        this object; a new version (another process updated the folder) is opened on the first
        query after it is switched in (`index/_version.py`)."""
        with self._version_lock:
            stamp = manifest_stamp(self.path)
            if stamp != self._stamp:
                self._vector_index = None
                self._reload_manifest()  # may raise (another embedder, a damaged manifest): read again next time
                self._stamp = stamp
            self._check_embedder()
            manifest = self.manifest
            if manifest is None or manifest.chunk_count == 0:
                return manifest, None, None
            if self._bm25 is None:  # the version's parts, both or neither
                self._verify(manifest, full=False)
                bm25 = self._load_bm25(manifest)
                self._snapshot = None if uses_server(self.path, self.chroma_url) else Snapshot.open(
                    self.path / manifest.bm25, manifest.chunk_ids(), fix=self._fix())
                if self._snapshot is None and manifest.dense == "files":
                    raise IndexDamagedError(f"{self.path / manifest.bm25} holds no dense rows; {self._fix()}")
                self._bm25 = bm25
            if self._snapshot is not None and manifest.dense == "files":
                return manifest, self._bm25, self._snapshot
            if self._snapshot is not None:
                if not (self.path / "chroma" / "chroma.sqlite3").is_file():  # the store of record: its loss is damage
                    raise IndexDamagedError(f"{self.path / 'chroma'} is missing or holds no Chroma database; {self._fix()}")
                return manifest, self._bm25, self._snapshot
            if self._vector_index is None and not uses_server(self.path, self.chroma_url):
                client_for_version(self.path / "chroma", stamp)
            return manifest, self._bm25, self._vectors()

    def _reopen(self) -> None:
        """Open the folder's parts afresh on the next query."""
        with self._version_lock:
            self._stamp = (-1, -1, -1)  # no manifest has it
            client_for_version(self.path / "chroma", None)

    def _reload_manifest(self, *, check_embedder: bool = True) -> None:
        self.manifest = IndexManifest.read(self.path) if (self.path / MANIFEST_NAME).is_file() else None
        self._bm25 = None
        self._snapshot = None
        if check_embedder:
            self._check_embedder()

    def _check_embedder(self) -> None:
        """`IndexMismatchError` when the folder was built with another embedder than this object's."""
        if self.manifest is not None:
            built = self.manifest.embedder["model"]
            if built != self.embedder.model_name:
                raise IndexMismatchError(
                    f"the index {self.path} was built with the embedder {built!r}, not {self.embedder.model_name!r}; "
                    f"use the same embedder (contextual-retrieval index --embedder {self.manifest.embedder['kind']}), "
                    "or rebuild the index (--rebuild) or write a new one (--index-dir)"
                )

    # -- manifest -------------------------------------------------------------------------------

    @staticmethod
    def read_manifest(path: str | os.PathLike[str]) -> IndexManifest:
        """The manifest of the index at `path`; FileNotFoundError naming the fix when there is none."""
        return IndexManifest.read(path)

    @staticmethod
    def clear(path: str | os.PathLike[str]) -> None:
        """Empty the index at `path` (chunks, BM25, manifest), keeping its context store and
        embedding cache, so a rebuild pays for nothing twice."""
        clear_index(Path(path), _COLLECTION)

    def _fix(self) -> str:
        return f"re-run `contextual-retrieval index PATH... --index-dir {self.path}` to repair it"

    def _embedder(self) -> Any:
        if self._cached is None:
            self._cached = open_embedding_cache(self.path / "embeddings.sqlite3", self.embedder)
        return self._cached

    def _vectors(self, *, create: bool = False) -> ChromaVectorIndex:
        """The Chroma side; with create=False (queries) a missing database or collection is an
        `IndexDamagedError`, never silently created."""
        if self._vector_index is None and uses_server(self.path, self.chroma_url):
            self._vector_index = open_server_vectors(self.path, self.chroma_url, create=create, fix=self._fix())
        if self._vector_index is None:
            self._vector_index = open_vectors(self.path / "chroma", _COLLECTION, create=create, fix=self._fix())
        return self._vector_index

    def _chroma(self) -> Any:
        return self._vectors(create=True).collection

    def _load_bm25(self, manifest: IndexManifest) -> BM25Index:
        return load_bm25(self.path / manifest.bm25, manifest, fix=self._fix())

    def _damage(self, manifest: IndexManifest) -> str | None:
        """Why the saved index cannot be served as it is (None when it can), checked cheaply
        before an update so that re-running `index` repairs it."""
        if manifest.chunk_count == 0:
            return None
        if (manifest.dense == "chroma" and not uses_server(self.path, self.chroma_url)
                and not (self.path / "chroma" / "chroma.sqlite3").is_file()):
            return f"{self.path / 'chroma'} is missing"
        try:
            self._verify(manifest, full=True)  # every byte, before anything is reused
            self._load_bm25(manifest)
            snapshot = Snapshot.open(self.path / manifest.bm25, manifest.chunk_ids(), fix=self._fix())
            if snapshot is None and manifest.dense == "files":
                return f"{self.path / manifest.bm25} holds no dense rows"
        except IndexDamagedError as exc:
            return str(exc).split("; re-run")[0]
        return None

    def _verify(self, manifest: IndexManifest, *, full: bool) -> None:
        """The version folder's files against the sizes and checksums its manifest recorded
        (`index/_file_checks.py`; `full`: every byte)."""
        if manifest.checks:
            from contextual_retrieval_core.index._file_checks import verify_files

            verify_files(self.path / manifest.bm25, manifest.checks, fix=self._fix(), full=full)

    def check(self) -> None:
        """Check every byte of the current version (sizes, checksums, then loading it whole);
        `IndexDamagedError` naming the file and the fix when something is wrong."""
        manifest = IndexManifest.read(self.path)
        damage = self._damage(manifest)
        if damage:
            raise IndexDamagedError(f"{damage}; {self._fix()}")

    def _wants_snapshot(self, manifest: IndexManifest) -> bool:
        """Whether the version of `manifest` gets a query snapshot (`index/_snapshot.py`)."""
        if manifest.dense == "files":
            return manifest.chunk_count > 0
        return not uses_server(self.path, self.chroma_url) and 0 < manifest.chunk_count <= SNAPSHOT_MAX_CHUNKS

    # -- indexing -------------------------------------------------------------------------------

    def close(self) -> None:
        """Close the embedding cache's database (`update` does at its end; a later call reopens it)."""
        if self._cached is not None:
            self._cached.close()
            self._cached = None

    def update(
        self,
        paths: Sequence[str | os.PathLike[str]],
        *,
        show_progress: bool = True,
        batch_size: int = 64,
        max_file_bytes: int = MAX_FILE_BYTES,
        prune_missing: bool = False,
        lock_wait: float = 0.0,
        shared_contexts: str | os.PathLike[str] | bool = True,
        rebuild: bool = False,
    ) -> IndexReport:
        """Bring the index up to date with the files under `paths`.

        New and changed files are chunked, situated, embedded and added; files that were indexed
        under one of `paths` and are gone (or are now skipped) are removed; files indexed from
        other paths are kept, unless `prune_missing` is set and they no longer exist.

        Args:
            paths: files and folders; the index folder may not be inside one of them, nor they
                inside it.
            max_file_bytes: larger files are skipped and named in the report.
            prune_missing: also drop files indexed from other paths that no longer exist.
            lock_wait: seconds to wait when another update holds the folder's lock (then
                `IndexLockedError`).
            shared_contexts: the context store shared with `eval` and other runs (True: the
                default one, `default_store_path()`; a path; False: none). LLM contexts found
                there are copied into the index's own ``contexts.sqlite3`` instead of being paid
                for again, and those the index's store holds are copied to it.
            rebuild: build every file again, as for a new index (another embedder, say), from the
                stored contexts and cached embeddings. The new version is written beside the
                old one, which serves queries until the switch (an index on a Chroma server
                has its collection emptied first).
        """
        from contextual_retrieval_core.index._changes import check_not_nested
        from contextual_retrieval_core.index.lock import folder_lock
        from contextual_retrieval_core.index.space import UpdateSpace

        if isinstance(paths, (str, os.PathLike)):
            raise InputError("pass a list of paths: update([path, ...])")
        check_not_nested(self.path, paths)
        with folder_lock(self.path, lock_wait):  # before anything in the folder is touched, a rebuild's too
            self._reload_manifest(check_embedder=not rebuild)  # another run may have updated it while this one waited
            if rebuild and self.manifest is not None and self.manifest.dense == "chroma" and self.chroma_url:
                ContextualIndex.clear(self.path)  # a Chroma collection holds one version: emptied, then refilled
                self._vector_index = None
                self._reload_manifest()
            space = UpdateSpace(self.path)
            try:
                with space.errors():  # a full disk: IndexFullError naming the folder and the space
                    return self._update(paths, space, show_progress, batch_size, max_file_bytes, prune_missing,
                                        shared_contexts, rebuild)
            finally:
                self.close()  # the embedding cache is checkpointed now, under the lock, not at some later GC

    def remove(self, paths: Sequence[str | os.PathLike[str]], *, lock_wait: float = 0.0) -> IndexReport:
        """Drop every indexed file at or under `paths` (paths on disk, existing or not, or doc ids
        as `query` shows them) from the index."""
        if isinstance(paths, (str, os.PathLike)) or not paths:
            raise InputError("pass a non-empty list of paths: remove([path, ...])")
        from contextual_retrieval_core.index.lock import folder_lock
        from contextual_retrieval_core.index.space import UpdateSpace

        started = time.perf_counter()
        with folder_lock(self.path, lock_wait):
            self._reload_manifest()
            if self.manifest is None:
                raise NotFoundError(f"{self.path} is not a contextual-retrieval index (no {MANIFEST_NAME})")
            targets = [str(Path(p).expanduser().resolve()) for p in paths]
            names = [os.fspath(p).rstrip("/") for p in paths]

            def matches(doc_id: str, entry: FileEntry) -> bool:
                return any(entry.file == t or entry.file.startswith(t.rstrip(os.sep) + os.sep) for t in targets) or any(
                    doc_id == n or doc_id.startswith(n + "/") for n in names)

            gone = [d for d, e in self.manifest.files.items() if matches(d, e)]
            if not gone:
                raise InputError(f"nothing indexed in {self.path} is at or under {', '.join(map(str, paths))}; "
                                 "`contextual-retrieval query INDEX ... --json` shows the indexed paths")
            report = IndexReport(files_removed=len(gone))
            files = {d: e for d, e in self.manifest.files.items() if d not in gone}
            with UpdateSpace(self.path).errors():  # the new version folder is written whole
                self._commit(dataclasses.replace(self.manifest, files=files), report, {})
            report.elapsed_s = time.perf_counter() - started
            return report

    def _update(self, paths: Sequence[str | os.PathLike[str]], space: UpdateSpace, show_progress: bool, batch_size: int,
                max_file_bytes: int, prune_missing: bool, shared_contexts: str | os.PathLike[str] | bool = True,
                rebuild: bool = False) -> IndexReport:
        """`update` under the folder's lock: scan, decide what to redo, read and chunk the new and
        changed files, situate and embed them, write the new version and switch to it."""
        started = time.perf_counter()
        report = IndexReport()
        scan = self._scan(paths, max_file_bytes, report)
        old = None if rebuild else self.manifest  # a rebuild starts over, beside the current version
        windows = requested_windows(self.windows, old.windows if old else windows_setting(WindowConfig()))
        fit = self.fit_chunks if self.fit_chunks is not None else (old is not None and old.chunk_tokens is not None)
        window = window_of(self.embedder) if fit else None
        manifest = IndexManifest(
            embedder={"kind": embedder_kind(self.embedder), "model": self.embedder.model_name},
            generator=generator_identity(self.generator), chunk_chars=self.chunk_chars, weights=list(self.weights),
            bm25=old.bm25 if old else "", windows=windows_setting(windows),
            chunk_tokens=window.size if window is not None else None, dense=self._layout(old, report),
        )
        redo_all = self._why_redo(old, manifest, report)
        documents, chunks, spans = self._read(scan, paths, old, manifest, redo_all, window, prune_missing, report, show_progress)
        if not chunks and not redo_all and self._unchanged(old, manifest):
            assert old is not None
            manifest.checks = old.checks  # the same version folder
            report.chunks_total = manifest.chunk_count
            if manifest != old:
                manifest.write(self.path)  # mtimes refreshed: the next run skips hashing
                self.manifest = manifest
            report.elapsed_s = time.perf_counter() - started
            return report
        self.path.mkdir(parents=True, exist_ok=True)
        space.check(len(chunks), manifest.chunk_count)  # before anything is paid for or written
        texts, fresh, written, shown = self._situate_and_embed(documents, chunks, spans, windows, manifest.dense, shared_contexts,
                                                               batch_size, show_progress, report)
        report.chunks_added = len({c.id for c in chunks} - set(old.chunk_ids() if old else ()))  # new ids only
        self._commit(manifest, report, texts, fresh, written, shown)
        report.elapsed_s = time.perf_counter() - started
        return report

    def _scan(self, paths: Sequence[str | os.PathLike[str]], max_file_bytes: int, report: IndexReport) -> Any:
        """The files under `paths` (the skipped ones named in `report`); a ValueError naming the
        fix when there is none to index."""
        scan = collect_files(paths, skip=[self.path], max_file_bytes=max_file_bytes)
        report.skipped = [(str(s.path), s.reason) for s in scan.skipped]
        if not scan.files:
            raise InputError(f"nothing to index under {', '.join(map(str, paths))}: no text, markdown or code file "
                             f"({scan.describe()}); `contextual-retrieval index --help` lists the indexed extensions "
                             f"({', '.join(sorted(TEXT_EXTENSIONS)[:8])}, ...) and the size limit")
        return scan

    def _layout(self, old: IndexManifest | None, report: IndexReport) -> str:
        """Where the new version's rows live: as before, else the index's own files (a Chroma
        collection with `chroma_url`); an index still in embedded Chroma is told how to move."""
        dense = old.dense if old else ("chroma" if self.chroma_url or uses_server(self.path, self.chroma_url) else "files")
        if old is not None and dense == "chroma" and not self.chroma_url and not uses_server(self.path, self.chroma_url):
            report.note = (f"this index keeps its vectors in embedded Chroma ({self.path / 'chroma'}); "
                           f"`contextual-retrieval index PATH... --index-dir {self.path} --rebuild` moves them into the "
                           "index's own files, the dense index `index` writes now (nothing is paid for or embedded again)")
        return dense

    def _why_redo(self, old: IndexManifest | None, manifest: IndexManifest, report: IndexReport) -> bool:
        """Whether every file is done again (a damaged index, or a changed generator, chunk size,
        token budget or windows), with the reason in ``report.note``."""
        if old is None:
            return False
        damage = self._damage(old)
        reasons = [
            (damage, f"the index was damaged ({damage}): every file is re-indexed from the stored contexts and cached embeddings"),
            (old.generator != manifest.generator, f"contexts: the index was built with {old.generator.get('label')!r}, this run "
                                                  f"uses {manifest.generator['label']!r}: every file is re-situated"),
            (old.chunk_chars != manifest.chunk_chars,
             f"chunk size changed ({old.chunk_chars} -> {manifest.chunk_chars}): every file is re-chunked"),
            (old.chunk_tokens != manifest.chunk_tokens,
             f"chunk token budget changed ({old.chunk_tokens} -> {manifest.chunk_tokens}): every file is re-chunked"),
            (old.windows != manifest.windows, f"windows changed ({old.windows} -> {manifest.windows}): every file is re-embedded"),
        ]
        for hit, note in reasons:
            if hit:
                report.note = note
                return True
        return False

    def _read(self, scan: Any, paths: Sequence[str | os.PathLike[str]], old: IndexManifest | None, manifest: IndexManifest,
              redo_all: bool, window: Any, prune_missing: bool, report: IndexReport,
              show_progress: bool) -> tuple[list[Document], list[Chunk], dict[str, tuple[int, int]]]:
        """Read and chunk the new and changed files (all with `redo_all`) into `manifest`'s file
        list, with the files indexed from other paths kept and the gone ones counted removed."""
        from contextual_retrieval_core.index._changes import read_changes

        old_files: dict[str, FileEntry] = dict(old.files) if old else {}
        new_files, documents, chunks, spans = read_changes(scan.files, old_files, redo_all, self.chunk_chars, report, show_progress,
                                                           window=window, generator=self.generator)
        roots = {str(f.root) for f in scan.files} | {str(Path(p).expanduser().resolve()) for p in paths}
        for doc_id, entry in old_files.items():
            if doc_id in new_files:
                continue
            if entry.root in roots or (prune_missing and not Path(entry.file).exists()):
                report.files_removed += 1
            else:
                new_files[doc_id] = entry  # indexed from another path: kept
        if not new_files:
            raise InputError(f"nothing to index under {', '.join(map(str, paths))}: every file was skipped ("
                             + "; ".join(f"{p} ({r})" for p, r in report.skipped[:10]) + ")")
        manifest.files = new_files
        return documents, chunks, spans

    def _unchanged(self, old: IndexManifest | None, manifest: IndexManifest) -> bool:
        """Whether the current version serves `manifest` as it is (same chunks, nothing missing)."""
        if old is None or manifest.chunk_ids() != old.chunk_ids():
            return False
        return not (old.bm25 and self._wants_snapshot(old) and not has_snapshot(self.path / old.bm25))

    def _situate_and_embed(self, documents: list[Document], chunks: list[Chunk], spans: dict[str, tuple[int, int]],
                           windows: WindowConfig | None, dense: str, shared_contexts: str | os.PathLike[str] | bool,
                           batch_size: int, show_progress: bool,
                           report: IndexReport) -> tuple[dict[str, str], list[str], dict[str, np.ndarray], dict[str, dict]]:
        """Contexts and rows for `chunks`: (indexed text by chunk, the new row ids, their vectors,
        the shown fields by chunk); a Chroma-backed index gets the rows added beside the old ones."""
        if not chunks:
            return {}, [], {}, {}
        result = self._situate(documents, chunks, shared_contexts, show_progress)
        report.contexts = result.report
        cached = self._embedder()
        hits0, misses0 = cached.hits, cached.misses
        texts = {c.id: c.indexed_text for c in result.chunks}
        rows, vectors = embed_rows(cached, result.chunks, windows, batch_size=batch_size, show_progress=show_progress)
        report.embedded = cached.misses - misses0
        report.embedding_cache_hits = cached.hits - hits0
        shown = {c.id: {"path": c.document_id, "context": c.context, "text": c.text, "chunk_index": c.chunk.index,
                        "start_line": spans[c.id][0], "end_line": spans[c.id][1]} for c in result.chunks}
        fresh, row_texts, metas = store_payload(rows, texts, shown)
        if dense == "chroma":  # new rows go in beside the old ones: the old manifest still finds all of its chunks
            self._vectors(create=True).add(fresh, vectors, documents=row_texts, metadatas=metas)
        return texts, fresh, dict(zip(fresh, np.asarray(vectors, dtype=np.float32))), shown

    def _situate(self, documents: Sequence[Document], chunks: Sequence[Chunk], shared: str | os.PathLike[str] | bool,
                 show_progress: bool) -> ContextualizeResult:
        """The chunks' contexts through the folder's store and the shared one (`index/_situate.py`)."""
        from contextual_retrieval_core.index._situate import situate

        return situate(self.path, self.generator, documents, chunks, shared=shared,
                       concurrency=self.contextualize.concurrency, show_progress=show_progress)

    def _commit(self, manifest: IndexManifest, report: IndexReport, texts: dict[str, str], fresh: Sequence[str] = (),
                written: dict[str, np.ndarray] | None = None, shown: dict[str, dict] | None = None) -> None:
        """Write the new version and switch to it (`_commit_files`, or `_commit_chroma` for an
        index whose rows live in Chroma)."""
        if manifest.dense == "files":
            self._commit_files(manifest, report, texts, fresh, written or {}, shown or {})
        else:
            self._commit_chroma(manifest, report, texts, fresh, written, shown)

    def _commit_files(self, manifest: IndexManifest, report: IndexReport, texts: dict[str, str], fresh: Sequence[str],
                      written: dict[str, np.ndarray], shown: dict[str, dict]) -> None:
        """Write a new version folder holding everything a query reads (BM25, every dense row,
        the IVF index from `dense_index`'s threshold on, the chunks' shown fields, and their sizes
        and checksums in the manifest), swap the manifest in, then drop the other version
        folders (and an embedded Chroma the index has moved out of). The rows of chunks this run
        did not embed, and their text, are read from the current version."""
        wanted = manifest.chunk_ids()
        old_ids = set(self.manifest.chunk_ids()) if self.manifest else set()
        manifest.bm25, manifest.checks = "", {}
        if wanted:
            self._write_version(manifest, wanted, texts, fresh, written, shown)
        manifest.write(self.path)  # the switch: from here on the new index is the index
        self.manifest = manifest
        self._bm25 = None
        self._snapshot = None
        report.chunks_removed = len(old_ids - set(wanted))
        report.chunks_total = len(wanted)
        # clean-up; an interruption here leaves folders the next update removes
        for part in self.path.glob("bm25*"):
            if part.name != manifest.bm25 and part.is_dir():
                shutil.rmtree(part, ignore_errors=True)
        if (self.path / "chroma").is_dir() and not uses_server(self.path, self.chroma_url):
            self._vector_index = None
            shutil.rmtree(self.path / "chroma", ignore_errors=True)  # moved out of by a rebuild

    def _write_version(self, manifest: IndexManifest, wanted: list[str], texts: dict[str, str], fresh: Sequence[str],
                       written: dict[str, np.ndarray], shown: dict[str, dict]) -> None:
        """`_commit_files`'s new version folder, named in `manifest` with its checks."""
        from contextual_retrieval_core.index._file_checks import record_files
        from contextual_retrieval_core.index._snapshot import RowWriter

        redone: dict[str, list[str]] = {}
        for row in fresh:
            redone.setdefault(row_owner(row), []).append(row)
        kept = [cid for cid in wanted if cid not in redone]
        prior = self._current_snapshot() if kept else None  # a run that redid everything reads nothing old
        row_ids: list[str] = []
        sources: list[np.ndarray | int] = []  # a fresh vector, or a row number of the current version
        lost = []
        for cid in wanted:
            if cid in redone:
                rows = sorted(redone[cid], key=row_window)
                row_ids += rows
                sources += [written[r] for r in rows]
                continue
            numbers = prior.rows_of(cid) if prior is not None else []
            if not numbers:
                lost.append(cid)
                continue
            row_ids += [prior.rows.ids[i] for i in numbers]  # type: ignore[union-attr]
            sources += numbers
        if lost:
            raise IndexDamagedError(f"{len(lost)} chunks listed in {self.path / MANIFEST_NAME} have no vectors in "
                                    f"{self.path / (self.manifest.bm25 if self.manifest else '')} (first: {lost[0]}); rebuild the "
                                    f"index: contextual-retrieval index PATH... --index-dir {self.path} --rebuild")
        if kept:
            assert prior is not None
            for cid, (doc, meta) in prior.shown(kept).items():
                texts.setdefault(cid, doc)
                shown.setdefault(cid, meta)
        manifest.bm25 = f"bm25-{uuid.uuid4().hex[:12]}"
        folder = BM25Index().index(wanted, [texts[c] for c in wanted]).save(self.path / manifest.bm25)
        first = sources[0]
        dim = len(first) if isinstance(first, np.ndarray) else prior.rows.vectors.shape[1]  # type: ignore[union-attr]
        writer = RowWriter(folder, row_ids, dim)
        block = 4096
        for start in range(0, len(row_ids), block):
            part = sources[start : start + block]
            writer.put(start, np.stack([s if isinstance(s, np.ndarray) else prior.rows.vectors[s] for s in part]))  # type: ignore[union-attr]
        writer.finish((c, (texts[c], shown[c])) for c in wanted)
        manifest.checks = record_files(folder)

    def _current_snapshot(self) -> Snapshot | None:
        """The current version's rows and chunks, to carry the unchanged ones over (None: no
        version, or one whose rows are not in files)."""
        current = self.manifest
        if current is None or current.dense != "files" or not current.chunk_count or not current.bm25:
            return None
        return Snapshot.open(self.path / current.bm25, current.chunk_ids(), fix=self._fix())

    def _commit_chroma(self, manifest: IndexManifest, report: IndexReport, texts: dict[str, str], fresh: Sequence[str] = (),
                       written: dict[str, np.ndarray] | None = None, shown: dict[str, dict] | None = None) -> None:
        """Write a new version folder (BM25 and, when wanted, the query snapshot), swap the
        manifest in, then drop what the old one listed alone and the rows of chunks re-embedded
        into `fresh` rows that are not among them. `written` and `shown` hold the vectors of the
        `fresh` rows and the metadata of this run's chunks; the rest is read back from Chroma."""
        wanted = manifest.chunk_ids()
        old_ids = set(self.manifest.chunk_ids()) if self.manifest else set()
        vectors = self._vectors(create=True)
        collection = vectors.collection
        manifest.bm25 = ""
        keep = set(wanted)
        have = collection.get(include=[])["ids"]
        stale = stale_rows(have, keep, {row_owner(r) for r in fresh}, set(fresh))
        if wanted:
            snapshot = self._wants_snapshot(manifest)
            rows = snapshot_order(sorted(set(have) - set(stale)), wanted) if snapshot else []
            held, shown = dict(written or {}), dict(shown or {})
            read = [cid for cid in wanted if cid not in texts or (snapshot and cid not in shown)]
            read = list(dict.fromkeys(read + [r for r in rows if r not in held]))
            include = ["documents", "metadatas", "embeddings"] if snapshot else ["documents"]
            step = vectors.max_batch_size
            for start in range(0, len(read), step):
                got = collection.get(ids=read[start : start + step], include=include)
                for n, rid in enumerate(got["ids"]):
                    if rid in keep:
                        texts.setdefault(rid, got["documents"][n])
                        if snapshot:
                            shown.setdefault(rid, got["metadatas"][n])
                    if snapshot:
                        held[rid] = np.asarray(got["embeddings"][n], dtype=np.float32)
            lost = [cid for cid in wanted if cid not in texts] + [r for r in rows if r not in held]
            if lost:
                raise IndexDamagedError(
                    f"{len(lost)} chunks listed in {self.path / MANIFEST_NAME} are missing from {self.path / 'chroma'} "
                    f"(first: {lost[0]}); rebuild the index: contextual-retrieval index PATH... --index-dir {self.path} --rebuild"
                )
            manifest.bm25 = f"bm25-{uuid.uuid4().hex[:12]}"
            folder = BM25Index().index(wanted, [texts[c] for c in wanted]).save(self.path / manifest.bm25)
            if snapshot:
                write_snapshot(folder, rows, np.stack([held[r] for r in rows]), {c: (texts[c], shown[c]) for c in wanted})
        manifest.write(self.path)  # the switch: from here on the new index is the index
        self.manifest = manifest
        self._bm25 = None
        self._snapshot = None
        report.chunks_removed = len(old_ids - keep)
        report.chunks_total = len(wanted)
        # clean-up; an interruption here leaves rows and folders the next update removes
        vectors.delete(stale)
        for part in self.path.glob("bm25*"):
            if part.name != manifest.bm25 and part.is_dir():
                shutil.rmtree(part, ignore_errors=True)

    # -- querying -------------------------------------------------------------------------------

    def __len__(self) -> int:
        return self.manifest.chunk_count if self.manifest is not None else 0

    def search(
        self,
        query: str,
        top_k: int | None = None,
        *,
        config: FusionConfig | None = None,
    ) -> list[IndexHit]:
        """The top `top_k` chunks for `query`: Chroma top-`depth` and BM25 top-`depth`, fused with
        weighted reciprocal-rank fusion, dense feedback from the fused top, then reranked when
        the config has a reranker (the one `QueryFlow`). The settings come in a `FusionConfig`
        (`config`); the fusion weights are the index's. With ``on_rerank_error="fused"`` a
        failing reranker leaves the fused order, each hit carrying the error
        (`IndexHit.rerank_error`). A blank query returns no results, as in every query path.

        Reads the folder only (the query's embedding is not cached); a damaged folder raises
        `IndexDamagedError` naming the file and the fix."""
        if not isinstance(query, str):
            raise InputTypeError(f"query must be str, got {type(query).__name__}")
        fusion = FusionConfig.merged(config).replace(weights=self.weights, **({"top_k": top_k} if top_k is not None else {}))
        if is_blank(query):
            return []
        return read_retrying(self.path, lambda: self._search_version(query, fusion), reopen=self._reopen)

    def _search_version(self, query: str, fusion: FusionConfig) -> list[IndexHit]:
        """`search` on the version of the folder open now (`_open_version`)."""
        manifest, bm25, vectors = self._open_version()
        if manifest is None:
            raise NotFoundError(f"{self.path} is not a contextual-retrieval index (no {MANIFEST_NAME}); build one "
                                    f"with: contextual-retrieval index PATH... --index-dir {self.path}")
        total = manifest.chunk_count
        if total == 0:
            raise InputError(f"the index {self.path} holds no chunks; add files with: contextual-retrieval index PATH...")
        assert bm25 is not None and vectors is not None
        dense: SyncDenseSide
        if isinstance(vectors, Snapshot):
            dense = vectors.side("dense", self.embedder, fusion.depth)
        else:
            rows_in_chroma = len(vectors)
            if rows_in_chroma < total:
                raise IndexDamagedError(f"{self.path / 'chroma'} holds {rows_in_chroma} chunks, the manifest lists {total}; "
                                        f"{self._fix()}")
            dense = ChromaSide("dense", self.embedder, vectors, fusion.depth,
                               min(fusion.depth + rows_in_chroma - total, rows_in_chroma), set(manifest.chunk_ids()))
        flow = QueryFlow(fusion, [dense, BM25Side("bm25", bm25, fusion.depth)])
        fused = flow.run([query], rerank=False)[0].fused
        pool = fused[: fusion.effective_rerank_depth] if fusion.reranker else fused[: fusion.top_k]
        pool_ids = [str(h.id) for h in pool]
        info = (vectors.shown(pool_ids) if isinstance(vectors, Snapshot)
                else chunk_rows(vectors.collection, pool_ids, self.path / "chroma", self._fix()))
        ranked = fusion.rerank(query, pool, lambda cid: info[str(cid)][0])
        out = []
        for h in ranked:
            doc, meta = info[str(h.id)]
            out.append(IndexHit(
                str(h.id), str(meta.get("path", "")), float(h.score), str(meta.get("context", "")),
                str(meta.get("text", doc)), dict(h.ranks), int(meta.get("start_line", 0)),
                int(meta.get("end_line", 0)), float(h.fused_score), h.rerank_score, h.rerank_error,
            ))
        return out


class ChromaSide(SyncDenseSide):
    """An index folder's Chroma collection as the dense side: rows (chunks and their windows)
    searched by vector, each chunk the manifest `listed` once at its best row; feedback reads the
    rows back from the collection."""

    def __init__(self, name: str, embedder: Embedder, vectors: ChromaVectorIndex, depth: int, rows: int, listed: set[str]) -> None:
        self.name, self.embedder, self.vectors, self.depth, self.rows, self.listed = name, embedder, vectors, depth, rows, listed

    def embed_queries(self, queries: Sequence[str]) -> np.ndarray:
        return np.asarray(self.embedder.embed_queries(list(queries)), dtype=np.float32)

    def search_vectors(self, vectors: Sequence[Any]) -> list[Any]:
        return [collapse_rows(self.vectors.search(np.asarray(v, dtype=np.float32), self.rows), self.depth, self.listed) for v in vectors]

    def feedback_rows(self, top: Sequence[str]) -> FeedbackRows:
        return stored_feedback_rows(self.vectors.collection, top)
