"""SIGTERM handled as Ctrl-C while ingestion runs, and both stopping a run gracefully.

Python ends a process on SIGTERM at once: no ``finally`` runs, no message is printed. While a run
is in progress (`sigterm_as_interrupt`) SIGTERM raises `Terminated` instead, a `KeyboardInterrupt`,
so it takes Ctrl-C's path: sending stops, what arrived is already stored, work claims are released,
and the process exits non-zero with a message. Only the main thread can take signals, and a
handler the program installed itself is left as it is.

A first Ctrl-C or SIGTERM during `Contextualizer.contextualize` stops sending and waits, at most
`GRACE_S`, for the requests in flight, storing what they bring, so nothing paid is paid again; a
second one stops the run at once.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from contextual_retrieval_core.errors import ContextualRetrievalError

__all__ = ["Terminated", "Interrupted", "StopAsked", "sigterm_as_interrupt", "TERMINATED_EXIT_CODE", "GRACE_S"]

#: how long a run stopped by a first Ctrl-C (or SIGTERM) waits for its requests in flight: the
#: SDK's default request timeout (120 s) and a margin; a second one stops it at once
GRACE_S = 130.0

#: the exit status of a process ended by SIGTERM (128 + 15), as shells report it
TERMINATED_EXIT_CODE = 128 + signal.SIGTERM


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived during a run: it stops as after Ctrl-C (contexts that arrived are stored)."""


class Interrupted(KeyboardInterrupt):
    """A run stopped by a first Ctrl-C or SIGTERM: it sent nothing more, and the requests in
    flight ended and their contexts are stored."""


class StopAsked(ContextualRetrievalError, RuntimeError):
    """How a run ends inside its event loop once a graceful stop was asked for (not a KeyboardInterrupt:
    asyncio lets a KeyboardInterrupt escape the loop); the caller raises `Interrupted` for it."""


def _raise_terminated(signum: int, frame: Any) -> None:
    raise Terminated("stopped by SIGTERM; the contexts that arrived are stored — run again to resume")


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM raises `Terminated` in the main thread (elsewhere, or when the
    program has its own SIGTERM handler, nothing changes); the previous handler comes back after.

    Example:
        >>> with sigterm_as_interrupt():
        ...     signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
        True
    """
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return
    signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
