"""A Chroma server (`chroma run`) stopped and started again under a loop of queries against an
index built with ``--chroma-url``: while it is down each query fails with an error naming the
server; once it is back the same `ContextualIndex` (and the ``query`` command) answers again, the
same answers as before, without restarting the process."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("chromadb")

from contextual_retrieval_core.app.cli import main  # noqa: E402
from contextual_retrieval_core.app.demo_corpus import DEMO_DOCUMENTS  # noqa: E402
from contextual_retrieval_core.embeddings.minilm import LocalMiniLMEmbedder  # noqa: E402
from contextual_retrieval_core.index.contextual_index import ContextualIndex  # noqa: E402
from tests.servers import _stop, chroma_executable, free_port  # noqa: E402

QUERIES = ["fork server child process", "battery life of the Widget Pro", "parental leave at the Austin office"]


class ChromaProcess:
    """One `chroma run` on a fixed port and data folder, to stop and start again."""

    def __init__(self, exe: str, data: Path) -> None:
        self.exe, self.data, self.port = exe, data, free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        log = open(self.data / "server.log", "ab")  # noqa: SIM115 - the process holds it
        self.proc = subprocess.Popen(
            [self.exe, "run", "--path", str(self.data / "db"), "--port", str(self.port), "--host", "127.0.0.1"],
            stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "ANONYMIZED_TELEMETRY": "False"},
        )
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, (self.data / "server.log").read_text()[-2000:]
            try:
                with urllib.request.urlopen(f"{self.url}/api/v2/heartbeat", timeout=2) as resp:
                    if resp.status == 200:
                        return
            except OSError:
                time.sleep(0.2)
        raise AssertionError(f"chroma run did not answer on {self.url} within 90 s")

    def stop(self) -> None:
        if self.proc is not None:
            _stop(self.proc)
            self.proc = None


@pytest.fixture
def server(pytestconfig: pytest.Config, tmp_path: Path):
    chroma = ChromaProcess(chroma_executable(pytestconfig), tmp_path)
    chroma.start()
    try:
        yield chroma
    finally:
        chroma.stop()


def cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


def test_queries_name_the_server_while_it_is_down_and_recover_when_it_is_back(server: ChromaProcess, tmp_path: Path) -> None:
    src, index_dir = tmp_path / "src", tmp_path / "index"
    for name, text in DEMO_DOCUMENTS:
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_text(text, encoding="utf-8")
    code, _, err = cli("index", str(src), "--index-dir", str(index_dir), "--no-progress", "--embedder", "local",
                       "--contexts", "structural", "--chroma-url", server.url)
    assert code == 0, err
    index = ContextualIndex(index_dir, embedder=LocalMiniLMEmbedder())
    before = [[h.id for h in index.search(q, top_k=10)] for q in QUERIES]
    assert all(before)
    code, out, _ = cli("query", str(index_dir), QUERIES[0], "-k", "10", "--json")
    assert code == 0 and [h["id"] for h in json.loads(out)] == before[0]

    server.stop()
    for q in QUERIES:  # the loop goes on: every query fails, naming the server and what to do
        with pytest.raises(ConnectionError) as failed:
            index.search(q)
        assert server.url in str(failed.value) and "chroma run" in str(failed.value)
    code, _, err = cli("query", str(index_dir), QUERIES[0])
    assert code == 2 and server.url in err and "chroma run" in err and "Traceback" not in err

    server.start()  # same port, same data
    assert [[h.id for h in index.search(q, top_k=10)] for q in QUERIES] == before
    code, out, _ = cli("query", str(index_dir), QUERIES[0], "-k", "10", "--json")
    assert code == 0 and [h["id"] for h in json.loads(out)] == before[0]
