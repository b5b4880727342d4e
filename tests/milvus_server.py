"""A real Milvus server on loopback for the tests: Milvus Lite's gRPC server (``milvus-lite server``).

`MilvusLite` starts ``python -m milvus_lite server`` on a free 127.0.0.1 port with its data in a
temporary folder, waits until it answers, and can be stopped (SIGTERM), killed (SIGKILL, as a
crash) and started again on the same port and data. The `milvus_server` fixture holds one for the
session; a test that kills its server makes its own (`milvus_lite`). Where milvus-lite (or
pymilvus) is missing the test is skipped with the reason, and fails under ``--ci``.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.servers import free_port, require

__all__ = ["MilvusLite", "milvus_lite", "milvus_server", "require_milvus"]


def require_milvus(config: pytest.Config) -> None:
    """Skip (fail under --ci) when milvus-lite or pymilvus is not installed."""
    try:
        import milvus_lite  # noqa: F401
        import pymilvus  # noqa: F401
    except ImportError as exc:
        require(config, False, f"no Milvus Lite ({exc.name} is not installed): pip install 'contextual-retrieval-kit[milvus]'")


class MilvusLite:
    """One Milvus Lite server process on a fixed loopback port and data folder."""

    def __init__(self, data: Path) -> None:
        self.data = data
        self.port = free_port()
        self.uri = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None
        self.log = data / "server.log"

    def start(self, timeout: float = 90.0) -> None:
        """Start the server (on the same port and data as before) and wait until it answers."""
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "milvus_lite", "server", "--data-dir", str(self.data / "db"),
                 "--host", "127.0.0.1", "--port", str(self.port)],
                stdout=log, stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + timeout
        while not self.answers():
            if self.proc.poll() is not None:
                raise RuntimeError(f"milvus-lite server exited with {self.proc.returncode}: "
                                   f"{self.log.read_text(errors='replace')[-2000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"milvus-lite server did not answer on {self.uri} within {timeout:.0f} s")
            time.sleep(0.2)

    def answers(self) -> bool:
        """Whether the server answers a gRPC call (a fresh connection, closed after)."""
        import grpc

        channel = grpc.insecure_channel(f"127.0.0.1:{self.port}")
        try:
            grpc.channel_ready_future(channel).result(timeout=1)
            return True
        except grpc.FutureTimeoutError:
            return False
        finally:
            channel.close()

    def stop(self) -> None:
        """Stop the server as an operator would (SIGTERM, then SIGKILL after 15 s)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(15)
        self.proc = None

    def kill(self) -> None:
        """Kill the server at once (SIGKILL: a crash; nothing is flushed)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(15)
        self.proc = None

    def restart(self, down_s: float = 0.5) -> None:
        """Stop it, keep it down for `down_s` seconds, start it again on the same port and data."""
        self.stop()
        time.sleep(down_s)
        self.start()


@contextmanager
def milvus_lite(config: pytest.Config) -> Iterator[MilvusLite]:
    """A Milvus Lite server of its own, in a temporary folder removed afterwards."""
    require_milvus(config)
    server = MilvusLite(Path(tempfile.mkdtemp(prefix="milvus-lite-")))
    try:
        try:
            server.start()
        except RuntimeError as exc:
            pytest.fail(str(exc))
        yield server
    finally:
        server.kill()
        shutil.rmtree(server.data, ignore_errors=True)


@pytest.fixture(scope="session")
def milvus_server(pytestconfig: pytest.Config) -> Iterator[MilvusLite]:
    """A Milvus Lite server for the session (its ``uri``; tests that stop it start it again)."""
    with milvus_lite(pytestconfig) as server:
        yield server
