"""The unit tier's `tmp_path` lives in memory (a folder under /dev/shm) where the machine has one
with room to spare: these tests commit thousands of small SQLite transactions, and each commit is
an fsync, about 0.4 ms on this project's CI disk and next to nothing in memory. Elsewhere, or when
/dev/shm has under 4 GB free, `tmp_path` is pytest's own folder on disk. Nothing in this tier
tests what a disk does that memory does not (full disks and restarts are tests/integration's)."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

MEMORY = Path("/dev/shm")
MIN_FREE = 4 * 1024**3


def _memory_folder() -> Path | None:
    try:
        if MEMORY.is_dir() and os.access(MEMORY, os.W_OK) and shutil.disk_usage(MEMORY).free >= MIN_FREE:
            return MEMORY
    except OSError:
        pass
    return None


@pytest.fixture(scope="session")
def _unit_tmp_root() -> Iterator[Path | None]:
    memory = _memory_folder()
    if memory is None:
        yield None
        return
    root = Path(tempfile.mkdtemp(prefix="contextual-retrieval-unit-", dir=memory))
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def tmp_path(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, _unit_tmp_root: Path | None) -> Path:
    """A new empty folder for the test: in memory (see the module docstring), else pytest's own."""
    name = re.sub(r"\W", "_", request.node.name)[:30]
    if _unit_tmp_root is None:
        return tmp_path_factory.mktemp(name, numbered=True)
    return Path(tempfile.mkdtemp(prefix=f"{name}-", dir=_unit_tmp_root))
