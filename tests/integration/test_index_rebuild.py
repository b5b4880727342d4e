"""`index --rebuild` beside a running `index` (issue 43): the rebuild takes the folder's lock before
it touches anything, so started while another `index` runs it stops with the lock message (or,
with --lock-wait, waits), and the folder goes on serving the old version; the rebuild writes its
version beside the current one and switches atomically, so queries during it answer from the old
version or the new, never fail. Real processes, real files; Claude is the loopback server, made
slow so that the first run is mid-flight when the rebuild starts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from contextual_retrieval_core.app.cli import main
from tests.fakes.anthropic_server import FakeAnthropicServer
from tests.notes_corpus import change_corpus, make_corpus

pytestmark = pytest.mark.timeout(300)

CLI = "import sys; from contextual_retrieval_core.app.cli import main; sys.exit(main(sys.argv[1:]))"


def refund_days(ix: Path, capsys) -> str:
    capsys.readouterr()
    assert main(["query", str(ix), "how many days until refunds are issued", "--json", "-k", "1"]) == 0
    (hit,) = json.loads(capsys.readouterr().out)
    assert hit["path"] == "notes/billing.md"
    return "14" if "14 days" in hit["text"] else "30" if "30 days" in hit["text"] else hit["text"]


def holder(ix: Path) -> str:
    try:
        return (ix / ".lock").read_text().strip("\x00 \n")
    except OSError:
        return ""


@pytest.mark.usefixtures("offline_env")
def test_a_rebuild_during_another_index_run_never_touches_the_served_version(tmp_path, monkeypatch, capsys):
    with FakeAnthropicServer() as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", server.api_key)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        corpus = make_corpus(tmp_path)
        ix = tmp_path / "ix"
        base = ["index", str(corpus), "--index-dir", str(ix), "--embedder", "local", "--no-progress"]
        assert main([*base, "--contexts", "anthropic"]) == 0
        assert refund_days(ix, capsys) == "14"
        paid = len(server.requests_to("/v1/messages"))

        change_corpus(corpus)
        server.hang_next(8)  # the running update waits on its first context request
        first = subprocess.Popen([sys.executable, "-c", CLI, *base], env=dict(os.environ), stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        # the other run holds the lock and waits on its first context request: the files it makes
        # before generating (its disk-space reserve) are there before the listing below
        while holder(ix) != str(first.pid) or len(server.requests_to("/v1/messages")) <= paid:
            assert first.poll() is None and time.monotonic() < deadline, first.communicate()
            time.sleep(0.05)

        before = sorted(p.name for p in ix.iterdir())
        assert main([*base, "--rebuild"]) == 2
        err = capsys.readouterr().err
        assert "is updating" in err and f"pid {first.pid}" in err and "--lock-wait" in err
        assert sorted(p.name for p in ix.iterdir()) == before  # nothing touched, nothing wiped
        assert refund_days(ix, capsys) == "14"  # the old version serves

        # a rebuild that waits: it starts when the first run ends; queries meanwhile answer old or new
        rebuild = subprocess.Popen([sys.executable, "-c", CLI, *base, "--rebuild", "--lock-wait", "120"], env=dict(os.environ),
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        seen = []
        while rebuild.poll() is None:
            seen.append(refund_days(ix, capsys))
        out, err = first.communicate(timeout=120)
        assert first.returncode == 0, err
        out, err = rebuild.communicate(timeout=120)
        assert rebuild.returncode == 0, err
        assert set(seen) <= {"14", "30"} and seen, seen
        assert refund_days(ix, capsys) == "30"  # the new version serves
        # the rebuild paid for nothing: every context came from the store the first run filled
        requests = len(server.requests_to("/v1/messages"))
        assert requests - paid == 2  # the first run's two new chunks (billing changed, faq added); none by the rebuild
        assert len([p for p in ix.glob("bm25*")]) == 1
