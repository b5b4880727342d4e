"""`server_unavailable` on the PostgreSQL drivers' real error classes: a lost server is the clear
error naming the address the driver reported; a statement timeout, a bad query or an unrelated
refused connection is left alone."""

from __future__ import annotations

import pytest

from contextual_retrieval_core.dense.server_errors import VectorServerUnavailable, server_unavailable

psycopg = pytest.importorskip("psycopg")
sqlalchemy_exc = pytest.importorskip("sqlalchemy.exc")

REFUSED = ('connection failed: connection to server at "10.1.2.3", port 5433 failed: Connection refused\n'
           "\tIs the server running on that host and accepting TCP/IP connections?")


def wrapped(low: BaseException) -> BaseException:
    """`low` as SQLAlchemy raises it: an error of its own, with the SQL and a vector, from the driver's."""
    try:
        try:
            raise low
        except Exception as exc:
            raise sqlalchemy_exc.OperationalError("SELECT embedding <=> %(v)s", {"v": "[0.1,0.2]"}, exc) from exc
    except Exception as high:
        return high


def test_a_refused_connection_names_the_address_and_the_fix_without_the_sql():
    clear = server_unavailable(wrapped(psycopg.OperationalError(REFUSED)))
    assert isinstance(clear, VectorServerUnavailable) and isinstance(clear, ConnectionError)
    message = str(clear)
    assert "10.1.2.3:5433 does not answer" in message and "start it again" in message
    assert "SELECT" not in message and "[0.1" not in message and "\n" not in message


def test_a_server_shutting_down_is_lost_too():
    error = psycopg.errors.AdminShutdown("terminating connection due to administrator command")
    assert "does not answer" in str(server_unavailable(wrapped(error)))


@pytest.mark.parametrize("error", [
    psycopg.errors.QueryCanceled("canceling statement due to statement timeout"),  # an OperationalError, not a lost server
    psycopg.errors.UndefinedTable('relation "data_chunks" does not exist'),
    ConnectionRefusedError(111, "Connection refused"),  # not from a PostgreSQL driver
    ValueError("bad input"),
])
def test_other_errors_are_left_alone(error):
    assert server_unavailable(wrapped(error) if isinstance(error, psycopg.Error) else error) is None
