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

import bisect
import hashlib
import json
import os
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from tqdm.auto import tqdm

from .bm25 import BM25Index
from .chroma import ChromaVectorIndex
from .embeddings.base import Embedder
from .ensemble import DEFAULT_RRF_K, DEFAULT_TOP_K, DEFAULT_WEIGHTS, fuse_sources, rerank_hits
from .fusion import DEFAULT_DEPTH
from .hybrid import _embed_with_progress
from .generators.base import ContextGenerator
from .rerank.base import Reranker
from .types import Chunk, Document, stable_chunk_id
from .usage import UsageReport

__all__ = [
    "ContextualIndex",
    "IndexHit",
    "IndexReport",
    "IndexMismatchError",
    "SourceFile",
    "collect_files",
    "split_text",
    "choose_embedder",
    "choose_generator",
    "weights_for",
    "choose_reranker",
    "unused_keys",
    "TEXT_EXTENSIONS",
    "SKIP_DIRS",
    "DEFAULT_CHUNK_CHARS",
    "MANIFEST_NAME",
]

MANIFEST_NAME = "manifest.json"
_FORMAT = "contextual-retrieval/index"
_FORMAT_VERSION = 1
_COLLECTION = "chunks"

#: Characters per chunk: about 200 tokens of prose, so a chunk and its context fit the local
#: embedder's 256-token window.
DEFAULT_CHUNK_CHARS = 800
#: Files larger than this are skipped (they are usually generated: lock files, minified code).
MAX_FILE_BYTES = 1_000_000

#: Extensions indexed when walking a folder (a file named explicitly is indexed whatever its name,
#: if it is text).
TEXT_EXTENSIONS = frozenset(
    ".txt .text .md .markdown .mdx .rst .rest .adoc .org .tex .csv .tsv "
    ".py .pyi .ipynb .rb .rs .go .js .jsx .mjs .cjs .ts .tsx .java .kt .kts .scala .swift .c .h .cc "
    ".cpp .cxx .hh .hpp .hxx .cs .php .lua .pl .r .jl .sh .bash .zsh .sql .html .css .scss .vue .svelte "
    ".toml .yaml .yml .json .ini .cfg .proto .graphql .dart .ex .exs .erl .hs .ml .clj .el .vim .zig .nim".split()
)
#: Folder names never walked into (hidden folders are skipped as well).
SKIP_DIRS = frozenset({"node_modules", "__pycache__", "venv", "site-packages", "dist-packages"})

_CODE_EXTS = frozenset(
    ".py .pyi .rb .rs .go .js .jsx .mjs .cjs .ts .tsx .java .kt .kts .scala .swift .c .h .cc .cpp .cxx "
    ".hh .hpp .hxx .cs .php .lua .pl .r .jl .sh .bash .zsh .sql .dart .ex .exs .erl .hs .ml .clj .zig .nim".split()
)
_HEADING = re.compile(r"(#{1,6} |[=\-~^*+#]{3,}\s*$)")
_CODE_DEF = re.compile(
    r"(?:@|def |async def |class |fn |pub |impl |func |function |export |interface |struct |enum |type |"
    r"trait |mod |module |public |private |protected |static |const |let |var |package |namespace |#\[)"
)


class IndexMismatchError(ValueError):
    """The index was built with another embedder than the one this run would use."""


# ----------------------------------------------------------------------------------------------
# chunking
# ----------------------------------------------------------------------------------------------


def split_text(text: str, *, max_chars: int = DEFAULT_CHUNK_CHARS, code: bool = False) -> list[tuple[int, str]]:
    """Split `text` into chunks of at most `max_chars`, each occurring verbatim in `text`.

    Cuts go at line starts, preferring (best first) a heading or, for `code`, a top-level
    definition after a blank line; then any paragraph break; then any line; a single line longer
    than `max_chars` is cut at a space. Chunks are stripped of surrounding whitespace and empty
    ones are dropped.

    Returns:
        (offset in `text` of the chunk's first character, chunk text) pairs, in order.

    Example:
        >>> text = "# A\\n\\n" + "first paragraph. " * 3 + "\\n\\n# B\\n\\n" + "second paragraph. " * 3
        >>> [chunk[:20] for _, chunk in split_text(text, max_chars=80)]
        ['# A\\n\\nfirst paragraph', '# B\\n\\nsecond paragrap']
    """
    if max_chars < 50:
        raise ValueError(f"max_chars must be at least 50, got {max_chars}")
    n = len(text)
    starts = [0] + [m.end() for m in re.finditer("\n", text) if m.end() < n]
    quality = []
    for i, s in enumerate(starts):
        line = text[s : starts[i + 1] if i + 1 < len(starts) else n]
        prev_blank = i > 0 and not text[starts[i - 1] : s].strip()
        strong = _CODE_DEF.match(line.lstrip()) if code else _HEADING.match(line)
        quality.append(3 if strong and (prev_blank or not code) else 2 if prev_blank else 1)
    min_chars = max_chars // 3
    out: list[tuple[int, str]] = []
    pos = 0
    while pos < n:
        end = n
        if n - pos > max_chars:
            lo = bisect.bisect_right(starts, pos + min_chars)
            hi = bisect.bisect_right(starts, pos + max_chars)
            if lo < hi:
                best = max(range(lo, hi), key=lambda j: (quality[j], starts[j]))
                end = starts[best]
            else:
                space = text.rfind(" ", pos + min_chars, pos + max_chars)
                end = space + 1 if space > 0 else pos + max_chars
        piece = text[pos:end]
        stripped = piece.strip()
        if stripped:
            out.append((pos + piece.index(stripped[0]), stripped))
        pos = end
    return out


# ----------------------------------------------------------------------------------------------
# files
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SourceFile:
    """A file to index.

    Attributes:
        path: the absolute path.
        doc_id: the id shown in results and contexts: the folder argument's name plus the path
            inside it ("docs/setup.md"), or the file name for a file argument.
        root: the absolute path of the argument the file was found under.
    """

    path: Path
    doc_id: str
    root: Path


def collect_files(paths: Sequence[str | os.PathLike[str]], *, skip: Sequence[Path] = ()) -> tuple[list[SourceFile], int]:
    """The text files under `paths` (folders are walked; hidden, virtualenv, build-cache folders
    and contextual-retrieval index folders are skipped).

    Returns:
        the files (sorted by doc id) and how many were skipped as binary or too large.
    """
    if isinstance(paths, (str, os.PathLike)):
        raise ValueError("pass a list of paths: collect_files([path, ...])")
    if not paths:
        raise ValueError("no paths given: pass at least one file or folder to index")
    skip_resolved = {Path(p).resolve() for p in skip}
    found: dict[str, SourceFile] = {}
    skipped = 0
    for raw in paths:
        root = Path(raw).expanduser()
        if not root.exists():
            raise FileNotFoundError(f"{raw} does not exist; pass existing files or folders to index")
        root = root.resolve()
        if root.is_file():
            candidates = [(root, root.name)]
        else:
            candidates = []
            prefix = root.name
            for folder, dirs, files in os.walk(root):
                here = Path(folder)
                dirs[:] = sorted(
                    d for d in dirs
                    if not d.startswith(".") and d not in SKIP_DIRS and not d.endswith(".egg-info")
                    and (here / d).resolve() not in skip_resolved and not (here / d / MANIFEST_NAME).is_file()
                )
                for name in sorted(files):
                    file = here / name
                    if name.startswith(".") or file.suffix.lower() not in TEXT_EXTENSIONS:
                        continue
                    rel = file.relative_to(root).as_posix()
                    candidates.append((file, f"{prefix}/{rel}" if prefix else rel))
        for file, doc_id in candidates:
            if not _is_text(file):
                skipped += 1
                continue
            other = found.get(doc_id)
            if other is not None and other.path != file:
                raise ValueError(
                    f"{other.path} and {file} would both be indexed as {doc_id!r}; index folders with "
                    "different names, or pass their common parent folder instead"
                )
            found[doc_id] = SourceFile(file, doc_id, root)
    return [found[k] for k in sorted(found)], skipped


def _is_text(path: Path) -> bool:
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            return False
        with path.open("rb") as fh:
            head = fh.read(8192)
    except OSError:
        return False
    return b"\x00" not in head


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ----------------------------------------------------------------------------------------------
# reports and hits
# ----------------------------------------------------------------------------------------------


@dataclass
class IndexReport:
    """What one `ContextualIndex.update` did.

    Attributes:
        files_new, files_changed, files_unchanged, files_removed: files by what happened to them.
        files_skipped: binary or too-large files left out.
        chunks_added, chunks_removed, chunks_total: chunk counts (total: in the index afterwards).
        embedded: texts sent to the embedder; embedding_cache_hits: texts served by its cache.
        contexts: the contextualizer's `UsageReport` (None when there was nothing to situate).
        note: why every file was re-situated, when the generator or chunk size changed.
        elapsed_s: wall time.
    """

    files_new: int = 0
    files_changed: int = 0
    files_unchanged: int = 0
    files_removed: int = 0
    files_skipped: int = 0
    chunks_added: int = 0
    chunks_removed: int = 0
    chunks_total: int = 0
    embedded: int = 0
    embedding_cache_hits: int = 0
    contexts: UsageReport | None = None
    note: str | None = None
    elapsed_s: float = 0.0

    @property
    def generated(self) -> int:
        """Contexts generated in this run (0 when nothing was situated)."""
        return self.contexts.generated if self.contexts else 0

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data."""
        data = {k: v for k, v in self.__dict__.items() if k != "contexts"}
        data["contexts"] = self.contexts.to_dict() if self.contexts else None
        return data

    def format(self) -> str:
        """A human-readable summary, as the CLI prints it."""
        lines = []
        if self.note:
            lines.append(self.note)
        lines.append(
            f"files: {self.files_new} new, {self.files_changed} changed, {self.files_unchanged} unchanged, "
            f"{self.files_removed} removed" + (f" ({self.files_skipped} binary or too large, skipped)" if self.files_skipped else "")
        )
        lines.append(
            f"chunks: {self.chunks_added} added, {self.chunks_removed} removed, {self.chunks_total} in the index; "
            f"embeddings: {self.embedded} computed, {self.embedding_cache_hits} from the cache"
        )
        if self.contexts is not None:
            lines.append(self.contexts.format())
        else:
            lines.append("contexts: nothing to situate (no generation requests)")
        lines.append(f"({self.elapsed_s:.2f} s)")
        return "\n".join(lines)


@dataclass(frozen=True)
class IndexHit:
    """One query result.

    Attributes:
        id: the chunk id; path: the file's doc id; score: the final score (the reranker's when
        reranked, else the fused score); context: the situating context; text: the chunk's text;
        ranks: 1-based rank per source ("dense", "bm25"), None where it missed; start_line,
        end_line: where the chunk is in the file (1-based); fused_score, rerank_score.
    """

    id: str
    path: str
    score: float
    context: str
    text: str
    ranks: dict[str, int | None] = field(default_factory=dict)
    start_line: int = 0
    end_line: int = 0
    fused_score: float = 0.0
    rerank_score: float | None = None


# ----------------------------------------------------------------------------------------------
# the index
# ----------------------------------------------------------------------------------------------


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
        self.manifest = self.read_manifest(self.path) if (self.path / MANIFEST_NAME).is_file() else None
        if self.manifest is not None:
            built = self.manifest["embedder"]["model"]
            if built != embedder.model_name:
                raise IndexMismatchError(
                    f"the index {self.path} was built with the embedder {built!r}, not {embedder.model_name!r}; "
                    f"use the same embedder (contextual-retrieval index --embedder {self.manifest['embedder']['kind']}), "
                    "or rebuild the index (--rebuild) or write a new one (--index-dir)"
                )

    # -- manifest -------------------------------------------------------------------------------

    @staticmethod
    def read_manifest(path: str | os.PathLike[str]) -> dict[str, Any]:
        """The manifest of the index at `path`; FileNotFoundError naming the fix when there is none."""
        file = Path(path) / MANIFEST_NAME
        if not file.is_file():
            raise FileNotFoundError(
                f"{path} is not a contextual-retrieval index (no {MANIFEST_NAME}); build one with: "
                f"contextual-retrieval index PATH... --index-dir {path}"
            )
        data = json.loads(file.read_text(encoding="utf-8"))
        if data.get("format") != _FORMAT or data.get("format_version", 0) > _FORMAT_VERSION:
            raise ValueError(f"{file} was not written by this version of contextual-retrieval; rebuild the index (--rebuild)")
        return data

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

    def _write_manifest(self, manifest: dict[str, Any]) -> None:
        tmp = self.path / (MANIFEST_NAME + ".tmp")
        tmp.write_text(json.dumps(manifest, indent=1, sort_keys=True), encoding="utf-8")
        os.replace(tmp, self.path / MANIFEST_NAME)
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
        old = self.manifest or {}
        old_files: dict[str, dict[str, Any]] = dict(old.get("files", {}))
        gen_id = self._generator_identity()
        redo_all = False
        if old:
            if old.get("generator") != gen_id:
                redo_all = True
                report.note = (
                    f"contexts: the index was built with {old['generator'].get('label')!r}, this run uses "
                    f"{gen_id['label']!r}: every file is re-situated"
                )
            elif old.get("chunk_chars") != self.chunk_chars:
                redo_all = True
                report.note = f"chunk size changed ({old.get('chunk_chars')} -> {self.chunk_chars}): every file is re-chunked"

        todo: list[tuple[SourceFile, str, os.stat_result]] = []
        new_files: dict[str, dict[str, Any]] = {}
        for f in tqdm(files, desc="checking files", unit="file", disable=not show_progress, leave=False):
            st = f.path.stat()
            entry = old_files.get(f.doc_id)
            if entry is not None and not redo_all and entry["size"] == st.st_size and entry["mtime_ns"] == st.st_mtime_ns:
                new_files[f.doc_id] = entry
                report.files_unchanged += 1
                continue
            digest = _sha256(f.path)
            if entry is not None and not redo_all and entry["sha256"] == digest:
                new_files[f.doc_id] = {**entry, "size": st.st_size, "mtime_ns": st.st_mtime_ns}
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
                    removed_ids.extend(entry["chunks"])
            elif entry["root"] in roots:
                report.files_removed += 1
                removed_ids.extend(entry["chunks"])
            else:
                new_files[doc_id] = entry  # indexed from another path: kept
        manifest = {
            "format": _FORMAT,
            "format_version": _FORMAT_VERSION,
            "embedder": {"kind": _embedder_kind(self.embedder), "model": self.embedder.model_name},
            "generator": gen_id,
            "chunk_chars": self.chunk_chars,
            "weights": list(self.weights),
            "files": new_files,
        }
        if not todo and not removed_ids:
            report.chunks_total = sum(len(e["chunks"]) for e in new_files.values())
            if manifest != old:
                self.path.mkdir(parents=True, exist_ok=True)
                self._write_manifest(manifest)  # mtimes refreshed: the next run skips hashing
            report.elapsed_s = time.perf_counter() - started
            return report

        self.path.mkdir(parents=True, exist_ok=True)
        vectors = self._vectors()
        keep = {cid for e in new_files.values() for cid in e["chunks"]}
        stale = [cid for cid in dict.fromkeys(removed_ids) if cid not in keep]
        vectors.delete(stale)
        report.chunks_removed = len(stale)

        documents, chunks, spans = [], [], {}
        for f, digest, st in todo:
            text = f.path.read_bytes().decode("utf-8", errors="replace")
            pieces = split_text(text, max_chars=self.chunk_chars, code=f.path.suffix.lower() in _CODE_EXTS)
            ids = []
            for i, (offset, piece) in enumerate(pieces):
                cid = stable_chunk_id(f.doc_id, i, piece)
                ids.append(cid)
                chunks.append(Chunk(cid, f.doc_id, piece, i))
                first = text.count("\n", 0, offset) + 1
                spans[cid] = (first, first + piece.count("\n"))
            if pieces:
                documents.append(Document(f.doc_id, text, {"file_path": f.doc_id}))
            new_files[f.doc_id] = {
                "root": str(f.root), "file": str(f.path), "sha256": digest,
                "size": st.st_size, "mtime_ns": st.st_mtime_ns, "chunks": ids,
            }
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
                _embed_with_progress(cached, texts, batch_size, show_progress),
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
        report.chunks_total = sum(len(e["chunks"]) for e in new_files.values())
        self._write_manifest(manifest)
        report.elapsed_s = time.perf_counter() - started
        return report

    def _rebuild_bm25(self, files: dict[str, dict[str, Any]]) -> None:
        vectors = self._vectors()
        collection = vectors.collection
        wanted = [cid for e in files.values() for cid in e["chunks"]]
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
        return sum(len(e["chunks"]) for e in self.manifest["files"].values())

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


def choose_embedder(kind: str = "auto", model: str | None = None) -> Embedder:
    """The embedder for `kind`: "local" (offline MiniLM), "voyage" (VOYAGE_API_KEY), or "auto"
    (Voyage when VOYAGE_API_KEY is set and voyageai installed, else local)."""
    from ._sdk import env_key

    if kind == "auto":
        kind = "voyage" if env_key("VOYAGE_API_KEY") and _installed("voyageai") else "local"
    if kind == "local":
        from .embeddings.minilm import LocalMiniLMEmbedder

        return LocalMiniLMEmbedder()
    if kind == "voyage":
        from .embeddings.voyage import VoyageEmbedder

        return VoyageEmbedder(model or "voyage-3.5")
    raise ValueError(f"unknown embedder {kind!r}; choose auto, local or voyage")


def weights_for(embedder: Embedder) -> tuple[float, float]:
    """The (dense, BM25) fusion weights for `embedder`: the cookbook's 0.8 / 0.2 for Voyage (a
    strong hosted embedder, also behind a `CachedEmbedder`), else the defaults (0.5 / 0.5: the local
    embedder is no stronger than BM25)."""
    if _embedder_kind(embedder) == "voyage":
        return (0.8, 0.2)
    return (float(DEFAULT_WEIGHTS[0]), float(DEFAULT_WEIGHTS[1]))


def choose_generator(kind: str = "auto", model: str | None = None) -> ContextGenerator:
    """The context generator for `kind`: "structural" (offline, no LLM), "anthropic" (Claude,
    ANTHROPIC_API_KEY), or "auto" (Claude when ANTHROPIC_API_KEY is set and anthropic installed,
    else structural)."""
    from ._sdk import env_key

    if kind == "auto":
        kind = "anthropic" if env_key("ANTHROPIC_API_KEY") and _installed("anthropic") else "structural"
    if kind == "structural":
        from .generators.structural import StructuralContextGenerator

        return StructuralContextGenerator()
    if kind == "anthropic":
        from .generators.anthropic import AnthropicContextGenerator

        return AnthropicContextGenerator(model or "claude-haiku-4-5")
    raise ValueError(f"unknown context generator {kind!r}; choose auto, structural or anthropic")


def choose_reranker(kind: str = "auto") -> Reranker | None:
    """The reranker for `kind`: "none", "cohere" (COHERE_API_KEY), "voyage" (VOYAGE_API_KEY), or
    "auto" (Cohere when COHERE_API_KEY or CO_API_KEY is set and cohere installed, else none)."""
    from ._sdk import env_key

    if kind == "auto":
        kind = "cohere" if env_key("COHERE_API_KEY", "CO_API_KEY") and _installed("cohere") else "none"
    if kind == "none":
        return None
    if kind == "cohere":
        from .rerank.cohere import CohereReranker

        return CohereReranker()
    if kind == "voyage":
        from .rerank.voyage import VoyageReranker

        return VoyageReranker()
    raise ValueError(f"unknown reranker {kind!r}; choose auto, none, cohere or voyage")


def _installed(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def unused_keys() -> list[str]:
    """Notes for API keys that "auto" choices ignore because their SDK is not installed."""
    from ._sdk import env_key

    notes = []
    for keys, module, extra in ((("ANTHROPIC_API_KEY",), "anthropic", "anthropic"), (("VOYAGE_API_KEY",), "voyageai", "voyage"),
                                (("COHERE_API_KEY", "CO_API_KEY"), "cohere", "cohere")):
        if env_key(*keys) and not _installed(module):
            notes.append(f"{keys[0]} is set but the {module} SDK is not installed, so it is not used: "
                         f"pip install 'contextual-retrieval-kit[{extra}]'")
    return notes


def _embedder_kind(embedder: Embedder) -> str:
    inner = getattr(embedder, "embedder", embedder)
    name = type(inner).__name__
    return {"LocalMiniLMEmbedder": "local", "VoyageEmbedder": "voyage"}.get(name, name)
