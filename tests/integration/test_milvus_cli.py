"""`contextual-retrieval index PATH --milvus-uri URI` and `query` on a real Milvus server (Milvus
Lite on loopback): incremental runs, removal, a server down at query time, and a server killed
during an `index` run whose rerun pays for no context and embeds no chunk again."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from contextual_retrieval_core.app.cli import main
from contextual_retrieval_core.index.milvus_index import MilvusIndexRecord
from contextual_retrieval_core.search.milvus import MilvusCollection
from tests.fakes.anthropic_server import FakeAnthropicServer
from tests.milvus_server import milvus_lite  # noqa: F401
from tests.notes_corpus import change_corpus, make_corpus

pytestmark = pytest.mark.timeout(300)


def _guides(folder: Path, n: int) -> Path:
    folder.mkdir()
    for i in range(n):
        body = "\n\n".join(f"## Part {j}\n\n" + f"Valve {i}-{j} must be closed before pump {i} starts. " * 8 for j in range(4))
        (folder / f"valves{i}.md").write_text(f"# Valves {i}\n\n{body}\n", encoding="utf-8")
    return folder


def _rows(index_dir: Path) -> list[str]:
    record = MilvusIndexRecord.read(index_dir)
    collection = MilvusCollection(record.uri, record.collection)
    collection.client.load_collection(collection.name)
    return [str(r["id"]) for r in collection.client.query(collection.name, filter='id != ""', output_fields=["id"], limit=16_384)]


def _query(capsys: pytest.CaptureFixture[str], *args: str) -> list[dict]:
    capsys.readouterr()
    assert main(["query", *args, "--json", "--rerank", "none"]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def test_index_and_query_on_milvus_incrementally(tmp_path, capsys, milvus_server):  # noqa: F811
    notes, index_dir = make_corpus(tmp_path), tmp_path / "ix"
    command = ["index", str(notes), "--index-dir", str(index_dir), "--milvus-uri", milvus_server.uri, "--collection",
               "cli_notes", "--contexts", "structural", "--embedder", "local", "--no-progress", "--store", "none",
               "--json", str(tmp_path / "r.json")]
    assert main(command) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert f"collection: cli_notes at {milvus_server.uri}" in out and "3 new" in out
    hits = _query(capsys, str(index_dir), "how long do refunds take?", "-k", "2")
    assert hits[0]["path"] == "notes/billing.md" and set(hits[0]["ranks"]) == {"dense", "bm25"}
    assert hits[0]["context"] and hits[0]["start_line"] == 1

    change_corpus(notes)
    assert main(command[:-2]) == 0, capsys.readouterr().err  # the folder remembers the server and the collection
    out = capsys.readouterr().out
    assert "1 new, 1 changed, 1 unchanged, 1 removed" in out
    record = MilvusIndexRecord.read(index_dir)
    assert sorted(_rows(index_dir)) == sorted(record.chunk_ids())
    assert _query(capsys, str(index_dir), "when does the office open?", "-k", "1")[0]["path"] == "notes/faq.md"

    assert main(["remove", str(notes / "faq.md"), "--index-dir", str(index_dir)]) == 0
    assert "removed 1 files" in capsys.readouterr().out
    assert sorted(_rows(index_dir)) == sorted(MilvusIndexRecord.read(index_dir).chunk_ids())
    assert all(h["path"] != "notes/faq.md" for h in _query(capsys, str(index_dir), "office opens at nine"))

    # a rebuild empties the same collection on the same server and fills it again, from the caches
    assert main(["index", str(notes), "--index-dir", str(index_dir), "--rebuild", "--no-progress", "--store", "none"]) == 0
    out = capsys.readouterr().out
    assert "collection: cli_notes" in out and "0 computed" in out
    assert sorted(_rows(index_dir)) == sorted(MilvusIndexRecord.read(index_dir).chunk_ids())
    # chunks fitted to the embedder's window: recorded, and every file re-chunked once
    assert main(["index", str(notes), "--index-dir", str(index_dir), "--fit-chunks", "--no-progress", "--store", "none"]) == 0
    assert "fitted to 256 tokens" in capsys.readouterr().out and MilvusIndexRecord.read(index_dir).chunk_tokens == 256
    assert main(["index", str(notes), "--index-dir", str(index_dir), "--no-progress", "--store", "none"]) == 0
    assert "0 changed, 3 unchanged" in capsys.readouterr().out  # as recorded: still fitted
    assert sorted(_rows(index_dir)) == sorted(MilvusIndexRecord.read(index_dir).chunk_ids())

    # an index of its own files is not turned into one on Milvus
    local = tmp_path / "local"
    assert main(["index", str(notes), "--index-dir", str(local), "--embedder", "local", "--no-progress", "--store", "none"]) == 0
    capsys.readouterr()
    assert main(["index", str(notes), "--index-dir", str(local), "--milvus-uri", milvus_server.uri]) == 2
    assert "not on Milvus" in capsys.readouterr().err


def test_query_with_the_server_down_names_it_and_answers_once_it_is_back(tmp_path, capsys, pytestconfig):
    notes, index_dir = make_corpus(tmp_path), tmp_path / "ix"
    with milvus_lite(pytestconfig) as server:
        assert main(["index", str(notes), "--index-dir", str(index_dir), "--milvus-uri", server.uri, "--embedder", "local",
                     "--contexts", "structural", "--no-progress", "--store", "none"]) == 0
        want = _query(capsys, str(index_dir), "refunds")
        server.stop()
        assert main(["query", str(index_dir), "refunds", "--rerank", "none"]) == 2
        err = capsys.readouterr().err
        assert f"error: the Milvus server at {server.uri} does not answer" in err and "Traceback" not in err, err
        assert "pymilvus" not in err.split("error:")[0], err  # no log lines before the one error
        server.start()
        assert _query(capsys, str(index_dir), "refunds") == want


def test_index_whose_milvus_server_is_killed_completes_on_rerun_paying_nothing_twice(tmp_path, monkeypatch, capsys, pytestconfig):
    docs, index_dir = _guides(tmp_path / "docs", 8), tmp_path / "ix"
    with milvus_lite(pytestconfig) as milvus, FakeAnthropicServer(latency_s=0.05) as claude:
        monkeypatch.setenv("ANTHROPIC_API_KEY", claude.api_key)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", claude.url)
        command = ["index", str(docs), "--index-dir", str(index_dir), "--contexts", "anthropic", "--embedder", "local",
                   "--milvus-uri", milvus.uri, "--concurrency", "2", "--no-progress", "--store", "none",
                   "--json", str(tmp_path / "r.json")]

        def kill_mid_run() -> None:  # the server dies while contexts are being generated
            while claude.stats()["messages"] < 6:
                time.sleep(0.01)
            milvus.kill()

        killer = threading.Thread(target=kill_mid_run, daemon=True)
        killer.start()
        assert main(command) == 2
        killer.join(30)
        err = capsys.readouterr().err
        assert f"the Milvus server at {milvus.uri} does not answer" in err and "Traceback" not in err, err
        paid = claude.stats()["messages"]

        milvus.start()  # back, on the same port and data
        assert main(command) == 0, capsys.readouterr().err
        report = json.loads((tmp_path / "r.json").read_text())
        assert claude.stats()["messages"] == paid, "a context was paid for again"
        assert report["contexts"]["generated"] == 0 and report["contexts"]["store_hits"] == report["chunks_total"]
        assert report["embedded"] == 0 and report["embedding_cache_hits"] == report["chunks_total"], report
        rows = _rows(index_dir)
        assert len(rows) == len(set(rows)) == report["chunks_total"]
        assert sorted(rows) == sorted(MilvusIndexRecord.read(index_dir).chunk_ids())
        found = _query(capsys, str(index_dir), "valve 3-2 closed before pump 3")
        assert found and found[0]["path"].endswith("valves3.md")
