"""How the `contextual-retrieval` command ends a run: library errors as one "error:" line with
exit code 2, a closed output pipe as a quiet exit, library warnings gathered into one line."""

from __future__ import annotations

import os
import sqlite3
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

from contextual_retrieval_core.errors import ContextualRetrievalError

__all__ = ["error_classes", "LIBRARY_ERRORS", "SDK_ERRORS", "LOCAL_ENGINES", "ENGINE_ERRORS", "local_engine", "gathered_warnings", "warnings_line", "quiet_broken_pipe", "describe"]


#: the hosted services' SDK error bases (module, class): an answer the service refused (a bad key,
#: an outage, a rate limit the SDK gave up on) is an "error:" line with the fix, not a traceback
SDK_ERRORS = (
    ("anthropic", "AnthropicError"),
    ("cohere.core.api_error", "ApiError"),
    ("voyageai.error", "VoyageError"),
    ("httpx", "HTTPError"),
)

#: the local engines an index folder's files are read with (the package, and its name in messages):
#: their errors are about files on this machine, never a hosted service's refusal
LOCAL_ENGINES = (("chromadb", "Chroma"), ("faiss", "faiss"), ("sqlite3", "SQLite"))

#: the local engines' error bases that derive from no builtin reported below (module, class)
ENGINE_ERRORS = (("chromadb.errors", "ChromaError"),)


#: the library's error classes that do not derive from a builtin reported below (module, class);
#: every other library error is a ValueError, OSError or RuntimeError (tests/integration/test_cli_error_classes.py)
LIBRARY_ERRORS = (
    ("contextual_retrieval_core.generators._anthropic_http", "SpendLimitReached"),
    ("contextual_retrieval_core.chunking.code_outline", "GrammarUnavailable"),
)


def _loaded(names: tuple[tuple[str, str], ...]) -> list[type[BaseException]]:
    """The classes of `names` whose module is imported (an error from a module never imported
    cannot have been raised; nothing is imported here)."""
    out = []
    for module, name in names:
        cls = getattr(sys.modules.get(module), name, None)
        if isinstance(cls, type) and issubclass(cls, BaseException):
            out.append(cls)
    return out


def error_classes() -> tuple[type[BaseException], ...]:
    """What a run reports as "error:" and exit 2: bad input, damaged or unreadable files, missing
    extras, locks, every `ContextualRetrievalError` (an `InputTypeError` too), the library's own errors (`ContextStoreError`, `IndexDamagedError`,
    `IndexFileError`, `FatalGenerationError`, ...: subclasses of the builtins here, or in
    `LIBRARY_ERRORS`), the local engines' errors (`ENGINE_ERRORS`) and the hosted services' SDK
    errors. A bug (TypeError, AttributeError, KeyError, ...) keeps its traceback."""
    return (ContextualRetrievalError, ValueError, OSError, ImportError, RuntimeError, sqlite3.Error, *_loaded(LIBRARY_ERRORS),
            *_loaded(ENGINE_ERRORS), *_loaded(SDK_ERRORS))


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
    from contextual_retrieval_core.embeddings.minilm import TRUNCATION_FIX

    parts = []
    for e in embedders.values():
        parts.append(f"{getattr(e, 'truncated_count', 0)} of {getattr(e, 'embedded_count', 0)} texts embedded in this "
                     f"run were longer than {getattr(e, 'model_name', 'the embedder')}'s "
                     f"{getattr(e, 'max_tokens', '?')}-token window and were truncated ({TRUNCATION_FIX})")
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


def local_engine(exc: BaseException) -> str | None:
    """The name of the local engine (`LOCAL_ENGINES`) that raised `exc`, else None: the package
    of its class, else of the innermost frame of its traceback inside one (faiss raises builtin
    RuntimeErrors from its own code; an HTTP error raised inside chromadb is the Chroma server's).

    Example:
        >>> import sqlite3
        >>> local_engine(sqlite3.OperationalError("database is locked"))
        'SQLite'
        >>> local_engine(ValueError("bad input")) is None
        True
    """
    names = dict(LOCAL_ENGINES)
    engine = names.get(type(exc).__module__.split(".", 1)[0])
    if engine:
        return engine
    frame, found = exc.__traceback__, None
    while frame is not None:
        package = str(frame.tb_frame.f_globals.get("__name__", "")).split(".", 1)[0]
        found = names.get(package, found)
        frame = frame.tb_next
    return found


def describe(exc: BaseException, index_dir: str | os.PathLike[str] | None = None) -> str:
    """The message, with the file an OSError is about when the message lacks it, the fix for a
    hosted service's refusal (secrets masked), and for a local engine's error (Chroma, faiss,
    SQLite: `local_engine`) the files it reads and the fix; `index_dir`, the command's index
    folder where it has one, is named in that fix."""
    engine = local_engine(exc)
    if engine is not None:
        return _engine_error(engine, exc, index_dir)
    if isinstance(exc, tuple(_loaded(SDK_ERRORS))):
        from contextual_retrieval_core.rerank.base import describe_error

        return (f"{describe_error(exc)} — a hosted service refused the request: check its API key "
                "(ANTHROPIC_API_KEY, VOYAGE_API_KEY, COHERE_API_KEY) and its status, or run offline "
                "(--contexts structural, --embedder local, --rerank none)")
    text = str(exc) or type(exc).__name__
    if text.startswith("ANTHROPIC_API_KEY is not set"):  # the library's advice is Python's; this is the command line's
        return ("ANTHROPIC_API_KEY is not set: export ANTHROPIC_API_KEY=... to use Claude, or run offline "
                "(index --contexts structural); eval --generate-questions --dry-run prints the estimate without a key")
    if isinstance(exc, OSError) and exc.filename and str(exc.filename) not in text:
        text = f"{exc.filename}: {text}"
    return text


#: what each local engine reads in an index folder ({dir}: the folder, or "the index's")
_ENGINE_FILES = {
    "Chroma": "{dir}chroma/ folder (chroma.sqlite3 and its HNSW segment files)",
    "faiss": "{dir}dense index files (ivf.faiss, hnsw.faiss)",
    "SQLite": "{dir}databases (chroma/chroma.sqlite3, contexts.sqlite3, embeddings.sqlite3)",
}


def _engine_error(engine: str, exc: BaseException, index_dir: str | os.PathLike[str] | None) -> str:
    """A local engine's error: what failed, the files it reads, and the fix."""
    from contextual_retrieval_core.rerank.base import describe_error

    folder = "the index's " if index_dir is None else f"{os.fspath(index_dir)}/"
    files = _ENGINE_FILES[engine].format(dir=folder)
    repair = "PATH..." if index_dir is None else f"PATH... --index-dir {os.fspath(index_dir)}"
    text = (f"{engine} (a local engine reading the index's files, not a hosted service) failed: {describe_error(exc)}; "
            f"{files} may be damaged or unreadable: check the disk and permissions, then re-run "
            f"`contextual-retrieval index {repair}` to repair it, or rebuild the index (--rebuild)")
    if engine == "Chroma":
        text = (f"{engine} (a local engine reading the index's files, not a hosted service) failed: {describe_error(exc)}; "
                f"{files} may be damaged or unreadable. An index folder that keeps its vectors in an embedded Chroma "
                f"(written before 0.2) is repaired by moving them out of it: `contextual-retrieval index {repair} --rebuild` "
                "(nothing is paid for or embedded again); for an index on a Chroma server (--chroma-url), check the "
                "server and its log")
    return text
