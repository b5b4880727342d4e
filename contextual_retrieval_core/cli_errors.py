"""How the `contextual-retrieval` command ends a run: library errors as one "error:" line with
exit code 2, a closed output pipe as a quiet exit, library warnings gathered into one line."""

from __future__ import annotations

import os
import sqlite3
import sys
import warnings
from contextlib import contextmanager
from typing import Iterator

__all__ = ["error_classes", "gathered_warnings", "warnings_line", "quiet_broken_pipe", "describe"]


def error_classes() -> tuple[type[BaseException], ...]:
    """What a run reports as "error:" and exit 2: bad input, damaged or unreadable files, missing
    extras, locks, services. A bug (TypeError, AttributeError, ...) keeps its traceback."""
    classes: list[type[BaseException]] = [ValueError, OSError, ImportError, RuntimeError, sqlite3.Error]
    errors = sys.modules.get("chromadb.errors")
    if errors is not None:
        classes.append(errors.ChromaError)
    return tuple(classes)


@contextmanager
def gathered_warnings() -> Iterator[None]:
    """Record library warnings during a run and print them as one line at its end (run totals
    for the local embedder's truncation warning), instead of raw `warnings` output."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield
        finally:
            line = warnings_line(caught)
            if line:
                print(line, file=sys.stderr)


def warnings_line(caught: list[warnings.WarningMessage]) -> str:
    embedders: dict[int, object] = {}
    others: dict[str, int] = {}
    for w in caught:
        embedder = getattr(w.message, "embedder", None)
        if embedder is not None:
            embedders[id(embedder)] = embedder
        else:
            text = f"{w.category.__name__}: {w.message}"
            others[text] = others.get(text, 0) + 1
    parts = []
    for e in embedders.values():
        parts.append(f"{getattr(e, 'truncated_count', 0)} of {getattr(e, 'embedded_count', 0)} texts embedded in this "
                     f"run were longer than {getattr(e, 'model_name', 'the embedder')}'s "
                     f"{getattr(e, 'max_tokens', '?')}-token window and were truncated (split chunks smaller, or use "
                     "a hosted embedder with a longer window)")
    parts.extend(text if n == 1 else f"{text} ({n} times)" for text, n in others.items())
    return ("warnings: " + "; ".join(parts)) if parts else ""


def quiet_broken_pipe() -> int:
    # the reader went away (``| head``): stop quietly, and keep Python's exit-time flush quiet too
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return 0


def describe(exc: BaseException) -> str:
    """The message, with the file an OSError or SQLite error is about when the message lacks it."""
    text = str(exc) or type(exc).__name__
    if isinstance(exc, OSError) and exc.filename and str(exc.filename) not in text:
        text = f"{exc.filename}: {text}"
    if isinstance(exc, sqlite3.Error):
        text = (f"SQLite: {text}; an index's databases are chroma/chroma.sqlite3, contexts.sqlite3 and "
                "embeddings.sqlite3: check the disk and permissions, or rebuild the index (--rebuild)")
    return text
