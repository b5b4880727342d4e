"""Damage to a 25,000-chunk index folder as `index` builds it (issue 43): every file a query can
read is truncated, has a 4 KB block zeroed, is deleted, or is replaced by the same file of another
index, in turn; every case either fails with a clear error naming the file and the fix, or
answers exactly as the healthy folder does. Never a crash, never a changed answer. At this size
the folder's dense side is the IVF index (`dense_index`'s threshold is 20,000 rows). And a
read-only copy, read by an unprivileged user, answers the same as the folder itself."""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

from contextual_retrieval_core.index import _version
from contextual_retrieval_core.index.contextual_index import ContextualIndex
from tests import notes_corpus

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

WORDS = [f"{a}{b}" for a in ("kar", "mel", "tos", "vin", "dur", "pal", "sen", "gor", "lum", "rix")
         for b in ("ba", "do", "fi", "gu", "ke", "lo", "mu", "ne", "po", "ra", "si", "tu")]


def corpus(root: Path, files: int, paragraphs: int, seed: int) -> Path:
    """`files` text files of `paragraphs` paragraphs (about 600 characters: one chunk each)."""
    rng = random.Random(seed)
    root.mkdir(parents=True)
    for f in range(files):
        text = "\n\n".join(" ".join([f"Record {f}-{p}."] + rng.choices(WORDS, k=90)) for p in range(paragraphs))
        (root / f"notes-{f:03d}.txt").write_text(text + "\n", encoding="utf-8")
    return root


QUERIES = [" ".join(random.Random(i).choices(WORDS, k=6)) for i in range(12)]


class CountingEmbedder(notes_corpus.CountingEmbedder):
    """`tests.notes_corpus.CountingEmbedder` bit for bit (same class name and model, so the same
    embedder to the manifest; the same word counts in the same float32 arithmetic), with each
    distinct word's bucket found once (by the parent's own `_vec` of the word alone) instead of
    MD5-hashed at each of the 2.4 million words of the 25k-chunk build: about 2.5 s of the
    fixture. `folders` checks the two agree; the read-only copy is read with the parent."""

    _buckets: dict[str, int] = {}

    def _vec(self, texts):
        out = np.zeros((len(texts), 64), dtype=np.float32)
        for i, t in enumerate(texts):
            words = re.findall(r"\w+", t.lower())
            out[i] = np.bincount(np.fromiter(map(self._bucket, words), dtype=np.intp, count=len(words)), minlength=64)
        return out / np.clip(np.linalg.norm(out, axis=1, keepdims=True), 1e-9, None)

    def _bucket(self, word: str) -> int:
        found = self._buckets.get(word)
        if found is None:
            found = self._buckets[word] = int(np.argmax(super()._vec([word])[0]))
        return found


def answers(ix: Path) -> list[list[str]]:
    index = ContextualIndex(ix, embedder=CountingEmbedder())
    return [[h.id for h in index.search(q, top_k=10)] for q in QUERIES]


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("damage")
    ix, other = root / "ix", root / "other"
    docs = corpus(root / "docs", 250, 100, 1)
    sample = [*QUERIES, *(docs / "notes-000.txt").read_text(encoding="utf-8").split("\n\n")]
    assert np.array_equal(CountingEmbedder()._vec(sample), notes_corpus.CountingEmbedder()._vec(sample))
    report = ContextualIndex(ix, embedder=CountingEmbedder()).update([docs], show_progress=False)
    assert report.chunks_total >= 25_000, report.chunks_total
    ContextualIndex(other, embedder=CountingEmbedder()).update([corpus(root / "docs2", 3, 20, 2)], show_progress=False)
    return ix, other


def _truncate(file: Path, other: Path) -> None:
    data = file.read_bytes()
    file.write_bytes(data[: len(data) // 2])


def _zero_block(file: Path, other: Path) -> None:
    size = file.stat().st_size
    with open(file, "r+b") as fh:
        fh.seek(max(0, size // 2 - 2048))
        fh.write(b"\0" * min(4096, size))


def _delete(file: Path, other: Path) -> None:
    file.unlink()


def _swap(file: Path, other: Path) -> None:
    file.write_bytes(other.read_bytes())


def readable_files(ix: Path) -> list[Path]:
    """Every file a query may read: the manifest and the current version folder, plus the rest of
    the folder (a query must not read those, so damage there changes nothing)."""
    return sorted(p for p in ix.rglob("*") if p.is_file() and p.name != ".lock")


class _RecordedPauses:
    """`time` as `_version.read_retrying` sees it, whose pauses between tries are recorded instead
    of slept: the tries still run, one after the other, but a damaged case no longer waits out
    the 1.5 s of back-off (0.1 + 0.2 + 0.4 + 0.8 s) before its error, which was 70 of the test's
    75 s. Nothing changes the folder between the tries, so the outcome is the one the pauses gave."""

    def __init__(self) -> None:
        self.asked: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.asked.append(seconds)

    def __getattr__(self, name: str):
        return getattr(time, name)


#: the longest a query may make a damaged folder's caller wait for its error, in pauses between
#: tries ("a folder damaged for good is reported a second or so later", `read_retrying`)
MAX_PAUSES_S = 5.0


def test_every_damaged_file_is_named_or_changes_nothing(folders, monkeypatch):
    ix, other = folders
    pauses = _RecordedPauses()
    monkeypatch.setattr(_version, "time", pauses)
    manifest = json.loads((ix / "manifest.json").read_text())
    version = ix / manifest["bm25"]
    assert (version / "ivf.faiss").is_file() and manifest["dense"] == "files"  # the dense index we measure
    healthy = answers(ix)
    other_version = other / json.loads((other / "manifest.json").read_text())["bm25"]
    cases, named, unchanged = 0, 0, 0
    for file in readable_files(ix):
        twin = (other_version / file.relative_to(version)) if file.is_relative_to(version) else other / file.relative_to(ix)
        backup = file.read_bytes()
        for damage in (_truncate, _zero_block, _delete, _swap):
            if damage is _swap and not twin.is_file():
                continue
            damage(file, twin)
            cases += 1
            pauses.asked.clear()
            try:
                got = answers(ix)
            except (ValueError, OSError) as exc:  # IndexDamagedError and the other clear errors of the library
                message = str(exc)
                assert str(file) in message or str(file.parent) in message, (damage.__name__, file, message)
                assert "contextual-retrieval index" in message or "--rebuild" in message, message  # the fix
                named += 1
            else:
                assert got == healthy, (damage.__name__, file)
                unchanged += 1
            assert sum(pauses.asked) <= MAX_PAUSES_S, (damage.__name__, file, pauses.asked)
            file.write_bytes(backup)
    assert answers(ix) == healthy
    assert cases >= 40 and named >= 30, (cases, named, unchanged)


@pytest.mark.parametrize("size", ["small", "25k"])
def test_a_read_only_copy_answers_for_an_unprivileged_reader(folders, tmp_path_factory, size):
    """Below the IVF threshold (exact search over the rows) and above it (the IVF index)."""
    if size == "small":
        root = tmp_path_factory.mktemp("small")
        ix = root / "ix"
        ContextualIndex(ix, embedder=CountingEmbedder()).update([corpus(root / "docs", 3, 10, 3)], show_progress=False)
        assert not (ix / json.loads((ix / "manifest.json").read_text())["bm25"] / "ivf.faiss").exists()
    else:
        ix, _ = folders
    tmp_path = Path(tempfile.mkdtemp(prefix="read-only-index-"))  # outside pytest's folders, which only root may enter
    try:
        _read_only_answers(ix, tmp_path)
    finally:
        for path in [tmp_path, *tmp_path.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        shutil.rmtree(tmp_path)


def _read_only_answers(ix: Path, tmp_path: Path) -> None:
    tmp_path.chmod(0o755)
    copy = tmp_path / "deployed"
    shutil.copytree(ix, copy)
    for path in [*copy.rglob("*"), copy]:
        path.chmod(0o555 if path.is_dir() else 0o444)
    script = ("import json, sys; sys.path.insert(0, sys.argv[2]); from tests.notes_corpus import CountingEmbedder; "
              "from contextual_retrieval_core.index.contextual_index import ContextualIndex; "
              "ix = ContextualIndex(sys.argv[1], embedder=CountingEmbedder()); "
              "print(json.dumps([[h.id for h in ix.search(q, top_k=10)] for q in json.loads(sys.argv[3])]))")
    repo = str(Path(__file__).resolve().parents[2])
    command = [sys.executable, "-c", script, str(copy), repo, json.dumps(QUERIES)]
    if os.geteuid() == 0:  # root writes anywhere: read as nobody, who may not
        command = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *command]
    env = {**os.environ, "HOME": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == answers(ix)
