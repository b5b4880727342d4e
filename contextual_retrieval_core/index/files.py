"""Which files `contextual-retrieval index` reads: folder walking, text detection, decoding.

Decoding rule (`read_text`): UTF-8 (a leading BOM dropped); else, for a file that starts with a
UTF-16 byte-order mark, UTF-16; else Windows-1252 (cp1252, a superset of the printable Latin-1
range). A file that is none of these (cp1252 leaves five byte values undefined) is skipped as
undecodable. Files not read as UTF-8 are named in the index report with the encoding used.

What is chunked (`read_source_text`): the decoded text with its base64 payloads (a notebook's
images and attachments, ``data:`` URIs) replaced by a short placeholder (`chunking.payloads`),
which the index counts in its report.
"""

from __future__ import annotations

import hashlib
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from contextual_retrieval_core.checks import positive_int
from contextual_retrieval_core.chunking._languages import EXTENSIONS
from contextual_retrieval_core.chunking.payloads import Payload, omit_payloads
from contextual_retrieval_core.errors import ContextualRetrievalError, InputError, NotFoundError
from contextual_retrieval_core.index.manifest import MANIFEST_NAME

__all__ = ["SourceFile", "SkippedFile", "FileScan", "collect_files", "read_text", "read_source_text", "UndecodableFileError", "file_sha256",
           "TEXT_EXTENSIONS", "SKIP_DIRS", "MAX_FILE_BYTES"]

#: Files larger than this are skipped by default (they are usually generated: lock files, minified
#: code, data dumps); `contextual-retrieval index --max-file-size MB` changes it.
MAX_FILE_BYTES = 1_000_000

#: Extensions indexed when walking a folder (a file named explicitly is indexed whatever its name,
#: if it is text).
TEXT_EXTENSIONS = frozenset(EXTENSIONS)  # the one table, `_languages.EXTENSIONS`
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


@dataclass(frozen=True)
class SkippedFile:
    """A file left out of the index, and why.

    Attributes:
        path: its path; reason: "too large (30.0 MB > 1.0 MB)", "binary (NUL bytes)",
        "undecodable (...)" or "unreadable (...)".
    """

    path: Path
    reason: str


@dataclass
class FileScan:
    """What `collect_files` found.

    Attributes:
        files: the text files to index, sorted by doc id.
        skipped: files with an indexed extension left out (too large, binary, unreadable).
        other_extensions: how many files of each extension that is not indexed were seen.
    """

    files: list[SourceFile] = field(default_factory=list)
    skipped: list[SkippedFile] = field(default_factory=list)
    other_extensions: Counter = field(default_factory=Counter)

    def describe(self) -> str:
        """One sentence on what was seen but not indexed (for the "nothing to index" error)."""
        parts = []
        if self.skipped:
            parts.append("skipped: " + "; ".join(f"{s.path} ({s.reason})" for s in self.skipped[:10])
                         + (f"; and {len(self.skipped) - 10} more" if len(self.skipped) > 10 else ""))
        if self.other_extensions:
            common = ", ".join(f"{ext or '(no extension)'} ({n})" for ext, n in self.other_extensions.most_common(8))
            parts.append(f"{sum(self.other_extensions.values())} files of other types, not indexed: {common}")
        return "; ".join(parts) if parts else "no files at all"


def collect_files(
    paths: Sequence[str | os.PathLike[str]],
    *,
    skip: Sequence[Path] = (),
    max_file_bytes: int = MAX_FILE_BYTES,
) -> FileScan:
    """The text files under `paths` (folders are walked; hidden, virtualenv, build-cache folders
    and contextual-retrieval index folders are skipped; in a folder, only `TEXT_EXTENSIONS`).

    Args:
        paths: files and folders.
        skip: folders never walked into.
        max_file_bytes: larger files are skipped (and named in `FileScan.skipped`).
    """
    if isinstance(paths, (str, os.PathLike)):
        raise InputError("pass a list of paths: collect_files([path, ...])")
    if not paths:
        raise InputError("no paths given: pass at least one file or folder to index")
    positive_int("max_file_bytes", max_file_bytes)
    skip_resolved = {Path(p).resolve() for p in skip}
    found: dict[str, SourceFile] = {}
    scan = FileScan()
    for raw in paths:
        root = Path(raw).expanduser()
        if not root.exists():
            raise NotFoundError(f"{raw} does not exist; pass existing files or folders to index")
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
                    if name.startswith("."):
                        continue
                    if file.suffix.lower() not in TEXT_EXTENSIONS:
                        scan.other_extensions[file.suffix.lower()] += 1
                        continue
                    rel = file.relative_to(root).as_posix()
                    candidates.append((file, f"{prefix}/{rel}" if prefix else rel))
        for file, doc_id in candidates:
            reason = _skip_reason(file, max_file_bytes)
            if reason:
                scan.skipped.append(SkippedFile(file, reason))
                continue
            other = found.get(doc_id)
            if other is not None and other.path != file:
                raise InputError(
                    f"{other.path} and {file} would both be indexed as {doc_id!r}; index folders with "
                    "different names, or pass their common parent folder instead"
                )
            found[doc_id] = SourceFile(file, doc_id, root)
    scan.files = [found[k] for k in sorted(found)]
    return scan


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 100_000 else f"{n / 1e3:.1f} KB"


def _skip_reason(path: Path, max_file_bytes: int) -> str | None:
    try:
        size = path.stat().st_size
        if size > max_file_bytes:
            return f"too large: {_mb(size)} > {_mb(max_file_bytes)}; raise --max-file-size to index it"
        with path.open("rb") as fh:
            head = fh.read(8192)
    except OSError as exc:
        return f"unreadable: {exc.strerror or exc}"
    if head.startswith(_UTF16_BOMS):
        return None
    return "binary (NUL bytes)" if b"\x00" in head else None


_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


class UndecodableFileError(ContextualRetrievalError, ValueError):
    """A file is neither UTF-8, UTF-16 with a byte-order mark, nor cp1252."""


def read_text(path: Path) -> tuple[str, str]:
    """A file's text and the encoding it was read with, by the module's decoding rule.

    Returns:
        (text, encoding): encoding is "utf-8", "utf-16" or "cp1252".

    Raises:
        UndecodableFileError: naming the file and the first undecodable byte's offset.
    """
    data = path.read_bytes()
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        pass
    if data.startswith(_UTF16_BOMS):
        try:
            return data.decode("utf-16"), "utf-16"
        except UnicodeDecodeError as exc:
            raise UndecodableFileError(f"{path}: starts with a UTF-16 byte-order mark but is not UTF-16 "
                                       f"(byte {exc.start}); convert it to UTF-8") from exc
    try:
        return data.decode("cp1252"), "cp1252"
    except UnicodeDecodeError as exc:
        raise UndecodableFileError(f"{path}: not UTF-8, UTF-16 or cp1252 (byte 0x{data[exc.start]:02x} at "
                                   f"offset {exc.start}); convert it to UTF-8") from exc


def read_source_text(path: Path) -> tuple[str, str, list[Payload]]:
    """The text the index chunks for a file: `read_text`'s, with base64 payloads replaced by a
    placeholder (`chunking.payloads.omit_payloads`), the document and its chunks alike.

    Returns:
        (text, encoding, the payloads replaced).

    Raises:
        UndecodableFileError: as `read_text`.
    """
    text, encoding = read_text(path)
    text, payloads = omit_payloads(text, path.name)
    return text, encoding, payloads


def file_sha256(path: Path) -> str:
    """The hex SHA-256 of a file's bytes."""
    return hashlib.sha256(path.read_bytes()).hexdigest()
