"""The throwaway PostgreSQL server fixture (tests/servers.py): it starts, answers psycopg on
loopback, keeps what one connection commits for another, and is a real server (concurrent
transactions, row locks), which the PostgreSQL context-store backend's tests build on."""

from __future__ import annotations

import threading

import pytest

psycopg = pytest.importorskip("psycopg", reason="psycopg is not installed: pip install 'contextual-retrieval-kit[postgres]'")


def test_server_answers_and_commits_are_shared(postgres_server: str) -> None:
    assert postgres_server.startswith("postgresql://") and "@127.0.0.1:" in postgres_server
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        version = conn.execute("SHOW server_version_num").fetchone()[0]
        assert int(version) >= 140000
        conn.execute("CREATE TABLE IF NOT EXISTS fixture_probe (k text PRIMARY KEY, v text)")
        conn.execute("INSERT INTO fixture_probe VALUES ('a', 'one') ON CONFLICT (k) DO UPDATE SET v = excluded.v")
    with psycopg.connect(postgres_server) as other:
        assert other.execute("SELECT v FROM fixture_probe WHERE k = 'a'").fetchone() == ("one",)


def test_row_locks_between_connections(postgres_server: str) -> None:
    """SKIP LOCKED: the primitive a work-claiming store needs, only a real server has it."""
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS claims_probe (k int PRIMARY KEY)")
        conn.execute("TRUNCATE claims_probe")
        conn.execute("INSERT INTO claims_probe SELECT generate_series(1, 10)")
    first = psycopg.connect(postgres_server)
    try:
        got_first = [r[0] for r in first.execute("SELECT k FROM claims_probe ORDER BY k LIMIT 4 FOR UPDATE SKIP LOCKED")]
        got_second: list[int] = []

        def other() -> None:
            with psycopg.connect(postgres_server) as conn:
                got_second.extend(r[0] for r in conn.execute("SELECT k FROM claims_probe ORDER BY k LIMIT 4 FOR UPDATE SKIP LOCKED"))

        thread = threading.Thread(target=other)
        thread.start()
        thread.join(30)
        assert got_first == [1, 2, 3, 4]
        assert got_second == [5, 6, 7, 8]
    finally:
        first.close()
