"""The manifest of a `ContextualIndex` folder: which files were indexed, and how.

``manifest.json`` records the embedder, the context generator, the chunk size, the fusion
weights and, per file, its size, mtime, SHA-256 and chunk ids. It is written last by every
update (through a temporary file and `os.replace`), so it always describes a complete index.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from contextual_retrieval_core.errors import ContextualRetrievalError, InputError, NotFoundError

__all__ = ["IndexManifest", "FileEntry", "IndexMismatchError", "IndexDamagedError", "MANIFEST_NAME", "generator_identity"]

MANIFEST_NAME = "manifest.json"
FORMAT = "contextual-retrieval/index"
FORMAT_VERSION = 1


class IndexMismatchError(ContextualRetrievalError, ValueError):
    """The index was built with another embedder than the one this run would use."""


class IndexDamagedError(ContextualRetrievalError, ValueError):
    """A file of an index folder is missing, truncated or belongs to another index.

    The message names the file and the fix (re-run ``contextual-retrieval index``, or
    ``--rebuild``).
    """


@dataclass
class FileEntry:
    """One indexed file.

    Attributes:
        root: the absolute path of the argument it was found under.
        file: its absolute path.
        sha256: the hex SHA-256 of its bytes when indexed.
        size, mtime_ns: its size and modification time when indexed (a file with both unchanged is
            not even hashed again).
        chunks: its chunk ids, in order.
    """

    root: str
    file: str
    sha256: str
    size: int
    mtime_ns: int
    chunks: list[str] = field(default_factory=list)


@dataclass
class IndexManifest:
    """What one index folder holds (``manifest.json``).

    Attributes:
        embedder: {"kind": "local" | "voyage" | class name, "model": model name}.
        generator: {"name", "model", "prompt", "label"} of the context generator.
        chunk_chars: the chunk size.
        weights: (dense, BM25) fusion weights used by ``query``.
        files: doc id -> `FileEntry`.
        bm25: the folder (inside the index folder) holding the BM25 index of these chunks; each
            update writes a new one and names it here, so the manifest swap switches both at once.
        windows: the `WindowConfig` long chunks were embedded with, as a dict (`windows_setting`);
            None when every chunk is one vector.
        chunk_tokens: the embedder window (tokens) chunks were fitted to with their contexts
            (`contextualize.fit.chunk_to_fit`, `fit_chunks=True`); None: cut by `chunk_chars`
            alone (the default, or an embedder that exposes no window).
        dense: where the dense rows live: "files" (the version folder holds every row, exact
            search or an IVF index by `dense_index`'s rule; what `index` writes) or "chroma" (a
            Chroma collection, embedded in ``chroma/`` or on a server; indexes written before
            version folders held every row say nothing and are "chroma").
        checks: relative path in the version folder -> [size in bytes, CRC-32 of its bytes] of
            every file a query reads (`index.checks`), recorded at commit and verified before a
            query answers.
    """

    embedder: dict[str, str]
    generator: dict[str, str]
    chunk_chars: int
    weights: list[float]
    files: dict[str, FileEntry] = field(default_factory=dict)
    bm25: str = "bm25"
    windows: dict[str, Any] | None = None
    chunk_tokens: int | None = None
    dense: str = "chroma"
    checks: dict[str, list[int]] = field(default_factory=dict)

    @property
    def chunk_count(self) -> int:
        """Chunks in the index."""
        return sum(len(e.chunks) for e in self.files.values())

    def chunk_ids(self) -> list[str]:
        """Every chunk id, file by file."""
        return [cid for e in self.files.values() for cid in e.chunks]

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        return {"format": FORMAT, "format_version": FORMAT_VERSION, **data}

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str | os.PathLike[str] = MANIFEST_NAME) -> IndexManifest:
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise IndexDamagedError(f"{source} is not a contextual-retrieval index manifest; rebuild the index "
                                    "(contextual-retrieval index PATH... --rebuild)")
        version = data.get("format_version", 0)
        if isinstance(version, bool) or not isinstance(version, int):
            raise IndexDamagedError(f"{source} is damaged (format_version must be an integer, got "
                                    f"{type(version).__name__} {version!r}); rebuild the index "
                                    "(contextual-retrieval index PATH... --rebuild)")
        if version > FORMAT_VERSION:
            raise InputError(f"{source} was written by a newer contextual-retrieval; upgrade it, or rebuild the index (--rebuild)")
        weights = _weights(data.get("weights"), source)
        try:
            return cls(
                embedder=dict(data["embedder"]),
                generator=dict(data["generator"]),
                chunk_chars=int(data["chunk_chars"]),
                weights=weights,
                files={k: FileEntry(**v) for k, v in data["files"].items()},
                bm25=_folder_name(data.get("bm25", "bm25")),
                windows=_windows(data.get("windows")),
                chunk_tokens=None if data.get("chunk_tokens") is None else int(data["chunk_tokens"]),
                dense=_dense(data.get("dense", "chroma")),
                checks=_checks(data.get("checks") or {}),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise IndexDamagedError(f"{source} is damaged ({type(exc).__name__}: {exc}); rebuild the index "
                                    "(contextual-retrieval index PATH... --rebuild)") from exc

    @classmethod
    def read(cls, folder: str | os.PathLike[str]) -> IndexManifest:
        """The manifest of the index in `folder`; FileNotFoundError naming the fix when there is none."""
        file = Path(folder) / MANIFEST_NAME
        if not file.is_file():
            raise NotFoundError(
                f"{folder} is not a contextual-retrieval index (no {MANIFEST_NAME}); build one with: "
                f"contextual-retrieval index PATH... --index-dir {folder}"
            )
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise IndexDamagedError(f"{file} is not valid JSON ({exc}); rebuild the index "
                                    "(contextual-retrieval index PATH... --rebuild)") from exc
        return cls.from_dict(data, file)

    def write(self, folder: str | os.PathLike[str]) -> None:
        """Write ``folder/manifest.json`` atomically (temporary file, then `os.replace`)."""
        target = Path(folder) / MANIFEST_NAME
        tmp = target.with_name(MANIFEST_NAME + ".tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(json.dumps(self.to_dict(), indent=1, sort_keys=True))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)


def _dense(value: Any) -> str:
    if value not in ("files", "chroma"):
        raise InputError(f"'dense' must be \"files\" or \"chroma\", got {value!r}")
    return str(value)


def _checks(value: Any) -> dict[str, list[int]]:
    """The recorded (size, CRC-32) of each version file: a dict of names to two integers."""
    out: dict[str, list[int]] = {}
    for name, pair in dict(value).items():
        if (not isinstance(name, str) or name.startswith("/") or ".." in name.split("/") or not isinstance(pair, list) or len(pair) != 2
                or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in pair)):
            raise InputError(f"'checks' must map file names to [size, crc32], got {name!r}: {pair!r}")
        out[name] = [int(pair[0]), int(pair[1])]
    return out


def _weights(value: Any, source: str | os.PathLike[str]) -> list[float]:
    """The (dense, BM25) weights of a manifest: two finite numbers >= 0, not both 0 ([] when none
    are recorded: the query then uses the embedder's defaults); else `IndexDamagedError` naming
    `source` and the fix."""
    if value is None or value == []:
        return []
    ok = (isinstance(value, list) and len(value) == 2
          and all(isinstance(w, (int, float)) and not isinstance(w, bool) for w in value))
    weights = [float(w) for w in value] if ok else []
    if not ok or not all(math.isfinite(w) and w >= 0 for w in weights) or not any(weights):
        raise IndexDamagedError(f"{source} is damaged (weights must be two finite numbers >= 0, not both 0: "
                                f"(dense, BM25), got {value!r}); write two such numbers there, e.g. [0.8, 0.2], "
                                "or rebuild the index (contextual-retrieval index PATH... --rebuild)")
    return weights


def _windows(setting: Any) -> dict[str, Any] | None:
    from contextual_retrieval_core.dense._window_rows import windows_from_setting, windows_setting

    return windows_setting(windows_from_setting(setting))  # checked, in its one shape


def _folder_name(name: Any) -> str:
    if not isinstance(name, str) or (name and (not name.startswith("bm25") or "/" in name or "\\" in name or ".." in name)):
        raise InputError(f"bad BM25 folder name {name!r}")
    return name


def generator_identity(generator: Any) -> dict[str, str]:
    """What a manifest records of the contexts (a change re-situates every file, from the store):
    the generator's name, model, prompt and label; the contexts of any generator but the structural
    one carry the structural header (the `Contextualizer`'s default), and say so."""
    from contextual_retrieval_core.contextualize.contextualizer import is_structural_generator
    from contextual_retrieval_core.generators.base import label_of

    identity = {"name": generator.name, "model": generator.model, "prompt": generator.prompt_identity,
                "label": label_of(generator)}
    if not is_structural_generator(generator):
        identity.update(header="structural", label=identity["label"] + " + structural header")
    return identity
