"""docs/scaling-out.md's way to a PostgreSQL server with pgvector on a machine without one
(`contextual_retrieval_core.app.pgvector_server`, the `pgserver` wheel): the page's commands, run
as shown, print a URL that answers, with pgvector; `start` again is a no-op that prints the same
URL; a stopped cluster starts again with its data; the errors name the fix."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.servers import require

psycopg = pytest.importorskip("psycopg")

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "scaling-out.md"
MODULE = "contextual_retrieval_core.app.pgvector_server"
URL = re.compile(r"^postgresql://postgres@127\.0\.0\.1:(\d+)/postgres$")

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def folder(pytestconfig):
    try:
        import pgserver  # type: ignore[import-not-found]  # noqa: F401
    except ImportError:
        require(pytestconfig, False, "no pgserver package: pip install 'contextual-retrieval-kit[pgserver]'")
    where = Path(tempfile.mkdtemp(prefix="pgvector-helper-"))
    where.chmod(0o755)  # as root, the server's own user reaches the cluster inside
    yield where
    subprocess.run([sys.executable, "-m", MODULE, "stop", str(where / "pgdata")], capture_output=True)
    shutil.rmtree(where, ignore_errors=True)


def page_commands() -> list[str]:
    """The page's commands that start the server (the ```bash block marked as run here)."""
    text = PAGE.read_text(encoding="utf-8")
    marker = "<!-- run by: tests/integration/test_pgvector_server_helper.py -->\n```bash\n"
    block = text[text.index(marker) + len(marker):].split("```", 1)[0]
    return [line.split("  #")[0].strip() for line in block.strip().splitlines()]


def run(command: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    return subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_the_pages_commands_start_a_server_with_pgvector_and_stop_it(folder) -> None:
    commands = page_commands()
    assert commands[0].startswith("pip install") and "[pgvector,pgserver" in commands[0]
    started = run(" && ".join(commands[1:]), folder)  # as a shell runs them: the URL exported, then echoed
    assert started.returncode == 0, started.stderr
    url = started.stdout.strip().splitlines()[-1]
    assert URL.match(url), started.stdout
    with psycopg.connect(url) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute("CREATE TABLE kept (v vector(2))")
        conn.execute("INSERT INTO kept VALUES ('[3,4]')")
        assert conn.execute("SELECT v <=> '[4,3]' FROM kept").fetchone()[0] == pytest.approx(1 - 24 / 25)
    again = run(f"python -m {MODULE} start ./pgdata", folder)  # running already: the same URL
    assert again.returncode == 0 and again.stdout.strip() == url
    stopped = run(f"python -m {MODULE} stop ./pgdata", folder)
    assert stopped.returncode == 0, stopped.stderr
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(url, connect_timeout=5)
    assert run(f"python -m {MODULE} url ./pgdata", folder).stdout.strip() == url  # still known while stopped
    restarted = run(f"python -m {MODULE} start ./pgdata", folder)
    assert restarted.stdout.strip() == url, restarted.stderr
    with psycopg.connect(url) as conn:  # the same cluster: its data kept
        assert conn.execute("SELECT count(*) FROM kept").fetchone()[0] == 1


def test_errors_name_the_fix(folder) -> None:
    missing = run(f"python -m {MODULE} url ./nothing-here", folder)
    assert missing.returncode == 1 and "no cluster made by `start`" in missing.stderr and "start" in missing.stderr
    (folder / "busy").mkdir()
    (folder / "busy" / "notes.txt").write_text("mine")
    busy = run(f"python -m {MODULE} start ./busy", folder)
    assert busy.returncode == 1 and "holds files but no PostgreSQL cluster" in busy.stderr
    assert (folder / "busy" / "notes.txt").read_text() == "mine"
