"""`MilvusContextualIndex`: an index of files on disk whose both sides live in a Milvus collection.

What ``contextual-retrieval index PATH --milvus-uri URI`` and ``query`` run on such an index. The
collection (`search.milvus.MilvusCollection`) holds every chunk's indexed text (structural header
+ context + chunk), its BM25 terms (scored by Milvus's BM25 function on the server), its dense
vector and the fields a result shows; queries search both legs on the server and fuse them with
the one `QueryFlow` (weighted RRF, dense feedback from the vectors read back, rerank). The index
folder keeps what an update needs and nothing a query reads beyond this file:

- ``milvus-index.json`` (`MilvusIndexRecord`): the server's URI (never its credentials), the
  collection, the embedder, the context generator, the chunk size, the fusion weights, the BM25
  analysis and, per file, its size, mtime, SHA-256 and chunk ids; written last by every update
  (a temporary file, then `os.replace`);
- ``contexts.sqlite3``: the LLM contexts (`index/_situate.py`), each stored as it arrives;
- ``embeddings.sqlite3``: the embedding cache, so a chunk whose text is unchanged is never
  embedded twice.

The collection records the embedder, the dimension and the analysis too (a collection property),
so a query with another embedder fails with `IndexMismatchError` naming both, from this folder or
from any other pointing at the same collection.

Updates: new and changed files are chunked (stable chunk ids: a file's unchanged chunks keep
theirs), situated and embedded, their rows upserted (a row whose id is there already is replaced),
then the record is written, then the rows no file lists any more are deleted. An update stopped
at any point (the server killed, the process interrupted) leaves rows a rerun overwrites or
deletes: the rerun upserts the same ids again (nothing is duplicated), redoes every file whose
chunks are not all on the server (nothing is missing), reads the contexts from the store and the
vectors from the cache (nothing is paid for twice). An update ends by flushing what it wrote
(`MilvusCollection.flush`: sealed segments). Each chunk is one row, its text embedded as the
embedder takes it (truncated at its window, unless `fit_chunks` cut the chunks to fit it). An
update and a removal hold the folder's lock. Where the collection lives and how the index talks
to the server is a `MilvusConfig`.

Example:
    >>> from contextual_retrieval_core.embeddings import LocalMiniLMEmbedder
    >>> from contextual_retrieval_core.index import MilvusConfig
    >>> index = MilvusContextualIndex("my-index", embedder=LocalMiniLMEmbedder(),
    ...                               milvus=MilvusConfig(uri="http://127.0.0.1:19530"))  # doctest: +SKIP
    >>> print(index.update(["docs", "src"]).format())  # doctest: +SKIP
    >>> for hit in index.search("how is the cache invalidated?", top_k=5):  # doctest: +SKIP
    ...     print(hit.path, hit.score, hit.context)
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, cast

from contextual_retrieval_core._factories import embedder_kind
from contextual_retrieval_core.checks import is_blank, positive_int, string_list
from contextual_retrieval_core.chunking.budget import window_of
from contextual_retrieval_core.chunking.split import DEFAULT_CHUNK_CHARS
from contextual_retrieval_core.dense._window_rows import embed_rows
from contextual_retrieval_core.embeddings.base import Embedder
from contextual_retrieval_core.errors import InputError, InputTypeError, NotFoundError
from contextual_retrieval_core.generators.base import ContextGenerator
from contextual_retrieval_core.index.files import MAX_FILE_BYTES, collect_files
from contextual_retrieval_core.index.manifest import FileEntry, IndexDamagedError, IndexMismatchError, generator_identity
from contextual_retrieval_core.index.milvus_config import MilvusConfig
from contextual_retrieval_core.index.report import IndexHit, IndexReport
from contextual_retrieval_core.search.config import FusionConfig
from contextual_retrieval_core.search.flow import QueryFlow
from contextual_retrieval_core.search.milvus import Analysis, MilvusCollection, MilvusRow, collection_sides
from contextual_retrieval_core.search.ranked import DEFAULT_WEIGHTS

__all__ = ["MILVUS_FILE", "MilvusContextualIndex", "MilvusIndexRecord", "uses_milvus"]

#: the folder's record of a Milvus index
MILVUS_FILE = "milvus-index.json"
_FORMAT = "contextual-retrieval/milvus-index"
_FORMAT_VERSION = 1


def uses_milvus(folder: str | os.PathLike[str]) -> bool:
    """Whether `folder` holds an index on Milvus (a ``milvus-index.json``)."""
    return (Path(folder) / MILVUS_FILE).is_file()


@dataclass
class MilvusIndexRecord:
    """What an index folder on Milvus records (``milvus-index.json``).

    Attributes:
        uri: the Milvus server (no credentials). collection: the collection holding the chunks.
        embedder: {"kind", "model"}; dimension: its vectors' length.
        generator: the context generator's identity (`generator_identity`).
        chunk_chars: the chunk size. weights: (dense, BM25) fusion weights used by queries.
        analysis: what Milvus's BM25 function reads ("ours" or "milvus").
        files: doc id -> `FileEntry` (size, mtime, SHA-256, chunk ids).
        chunk_tokens: the embedder window chunks were fitted to with their contexts (None: cut by
            `chunk_chars` alone).
    """

    uri: str
    collection: str
    embedder: dict[str, str]
    dimension: int
    generator: dict[str, str]
    chunk_chars: int
    weights: list[float]
    analysis: str = "ours"
    files: dict[str, FileEntry] = field(default_factory=dict)
    chunk_tokens: int | None = None

    def chunk_ids(self) -> list[str]:
        """Every chunk id, file by file."""
        return [cid for e in self.files.values() for cid in e.chunks]

    @property
    def chunk_count(self) -> int:
        return sum(len(e.chunks) for e in self.files.values())

    @classmethod
    def read(cls, folder: str | os.PathLike[str]) -> MilvusIndexRecord:
        """The record in `folder`; FileNotFoundError naming the fix when there is none,
        `IndexDamagedError` when it cannot be read."""
        file = Path(folder) / MILVUS_FILE
        if not file.is_file():
            raise NotFoundError(f"{folder} is not an index on Milvus (no {MILVUS_FILE}); build one with: "
                                    f"contextual-retrieval index PATH... --index-dir {folder} --milvus-uri URI")
        fix = f"re-run `contextual-retrieval index PATH... --index-dir {folder} --milvus-uri URI` to rewrite it"
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
            if data.get("format") != _FORMAT:
                raise InputError(f"format is {data.get('format')!r}, not {_FORMAT!r}")
            if int(data.get("format_version", 0)) > _FORMAT_VERSION:
                raise InputError("written by a newer contextual-retrieval; upgrade it")
            return cls(
                uri=str(data["uri"]), collection=str(data["collection"]), embedder=dict(data["embedder"]),
                dimension=positive_int("dimension", data["dimension"]), generator=dict(data["generator"]),
                chunk_chars=int(data["chunk_chars"]), weights=[float(w) for w in data["weights"]],
                analysis=str(data.get("analysis", "ours")),
                files={k: FileEntry(**v) for k, v in dict(data["files"]).items()},
                chunk_tokens=None if data.get("chunk_tokens") is None else positive_int("chunk_tokens", data["chunk_tokens"]),
            )
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as exc:
            raise IndexDamagedError(f"{file} is damaged ({type(exc).__name__}: {exc}); {fix}") from exc

    def write(self, folder: str | os.PathLike[str]) -> None:
        """Write ``folder/milvus-index.json`` atomically (a temporary file, then `os.replace`)."""
        target = Path(folder) / MILVUS_FILE
        tmp = target.with_name(MILVUS_FILE + ".tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(json.dumps({"format": _FORMAT, "format_version": _FORMAT_VERSION, **asdict(self)}, indent=1, sort_keys=True))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)


class MilvusContextualIndex:
    """A contextual index of files whose dense and BM25 sides both live in one Milvus collection.

    Args:
        path: the index folder (created on the first `update`).
        embedder: the `Embedder` for chunks and queries; it must be the one the index was built
            with (checked against the folder and the collection).
        milvus: a `MilvusConfig`: the server (``uri``), the collection, the credentials and the
            collection's layout (default: `MilvusConfig()`, the server and collection the folder
            records; a new index needs a ``uri``).
        generator: the `ContextGenerator` for new or changed files (default: the offline
            `StructuralContextGenerator`); changing it re-situates every file.
        chunk_chars: the chunk size; changing it re-chunks every file.
        concurrency: generation requests in flight at once (None: `ContextualizeConfig`'s default).
        weights: (dense, BM25) fusion weights at query time (default: as recorded, else 0.5 / 0.5).
        fit_chunks: cut chunks so that each, with its context, fits the embedder's window (as
            `ContextualIndex`'s: no chunk is truncated when embedded; more chunks, so more LLM
            requests); None (default): as recorded, off for a new index. Changing it re-chunks
            every file.

    Threads: `search` may run in many threads at once (they share one pymilvus client and the
    embedder). A server that does not answer is `MilvusServerUnavailable` naming the URI; the
    same object answers again once it is back.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        embedder: Embedder,
        milvus: MilvusConfig | None = None,
        generator: ContextGenerator | None = None,
        chunk_chars: int = DEFAULT_CHUNK_CHARS,
        concurrency: int | None = None,
        weights: Sequence[float] | None = None,
        fit_chunks: bool | None = None,
    ) -> None:
        if milvus is not None and not isinstance(milvus, MilvusConfig):
            raise InputTypeError(f"milvus must be a MilvusConfig, got {type(milvus).__name__}; "
                                 "e.g. milvus=MilvusConfig(uri='http://127.0.0.1:19530')")
        self.milvus = milvus if milvus is not None else MilvusConfig()
        self.path = Path(path)
        self.embedder = embedder
        self._generator = generator
        self.chunk_chars = positive_int("chunk_chars", chunk_chars)
        self.concurrency = concurrency
        self._weights = None if weights is None else FusionConfig(weights=tuple(weights)).weights_for(2, per="side (dense, BM25)")
        # the server and collection in use: as given, else as recorded (`uri`, `collection`)
        self._uri, self._collection_name = self.milvus.uri, self.milvus.collection
        if fit_chunks is not None and not isinstance(fit_chunks, bool):
            raise InputTypeError(f"fit_chunks must be True, False or None (as recorded), got {fit_chunks!r}")
        self.fit_chunks = fit_chunks
        self.record: MilvusIndexRecord | None = MilvusIndexRecord.read(self.path) if uses_milvus(self.path) else None
        self._collection: MilvusCollection | None = None
        self._checked = False

    @property
    def generator(self) -> ContextGenerator:
        """The context generator of updates (the offline `StructuralContextGenerator` unless one was given)."""
        if self._generator is None:
            from contextual_retrieval_core.generators.structural import StructuralContextGenerator

            self._generator = StructuralContextGenerator()
        return self._generator

    @property
    def weights(self) -> tuple[float, float]:
        """(dense, BM25) fusion weights: as given, else as recorded, else the defaults."""
        if self._weights is not None:
            return cast("tuple[float, float]", self._weights)
        if self.record is not None and len(self.record.weights) == 2:
            return cast("tuple[float, float]", tuple(self.record.weights))
        return cast("tuple[float, float]", tuple(DEFAULT_WEIGHTS))

    @property
    def uri(self) -> str:
        uri = self._uri or (self.record.uri if self.record else None)
        if not uri:
            raise InputError(f"no Milvus server for {self.path}: pass --milvus-uri http://host:19530 (milvus=MilvusConfig(uri=...))")
        return uri

    @property
    def collection(self) -> MilvusCollection:
        """The index's collection (opened on first use)."""
        if self._collection is None:
            name = self._collection_name or (self.record.collection if self.record else None)
            if name is None:
                name = "contextual_index_" + uuid.uuid4().hex[:16]
                self._collection_name = name
            config = self.milvus
            analysis = cast("Analysis", self.record.analysis if self.record else config.analysis)
            self._collection = MilvusCollection(self.uri, name, token=config.token, analysis=analysis, dense_index=config.dense_index,
                                                batch_rows=config.batch_rows, timeout=config.timeout, client=config.client)
        return self._collection

    def __len__(self) -> int:
        return self.record.chunk_count if self.record is not None else 0

    def _settings(self) -> dict[str, Any]:
        """What the collection records and a query must match."""
        return {"embedder": {"kind": embedder_kind(self.embedder), "model": self.embedder.model_name}}

    def _check_embedder(self) -> None:
        """`IndexMismatchError` when the folder or the collection was built with another embedder."""
        built = self.record.embedder.get("model") if self.record else None
        if built is not None and built != self.embedder.model_name:
            raise IndexMismatchError(
                f"the index {self.path} was built with the embedder {built!r}, not {self.embedder.model_name!r}; use the "
                f"same embedder (contextual-retrieval index --embedder {self.record.embedder.get('kind')}), or rebuild "  # type: ignore[union-attr]
                "the index (--rebuild) or write a new one (--index-dir, --collection)"
            )
        if self._checked:
            return
        collection = self.collection
        try:
            recorded = collection.check_settings({})
        except ValueError as exc:
            raise IndexDamagedError(f"{exc}; rebuild the index: contextual-retrieval index PATH... --index-dir {self.path} "
                                    f"--milvus-uri URI --rebuild") from exc
        model = dict(recorded.get("embedder") or {}).get("model")
        if model != self.embedder.model_name:
            raise IndexMismatchError(
                f"the Milvus collection {collection.name!r} was built with the embedder {model!r}, not "
                f"{self.embedder.model_name!r}; query it with that embedder, or rebuild the index (--rebuild)"
            )
        self._checked = True

    # -- indexing -----------------------------------------------------------------------------------

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
        """Bring the collection up to date with the files under `paths` (as `ContextualIndex.update`:
        new and changed files added, files gone from under `paths` removed, files indexed from
        other paths kept unless `prune_missing` and they no longer exist). `rebuild` drops the
        collection and writes every file again from the stored contexts and cached embeddings."""
        from contextual_retrieval_core.index._changes import check_not_nested
        from contextual_retrieval_core.index.lock import folder_lock

        if isinstance(paths, (str, os.PathLike)):
            raise InputError("pass a list of paths: update([path, ...])")
        check_not_nested(self.path, paths)
        with folder_lock(self.path, lock_wait):
            self.record = MilvusIndexRecord.read(self.path) if uses_milvus(self.path) else None
            self._collection, self._checked = None, False
            if rebuild:  # the same server and collection, emptied
                if self.record is not None:
                    self._uri = self._uri or self.record.uri
                    self._collection_name = self._collection_name or self.record.collection
                self.collection.drop()
                self.record = None
            return self._update(paths, show_progress, batch_size, max_file_bytes, prune_missing, shared_contexts, rebuild)

    def _update(self, paths: Sequence[str | os.PathLike[str]], show_progress: bool, batch_size: int, max_file_bytes: int,
                prune_missing: bool, shared_contexts: str | os.PathLike[str] | bool, rebuild: bool) -> IndexReport:
        from contextual_retrieval_core.index._changes import read_changes
        from contextual_retrieval_core.index._situate import situate
        from contextual_retrieval_core.index._storage import open_embedding_cache

        started = time.perf_counter()
        report = IndexReport()
        old = self.record
        scan = collect_files(paths, skip=[self.path], max_file_bytes=max_file_bytes)
        report.skipped = [(str(s.path), s.reason) for s in scan.skipped]
        if not scan.files:
            raise InputError(f"nothing to index under {', '.join(map(str, paths))}: no text, markdown or code file "
                             f"({scan.describe()}); `contextual-retrieval index --help` lists the indexed extensions")
        collection = self.collection
        exists = collection.exists()
        if exists:
            self._check_embedder()  # before anything is paid for
        generator = generator_identity(self.generator)
        fit = self.fit_chunks if self.fit_chunks is not None else (old is not None and old.chunk_tokens is not None)
        window = window_of(self.embedder) if fit else None
        chunk_tokens = window.size if window is not None else None
        redo_all = old is not None and (old.generator != generator or old.chunk_chars != self.chunk_chars
                                        or old.chunk_tokens != chunk_tokens)
        if redo_all:
            assert old is not None
            report.note = ("contexts or chunking changed since the last run "
                           f"({old.generator.get('label')!r}, {old.chunk_chars} chars, fitted to {old.chunk_tokens} tokens -> "
                           f"{generator['label']!r}, {self.chunk_chars} chars, fitted to {chunk_tokens} tokens): "
                           "every file is re-chunked and re-situated")
        held = collection.ids() if exists else set()
        # a file whose chunks are not all on the server (an update stopped before they were written,
        # a collection emptied) is done again
        old_files = {d: e for d, e in (old.files if old else {}).items() if all(c in held for c in e.chunks)}
        new_files, documents, chunks, spans = read_changes(scan.files, old_files, redo_all, self.chunk_chars, report,
                                                           show_progress, window=window, generator=self.generator)
        roots = {str(f.root) for f in scan.files} | {str(Path(p).expanduser().resolve()) for p in paths}
        for doc_id, entry in (old.files if old else {}).items():
            if doc_id in new_files:
                continue
            if entry.root in roots or (prune_missing and not Path(entry.file).exists()):
                report.files_removed += 1
            else:
                new_files[doc_id] = entry  # indexed from another path: kept (on the server, or redone next run)
        self.path.mkdir(parents=True, exist_ok=True)
        rows: list[MilvusRow] = []
        dimension = old.dimension if old is not None else 0
        if chunks:
            result = situate(self.path, self.generator, documents, chunks, shared=shared_contexts,
                             concurrency=self.concurrency, show_progress=show_progress)
            report.contexts = result.report
            cached = open_embedding_cache(self.path / "embeddings.sqlite3", self.embedder)
            try:
                hits0, misses0 = cached.hits, cached.misses
                _, vectors = embed_rows(cached, result.chunks, None, batch_size=batch_size, show_progress=show_progress)
                report.embedded, report.embedding_cache_hits = cached.misses - misses0, cached.hits - hits0
            finally:
                cached.close()
            dimension = int(vectors.shape[1])
            rows = [MilvusRow(c.id, c.indexed_text, v, {"path": c.document_id, "context": c.context, "text": c.text,
                                                        "chunk_index": c.chunk.index, "start_line": spans[c.id][0],
                                                        "end_line": spans[c.id][1]})
                    for c, v in zip(result.chunks, vectors)]
        if not exists or rebuild:
            dimension = dimension or len(self.embedder.embed_queries(["dimension"])[0])
            collection.create(dimension, self._settings())
        collection.upsert(rows)
        record = MilvusIndexRecord(
            uri=self.uri, collection=collection.name, embedder=self._settings()["embedder"], dimension=dimension,
            generator=generator, chunk_chars=self.chunk_chars, weights=list(self.weights), analysis=collection.analysis,
            files=new_files, chunk_tokens=chunk_tokens,
        )
        wanted = set(record.chunk_ids())
        old_ids = set(old.chunk_ids()) if old else set()
        report.chunks_added = len(wanted - old_ids)
        record.write(self.path)  # the switch: from here on this is the index
        self.record, self._checked = record, True
        stale = (held | {c.id for c in chunks}) - wanted  # rows no file lists: gone files, old versions of changed ones
        collection.delete(sorted(stale))
        if rows or stale:
            collection.flush()
        report.chunks_removed = len(old_ids - wanted)
        report.chunks_total = len(wanted)
        report.elapsed_s = time.perf_counter() - started
        return report

    def remove(self, paths: Sequence[str | os.PathLike[str]], *, lock_wait: float = 0.0) -> IndexReport:
        """Drop every indexed file at or under `paths` (paths on disk, or doc ids as `query` shows them)."""
        from contextual_retrieval_core.index.lock import folder_lock

        if isinstance(paths, (str, os.PathLike)) or not paths:
            raise InputError("pass a non-empty list of paths: remove([path, ...])")
        started = time.perf_counter()
        with folder_lock(self.path, lock_wait):
            record = self.record = MilvusIndexRecord.read(self.path)
            targets = [str(Path(p).expanduser().resolve()) for p in paths]
            names = [os.fspath(p).rstrip("/") for p in paths]
            gone = [d for d, e in record.files.items()
                    if any(e.file == t or e.file.startswith(t.rstrip(os.sep) + os.sep) for t in targets)
                    or any(d == n or d.startswith(n + "/") for n in names)]
            if not gone:
                raise InputError(f"nothing indexed in {self.path} is at or under {', '.join(map(str, paths))}; "
                                 "`contextual-retrieval query INDEX ... --json` shows the indexed paths")
            dropped = [c for d in gone for c in record.files[d].chunks]
            record.files = {d: e for d, e in record.files.items() if d not in gone}
            record.write(self.path)
            self.collection.delete(dropped)
            self.collection.flush()
        return IndexReport(files_removed=len(gone), chunks_removed=len(dropped), chunks_total=record.chunk_count,
                           elapsed_s=time.perf_counter() - started)

    # -- querying -----------------------------------------------------------------------------------

    def search(self, query: str, top_k: int | None = None, *, config: FusionConfig | None = None,
               where: Mapping[str, Any] | None = None) -> list[IndexHit]:
        """The top `top_k` chunks for `query`: Milvus's dense top-`depth` and BM25 top-`depth`
        (both on the server, under the metadata filter `where`: ``path``, ``chunk_index``,
        ``start_line``, ... in `search/_where.py`'s language), fused with the index's weights,
        dense feedback from the vectors read back, reranked when `config` has a reranker (the
        one `QueryFlow`). A blank query returns no results."""
        if not isinstance(query, str):
            raise InputTypeError(f"query must be str, got {type(query).__name__}")
        return self.search_many([query], top_k, config=config, where=where)[0]

    def search_many(self, queries: Sequence[str], top_k: int | None = None, *, config: FusionConfig | None = None,
                    where: Mapping[str, Any] | None = None) -> list[list[IndexHit]]:
        """`search` for each query: each leg searched once for the whole batch."""
        queries = string_list("queries", queries, "query strings")
        fusion = (config or FusionConfig()).replace(weights=self.weights, **({"top_k": positive_int("top_k", top_k)} if top_k else {}))
        if self.record is None:
            raise NotFoundError(f"{self.path} is not an index on Milvus (no {MILVUS_FILE}); build one with: "
                                    f"contextual-retrieval index PATH... --index-dir {self.path} --milvus-uri URI")
        asked = [i for i, q in enumerate(queries) if not is_blank(q)]
        out: list[list[IndexHit]] = [[] for _ in queries]
        if not asked:
            return out
        self._check_embedder()
        collection = self.collection
        flow = QueryFlow(fusion, collection_sides(collection, self.embedder, fusion.depth, where))
        results = flow.run([queries[i] for i in asked], rerank=False)
        pools = [r.fused[: fusion.effective_rerank_depth] if fusion.reranker else r.fused[: fusion.top_k] for r in results]
        info = collection.rows([str(h.id) for pool in pools for h in pool])
        for i, pool in zip(asked, pools):
            ranked = fusion.rerank(queries[i], [h for h in pool if str(h.id) in info], lambda cid: info[str(cid)][0])
            out[i] = [_hit(h, *info[str(h.id)]) for h in ranked]
        return out


def _hit(h: Any, text: str, meta: dict[str, Any]) -> IndexHit:
    return IndexHit(str(h.id), str(meta.get("path", "")), float(h.score), str(meta.get("context", "")),
                    str(meta.get("text", text)), dict(h.ranks), int(meta.get("start_line", 0)), int(meta.get("end_line", 0)),
                    float(h.fused_score), h.rerank_score, h.rerank_error)
