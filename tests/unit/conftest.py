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
    for old in memory.glob("contextual-retrieval-unit-*"):  # left by runs that were killed
        pid = old.name.rsplit("-", 2)[-2]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(old, ignore_errors=True)
    root = Path(tempfile.mkdtemp(prefix=f"contextual-retrieval-unit-{os.getpid()}-", dir=memory))
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def tmp_path(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
             _unit_tmp_root: Path | None) -> Iterator[Path]:
    """A new empty folder for the test: in memory (see the module docstring), deleted when the test
    passes (a failed test's stays until the session ends); else pytest's own."""
    name = re.sub(r"\W", "_", request.node.name)[:30]
    if _unit_tmp_root is None:
        yield tmp_path_factory.mktemp(name, numbered=True)
        return
    folder = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=_unit_tmp_root))
    yield folder
    report = getattr(request.node, "rep_call", None)
    if report is None or report.passed:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    report = yield
    if report.when == "call":
        item.rep_call = report  # type: ignore[attr-defined]
    return report
