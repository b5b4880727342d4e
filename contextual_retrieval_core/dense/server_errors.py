"""A vector server that does not answer, as one clear error: PostgreSQL with pgvector behind a
framework's store (LangChain's `PGVector`, LlamaIndex's `PGVectorStore`).

Those stores reach the server through SQLAlchemy and a PostgreSQL driver (psycopg, psycopg2 or
asyncpg); a stopped or restarting server surfaces as the driver's error wrapped in SQLAlchemy's,
whose text carries the SQL and its parameters (a whole query vector). `server_unavailable` reads
the chain of errors and returns a `VectorServerUnavailable` naming the server's address (as the
driver reported it, else the address of the store's connection URL, `server_address`; host and
port, never a password) and the fix, or None for any other error. The query flow (`search.flow`)
tries a call that failed so once more (a pooled connection the server dropped when it restarted:
the store's engine discards its broken connections and opens a new one), then raises it in place
of the store's error, on every query path, sync and async.

Once the server is back the same retriever answers again; nothing has to be rebuilt.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qs, unquote, urlsplit

from contextual_retrieval_core._sdk import error_chain
from contextual_retrieval_core.errors import ContextualRetrievalError

__all__ = ["VectorServerUnavailable", "server_address", "server_unavailable"]


class VectorServerUnavailable(ContextualRetrievalError, ConnectionError):
    """The server holding the vectors did not answer (stopped, restarting, unreachable, or it
    dropped the connection mid-query); the message names its address and the fix. The same
    retriever answers again once the server is back. Raised as is for PostgreSQL (pgvector);
    an index's Chroma server raises the subclass `ChromaServerUnavailable`.

    Example:
        >>> raise VectorServerUnavailable("the PostgreSQL server at 127.0.0.1:5432 does not answer")
        Traceback (most recent call last):
        ...
        contextual_retrieval_core.dense.server_errors.VectorServerUnavailable: the PostgreSQL server at 127.0.0.1:5432 does not answer
    """


#: the PostgreSQL drivers the frameworks' pgvector stores use (through SQLAlchemy)
_DRIVERS = ("psycopg", "psycopg2", "asyncpg")
#: SQLSTATEs of a lost server: class 08 (connection exception), admin/crash shutdown, cannot connect now
_LOST_STATES = ("57P01", "57P02", "57P03")
#: asyncpg's classes for a connection that is gone
_ASYNCPG_LOST = ("ConnectionDoesNotExistError", "CannotConnectNowError", "PostgresConnectionError",
                 "AdminShutdownError", "CrashShutdownError", "ConnectionFailureError")
_ADDRESS = re.compile(r'connection to server at "([^"]+)"(?: \([^)]*\))?, port (\d+)'  # libpq
                      r"|Connect call failed \('([^']+)', (\d+)")  # asyncio, under asyncpg


def _driver(error: BaseException) -> str | None:
    module = type(error).__module__.split(".", 1)[0]
    return module if module in _DRIVERS else None


def _lost(error: BaseException, driver: str | None) -> bool:
    names = {cls.__name__ for cls in type(error).__mro__}
    if driver == "asyncpg":  # a pooled connection the server dropped: "connection is closed"
        return bool(names & set(_ASYNCPG_LOST)) or ("InterfaceError" in names and "closed" in str(error))
    if driver is not None and "OperationalError" in names:
        state = getattr(error, "sqlstate", None) or getattr(error, "pgcode", None)
        # no SQLSTATE: libpq's own error (refused, closed, reset); with one, only the lost-server states
        return state is None or state.startswith("08") or state in _LOST_STATES
    return False


def _raised_in_driver(error: BaseException) -> bool:
    """Whether `error` passed through a PostgreSQL driver's code on its way up."""
    tb = error.__traceback__
    while tb is not None:
        if str(tb.tb_frame.f_globals.get("__name__", "")).split(".", 1)[0] in _DRIVERS:
            return True
        tb = tb.tb_next
    return False


def server_address(url: str | None) -> str | None:
    """``host:port`` of a PostgreSQL connection URL (SQLAlchemy's ``postgresql+DRIVER://`` too;
    the default port 5432 when it names none; a Unix socket folder given as ``?host=`` stands for
    the host); never its user or password. None when `url` names no server.

    Example:
        >>> server_address("postgresql+psycopg://app:s3cret@db.example:6543/chunks")
        'db.example:6543'
        >>> server_address("postgresql://app@/chunks?host=/run/postgresql")
        '/run/postgresql:5432'
        >>> server_address("sqlite:///x.db") is None
        True
    """
    if not url:
        return None
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:  # not a URL, or a port that is not a number
        return None
    if not parts.scheme.startswith("postgres"):
        return None
    host = parts.hostname or next(iter(parse_qs(parts.query).get("host", [])), None)
    return f"{unquote(host) if host else 'localhost'}:{port or 5432}"


def server_unavailable(exc: BaseException, address: str | None = None) -> VectorServerUnavailable | None:
    """The clear error for `exc` when it (or an error it was raised from) says the PostgreSQL
    server is down or dropped the connection; None for any other error. The address named is the
    one the driver reported, else `address` (the store's, `server_address`).

    Example:
        >>> class OperationalError(Exception):  # psycopg's, as a stand-in
        ...     sqlstate = None
        >>> OperationalError.__module__ = "psycopg"
        >>> low = OperationalError('connection failed: connection to server at "127.0.0.1", port 5433 failed: '
        ...                        'Connection refused')
        >>> print(server_unavailable(low))  # doctest: +ELLIPSIS
        the PostgreSQL server at 127.0.0.1:5433 does not answer (OperationalError: connection failed: ...); start it ...
        >>> server_unavailable(ValueError("bad input")) is None
        True
    """
    chain = list(error_chain(exc))
    lost = next((e for e in chain if _lost(e, _driver(e))), None)
    # asyncpg reports a refused connection as the OS's error, unwrapped: raised inside asyncpg
    if lost is None:
        lost = next((e for e in chain if isinstance(e, (ConnectionRefusedError, ConnectionResetError))
                     and (any(_driver(o) for o in chain) or _raised_in_driver(e))), None)
    if lost is None:
        return None
    text = " ".join(str(lost).split()) or type(lost).__name__
    found = next((m for m in map(_ADDRESS.search, (str(e) for e in chain)) if m), None)
    if found:
        address = f"{found.group(1) or found.group(3)}:{found.group(2) or found.group(4)}"
    where = f" at {address}" if address else ""
    return VectorServerUnavailable(
        f"the PostgreSQL server{where} does not answer ({type(lost).__name__}: {text[:300]}); start it again "
        "(`pg_ctl -D DATA start`, `systemctl start postgresql`) or check the vector store's connection URL, "
        "then retry: the same retriever answers once the server is back"
    )
