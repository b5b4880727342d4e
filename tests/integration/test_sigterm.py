"""SIGTERM to `contextual-retrieval index` and to a framework ingestion behaves as Ctrl-C does:
sending stops, what arrived is kept, the process exits non-zero with a message, and the next run
pays only for the rest. Real child processes against the loopback Anthropic server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from contextual_retrieval_core.store.context_store import ContextStore
from tests.fakes.anthropic_server import FakeAnthropicServer

REPO = Path(__file__).resolve().parents[2]
MODEL = "claude-haiku-4-5"


def _files(folder: Path, n: int = 6) -> Path:
    folder.mkdir()
    for i in range(n):
        sections = "\n\n".join(f"## Part {j}\n\n" + f"Topic {i}-{j} explains step {j} of process {i}. " * 12 for j in range(4))
        (folder / f"guide{i}.md").write_text(f"# Guide {i}\n\n{sections}\n", encoding="utf-8")
    return folder


def _wait_for_contexts(store: Path, at_least: int, proc: subprocess.Popen, seconds: float = 60) -> int:
    deadline = time.time() + seconds
    while time.time() < deadline:
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        if store.exists():
            with ContextStore(store) as s:
                if len(s) >= at_least:
                    return len(s)
        time.sleep(0.05)
    raise AssertionError("no contexts arrived")


def _index_command(corpus: Path, index: Path, concurrency: int) -> list[str]:
    return [sys.executable, "-m", "contextual_retrieval_core.app.cli", "index", str(corpus), "--index-dir", str(index),
            "--contexts", "anthropic", "--embedder", "local", "--concurrency", str(concurrency), "--no-progress"]


def _env(server: FakeAnthropicServer, home: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "ANTHROPIC_API_KEY": server.api_key, "ANTHROPIC_BASE_URL": server.url,
            "XDG_CACHE_HOME": str(home), "VOYAGE_API_KEY": "", "COHERE_API_KEY": ""}


@pytest.mark.parametrize("sig, code, message", [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "stopped by SIGTERM")])
def test_index_stops_on_a_signal_keeps_what_arrived_and_resumes(tmp_path, sig, code, message):
    """A first signal at concurrency 8: sending stops, the requests in flight end and are stored,
    and the rerun asks for exactly the rest: one request a chunk over both runs."""
    corpus, index = _files(tmp_path / "docs", n=8), tmp_path / "ix"
    command = _index_command(corpus, index, 8)
    with FakeAnthropicServer(latency_s=0.3) as server:
        env = _env(server, tmp_path / "cache")
        proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        store = index / "contexts.sqlite3"
        _wait_for_contexts(store, 4, proc)
        proc.send_signal(sig)
        try:
            _, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise AssertionError("the run did not stop on the signal") from None
        assert proc.returncode == code, (proc.returncode, err[-2000:])
        assert message in err and "Traceback" not in err
        sent = len(server.requests_to("/v1/messages"))
        time.sleep(0.5)
        assert len(server.requests_to("/v1/messages")) == sent  # nothing is sent after the exit
        with ContextStore(store) as s:
            kept = len(s)
        paid = server.stats()["messages"]
        assert kept >= 4 and paid == kept  # the requests in flight were waited for and stored
        server.latency_s = 0.0
        again = subprocess.run([*command, "--json", str(tmp_path / "r.json")], env=env, capture_output=True, text=True, timeout=300)
        assert again.returncode == 0, again.stderr[-2000:]
        report = json.loads((tmp_path / "r.json").read_text())
        assert report["contexts"]["store_hits"] >= kept
        assert server.stats()["messages"] - paid == report["contexts"]["generated"]  # the rest, once
        assert server.stats()["messages"] == report["chunks_total"]  # over both runs: one request a chunk


_FRAMEWORK = """
import sys
from langchain_anthropic import ChatAnthropic
from langchain_core.documents import Document
from langchain_text_splitters import RecursiveCharacterTextSplitter
from contextual_retrieval_langchain import ContextualDocumentTransformer
url, key, store, folder = sys.argv[1:5]
import pathlib
docs = [Document(page_content=p.read_text(), metadata={"source": p.name}) for p in sorted(pathlib.Path(folder).iterdir())]
llm = ChatAnthropic(model="claude-haiku-4-5", api_key=key, base_url=url, max_tokens=300)
part = ContextualDocumentTransformer(generator=llm, store=store, concurrency=2, show_progress=False,
                                     text_splitter=RecursiveCharacterTextSplitter(chunk_size=300))
if sys.argv[5] == "async":
    import asyncio
    asyncio.run(part.atransform_documents(docs))
else:
    part.transform_documents(docs)
print("finished", flush=True)
"""


@pytest.mark.parametrize("way", ["sync", "async"])
def test_a_framework_ingestion_stops_on_sigterm_as_on_ctrl_c(tmp_path, way):
    corpus, store = _files(tmp_path / "docs"), tmp_path / "contexts.sqlite3"
    with FakeAnthropicServer(latency_s=0.3) as server:
        command = [sys.executable, "-c", textwrap.dedent(_FRAMEWORK), server.url, server.api_key, str(store), str(corpus), way]
        proc = subprocess.Popen(command, env=_env(server, tmp_path / "cache"), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        _wait_for_contexts(store, 2, proc)
        proc.send_signal(signal.SIGTERM)
        try:
            out, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise AssertionError("the ingestion did not stop on SIGTERM") from None
        assert proc.returncode != 0 and proc.returncode != -signal.SIGTERM, (proc.returncode, err[-2000:])
        assert "finished" not in out and "Terminated: stopped by SIGTERM" in err
        with ContextStore(store) as s:
            kept = len(s)
            assert not s.claims()  # the run released its work claims, as after Ctrl-C
        assert kept >= 2 and server.stats()["messages"] - kept <= 2
