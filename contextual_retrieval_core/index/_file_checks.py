"""Sizes and checksums of a version folder's files: damage is found before a query answers.

At commit, an update records the size and CRC-32 of every file in the new version folder in the
manifest (`IndexManifest.checks`). Before a query answers from a version, its files are checked
against the record: every size always, and every checksum while the folder is at most
`FULL_CHECK_BYTES`; a larger folder has its small files
(metadata, ids, BM25 statistics) checked in full and its large arrays by size, and the range
checks of the loaders (norms, term maxima, unit rows) cover the rest. `index` checks every byte
before it reuses a version, and `index --check` does so on request. A file that is missing, has
another size or another checksum is an `IndexDamagedError` naming it and the fix.

CRC-32 finds damage (a zeroed block, a truncated or swapped file), not tampering: the folder is
the user's own, as the files it indexes are.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from pathlib import Path

from contextual_retrieval_core.index.manifest import IndexDamagedError

__all__ = ["FULL_CHECK_BYTES", "SMALL_FILE_BYTES", "record_files", "verify_files"]

#: up to this many bytes in a version folder, every query-time check reads every byte
FULL_CHECK_BYTES = 256 * 1024 * 1024
#: files up to this size are checked in full at every load, whatever the folder's size
SMALL_FILE_BYTES = 4 * 1024 * 1024
_BLOCK = 4 * 1024 * 1024


def _crc(file: Path) -> int:
    crc = 0
    with open(file, "rb") as fh:
        while block := fh.read(_BLOCK):
            crc = zlib.crc32(block, crc)
    return crc


def record_files(folder: Path) -> dict[str, list[int]]:
    """[size, CRC-32] of every file under `folder`, by path relative to it (``/``-separated)."""
    return {p.relative_to(folder).as_posix(): [p.stat().st_size, _crc(p)]
            for p in sorted(folder.rglob("*")) if p.is_file()}


def verify_files(folder: Path, recorded: Mapping[str, list[int]], *, fix: str, full: bool = False) -> None:
    """Check `folder`'s files against `recorded` (`record_files` at commit); `full`: every
    checksum, else as the module says. Raises `IndexDamagedError` naming the first bad file."""
    sizes = {}
    for name, (size, _) in recorded.items():
        file = folder / name
        try:
            sizes[name] = file.stat().st_size
        except FileNotFoundError:
            raise IndexDamagedError(f"{file} is missing; {fix}") from None
        except OSError as exc:
            raise IndexDamagedError(f"{file} cannot be read ({exc.strerror or exc}); {fix}") from None
        if sizes[name] != size:
            raise IndexDamagedError(f"{file} is damaged ({sizes[name]} bytes, {size} when written: truncated, grown or "
                                    f"replaced); {fix}")
    every = full or sum(sizes.values()) <= FULL_CHECK_BYTES
    for name, (size, crc) in recorded.items():
        if every or size <= SMALL_FILE_BYTES:
            file = folder / name
            try:
                got = _crc(file)
            except OSError as exc:
                raise IndexDamagedError(f"{file} cannot be read ({exc.strerror or exc}); {fix}") from None
            if got != crc:
                raise IndexDamagedError(f"{file} is damaged (its checksum differs from the one recorded when it was "
                                        f"written: changed bytes, or a copy from another index); {fix}")
