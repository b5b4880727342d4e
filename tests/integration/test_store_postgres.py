"""`ContextStore("postgresql://...")` against a real PostgreSQL server (tests/servers.py): the
SQLite store's API and behaviour, shared between connections, no password in messages."""

from __future__ import annotations

import json
import uuid

import pytest

psycopg = pytest.importorskip("psycopg", reason="psycopg is not installed: pip install 'contextual-retrieval-kit[postgres]'")

from contextual_retrieval_core.store.context_store import ContextStore, ContextStoreError  # noqa: E402
from contextual_retrieval_core.store.postgres import PostgresContextStore, redact_url  # noqa: E402


@pytest.fixture()
def db_url(postgres_server: str) -> str:
    """A fresh database on the session's server for each test."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return postgres_server.rsplit("/", 1)[0] + "/" + name


def test_url_dispatches_and_same_api_as_sqlite(db_url, tmp_path) -> None:
    key = ContextStore.key("anthropic", "m", "p", "doc text", "chunk text")
    for store in (ContextStore(db_url), ContextStore(tmp_path / "s.sqlite3")):
        with store:
            assert isinstance(store, PostgresContextStore) == (store.path.startswith("postgresql://"))
            assert len(store) == 0 and key not in store and store.get(key) is None
            store.check_writable()
            store.put(key, "ctx one", generator="anthropic", model="m", doc_id="d", chunk_id="d_0",
                      original_index=0, usage={"input_tokens": 5})
            store.put(key, "ctx two", generator="anthropic", model="m")  # replaces
            store.put("k2", "other", generator="g", model="m")
            assert store.get(key) == "ctx two" and len(store) == 2 and key in store
            assert store.get_many([key, "missing", "k2", key]) == {key: "ctx two", "k2": "other"}
            rec = store.record(key)
            assert rec["context"] == "ctx two" and rec["doc_id"] is None and rec["usage"] is None
            store.add_batch("b1", generator="anthropic", model="m", manifest={"x": [1, 2]})
            assert store.pending_batches(generator="anthropic", model="m") == [("b1", {"x": [1, 2]})]
            store.finish_batch("b1")
            assert store.batch_status("b1") == "done" and store.pending_batches(generator="anthropic", model="m") == []
            out = tmp_path / f"{type(store).__name__}.jsonl"
            assert store.export_jsonl(out) == 2
            assert [json.loads(line)["context"] for line in out.read_text().splitlines()] == ["ctx two", "other"]
    assert (tmp_path / "PostgresContextStore.jsonl").read_text() == (tmp_path / "ContextStore.jsonl").read_text()


def test_two_stores_on_one_database_share_contexts(db_url) -> None:
    with ContextStore(db_url) as a, ContextStore(db_url) as b:  # schema created twice: no error
        a.put("k", "written by a", generator="g", model="m")
        assert b.get("k") == "written by a"
        b.put("k", "replaced by b", generator="g", model="m")
        assert a.get("k") == "replaced by b" and len(a) == len(b) == 1


def test_import_jsonl_and_read_only(db_url, tmp_path) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(json.dumps({"doc_id": "d", "original_index": i, "context": f"c{i}"}) for i in range(3)) + "\n")
    with ContextStore(db_url) as store:
        result = store.import_jsonl(src, lambda line: f"key-{line['original_index']}")
        assert tuple(result) == (3, 0) and store.get("key-2") == "c2"
    with ContextStore(db_url, read_only=True) as ro:
        assert ro.get("key-1") == "c1" and ro.read_only
        with pytest.raises(ContextStoreError, match="read-only"):
            ro.put("x", "y", generator="g", model="m")


def test_errors_name_the_server_without_the_password(postgres_server) -> None:
    host_part = postgres_server.split("@", 1)[1].rsplit("/", 1)[0]
    url = f"postgresql://nobody_here:s3cret@{host_part}/no_such_db"
    with pytest.raises(ContextStoreError) as info:
        ContextStore(url, timeout=5)
    assert "s3cret" not in str(info.value) and "***" in str(info.value)
    assert redact_url("postgresql://u:pw@h:1/d") == "postgresql://u:***@h:1/d"
    assert redact_url("postgresql://u@h/d") == "postgresql://u@h/d"
