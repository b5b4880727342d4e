"""Disk space for an index update: checked before anything is generated or written, and a full
disk met mid-update named with the folder and the space needed.

An update writes new rows beside the old ones and switches the manifest last, so a write that
fails for space leaves the previous index whole; `UpdateSpace.errors` turns that failure (ENOSPC,
or SQLite's "database or disk is full" from Chroma, the embedding cache or the context store) into
`IndexFullError`, naming the folder, the space the update needs and the space free.
"""

from __future__ import annotations

import errno
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from contextual_retrieval_core.errors import ContextualRetrievalError
from contextual_retrieval_core.store._space import mb
from contextual_retrieval_core.store.errors import is_disk_full

__all__ = ["IndexFullError", "UpdateSpace", "BYTES_PER_NEW_CHUNK"]

#: what one added chunk takes in an index folder: its Chroma row (vector, text, metadata, full-text
#: entries), its embedding-cache row, its stored context, with room to spare
BYTES_PER_NEW_CHUNK = 16 * 1024
#: the version folder is written whole on every update: bytes per indexed chunk for its BM25 index
#: (about 512) and query snapshot (a vector of up to 1,024 float32, the chunk's text and metadata)
_VERSION_PER_CHUNK = 8 * 1024
#: journals and the vector index's growth
_HEADROOM = 1024 * 1024


class IndexFullError(ContextualRetrievalError, OSError):
    """The disk holding an index folder is full (errno ENOSPC): the message names the folder, the
    space the update needs and the space free; the previous index is unchanged."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.errno = errno.ENOSPC


class UpdateSpace:
    """The disk space of one update of the index folder `folder`.

    Example:
        >>> import tempfile
        >>> space = UpdateSpace(Path(tempfile.gettempdir()))
        >>> space.needed(new_chunks=100, total_chunks=1000) == 100 * BYTES_PER_NEW_CHUNK + 1000 * 8 * 1024 + 1024 * 1024
        True
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        #: bytes this update was estimated to need (set by `check`)
        self.estimate: int | None = None

    @staticmethod
    def needed(new_chunks: int, total_chunks: int) -> int:
        """Bytes an update adding `new_chunks` to an index of `total_chunks` needs, about."""
        return new_chunks * BYTES_PER_NEW_CHUNK + total_chunks * _VERSION_PER_CHUNK + _HEADROOM

    def free(self) -> int:
        """Bytes free on the disk holding the folder (or its nearest existing parent)."""
        folder = self.folder
        while not folder.exists() and folder != folder.parent:
            folder = folder.parent
        return shutil.disk_usage(folder).free

    def check(self, new_chunks: int, total_chunks: int) -> None:
        """Raise `IndexFullError` unless the disk holds the update (before anything is generated,
        embedded or written)."""
        self.estimate = self.needed(new_chunks, total_chunks)
        free = self.free()
        if free < self.estimate:
            raise IndexFullError(self._message(free, f"adding {new_chunks} chunks needs about {mb(self.estimate)}",
                                               "nothing was generated or written"))

    @contextmanager
    def errors(self) -> Iterator[None]:
        """A write that fails for space raises `IndexFullError` naming the folder and the space."""
        try:
            yield
        except IndexFullError:
            raise
        except Exception as exc:
            if not is_disk_full(exc):
                raise
            need = f"this update needs about {mb(self.estimate)}" if self.estimate else "this update needs more space"
            raise IndexFullError(self._message(self.free(), need, f"it stopped at: {exc}")) from exc

    def _message(self, free: int, need: str, what: str) -> str:
        return (f"no space left on the disk holding the index {self.folder} ({mb(free)} free): {need}; {what}. "
                "The previous index is unchanged and can be queried — free some space and run the update again")
