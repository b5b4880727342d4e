"""`ContextualIndex`: a persistent, incremental contextual index of files on disk.

What `contextual-retrieval index` and `contextual-retrieval query` run. One folder holds:

- ``chroma/``: an embedded Chroma database with one collection of the chunks' contextual
  embeddings (computed here and passed to Chroma: Chroma's own embedding function is never used),
  the indexed text (context + chunk) as the Chroma document, and the path, context, chunk text
  and line numbers as metadata;
- ``bm25/``: a `BM25Index` over the same indexed texts (JSON + .npy, no pickle);
- ``contexts.sqlite3``: the `ContextStore` of LLM-written contexts (structural contexts cost
  nothing and are not stored);
- ``embeddings.sqlite3``: the `CachedEmbedder` cache, so a chunk whose indexed text is unchanged
  is never embedded twice;
- ``manifest.json``: which files were indexed (size, mtime, sha256, chunk ids) and with which
  embedder, context generator and chunk size.

Re-indexing skips every file whose size and mtime (or, failing that, content hash) are unchanged:
an unchanged folder makes no generation request, embeds nothing and does not even open Chroma.
Changed and deleted files' chunks are removed; the BM25 index is rebuilt only when something
changed.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from tqdm.auto import tqdm

from .bm25 import BM25Index
from .chroma import ChromaVectorIndex
from .chunking import CODE_EXTENSIONS, DEFAULT_CHUNK_CHARS, split_text
from .embeddings.base import Embedder
from .ensemble import DEFAULT_RRF_K, DEFAULT_TOP_K, DEFAULT_WEIGHTS, fuse_sources, rerank_hits
from .factories import embedder_kind
from .files import TEXT_EXTENSIONS, SourceFile, collect_files, file_sha256
from .fusion import DEFAULT_DEPTH
from .generators.base import ContextGenerator
from .hybrid import embed_with_progress
from .index_manifest import MANIFEST_NAME, FileEntry, IndexDamagedError, IndexManifest, IndexMismatchError
from .index_report import IndexHit, IndexReport
from .rerank.base import Reranker
from .types import Chunk, Document, stable_chunk_id

__all__ = ["ContextualIndex", "IndexMismatchError", "IndexDamagedError"]

_COLLECTION = "chunks"


class ContextualIndex:
    """A contextual index (Chroma + BM25 + context store + manifest) in one folder.

    Args:
        path: the index folder (created on the first `update`).
        embedder: the `Embedder` for chunks and queries; it must be the one the index was built
            with (its `model_name` is checked). Wrapped in a `CachedEmbedder` on
            ``path/embeddings.sqlite3``.
        generator: the `ContextGenerator` for new or changed files (default: the offline
            `StructuralContextGenerator`). Changing it re-situates every file on the next update.
        chunk_chars: the chunk size for `split_text`; changing it re-chunks every file.
        concurrency: generation requests in flight at once.
        weights: (dense, BM25) fusion weights at query time.

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
        concurrency: int = 8,
        weights: Sequence[float] = DEFAULT_WEIGHTS,
    ) -> None:
        if generator is None:
            from .generators.structural import StructuralContextGenerator

            generator = StructuralContextGenerator()
        self.path = Path(path)
        self.embedder = embedder
        self.generator = generator
        self.chunk_chars = int(chunk_chars)
        self.concurrency = concurrency
        self.weights = tuple(float(w) for w in weights)
        self._cached: Any = None
        self._vector_index: ChromaVectorIndex | None = None
        self._bm25: BM25Index | None = None
        self.manifest: IndexManifest | None = IndexManifest.read(self.path) if (self.path / MANIFEST_NAME).is_file() else None
        if self.manifest is not None:
            built = self.manifest.embedder["model"]
            if built != embedder.model_name:
                raise IndexMismatchError(
                    f"the index {self.path} was built with the embedder {built!r}, not {embedder.model_name!r}; "
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
        path = Path(path)
        if (path / "chroma").is_dir():
            from .chroma import chroma_client

            # through Chroma, not by deleting its folder: a client open on it in this process
            # would go on writing to the deleted files
            client = chroma_client(path / "chroma")
            if _COLLECTION in [getattr(c, "name", c) for c in client.list_collections()]:
                client.delete_collection(_COLLECTION)
        for part in ("bm25", "bm25.tmp"):
            shutil.rmtree(path / part, ignore_errors=True)
        (path / MANIFEST_NAME).unlink(missing_ok=True)

    def _generator_identity(self) -> dict[str, str]:
        gen = self.generator
        return {"name": gen.name, "model": gen.model, "prompt": gen.prompt_identity,
                "label": getattr(gen, "label", gen.name)}

    def _write_manifest(self, manifest: IndexManifest) -> None:
        manifest.write(self.path)
        self.manifest = manifest

    # -- storage --------------------------------------------------------------------------------

    def _embedder(self) -> Any:
        if self._cached is None:
            from .embeddings.cache import CachedEmbedder

            self.path.mkdir(parents=True, exist_ok=True)
            self._cached = CachedEmbedder(self.embedder, self.path / "embeddings.sqlite3")
        return self._cached

    def _vectors(self) -> ChromaVectorIndex:
        if self._vector_index is None:
            from .chroma import chroma_client, chroma_collection

            # embeddings are always computed here and passed in: no Chroma embedding function
            collection = chroma_collection(chroma_client(self.path / "chroma"), _COLLECTION)
            self._vector_index = ChromaVectorIndex(collection=collection)
        return self._vector_index

    def _chroma(self) -> Any:
        return self._vectors().collection

    # -- indexing -------------------------------------------------------------------------------

    def update(
        self, paths: Sequence[str | os.PathLike[str]], *, show_progress: bool = True, batch_size: int = 64
    ) -> IndexReport:
        """Bring the index up to date with the files under `paths`.

        New and changed files are chunked, situated, embedded and added; files that were indexed
        under one of `paths` and are gone are removed; files indexed from other paths are kept.
        """
        started = time.perf_counter()
        report = IndexReport()
        files, report.files_skipped = collect_files(paths, skip=[self.path])
        roots = {str(f.root) for f in files} | {str(Path(p).expanduser().resolve()) for p in paths}
        if not files:
            raise ValueError(
                f"no text, markdown or code files found under {', '.join(map(str, paths))}; "
                f"supported extensions: {', '.join(sorted(TEXT_EXTENSIONS)[:12])}, ... (see --help)"
            )
        old = self.manifest
        old_files: dict[str, FileEntry] = dict(old.files) if old else {}
        gen_id = self._generator_identity()
        redo_all = False
        if old:
            if old.generator != gen_id:
                redo_all = True
                report.note = (
                    f"contexts: the index was built with {old.generator.get('label')!r}, this run uses "
                    f"{gen_id['label']!r}: every file is re-situated"
                )
            elif old.chunk_chars != self.chunk_chars:
                redo_all = True
                report.note = f"chunk size changed ({old.chunk_chars} -> {self.chunk_chars}): every file is re-chunked"

        todo: list[tuple[SourceFile, str, os.stat_result]] = []
        new_files: dict[str, FileEntry] = {}
        for f in tqdm(files, desc="checking files", unit="file", disable=not show_progress, leave=False):
            st = f.path.stat()
            entry = old_files.get(f.doc_id)
            if entry is not None and not redo_all and entry.size == st.st_size and entry.mtime_ns == st.st_mtime_ns:
                new_files[f.doc_id] = entry
                report.files_unchanged += 1
                continue
            digest = file_sha256(f.path)
            if entry is not None and not redo_all and entry.sha256 == digest:
                new_files[f.doc_id] = dataclasses.replace(entry, size=st.st_size, mtime_ns=st.st_mtime_ns)
                report.files_unchanged += 1
                continue
            if entry is None:
                report.files_new += 1
            else:
                report.files_changed += 1
            todo.append((f, digest, st))
        found = {f.doc_id for f in files}
        removed_ids: list[str] = []
        for doc_id, entry in old_files.items():
            if doc_id in found:
                if doc_id not in new_files:  # changed: its old chunks go
                    removed_ids.extend(entry.chunks)
            elif entry.root in roots:
                report.files_removed += 1
                removed_ids.extend(entry.chunks)
            else:
                new_files[doc_id] = entry  # indexed from another path: kept
        manifest = IndexManifest(
            embedder={"kind": embedder_kind(self.embedder), "model": self.embedder.model_name},
            generator=gen_id,
            chunk_chars=self.chunk_chars,
            weights=list(self.weights),
            files=new_files,
        )
        if not todo and not removed_ids:
            report.chunks_total = sum(len(e.chunks) for e in new_files.values())
            if manifest != old:
                self.path.mkdir(parents=True, exist_ok=True)
                self._write_manifest(manifest)  # mtimes refreshed: the next run skips hashing
            report.elapsed_s = time.perf_counter() - started
            return report

        self.path.mkdir(parents=True, exist_ok=True)
        vectors = self._vectors()
        keep = {cid for e in new_files.values() for cid in e.chunks}
        stale = [cid for cid in dict.fromkeys(removed_ids) if cid not in keep]
        vectors.delete(stale)
        report.chunks_removed = len(stale)

        documents, chunks, spans = [], [], {}
        for f, digest, st in todo:
            text = f.path.read_bytes().decode("utf-8", errors="replace")
            pieces = split_text(text, max_chars=self.chunk_chars, code=f.path.suffix.lower() in CODE_EXTENSIONS)
            ids = []
            for i, (offset, piece) in enumerate(pieces):
                cid = stable_chunk_id(f.doc_id, i, piece)
                ids.append(cid)
                chunks.append(Chunk(cid, f.doc_id, piece, i))
                first = text.count("\n", 0, offset) + 1
                spans[cid] = (first, first + piece.count("\n"))
            if pieces:
                documents.append(Document(f.doc_id, text, {"file_path": f.doc_id}))
            new_files[f.doc_id] = FileEntry(str(f.root), str(f.path), digest, st.st_size, st.st_mtime_ns, ids)
        if chunks:
            from .contextualizer import Contextualizer

            store = self.path / "contexts.sqlite3" if self.generator.is_llm else None
            contextualizer = Contextualizer(
                self.generator, store, concurrency=self.concurrency, show_progress=show_progress
            )
            result = contextualizer.contextualize(documents, chunks)
            report.contexts = result.report
            cached = self._embedder()
            hits0, misses0 = cached.hits, cached.misses
            texts = [c.indexed_text for c in result.chunks]
            vectors.add(
                [c.id for c in result.chunks],
                embed_with_progress(cached, texts, batch_size, show_progress),
                documents=texts,
                metadatas=[
                    {"path": c.document_id, "context": c.context, "text": c.text, "chunk_index": c.chunk.index,
                     "start_line": spans[c.id][0], "end_line": spans[c.id][1]}
                    for c in result.chunks
                ],
            )
            report.embedded = cached.misses - misses0
            report.embedding_cache_hits = cached.hits - hits0
            report.chunks_added = len(chunks)

        self._rebuild_bm25(new_files)
        report.chunks_total = sum(len(e.chunks) for e in new_files.values())
        self._write_manifest(manifest)
        report.elapsed_s = time.perf_counter() - started
        return report

    def _rebuild_bm25(self, files: dict[str, FileEntry]) -> None:
        vectors = self._vectors()
        collection = vectors.collection
        wanted = [cid for e in files.values() for cid in e.chunks]
        have = collection.get(include=[])["ids"]
        vectors.delete(sorted(set(have) - set(wanted)))  # orphans left by an interrupted run
        target = self.path / "bm25"
        tmp = self.path / "bm25.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        if wanted:
            texts: dict[str, str] = {}
            step = vectors.max_batch_size
            for start in range(0, len(wanted), step):
                got = collection.get(ids=wanted[start : start + step], include=["documents"])
                texts.update(zip(got["ids"], got["documents"]))
            missing = [cid for cid in wanted if cid not in texts]
            if missing:
                raise RuntimeError(
                    f"{len(missing)} chunks listed in the manifest are missing from Chroma (first: {missing[0]}); "
                    "rebuild the index with --rebuild"
                )
            BM25Index().index(wanted, [texts[c] for c in wanted]).save(tmp)
        shutil.rmtree(target, ignore_errors=True)
        if wanted:
            os.replace(tmp, target)
        self._bm25 = None

    # -- querying -------------------------------------------------------------------------------

    def __len__(self) -> int:
        if self.manifest is None:
            return 0
        return self.manifest.chunk_count

    def search(
        self,
        query: str,
        k: int = DEFAULT_TOP_K,
        *,
        reranker: Reranker | None = None,
        depth: int = DEFAULT_DEPTH,
        rerank_depth: int | None = None,
    ) -> list[IndexHit]:
        """The top `k` chunks for `query`: Chroma top-`depth` and BM25 top-`depth`, fused with
        weighted reciprocal-rank fusion, then reranked when a `reranker` is given."""
        if not isinstance(query, str):
            raise TypeError(f"query must be str, got {type(query).__name__}")
        if isinstance(k, bool) or k <= 0:
            raise ValueError(f"k must be a positive integer, got {k!r}")
        if not query.strip():
            raise ValueError("the query is empty; ask a question, e.g. \"how are contexts cached?\"")
        total = len(self)
        if total == 0:
            raise ValueError(f"the index {self.path} holds no chunks; add files with: contextual-retrieval index PATH...")
        vectors = self._vectors()
        collection = vectors.collection
        if self._bm25 is None:
            self._bm25 = BM25Index.load(self.path / "bm25")
        vector = np.asarray(self._embedder().embed_queries([query]), dtype=np.float32)
        dense = vectors.search(vector[0], min(depth, total))
        sources = [("dense", dense, self.weights[0]), ("bm25", self._bm25.search(query, depth), self.weights[1])]
        fused = fuse_sources(sources, rrf_k=DEFAULT_RRF_K, depth=depth)
        pool_ids = [str(h.id) for h in (fused[: rerank_depth or depth] if reranker else fused[:k])]
        rows = collection.get(ids=pool_ids, include=["documents", "metadatas"]) if pool_ids else {"ids": []}
        info = {cid: (doc, meta) for cid, doc, meta in zip(rows["ids"], rows.get("documents") or [], rows.get("metadatas") or [])}
        ranked = rerank_hits(query, fused, lambda cid: info[str(cid)][0], reranker, k=k, rerank_depth=rerank_depth or depth)
        out = []
        for h in ranked:
            doc, meta = info[str(h.id)]
            context = str(meta.get("context", ""))
            text = str(meta.get("text", doc))
            out.append(IndexHit(
                str(h.id), str(meta.get("path", "")), float(h.score), context, text, dict(h.ranks),
                int(meta.get("start_line", 0)), int(meta.get("end_line", 0)), float(h.fused_score), h.rerank_score,
            ))
        return out
