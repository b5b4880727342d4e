"""What an index update has to do: which files are new, changed or unchanged, read and chunked.

`ContextualIndex.update` calls `read_changes` with the files found and the previous manifest's
entries; it returns the new entries and the chunks to situate and embed.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from contextual_retrieval_core.chunking.budget import TokenWindow
from contextual_retrieval_core.chunking.code_outline import parser_fallback
from contextual_retrieval_core.contextualize.fit import chunk_to_fit
from contextual_retrieval_core.errors import InputError
from contextual_retrieval_core.index.files import SourceFile, UndecodableFileError, file_sha256, read_source_text
from contextual_retrieval_core.index.manifest import FileEntry
from contextual_retrieval_core.index.report import IndexReport
from contextual_retrieval_core.types import Chunk, Document, stable_chunk_id

__all__ = ["check_not_nested", "read_changes"]


def check_not_nested(index_dir: str | os.PathLike[str], paths: Sequence[str | os.PathLike[str]]) -> None:
    """ValueError when the index folder is (inside) one of `paths`, or one of them is inside it."""
    folder = Path(index_dir).expanduser().resolve()
    for raw in paths:
        p = Path(raw).expanduser().resolve()
        if folder == p or p in folder.parents:
            raise InputError(f"the index folder {index_dir} is inside {raw}, which is to be indexed: the index "
                             "would index itself; put the index elsewhere (--index-dir OUTSIDE)")
        if folder in p.parents:
            raise InputError(f"{raw} is inside the index folder {index_dir}; index files from outside it")


def read_changes(
    files: Sequence[SourceFile],
    old_files: dict[str, FileEntry],
    redo_all: bool,
    chunk_chars: int,
    report: IndexReport,
    show_progress: bool,
    *,
    window: TokenWindow | None = None,
    generator: Any = None,
) -> tuple[dict[str, FileEntry], list[Document], list[Chunk], dict[str, tuple[int, int]]]:
    """Sort `files` into unchanged (size and mtime, else SHA-256, as in `old_files`) and to do;
    read and chunk the latter (undecodable ones go to ``report.skipped``), each chunk fitting
    `window` with the context `generator` will give it (`chunk_to_fit`; no window: characters only).

    Returns:
        the entries of every file found and readable (unchanged ones as they were), the Documents
        and Chunks of the new and changed files, and each new chunk's (first, last) line.
    """
    todo: list[tuple[SourceFile, str, os.stat_result]] = []
    entries: dict[str, FileEntry] = {}
    for f in tqdm(files, desc="checking files", unit="file", disable=not show_progress, leave=False):
        st = f.path.stat()
        entry = old_files.get(f.doc_id)
        if entry is not None and not redo_all and entry.size == st.st_size and entry.mtime_ns == st.st_mtime_ns:
            entries[f.doc_id] = entry
            report.files_unchanged += 1
            continue
        digest = file_sha256(f.path)
        if entry is not None and not redo_all and entry.sha256 == digest:
            entries[f.doc_id] = dataclasses.replace(entry, size=st.st_size, mtime_ns=st.st_mtime_ns)
            report.files_unchanged += 1
            continue
        todo.append((f, digest, st))

    documents: list[Document] = []
    chunks: list[Chunk] = []
    spans: dict[str, tuple[int, int]] = {}
    progress = tqdm(total=sum(st.st_size for _, _, st in todo), desc="chunking", unit="B", unit_scale=True,
                    disable=not show_progress, leave=False)
    for f, digest, st in todo:
        try:
            text, encoding, payloads = read_source_text(f.path)
        except UndecodableFileError as exc:
            report.skipped.append((str(f.path), f"undecodable: {str(exc).split(': ', 1)[1]}"))
            progress.update(st.st_size)
            continue
        if encoding != "utf-8":
            report.decoded.append((f.doc_id, encoding))
        report.payloads_omitted += len(payloads)
        if f.doc_id in old_files:
            report.files_changed += 1
        else:
            report.files_new += 1
        pieces = chunk_to_fit(Document(f.doc_id, text), window, generator=generator, max_chars=chunk_chars, path=str(f.path))
        fallback = parser_fallback(f.path)
        if fallback:
            report.plain_text_code[fallback] = report.plain_text_code.get(fallback, 0) + 1
        ids = []
        first, counted = 1, 0  # lines counted once a file: chunks come in order
        for i, (offset, piece) in enumerate(pieces):
            cid = stable_chunk_id(f.doc_id, i, piece)
            ids.append(cid)
            chunks.append(Chunk(cid, f.doc_id, piece, i))
            first += text.count("\n", counted, offset)
            counted = offset
            spans[cid] = (first, first + piece.count("\n"))
        if pieces:
            documents.append(Document(f.doc_id, text, {"file_path": f.doc_id}))
        elif not text.strip():
            report.empty.append(f.doc_id)
        entries[f.doc_id] = FileEntry(str(f.root), str(f.path), digest, st.st_size, st.st_mtime_ns, ids)
        progress.update(st.st_size)
    progress.close()
    return entries, documents, chunks, spans
