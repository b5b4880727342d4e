"""Which files `contextual-retrieval index` reads: folder walking, text detection, hashing."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from .index_manifest import MANIFEST_NAME

__all__ = ["SourceFile", "collect_files", "file_sha256", "TEXT_EXTENSIONS", "SKIP_DIRS", "MAX_FILE_BYTES"]

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


def file_sha256(path: Path) -> str:
    """The hex SHA-256 of a file's bytes."""
    return hashlib.sha256(path.read_bytes()).hexdigest()
