"""Argument checks shared by every query path: one function per kind of setting.

Each raises with the parameter named and the fix, so a bad value fails where it is passed, not
deep inside numpy or a slice.

Example:
    >>> positive_int("top_k", 5)
    5
    >>> positive_int("depth", 0)
    Traceback (most recent call last):
    ...
    contextual_retrieval_core.errors.InputError: depth must be a positive integer, got 0
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from contextual_retrieval_core.errors import ContextualRetrievalError, InputError, InputTypeError

__all__ = ["IndexFileError", "positive_int", "non_negative_number", "positive_seconds", "fusion_weights", "string_list", "not_a_string", "finite_vectors", "unit_tolerance", "non_unit_rows", "is_blank"]


def positive_int(name: str, value: Any, *, allow_none: bool = False, what: str = "a positive integer") -> Any:
    """`value` when it is a positive int (None too when `allow_none`); else TypeError for a
    non-integer, ValueError for zero or less, naming `name` (and saying what it must be: `what`,
    e.g. "a positive number of tokens")."""
    if value is None and allow_none:
        return None
    what = f"{what} or None" if allow_none else what
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise InputTypeError(f"{name} must be {what}, got {type(value).__name__} {value!r}")
    if value <= 0:
        raise InputError(f"{name} must be {what}, got {value!r}")
    return int(value)


def not_a_string(name: str, value: Any, what: str = "items") -> Any:
    """`value`, unless it is a str or bytes where a sequence of `what` is expected: TypeError naming
    `name` (a bare string would otherwise be taken one character at a time)."""
    if isinstance(value, (str, bytes)):
        raise InputTypeError(f"{name} must be a list of {what}, not a single {type(value).__name__} ({value[:40]!r}); wrap it: [{value[:40]!r}]")
    return value


def string_list(name: str, values: Any, what: str = "strings") -> list[str]:
    """`values` as a list of str; TypeError naming `name` for a bare string or a non-str item."""
    not_a_string(name, values, what)
    try:
        out = list(values)
    except TypeError:
        raise InputTypeError(f"{name} must be a list of {what}, got {type(values).__name__}") from None
    for i, value in enumerate(out):
        if not isinstance(value, str):
            raise InputTypeError(f"{name}[{i}] must be a str, got {type(value).__name__} {value!r}")
    return out


def finite_vectors(name: str, vectors: np.ndarray) -> np.ndarray:
    """`vectors` unless a row holds NaN or infinity: ValueError naming `name` and the first bad row."""
    finite = np.isfinite(vectors)
    if not finite.all():
        row = int(np.argwhere(~finite)[0][0]) if vectors.ndim > 1 else 0
        raise InputError(
            f"{name} holds NaN or infinity (first in row {row}); the embedder returned a broken vector: "
            "check its input and model, and re-embed"
        )
    return vectors


def unit_tolerance(dtype: np.dtype) -> float:
    """How far a stored unit vector's squared length may be from 1 in `dtype`: 1e-4 for float32 and
    wider (normalising in float32 leaves about 1e-6), 1e-2 for float16."""
    return 1e-4 if np.dtype(dtype).itemsize >= 4 else 1e-2


def non_unit_rows(rows: np.ndarray, tolerance: float) -> np.ndarray:
    """The numbers of the rows of a 2-D float array whose squared length is not within `tolerance`
    of 1 (a zero row, a NaN or an infinity among them), in order; one pass, no copy of the rows.

    Example:
        >>> non_unit_rows(np.array([[1.0, 0.0], [0.0, 0.0], [0.6, 0.8], [np.nan, 0.0]]), 1e-4).tolist()
        [1, 3]
    """
    squared = np.einsum("ij,ij->i", rows, rows)  # in the rows' own type: no converted copy
    return np.flatnonzero(~(np.abs(squared - 1.0) <= tolerance))


def is_blank(query: Any) -> bool:
    """True for a str query that is empty or only whitespace: it matches nothing, in every path."""
    return isinstance(query, str) and not query.strip()



def non_negative_number(name: str, value: Any) -> float:
    """`value` as a float when it is a finite number >= 0; else TypeError / ValueError naming `name`."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise InputTypeError(f"{name} must be a finite number >= 0, got {type(value).__name__} {value!r}")
    if not np.isfinite(value) or value < 0:
        raise InputError(f"{name} must be a finite number >= 0, got {value!r}")
    return float(value)


def positive_seconds(name: str, value: Any, *, allow_none: bool = False) -> float | None:
    """`value` as a float when it is a number of seconds > 0 (None too when `allow_none`); else
    ValueError naming `name`.

    Example:
        >>> positive_seconds("timeout", 10)
        10.0
    """
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise InputError(f"{name} must be a positive number of seconds{' or None' if allow_none else ''}, got {value!r}")
    return float(value)


def fusion_weights(weights: Any, n: int | None = None, per: str = "list") -> tuple[float, ...]:
    """`weights` as a tuple of finite floats >= 0 (one per source when `n` is given); errors name
    the parameter and the fix."""
    not_a_string("weights", weights, "numbers")
    try:
        values = tuple(weights)
    except TypeError:
        raise InputTypeError(f"weights must be a list of numbers, got {type(weights).__name__}") from None
    out = tuple(non_negative_number(f"weights[{i}]", w) for i, w in enumerate(values))
    if n is not None and len(out) != n:
        raise InputError(f"got {len(out)} weights for {n} {per}{'' if n == 1 else 's'}; pass one weight per {per}")
    return out


class IndexFileError(ContextualRetrievalError, ValueError):
    """A saved index file that is missing, truncated, corrupted or inconsistent with the others.

    Attributes:
        path: the file at fault.
    """

    def __init__(self, path: Any, problem: str, fix: str = "the index is damaged or was written by something else: build and save it again") -> None:
        super().__init__(f"{path}: {problem}; {fix}")
        self.path = path


def read_json(file: Path) -> object:
    """A JSON file's content; `IndexFileError` naming the file when it cannot be read or parsed."""
    try:
        return json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise IndexFileError(file, f"not readable JSON ({type(exc).__name__}: {exc})") from None


def mapped_file(array: np.ndarray) -> tuple[Path, int] | None:
    """(file, byte offset) of a C-ordered memory map of a whole ``.npy`` file's rows, else None (an
    array in memory, or a slice of a map, whose offset numpy does not move)."""
    if not (isinstance(array, np.memmap) and array.filename and array.flags.c_contiguous):
        return None
    if os.path.getsize(array.filename) != int(array.offset) + array.nbytes:
        return None
    return Path(array.filename), int(array.offset)


def read_blocks(array: np.ndarray, rows: int) -> Iterator[tuple[int, np.ndarray]]:
    """(first row, rows) blocks of `array`, `rows` at a time. A memory map of a whole ``.npy`` is
    read through its file, so the pages read do not stay resident in the process (reading a large
    index to check or build it leaves the process small); a file shorter than its header says is an
    `IndexFileError` naming it."""
    rows = max(1, int(rows))
    source = mapped_file(array)
    if source is None:
        yield from ((start, np.asarray(array[start : start + rows])) for start in range(0, len(array), rows))
        return
    path, offset = source
    shape = array.shape[1:]
    per_row = int(np.prod(shape, dtype=np.int64))
    with open(path, "rb") as fh:
        fh.seek(offset)
        for start in range(0, len(array), rows):
            count = min(rows, len(array) - start)
            block = np.fromfile(fh, dtype=array.dtype, count=count * per_row)
            if block.size != count * per_row:
                raise IndexFileError(path, "truncated")
            yield start, block.reshape((count, *shape))
