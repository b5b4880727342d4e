"""docs/scaling-out.md's Milvus blocks run as pasted against a Milvus Lite server on loopback
(MILVUS_URI, as the page says to set it) and print what the page shows; the page's Milvus figures
are the ones benchmarks/milvus_cookbook.json records."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.test_docs_snippets import page_blocks

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "scaling-out.md"
THIS = "tests/integration/test_milvus_docs.py"
BLOCKS = [b for b in page_blocks(PAGE) if b.marker == ("run by", THIS)]

pytestmark = pytest.mark.timeout(300)


def test_the_page_has_the_milvus_blocks():
    assert len(BLOCKS) >= 2 and all(b.language == "python" and b.expected for b in BLOCKS)


@pytest.mark.parametrize("block", BLOCKS, ids=[b.name for b in BLOCKS])
def test_a_milvus_block_prints_what_the_page_shows(block, tmp_path, milvus_server):  # noqa: F811
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "VOYAGE_API_KEY", "COHERE_API_KEY")}
    env.update(MILVUS_URI=milvus_server.uri, XDG_CACHE_HOME=str(tmp_path / "cache"))
    (tmp_path / "block.py").write_text(block.code, encoding="utf-8")
    done = subprocess.run([sys.executable, "block.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout == block.expected, done.stdout
    assert "Traceback" not in done.stderr and "AsyncMilvusClient" not in done.stderr, done.stderr[-2000:]


def test_the_page_quotes_the_benchmark():
    text = PAGE.read_text(encoding="utf-8")
    data = json.loads((REPO / "benchmarks" / "milvus_cookbook.json").read_text(encoding="utf-8"))
    timing = data["core_path_timing"]
    assert f"{timing['overhead_ratio']:.2f}x" in text and f"{timing['query_ms']} ms" in text
    for row in data["scale"]:
        assert f"{row['rows']:,}" in text and f"{row['insert_s']} s" in text and f"{row['hybrid_query_ms']:.0f} ms" in text
