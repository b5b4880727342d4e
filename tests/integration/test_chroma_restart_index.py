"""A Chroma server (`chroma run`) stopped during `contextual-retrieval index --chroma-url` and
started again: while it is down the error names the server; the next `index` finishes without
paying for a context again or embedding a chunk again (the context store and the embedding cache
live in the index folder, and both were written before the vectors went to the server)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from contextual_retrieval_core.app.cli import main
from tests.fakes.anthropic_server import FakeAnthropicServer
from tests.integration.test_chroma_restart import ChromaProcess
from tests.servers import chroma_executable

pytestmark = pytest.mark.timeout(300)


def _guides(folder: Path, n: int) -> Path:
    folder.mkdir()
    for i in range(n):
        body = "\n\n".join(f"## Part {j}\n\n" + f"Valve {i}-{j} must be closed before pump {i} starts. " * 8 for j in range(4))
        (folder / f"valves{i}.md").write_text(f"# Valves {i}\n\n{body}\n", encoding="utf-8")
    return folder


def test_index_survives_a_chroma_server_restart_without_paying_or_embedding_twice(tmp_path, monkeypatch, capsys, pytestconfig):
    exe = chroma_executable(pytestconfig)
    docs, index_dir = _guides(tmp_path / "docs", 8), tmp_path / "ix"
    (tmp_path / "chroma").mkdir()
    chroma = ChromaProcess(exe, tmp_path / "chroma")
    chroma.start()
    url = chroma.url
    try:
        with FakeAnthropicServer(latency_s=0.05) as server:
            monkeypatch.setenv("ANTHROPIC_API_KEY", server.api_key)
            monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
            command = ["index", str(docs), "--index-dir", str(index_dir), "--contexts", "anthropic", "--embedder", "local",
                       "--chroma-url", url, "--concurrency", "2", "--no-progress", "--json", str(tmp_path / "r.json")]

            def stop_mid_run() -> None:  # the server goes away while contexts are being generated
                while server.stats()["messages"] < 6:
                    time.sleep(0.01)
                chroma.stop()

            stopper = threading.Thread(target=stop_mid_run, daemon=True)
            stopper.start()
            assert main(command) == 2
            stopper.join(30)
            err = capsys.readouterr().err
            assert f"the Chroma server at {url} does not answer" in err and "Traceback" not in err, err
            paid = server.stats()["messages"]

            chroma.start()  # back, on the same port and data
            assert main(command) == 0, capsys.readouterr().err
            report = json.loads((tmp_path / "r.json").read_text())
            assert server.stats()["messages"] == paid, "a context was paid for again"
            assert report["contexts"]["generated"] == 0 and report["contexts"]["store_hits"] == report["chunks_total"]
            # every row (a chunk's own, and the windows of long ones) from the cache
            assert report["embedded"] == 0 and report["embedding_cache_hits"] >= report["chunks_total"], report
            capsys.readouterr()
            assert main(["query", str(index_dir), "valve 3-2 closed before pump 3", "--json", "--rerank", "none"]) == 0
            found = json.loads(capsys.readouterr().out)
            assert found and found[0]["path"].endswith("valves3.md")
    finally:
        chroma.stop()
