"""What only real child processes show: the console entry point, tie order under other hash
seeds, a query piped into `head`, and runs killed with SIGKILL (the contextualizer half way or at
a random point, a context store writer) that resume without paying twice or losing a write.
Each test starts fresh Python interpreters, so they live here rather than in tests/unit."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

from contextual_retrieval_core.contextualize.config import ContextualizeConfig
from contextual_retrieval_core.contextualize.contextualizer import Contextualizer
from contextual_retrieval_core.store.context_store import ContextStore
from tests.fakes.anthropic_server import FakeAnthropicServer
from tests.integration.test_index_cli_edges import notes, report
from tests.unit.contextualize.test_contextualizer import MODEL, _chunk_of, generator, make_corpus, message_requests
from tests.unit.contextualize.test_generation_failures import _paid, _sync_gen
from tests.unit.store.test_store import _key

REPO = ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}

_CHILD = """
import sys, time
from contextual_retrieval_core.generators.prompts import DEFAULT_PROMPT
from contextual_retrieval_core.store.context_store import ContextStore
path, prefix, n, linger = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1"
store = ContextStore(path)
for i in range(n):
    key = ContextStore.key("gen", "model", DEFAULT_PROMPT.identity, "doc " + prefix, "chunk %d" % i)
    store.put(key, prefix + "-%d" % i, generator="gen", model="model", original_index=i)
print("done", flush=True)
if linger:
    time.sleep(600)
"""


def test_console_script_help():
    result = subprocess.run([sys.executable, "-m", "contextual_retrieval_core.app.cli", "--help"], capture_output=True, text=True)
    assert result.returncode == 0 and "eval" in result.stdout


def test_tie_order_does_not_depend_on_string_hashing():
    # set or hash order would show up as a different order of these 16 ids under another seed
    code = (
        "from contextual_retrieval_core.search.rank_fusion import reciprocal_rank_fusion as fuse\n"
        "print(' '.join(h.id for h in fuse([[c + '1', c + '2'] for c in 'hgfedcba'], rrf_k=0)))"
    )
    expected = [f"{c}{n}" for n in "12" for c in "hgfedcba"]
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run(
            [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True
        )
        assert out.stdout.split() == expected


def test_query_into_a_closed_pipe_exits_quietly(tmp_path):
    folder = notes(tmp_path)
    ix = tmp_path / "ix"
    report(tmp_path, folder, ix)
    code = ("import sys; from contextual_retrieval_core.app.cli import main; "
            f"sys.exit(main(['query', {str(ix)!r}, 'refunds', '--full']))")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.readline()
    proc.stdout.close()  # what `| head -1` does
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0
    assert "Traceback" not in err and "BrokenPipeError" not in err


def test_sigkill_half_way_then_resume_repeats_nothing(tmp_path):
    documents, chunks = make_corpus(big_docs=2, small_docs=4, chunks_per_doc=5, seed=7)
    corpus = tmp_path / "corpus.json"
    corpus.write_text(json.dumps({
        "documents": [{"id": d.id, "text": d.text} for d in documents],
        "chunks": [{"id": c.id, "document_id": c.document_id, "text": c.text, "index": c.index} for c in chunks],
    }))
    store_path = tmp_path / "killed.sqlite3"
    with FakeAnthropicServer(latency_s=0.15) as srv:
        script = textwrap.dedent(f"""
            import json, sys, anthropic
            sys.path[:0] = [{str(REPO)!r}]
            from contextual_retrieval_core import Chunk, Document
            from contextual_retrieval_core.contextualize.config import ContextualizeConfig
            from contextual_retrieval_core.contextualize.contextualizer import Contextualizer
            from contextual_retrieval_core.generators import AnthropicContextGenerator
            data = json.load(open({str(corpus)!r}))
            docs = [Document(d["id"], d["text"]) for d in data["documents"]]
            chunks = [Chunk(c["id"], c["document_id"], c["text"], c["index"]) for c in data["chunks"]]
            client = anthropic.Anthropic(api_key={srv.api_key!r}, base_url={srv.url!r})
            gen = AnthropicContextGenerator({MODEL!r}, client=client)
            Contextualizer(gen, {str(store_path)!r}, config=ContextualizeConfig(concurrency=2, show_progress=False)).contextualize(docs, chunks)
            print("finished", flush=True)
        """)
        proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.time() + 60
        stored = 0
        while time.time() < deadline:
            time.sleep(0.05)
            with ContextStore(store_path) as store:
                stored = len(store)
            if stored >= len(chunks) // 2:
                break
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert 0 < stored < len(chunks), proc.stderr.read().decode()[-2000:]
        with ContextStore(store_path) as store:
            store.export_jsonl(tmp_path / "made.jsonl")
        made_before = {json.loads(line)["chunk_id"] for line in (tmp_path / "made.jsonl").read_text().splitlines()}
        killed_requests = len(message_requests(srv))
        resumed = Contextualizer(generator(srv), store_path, config=ContextualizeConfig(concurrency=2, show_progress=False)).contextualize(documents, chunks)
        assert resumed.report.store_hits >= len(made_before)
        # nothing made before the kill was asked for again
        later = message_requests(srv)[killed_requests:]
        asked_later = {_chunk_of(r.body) for r in later}
        assert not asked_later & {c.text for c in chunks if c.id in made_before}
        # the output equals an uninterrupted run
        fresh = Contextualizer(generator(srv), tmp_path / "fresh.sqlite3", config=ContextualizeConfig(show_progress=False)).contextualize(documents, chunks)
        assert [c.context for c in resumed.chunks] == [c.context for c in fresh.chunks]


def test_sigkill_at_a_random_point_repays_at_most_the_requests_in_flight(tmp_path):
    documents, chunks = make_corpus(big_docs=2, small_docs=5, chunks_per_doc=5, seed=11)
    corpus = tmp_path / "corpus.json"
    corpus.write_text(json.dumps({
        "documents": [{"id": d.id, "text": d.text} for d in documents],
        "chunks": [{"id": c.id, "document_id": c.document_id, "text": c.text, "index": c.index} for c in chunks],
    }))  # fmt: skip
    store_path = tmp_path / "killed.sqlite3"
    seed = int.from_bytes(os.urandom(4), "big")
    rng = random.Random(seed)
    # at least 12 chunks left after the threshold: three rounds of 4 requests at 0.3 s each, well past
    # the extra wait, so the kill lands mid-run even on a loaded machine
    threshold, extra_s = rng.randint(1, len(chunks) - 12), rng.uniform(0.0, 0.15)
    concurrency = 4
    with FakeAnthropicServer(latency_s=0.3) as srv:
        script = textwrap.dedent(f"""
            import json, sys, anthropic
            sys.path[:0] = [{str(REPO)!r}]
            from contextual_retrieval_core import Chunk, Document
            from contextual_retrieval_core.contextualize.config import ContextualizeConfig
            from contextual_retrieval_core.contextualize.contextualizer import Contextualizer
            from contextual_retrieval_core.generators import AnthropicContextGenerator
            data = json.load(open({str(corpus)!r}))
            docs = [Document(d["id"], d["text"]) for d in data["documents"]]
            chunks = [Chunk(c["id"], c["document_id"], c["text"], c["index"]) for c in data["chunks"]]
            client = anthropic.Anthropic(api_key={srv.api_key!r}, base_url={srv.url!r})
            gen = AnthropicContextGenerator({MODEL!r}, client=client)
            Contextualizer(gen, {str(store_path)!r}, config=ContextualizeConfig(concurrency={concurrency}, show_progress=False)).contextualize(docs, chunks)
        """)
        proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.time() + 60
        while time.time() < deadline and proc.poll() is None:
            time.sleep(0.01)
            with ContextStore(store_path) as store:
                if len(store) >= threshold:
                    break
        time.sleep(extra_s)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        time.sleep(0.2)  # let the server finish the requests the kill cut off (they are paid)
        paid_before = Counter(_paid(srv))
        stored_before = len(ContextStore(store_path))
        assert 0 < stored_before < len(chunks), (seed, proc.stderr.read().decode()[-2000:])
        n = len(srv.requests)
        result = Contextualizer(_sync_gen(srv), store_path, config=ContextualizeConfig(concurrency=concurrency, show_progress=False)).contextualize(
            documents, chunks
        )
        repaid = [t for t in _paid(srv)[len([r for r in srv.requests[:n] if r.path == "/v1/messages" and r.status == 200]):]
                  if paid_before[t]]
        assert result.report.generated == len(chunks) - stored_before
        assert len(repaid) <= concurrency, f"seed {seed}: {len(repaid)} answers paid twice"


def test_concurrent_processes_write_the_same_file(tmp_path):
    path = tmp_path / "c.sqlite"
    with ContextStore(path) as store:
        child = subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(path), "child", "50", "0"],
            env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for i in range(50):
            store.put(_key(i, "parent"), f"parent-{i}", generator="gen", model="model")
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
        assert out.strip() == "done"
        assert len(store) == 100
        got = store.get_many([_key(i, "child") for i in range(50)])
        assert got == {_key(i, "child"): f"child-{i}" for i in range(50)}


def test_sigkilled_writer_loses_nothing(tmp_path):
    path = tmp_path / "c.sqlite"
    n = 30
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(path), "killed", str(n), "1"],
        env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        line = child.stdout.readline()
        assert line.strip() == "done", child.stderr.read() if child.poll() is not None else line
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            os.kill(child.pid, signal.SIGKILL)
            child.wait()
        child.stdout.close()
        child.stderr.close()
    assert child.returncode == -signal.SIGKILL
    with ContextStore(path) as store:
        assert len(store) == n
        assert store.get(_key(n - 1, "killed")) == f"killed-{n - 1}"
