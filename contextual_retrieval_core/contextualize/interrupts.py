"""SIGTERM handled as Ctrl-C while ingestion runs.

Python ends a process on SIGTERM at once: no ``finally`` runs, no message is printed. While a run
is in progress (`sigterm_as_interrupt`) SIGTERM raises `Terminated` instead, a `KeyboardInterrupt`,
so it takes Ctrl-C's path: sending stops, what arrived is already stored, work claims are released,
and the process exits non-zero with a message. Only the main thread can take signals, and a
handler the program installed itself is left as it is.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["Terminated", "sigterm_as_interrupt", "TERMINATED_EXIT_CODE"]

#: the exit status of a process ended by SIGTERM (128 + 15), as shells report it
TERMINATED_EXIT_CODE = 128 + signal.SIGTERM


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived during a run: it stops as after Ctrl-C (contexts that arrived are stored)."""


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
