"""`ContextualRetrievalError`: the base of every error the library raises on purpose.

``except ContextualRetrievalError`` catches anything this library raises about your input, your
files, a server or a paid API, and nothing else (a bug in your code or ours keeps its own type).
Besides the specific classes (`IndexDamagedError`, `ContextStoreError`, ...), the general ones
here carry the checks on arguments and inputs: `InputError` (a `ValueError`), `InputTypeError`
(a `TypeError`), `NotFoundError` (a `FileNotFoundError`), `MissingDependencyError` (an
`ImportError`), `RunError` (a `RuntimeError`) and `DiskError` (an `OSError`).
Each error also keeps the builtin base users already catch (`ValueError` for bad input and damaged
files, `RuntimeError` for a run that could not finish, `OSError` for a full disk,
`ConnectionError` for a server that does not answer), so existing ``except ValueError`` code goes
on working. The interruptions (`Interrupted`, `Terminated`) are `KeyboardInterrupt`s, not errors:
``except Exception`` must not swallow a Ctrl-C. Each error, its cause and its fix:
docs/errors.md.

Example:
    >>> from contextual_retrieval_core.index.manifest import IndexDamagedError
    >>> issubclass(IndexDamagedError, ContextualRetrievalError), issubclass(IndexDamagedError, ValueError)
    (True, True)
"""

from __future__ import annotations

__all__ = ["ContextualRetrievalError", "InputError", "InputTypeError", "NotFoundError", "MissingDependencyError", "RunError", "DiskError"]


class ContextualRetrievalError(Exception):
    """Anything contextual-retrieval-kit raises on purpose; the message names the cause and the fix."""


class InputError(ContextualRetrievalError, ValueError):
    """An argument, a file's content or a setting the library cannot use: out of range, empty,
    inconsistent with another. The message names it and the value it needs."""


class InputTypeError(ContextualRetrievalError, TypeError):
    """An argument of the wrong type (a string where a list is needed, a framework object where a
    core one is); the message names what to pass instead."""


class NotFoundError(ContextualRetrievalError, FileNotFoundError):
    """A file or folder the call needs does not exist (an index folder, a dataset, a corpus); the
    message names it and how to make it."""


class MissingDependencyError(ContextualRetrievalError, ImportError):
    """An optional package a feature needs is not installed; the message names the extra to
    install (``pip install 'contextual-retrieval-kit[EXTRA]'``)."""


class RunError(ContextualRetrievalError, RuntimeError):
    """A call that cannot go on in the state it found (a closed object, an event loop it may not
    use, a run already stopped); the message says what to do instead."""


class DiskError(ContextualRetrievalError, OSError):
    """A file the library writes cannot be written (a full disk, no permission); the message names
    the folder and where to find room."""
