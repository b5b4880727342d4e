"""ContextStore: round-trip, keys, durability across instances and processes, JSONL, schema."""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from pathlib import Path

import pytest

from contextual_retrieval_core.generators.prompts import DEFAULT_PROMPT, ContextPrompt
from contextual_retrieval_core.store.context_store import SCHEMA_VERSION, ContextStore


def _key(i: int, prefix: str = "main") -> str:
    return ContextStore.key("gen", "model", DEFAULT_PROMPT.identity, f"doc {prefix}", f"chunk {i}")


def test_round_trip_and_metadata(tmp_path):
    path = tmp_path / "sub" / "contexts.sqlite"
    with ContextStore(path) as store:
        k = _key(0)
        assert store.get(k) is None and k not in store and len(store) == 0
        store.put(k, "ctx {0}", generator="gen", model="model", doc_id="d", chunk_id="d_0",
                  original_index=0, usage={"input_tokens": 10, "cache_read_input_tokens": 5})
        assert store.get(k) == "ctx {0}"
        conn = sqlite3.connect(path)
        raw = conn.execute("SELECT usage FROM contexts").fetchone()[0]
        conn.close()
        assert json.loads(raw) == {"input_tokens": 10, "cache_read_input_tokens": 5}  # JSON, no pickle
        assert k in store and 42 not in store and len(store) == 1
        rec = store.record(k)
        assert rec["usage"] == {"input_tokens": 10, "cache_read_input_tokens": 5}
        assert (rec["doc_id"], rec["chunk_id"], rec["original_index"]) == ("d", "d_0", 0)
        assert rec["created_at"]
        store.put(k, "newer", generator="gen", model="model")
        assert store.get(k) == "newer" and len(store) == 1
    with pytest.raises(ValueError, match="closed"):
        store.get(k)


def test_get_many_batches(tmp_path):
    with ContextStore(tmp_path / "c.sqlite") as store:
        keys = [_key(i) for i in range(1200)]
        for i in range(0, 1200, 2):
            store.put(keys[i], f"c{i}", generator="gen", model="model")
        found = store.get_many(keys + keys[:10])
        assert len(found) == 600
        assert found[keys[1198]] == "c1198" and keys[1] not in found
        assert store.get_many([]) == {}


def test_memory_store():
    with ContextStore(":memory:") as store:
        store.put("k", "v", generator="g", model="m")
        assert store.get("k") == "v" and len(store) == 1


def test_key_framing_and_parts():
    k = ContextStore.key("ab", "c", "p", "d", "x")
    assert len(k) == 64 and k == ContextStore.key("ab", "c", "p", "d", "x")
    assert k != ContextStore.key("a", "bc", "p", "d", "x")
    assert ContextStore.key("g", "m", "p", "ab", "c") != ContextStore.key("g", "m", "p", "a", "bc")
    assert ContextStore.key("g", "m", "p", "d", "c") != ContextStore.key("g", "m2", "p", "d", "c")
    assert ContextStore.key("g", "m", "p", "d", "c") != ContextStore.key("g2", "m", "p", "d", "c")


def test_prompt_identity_changes_the_key(tmp_path):
    other = ContextPrompt(DEFAULT_PROMPT.document_template, DEFAULT_PROMPT.chunk_template, glossary="G")
    k1 = ContextStore.key("g", "m", DEFAULT_PROMPT.identity, "doc", "chunk")
    k2 = ContextStore.key("g", "m", other.identity, "doc", "chunk")
    assert k1 != k2
    with ContextStore(tmp_path / "c.sqlite") as store:
        store.put(k1, "old prompt's context", generator="g", model="m")
        assert store.get(k2) is None


def test_visible_from_a_second_instance_immediately(tmp_path):
    path = tmp_path / "c.sqlite"
    a, b = ContextStore(path), ContextStore(path)
    try:
        assert b.get(_key(1)) is None
        a.put(_key(1), "from a", generator="gen", model="model")
        assert b.get(_key(1)) == "from a" and len(b) == 1
        b.put(_key(2), "from b", generator="gen", model="model")
        assert a.get_many([_key(1), _key(2)]) == {_key(1): "from a", _key(2): "from b"}
    finally:
        a.close()
        b.close()


def test_threads_share_one_store(tmp_path):
    with ContextStore(tmp_path / "c.sqlite") as store:
        def work(t):
            for i in range(25):
                store.put(_key(i, f"t{t}"), f"{t}-{i}", generator="g", model="m")

        threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(store) == 100


def test_export_import_round_trip(tmp_path):
    src = ContextStore(tmp_path / "a.sqlite")
    for i in range(5):
        src.put(_key(i), f"context {i} with \u00e9 and {{braces}}", generator="anthropic",
                model="claude-3-haiku", doc_id="doc_1", chunk_id=f"doc_1_chunk_{i}", original_index=i)
    out = tmp_path / "export" / "contexts.jsonl"
    assert src.export_jsonl(out) == 5
    first = json.loads(out.read_text(encoding="utf-8").splitlines()[0])
    assert first == {"doc_id": "doc_1", "chunk_id": "doc_1_chunk_0", "original_index": 0,
                     "context": "context 0 with \u00e9 and {braces}", "key": _key(0),
                     "generator": "anthropic", "model": "claude-3-haiku"}
    dst = ContextStore(tmp_path / "b.sqlite")
    res = dst.import_jsonl(out, lambda line: line["key"] if line["original_index"] != 4 else None)
    assert res == (4, 1) and (res.imported, res.skipped) == (4, 1)
    assert dst.get_many([_key(i) for i in range(5)]) == {
        _key(i): f"context {i} with \u00e9 and {{braces}}" for i in range(4)
    }
    rec = dst.record(_key(0))
    assert (rec["generator"], rec["model"], rec["chunk_id"]) == ("anthropic", "claude-3-haiku", "doc_1_chunk_0")
    src.close()
    dst.close()


def test_malformed_line_names_file_and_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"doc_id": "d", "original_index": 0, "context": "ok"}\n\n{"doc_id": oops}\n',
                   encoding="utf-8")
    with ContextStore(tmp_path / "c.sqlite") as store:
        with pytest.raises(ValueError, match=r"bad\.jsonl, line 3"):
            store.import_jsonl(bad, lambda line: "k")
        assert len(store) == 0  # nothing half-imported
        bad.write_text('{"doc_id": "d"}\n', encoding="utf-8")
        with pytest.raises(ValueError, match=r"line 1.*context"):
            store.import_jsonl(bad, lambda line: "k")


def test_newer_schema_is_refused(tmp_path):
    path = tmp_path / "c.sqlite"
    ContextStore(path).close()
    conn = sqlite3.connect(path)
    conn.execute("UPDATE meta SET value=? WHERE name='schema_version'", (str(SCHEMA_VERSION + 1),))
    conn.commit()
    conn.close()
    with pytest.raises(RuntimeError, match=r"(?i)newer.*upgrade"):
        ContextStore(path)


def test_not_a_database(tmp_path):
    path = tmp_path / "c.sqlite"
    path.write_bytes(b"this is not sqlite at all" * 100)
    with pytest.raises(ValueError, match="not a usable context store"):
        ContextStore(path)


# -- read-only, damaged and locked stores (issue 12) -------------------------------------------

from contextual_retrieval_core.store.context_store import ContextStoreError  # noqa: E402


def _filled(path: Path, n: int = 3) -> list[str]:
    keys = [_key(i) for i in range(n)]
    with ContextStore(path) as store:
        for i, k in enumerate(keys):
            store.put(k, f"context {i}", generator="gen", model="model")
    return keys


def _unprivileged(fn):
    """Run `fn()` as a user who cannot write root's files: the caller itself when it is not root,
    else a forked child that drops to uid/gid 65534 (root writes read-only files regardless)."""
    if os.geteuid() != 0:
        return fn()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.close(read)
        try:
            os.setgid(65534)
            os.setuid(65534)
            out = {"ok": fn()}
        except BaseException as exc:  # noqa: BLE001 - handed to the parent
            out = {"error": type(exc).__name__, "message": str(exc)}
        with os.fdopen(write, "w") as f:
            json.dump(out, f)
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as f:
        data = f.read()
    os.waitpid(pid, 0)
    out = json.loads(data)
    if "error" in out:
        raise AssertionError(f"{out['error']}: {out['message']}")
    return out["ok"]


@pytest.fixture()
def shared_dir():
    """A folder outside pytest's private tmp tree (0700 for root), which uid 65534 can enter."""
    import shutil
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="cr-store-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_read_only_opening_reads_and_refuses_writes_naming_the_file(tmp_path):
    path = tmp_path / "c.sqlite"
    keys = _filled(path)
    with ContextStore(path, read_only=True) as store:
        assert store.read_only and store.get_many(keys) == {k: f"context {i}" for i, k in enumerate(keys)}
        assert len(store) == 3 and keys[0] in store
        for write in (
            lambda: store.put(_key(9), "x", generator="gen", model="model"),
            store.check_writable,
            lambda: store.add_batch("b", generator="gen", model="model", manifest={}),
        ):
            with pytest.raises(ContextStoreError, match=r"read-only \(opened with read_only=True\)") as info:
                write()
            assert str(path) in str(info.value) and info.value.path == str(path)
    assert len(ContextStore(path)) == 3  # nothing was written
    with pytest.raises(ValueError, match="does not exist"):
        ContextStore(tmp_path / "missing.sqlite", read_only=True)


@pytest.mark.parametrize("what", ["file", "folder"])
def test_an_unwritable_file_or_folder_opens_read_only(shared_dir, what):
    folder = shared_dir / "store"
    folder.mkdir()
    path = folder / "c.sqlite"
    keys = _filled(path)
    if what == "file":
        folder.chmod(0o777)
        path.chmod(0o444)
    else:
        folder.chmod(0o555)
        path.chmod(0o644)
        if os.geteuid() == 0:  # the file is writable by the user who opens it; the folder is not
            os.chown(path, 65534, 65534)

    def probe():
        store = ContextStore(path)
        out = {"read_only": store.read_only, "reason": store.read_only_reason, "found": len(store.get_many(keys))}
        try:
            store.put(_key(9), "x", generator="gen", model="model")
        except ContextStoreError as exc:
            out["refused"] = str(exc)
        try:
            store.check_writable()
        except ContextStoreError as exc:
            out["check"] = str(exc)
        store.close()
        return out

    out = _unprivileged(probe)
    assert out["read_only"] and out["found"] == 3
    assert out["reason"] == ("the file is not writable" if what == "file" else "its folder is not writable")
    for message in (out["refused"], out["check"]):
        assert str(path) in message and "read-only" in message and "writable" in message
    folder.chmod(0o755)


def test_a_folder_as_the_store_path_is_named(tmp_path):
    with pytest.raises(ValueError, match=rf"{tmp_path}.* is a folder, not a file.*contexts\.sqlite3"):
        ContextStore(tmp_path)


def test_a_corrupted_page_names_the_file(tmp_path):
    path = tmp_path / "c.sqlite"
    keys = _filled(path, 400)  # several pages of contexts
    size = path.stat().st_size
    page = 4096
    assert size >= 6 * page
    with open(path, "r+b") as f:  # overwrite every page but the first (the header and schema)
        for start in range(page, size, page):
            f.seek(start + 8)
            f.write(os.urandom(page - 16))
    with pytest.raises((ContextStoreError, ValueError), match=rf"{path}.*(malformed|not a database|damaged)") as info:
        with ContextStore(path) as store:
            store.get_many(keys)
    if isinstance(info.value, ContextStoreError):
        assert "restore it from a backup" in str(info.value)


def test_a_store_locked_by_another_writer_fails_its_write_check_naming_the_reason(tmp_path):
    path = tmp_path / "c.sqlite"
    _filled(path)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    # opening takes the write lock too (schema check): with the lock held it fails naming the file
    with pytest.raises((ValueError, ContextStoreError), match=rf"{path}.*locked"):
        ContextStore(path, timeout=0.1)
    holder.execute("ROLLBACK")
    store = ContextStore(path, timeout=0.1)
    holder.execute("BEGIN IMMEDIATE")
    with pytest.raises(ContextStoreError, match=rf"{path}: a test write failed: database is locked.*write lock"):
        store.check_writable()
    with pytest.raises(ContextStoreError, match=rf"{path}: storing a context failed"):
        store.put(_key(7), "x", generator="gen", model="model")
    holder.execute("ROLLBACK")
    store.check_writable()
    holder.close()
    store.close()


def test_a_postgresql_url_opens_the_server_store_in_a_fresh_interpreter() -> None:
    """``ContextStore(url)`` picks its backend by the URL's scheme even when nothing imported the
    backend's module first (the stage package imports on first use): never an SQLite file named
    like the URL."""
    import subprocess
    import sys

    code = ("from contextual_retrieval_core.store.context_store import ContextStore\n"
            "print(type(ContextStore.__new__(ContextStore, 'postgresql://u@127.0.0.1:1/db')).__name__)\n"
            "try:\n    ContextStore('mysql://u@127.0.0.1:1/db')\nexcept ValueError as e:\n    print(e)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.splitlines() == [
        "PostgresContextStore",
        "mysql:// is not a context store: pass a file path, ':memory:' or a postgresql://user:password@host/db URL"]
