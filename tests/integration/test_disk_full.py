"""A full disk under the context store and under an index folder: on a small tmpfs mounted for the
test (root only; skipped elsewhere), filled mid-run by another file. No context that was paid for
is lost, the previous index stays fully queryable, the error names the folder and the space
needed, and the next run after freeing space completes."""

from __future__ import annotations

import errno
import shutil
import subprocess
import threading
import time
from pathlib import Path

import anthropic
import pytest

from contextual_retrieval_core import Chunk, Document
from contextual_retrieval_core.contextualize.config import ContextualizeConfig
from contextual_retrieval_core.contextualize.contextualizer import Contextualizer
from contextual_retrieval_core.generators import AnthropicContextGenerator
from contextual_retrieval_core.store.context_store import ContextStore
from contextual_retrieval_core.store.errors import ContextStoreError, StoreFullError
from tests.fakes.anthropic_server import FakeAnthropicServer

MODEL = "claude-haiku-4-5"


@pytest.fixture
def small_disk(tmp_path):
    """A folder on its own tmpfs; call it with a size in MB."""
    mounts: list[Path] = []

    def mount(mb: int) -> Path:
        folder = tmp_path / f"disk{len(mounts)}"
        folder.mkdir()
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={mb}m", "tmpfs", str(folder)], capture_output=True)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
        mounts.append(folder)
        return folder

    yield mount
    for folder in mounts:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)


def fill(folder: Path, leave: int = 0) -> Path:
    """Write a file in `folder` until the disk has at most `leave` bytes free."""
    filler = folder / "filler.bin"
    with open(filler, "ab") as f:
        while shutil.disk_usage(folder).free > leave:
            try:
                f.write(b"\0" * min(1 << 16, max(shutil.disk_usage(folder).free - leave, 4096)))
                f.flush()
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
                break
    return filler


def corpus(n_docs: int = 40, per_doc: int = 5) -> tuple[list[Document], list[Chunk]]:
    documents, chunks = [], []
    for d in range(n_docs):
        parts = [f"Section {i} of manual {d}: " + f"the valve {d}-{i} is closed before the pump starts. " * 8 for i in range(per_doc)]
        doc = Document(f"manual{d}.md", "\n\n".join(parts))
        documents.append(doc)
        chunks += [Chunk(f"manual{d}-{i}", doc.id, part, i) for i, part in enumerate(parts)]
    return documents, chunks


def test_a_store_whose_disk_fills_mid_run_keeps_every_paid_context(small_disk, tmp_path):
    disk = small_disk(8)
    store_path = disk / "contexts.sqlite3"
    documents, chunks = corpus()
    with FakeAnthropicServer(latency_s=0.05) as server:
        gen = AnthropicContextGenerator(MODEL, client=anthropic.Anthropic(api_key=server.api_key, base_url=server.url))
        filled: list[Path] = []

        def filler() -> None:  # the disk fills up once a share of the contexts are stored
            while not filled:
                time.sleep(0.02)
                if store_path.exists():
                    with ContextStore(store_path, read_only=True) as s:
                        if len(s) >= 30:
                            filled.append(fill(disk))

        thread = threading.Thread(target=filler, daemon=True)
        thread.start()
        c = Contextualizer(gen, store_path, config=ContextualizeConfig(concurrency=4, show_progress=False))
        with pytest.raises(ContextStoreError) as info:
            c.contextualize(documents, chunks)
        thread.join(10)
        assert filled, "the disk was not filled"
        message = str(info.value)
        assert isinstance(info.value, StoreFullError) and str(disk) in message and "MB" in message, message
        paid = server.stats()["messages"]
        with ContextStore(store_path, read_only=True) as s:
            stored = len(s)
        assert stored == paid, f"{paid - stored} paid contexts were lost"  # every answer that came back is kept
        assert paid < len(chunks)  # the run stopped sending
        filled[0].unlink()  # space freed: the next run completes and pays for the rest only
        result = c.contextualize(documents, chunks)
        assert result.report.store_hits == stored and server.stats()["messages"] == len(chunks)


def test_a_store_on_a_disk_without_room_refuses_before_paying(small_disk):
    disk = small_disk(4)
    store_path = disk / "contexts.sqlite3"
    ContextStore(store_path).close()
    fill(disk, leave=64 * 1024)
    documents, chunks = corpus()
    with FakeAnthropicServer() as server:
        gen = AnthropicContextGenerator(MODEL, client=anthropic.Anthropic(api_key=server.api_key, base_url=server.url))
        with pytest.raises(StoreFullError, match=r"needs about [\d.]+ MB") as info:
            Contextualizer(gen, store_path, config=ContextualizeConfig(show_progress=False)).contextualize(documents, chunks)
        assert str(disk) in str(info.value) and server.stats()["requests"] == 0


# -- the index folder ------------------------------------------------------------------------------


def _guides(folder: Path, start: int, n: int) -> None:
    folder.mkdir(exist_ok=True)
    for i in range(start, start + n):
        body = "\n\n".join(f"## Step {j}\n\n" + f"Guide {i} step {j}: tighten bolt {i}-{j} to the torque in table {j}. " * 10
                           for j in range(6))
        (folder / f"guide{i}.md").write_text(f"# Guide {i}\n\n{body}\n", encoding="utf-8")


def test_an_index_whose_disk_fills_mid_update_keeps_the_previous_index_and_resumes(small_disk, tmp_path, offline_embedder, capsys):
    from contextual_retrieval_core.app.cli import main
    from contextual_retrieval_core.index.contextual_index import ContextualIndex

    disk = small_disk(48)
    docs, index_dir = tmp_path / "docs", disk / "ix"
    command = ["index", str(docs), "--index-dir", str(index_dir), "--embedder", "local", "--no-progress"]
    _guides(docs, 0, 4)
    ContextualIndex(index_dir, embedder=offline_embedder).update([docs], show_progress=False)

    def answers() -> list:
        index = ContextualIndex(index_dir, embedder=offline_embedder)
        return [len(index)] + [(h.id, round(h.score, 6)) for h in index.search("torque of bolt 2-3", 5)]

    before = answers()
    _guides(docs, 4, 24)  # many more files to add

    # a disk already too full: refused before anything is generated or written
    filler = fill(disk, leave=256 * 1024)
    assert main(command) == 2
    err = capsys.readouterr().err
    assert f"no space left on the disk holding the index {index_dir}" in err and "needs about" in err, err
    assert "nothing was generated or written" in err and answers() == before
    filler.unlink()

    # the disk fills while the update embeds and writes
    cache = index_dir / "embeddings.sqlite3"
    size = cache.stat().st_size
    filled: list[Path] = []

    def fill_when_writing() -> None:
        while not filled:
            time.sleep(0.01)
            if cache.stat().st_size > size or (index_dir / "embeddings.sqlite3-wal").exists():
                filled.append(fill(disk))

    thread = threading.Thread(target=fill_when_writing, daemon=True)
    thread.start()
    code = main(command)
    thread.join(10)
    err = capsys.readouterr().err
    assert filled and code == 2, err
    assert f"no space left on the disk holding the index {index_dir}" in err and "MB" in err and "Traceback" not in err, err
    assert "The previous index is unchanged" in err
    assert answers() == before  # the previous index, whole and queryable

    filled[0].unlink()  # space freed: the next run completes
    assert main(command) == 0, capsys.readouterr().err
    done = ContextualIndex(index_dir, embedder=offline_embedder)
    assert len(done) > before[0] and "docs/guide20.md" in {h.path for h in done.search("Guide 20 step 4 bolt 20-4", 3)}
