"""Every code block of the docs site that is meant to run runs, and prints what the page shows.

The rules the pages follow (checked here, so a new block cannot slip by untested):

- A ```python block runs as pasted, in a fresh folder, offline (no hosted API key, a private
  cache folder). When the next fenced block is ```text, the output must be exactly that block.
- ``<!-- needs: anthropic -->`` on the line above a block runs it against the loopback Anthropic
  server (`tests/fakes/anthropic_server.py`) through the real SDK, with ANTHROPIC_API_KEY and
  ANTHROPIC_BASE_URL pointing there.
- ``<!-- needs: pgvector -->`` runs it with PGVECTOR_URL naming a PostgreSQL server with pgvector,
  started for the block as the page starts one (`contextual_retrieval_core.app.pgvector_server`).
- A ```bash block runs here when it is the "Index your own files" commands; any other bash or
  python block that does not run here says why on the line above it: ``<!-- run by: PATH -->``
  (a test that runs it; the path must exist) or ``<!-- not run: REASON -->``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
HOSTED_KEYS = ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "VOYAGE_API_KEY", "COHERE_API_KEY", "CO_API_KEY")
FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n", re.S | re.M)
MARKER = re.compile(r"<!-- (not run|run by|needs): (.+?) -->\s*$")


@dataclass(frozen=True)
class Block:
    page: str
    number: int  # position among the page's fenced blocks
    language: str
    code: str
    marker: tuple[str, str] | None  # ("not run" | "run by" | "needs", its argument)
    expected: str | None  # the ```text block right after it

    @property
    def name(self) -> str:
        return f"{self.page}#{self.number}"


def page_blocks(path: Path) -> list[Block]:
    text = path.read_text(encoding="utf-8")
    found = list(FENCE.finditer(text))
    out = []
    for number, match in enumerate(found):
        language, body = match.group(1), match.group(2)
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        marked = MARKER.search(before)
        expected = None
        if number + 1 < len(found):
            after = found[number + 1]
            if after.group(1) == "text" and not text[match.end() : after.start()].strip():
                expected = after.group(2)
        out.append(Block(str(path.relative_to(DOCS)), number, language, body,
                         (marked.group(1), marked.group(2)) if marked else None, expected))
    return out


ALL = [b for page in sorted(DOCS.rglob("*.md")) for b in page_blocks(page)]
RUN_HERE = [b for b in ALL if b.language == "python" and (b.marker is None or b.marker[0] == "needs")]
INDEX_COMMANDS = [b for b in ALL if b.page == "indexing.md" and b.language == "bash"]


def offline_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in HOSTED_KEYS}
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    return env


def test_the_pages_have_blocks_that_run():
    pages = {b.page for b in RUN_HERE}
    assert {"index.md", "core.md", "llamaindex.md", "langchain.md", "cost-model.md", "pruning.md", "scaling-out.md"} <= pages
    assert len(INDEX_COMMANDS) == 1


def test_every_other_block_is_run_elsewhere_or_says_why():
    for block in ALL:
        if block.language not in ("python", "bash") or block in RUN_HERE or block in INDEX_COMMANDS:
            continue
        assert block.marker is not None, f"{block.name}: a {block.language} block that no test runs, and no reason"
        kind, argument = block.marker
        assert kind in ("run by", "not run"), block.name
        if kind == "run by":
            assert (REPO / argument).is_file(), f"{block.name}: {argument} does not exist"


def test_blocks_the_readme_test_runs_are_the_readmes():
    """A block marked as run by the README's test is run there as the README shows it: the same
    command, so the page and the README cannot drift apart."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    marked = [b for b in ALL if b.marker == ("run by", "tests/e2e/test_readme.py")]
    assert marked
    for block in marked:
        assert f"```{block.language}\n{block.code}```" in readme, block.name


@pytest.mark.parametrize("block", RUN_HERE, ids=lambda b: b.name)
def test_python_block_runs_as_pasted_and_prints_what_the_page_shows(block, tmp_path, pytestconfig):
    env = offline_env(tmp_path)
    server = None
    pgdata = None
    if block.marker == ("needs", "anthropic"):
        from tests.fakes.anthropic_server import FakeAnthropicServer

        server = FakeAnthropicServer().start()
        env.update(ANTHROPIC_API_KEY=server.api_key, ANTHROPIC_BASE_URL=server.url)
    elif block.marker == ("needs", "pgvector"):
        pgdata, env["PGVECTOR_URL"] = start_pgvector(pytestconfig)
    else:
        assert block.marker is None, f"{block.name}: unknown need {block.marker}"
    try:
        result = subprocess.run([sys.executable, "-c", block.code], cwd=tmp_path, env=env, capture_output=True,
                                text=True, timeout=600)
    finally:
        if server is not None:
            server.stop()
        if pgdata is not None:
            stop_pgvector(pgdata)
    assert result.returncode == 0, result.stderr[-3000:]
    if block.expected is not None:
        assert result.stdout.strip() == block.expected.strip()
    if server is not None:  # it really talked to the (fake) API, with the document cached
        assert server.requests_to("/v1/messages") and "cache read" in result.stdout


def start_pgvector(pytestconfig) -> tuple[Path, str]:
    """A PostgreSQL server with pgvector, started as docs/scaling-out.md starts one (its cluster
    folder, reachable by the server's own user when the tests run as root)."""
    from contextual_retrieval_core.app import pgvector_server
    from tests.servers import require

    for module in ("pgserver", "langchain_postgres", "llama_index.vector_stores.postgres"):
        try:
            __import__(module)
        except ImportError:
            require(pytestconfig, False, f"no {module}: pip install 'contextual-retrieval-kit[pgvector,pgserver]'")
    folder = Path(tempfile.mkdtemp(prefix="docs-pgvector-"))
    folder.chmod(0o755)
    return folder / "pgdata", pgvector_server.start(folder / "pgdata")


def stop_pgvector(pgdata: Path) -> None:
    from contextual_retrieval_core.app import pgvector_server

    pgvector_server.stop(pgdata)
    shutil.rmtree(pgdata.parent, ignore_errors=True)


def test_index_your_own_files_commands_print_what_the_page_shows(tmp_path):
    """The "Index your own files" commands, run as shown, print every line of the output the page
    shows after them."""
    (block,) = INDEX_COMMANDS
    shown = next(b for b in page_blocks(DOCS / block.page) if b.number > block.number and b.language == "text")
    bin_dir = Path(sys.executable).parent
    printed = ""
    for line in block.code.strip().splitlines():
        command = line.split("  #")[0].strip()
        assert command.startswith("contextual-retrieval "), command
        result = subprocess.run(f"{bin_dir}/{command}", shell=True, cwd=tmp_path, env=offline_env(tmp_path),
                                capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, (command, result.stderr[-3000:])
        printed += result.stdout
    for line in shown.code.splitlines():
        if line.strip() and line.strip() != "...":
            assert line in printed, line
