"""`contextual-retrieval demo` end to end: offline by default, Claude when ANTHROPIC_API_KEY is set."""

from __future__ import annotations

import io
import json

import pytest

from contextual_retrieval_core.app._demo import demo_chunks, run_demo
from contextual_retrieval_core.app.cli import main
from contextual_retrieval_core.app.demo_corpus import DEMO_DOCUMENTS, DEMO_QUERIES
from tests.fakes.anthropic_server import FakeAnthropicServer

pytestmark = pytest.mark.usefixtures("offline_env")


def test_demo_command_shows_a_query_plain_misses_and_contextual_finds(capsys):
    assert main(["demo", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "contexts: structural (no LLM); embedder: all-MiniLM-L6-v2-onnx-int8; reranker: none" in out
    assert "-> plain MISSED it, contextual FOUND it" in out
    assert "plain retrieval missed and contextual retrieval found: Q" in out
    assert "why: the context supplies" in out
    assert 'contextual-retrieval query contextual-index "your question"' in out


def test_demo_outcomes_and_saved_corpus_feed_the_index_command(tmp_path, capsys):
    buffer = io.StringIO()
    result = run_demo(offline=True, save_corpus=tmp_path / "corpus", show_progress=False, out=buffer)
    assert result.generator == "structural (no LLM)" and result.reranker is None
    assert result.chunks == len(demo_chunks()[1]) and result.documents == len(DEMO_DOCUMENTS)
    assert [q.query for q in result.queries] == [q.query for q in DEMO_QUERIES]
    missed_then_found = [q for q in result.queries if q.only_contextual_found]
    assert missed_then_found, buffer.getvalue()
    for q in missed_then_found:
        assert q.plain_rank > q.k >= q.contextual_rank
    # the corpus's premise: every answer lacks words of its query that only its context supplies
    assert all(q.added_words for q in result.queries), [(q.query, q.context) for q in result.queries]
    assert sum(q.contextual_found for q in result.queries) > sum(q.plain_found for q in result.queries)

    for path, text in DEMO_DOCUMENTS:
        assert (tmp_path / "corpus" / path).read_text(encoding="utf-8") == text
    index = tmp_path / "ix"
    assert main(["index", str(tmp_path / "corpus"), "--index-dir", str(index), "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["query", str(index), "How many weeks of parental leave do employees get in Austin?", "--json", "-k", "1"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["path"] == "corpus/handbook/austin-office.md"


def test_demo_uses_claude_when_the_key_is_set_and_pays_once(monkeypatch, capsys):
    with FakeAnthropicServer() as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", server.api_key)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        n_chunks = len(demo_chunks()[1])

        def messages() -> int:
            return len([r for r in server.requests if r.path == "/v1/messages"])

        first = run_demo(show_progress=False, out=io.StringIO())
        assert first.generator == "anthropic / claude-haiku-4-5"
        assert first.report.generated == messages() == n_chunks
        # the structural header line, then Claude's (the fake's) context
        assert all(q.context.split("\n", 1)[-1].startswith("This chunk is from the document beginning") for q in first.queries)
        assert all(q.context.startswith("From ") and "\n" in q.context for q in first.queries)

        second = run_demo(show_progress=False, out=io.StringIO())  # contexts come from the store
        assert messages() == n_chunks and second.report.store_hits == n_chunks

        assert main(["demo", "--offline", "--no-progress"]) == 0
        assert messages() == n_chunks and "contexts: structural (no LLM)" in capsys.readouterr().out


def test_demo_judges_by_the_answering_chunk_shows_the_file_rank_and_matches_the_readme(capsys):
    import re
    from pathlib import Path

    buffer = io.StringIO()
    result = run_demo(offline=True, show_progress=False, out=buffer)
    printed = buffer.getvalue()
    assert "each judged by the one chunk that answers it" in printed and "'file rank'" in printed
    for q in result.queries:
        # the file rank is the first chunk of the answering file: never below the answering chunk
        for rank, file_rank in ((q.plain_rank, q.plain_file_rank), (q.contextual_rank, q.contextual_file_rank)):
            assert file_rank is not None and (rank is None or file_rank <= rank)
    assert any(q.plain_file_rank < q.plain_rank for q in result.queries if q.only_contextual_found)
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    row = next(line for line in readme.splitlines() if line.startswith("| `contextual-retrieval demo` |"))
    plain = f"{sum(q.plain_found for q in result.queries)}/6, {sum(q.plain_rank == 1 for q in result.queries)} first"
    ctx = f"{sum(q.contextual_found for q in result.queries)}/6, {sum(q.contextual_rank == 1 for q in result.queries)} first"
    assert row.split("|")[4].strip() == plain and row.split("|")[5].strip() == ctx
    assert f"({result.chunks})" in row.split("|")[2]
    summary = re.search(r"summary: answering chunks found in the top 3: plain (\d)/6", printed).group(1)
    assert int(summary) == sum(q.plain_found for q in result.queries)
