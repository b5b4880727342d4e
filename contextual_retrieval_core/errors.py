"""`ContextualRetrievalError`: the base of every error the library raises on purpose.

``except ContextualRetrievalError`` catches anything this library raises about your input, your
files, a server or a paid API, and nothing else (a bug in your code or ours keeps its own type).
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

__all__ = ["ContextualRetrievalError"]


class ContextualRetrievalError(Exception):
    """Anything contextual-retrieval-kit raises on purpose; the message names the cause and the fix."""
