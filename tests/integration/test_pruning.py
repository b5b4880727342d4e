"""`ContextPruner` on real text with the offline MiniLM embedder and the library's BM25."""

from __future__ import annotations

import asyncio

import pytest

from contextual_retrieval_core.pruning import ELISION, ContextPruner, PruningConfig
from contextual_retrieval_core.types import CONTEXT_LABEL, Chunk, ContextualChunk


@pytest.fixture(scope="module")
def embedder(offline_embedder):
    return offline_embedder


REPORT = ContextualChunk(Chunk("r1", "reports/acme.md", (
    "# ACME Q2 2023\n\nACME reports its results for the quarter. All figures are unaudited.\n\n"
    "## Revenue\n\nThe company's revenue grew by 3% over the previous quarter, to $412 million. "
    "New customers in Europe made up most of the increase.\n\n## Headcount\n\nHeadcount ended the "
    "quarter at 1,200 employees. Hiring focused on engineering.\n\n## Outlook\n\nManagement expects "
    "growth to slow in the second half as two large contracts end."
)), "ACME Corp's Q2 2023 quarterly report.")
HANDBOOK = ContextualChunk(Chunk("h1", "handbook/austin.md", (
    "Employees are entitled to 12 weeks of fully paid leave after the birth or adoption of a child. "
    "Leave can be split into blocks. The standard working week is 40 hours. The office closes on "
    "eleven public holidays a year."
)), "Austin office handbook, parental leave.")


def test_keeps_the_answering_sentence_with_provenance(embedder):
    pruner = ContextPruner(embedder, config=PruningConfig(budget=30))
    result = pruner.prune("How much did ACME's revenue grow in Q2 2023?", [REPORT, HANDBOOK])
    kept = result.chunks[0]
    assert kept.id == "r1" and kept.document_id == "reports/acme.md"
    assert "grew by 3%" in kept.text
    for piece in kept.pieces:  # provenance: spans index the original text
        assert REPORT.text[piece.start : piece.end] == piece.text
        assert REPORT.text.count("\n", 0, piece.start) + 1 == piece.start_line
    starts = [p.start for p in kept.pieces]
    assert starts == sorted(starts)  # original order
    assert ELISION.join(p.text for p in kept.pieces) == kept.text
    assert result.report.tokens_after < result.report.tokens_before
    assert result.report.tokens_after <= 30 + max(len(p.text.split()) for p in kept.pieces) * 3
    # the generated context is kept apart from the source text
    assert REPORT.context not in kept.text
    formatted = result.format_for_llm()
    assert CONTEXT_LABEL in formatted and REPORT.context in formatted and "grew by 3%" in formatted


def test_chunks_stay_in_rank_order_and_async_matches_sync(embedder):
    pruner = ContextPruner(embedder, config=PruningConfig(budget_share=0.6, keep_share=0.0))
    query = "How many weeks of parental leave do Austin employees get?"
    sync = pruner.prune(query, [REPORT, HANDBOOK])
    assert [c.rank for c in sync.chunks] == sorted(c.rank for c in sync.chunks)
    assert any("12 weeks" in c.text for c in sync.chunks)
    async_ = asyncio.run(pruner.aprune(query, [REPORT, HANDBOOK]))
    assert [(c.id, c.text) for c in async_.chunks] == [(c.id, c.text) for c in sync.chunks]


class Counting:
    """MiniLM that records every text it is asked to embed."""

    def __init__(self, inner):
        self.inner, self.model_name, self.normalized = inner, inner.model_name, True
        self.documents: list[str] = []

    def embed_documents(self, texts):
        self.documents.extend(texts)
        return self.inner.embed_documents(texts)

    def embed_queries(self, texts):
        return self.inner.embed_queries(texts)


def test_only_the_kept_chunks_units_are_embedded_each_distinct_text_once(embedder):
    from contextual_retrieval_core.pruning import split_units

    repeated = ContextualChunk(Chunk("p1", "notes/leave.md", (
        "Parental leave is 12 weeks. Ask HR.\n\nLeave starts on the birth date. Ask HR.")), "HR notes.")
    counting = Counting(embedder)
    query = "How many weeks of parental leave do Austin employees get?"
    result = ContextPruner(counting, config=PruningConfig(keep_share=0.9, budget_share=1.0)).prune(query, [REPORT, HANDBOOK, repeated])
    dropped = set(result.report.chunks_dropped)
    assert "r1" in dropped  # the revenue report is far under 90% of the best chunk's score
    chunk_texts = [c.indexed_text for c in (REPORT, HANDBOOK, repeated)]
    assert counting.documents[:3] == chunk_texts  # the coarse filter's embeddings come first
    units = counting.documents[3:]
    assert len(units) == len(set(units))  # "Ask HR." twice in p1: embedded once
    for unit in split_units(REPORT.text, "prose"):
        assert unit.text not in units  # a dropped chunk's units are never embedded
    kept = [c for c in (HANDBOOK, repeated) if c.id not in dropped]
    assert set(units) == {u.text for c in kept for u in split_units(c.text, "prose")}
    async_ = asyncio.run(ContextPruner(embedder, config=PruningConfig(keep_share=0.9, budget_share=1.0)).aprune(query, [REPORT, HANDBOOK, repeated]))
    assert [(c.id, c.text) for c in async_.chunks] == [(c.id, c.text) for c in result.chunks]


def test_safety_valve_min_tokens_falls_back_to_top_two_whole_chunks(embedder):
    pruner = ContextPruner(embedder, config=PruningConfig(budget=1, min_tokens=10_000, standout_z=99))
    result = pruner.prune("revenue growth", [REPORT, HANDBOOK, ContextualChunk(Chunk("x", "x.md", "Unrelated words here."), "")])
    assert "min_tokens" in result.report.fallbacks
    assert len(result.chunks) == 2 and all(c.whole for c in result.chunks)
    assert result.report.tokens_after == result.report.tokens_before - result.report.tokens_before + result.report.tokens_after


def test_safety_valve_standout_unit_is_never_dropped(embedder):
    chunk = ContextualChunk(Chunk("c", "notes.md", (
        "The weather was mild. Lunch was served at noon. The DiffExecutor runs the primary and the "
        "secondary executor and compares their exit kinds. The meeting ended early. Parking is free.")), "")
    pruner = ContextPruner(embedder, config=PruningConfig(budget=1, min_tokens=0, standout_z=1.0))
    result = pruner.prune("How does DiffExecutor compare executors?", [chunk])
    assert any(f.startswith("standout:") for f in result.report.fallbacks)
    assert "DiffExecutor runs the primary" in result.text


def test_empty_input_and_stop_word_query_return_the_input_unchanged(embedder):
    pruner = ContextPruner(embedder)
    empty = pruner.prune("anything", [])
    assert empty.chunks == [] and empty.report.unchanged_reason == "no chunks to prune"
    result = pruner.prune("what is the of and to it", [REPORT, HANDBOOK])
    assert "no content terms" in result.report.unchanged_reason
    assert [c.text for c in result.chunks] == [REPORT.text, HANDBOOK.text]
    assert result.report.reduction == 0.0


def test_budget_zero_or_negative_and_bad_settings_are_rejected(embedder):
    for bad, error in ((0, ValueError), (-5, ValueError), (2.5, TypeError), (True, TypeError)):
        with pytest.raises(error, match="budget must be a positive number of tokens"):
            ContextPruner(embedder, config=PruningConfig(budget=bad))
    with pytest.raises(ValueError, match="budget_share must be in"):
        ContextPruner(embedder, config=PruningConfig(budget_share=0))
    with pytest.raises(ValueError, match="lam must be in"):
        ContextPruner(embedder, config=PruningConfig(lam=1.5))
    with pytest.raises(TypeError, match="embedder must be an Embedder"):
        ContextPruner(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="config must be a PruningConfig"):
        ContextPruner(embedder, config={"budget": 10})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="neighbours must be True or False"):
        PruningConfig(neighbours="yes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="min_score must be in"):
        PruningConfig(min_score=2)
    assert PruningConfig(min_tokens=0).min_tokens == 0
    with pytest.raises(ValueError, match="min_tokens must be an integer >= 0"):
        PruningConfig(min_tokens=-1)


def test_non_text_input_is_rejected_with_its_position(embedder):
    with pytest.raises(TypeError, match=r"chunks\[1\] is a dict"):
        ContextPruner(embedder).prune("revenue", [REPORT, {"text": "x"}])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="query must be str"):
        ContextPruner(embedder).prune(None, [REPORT])  # type: ignore[arg-type]


def test_one_very_long_line_of_minified_code(embedder):
    body = ";".join(f"function f{i}(a){{return a*{i}}}" for i in range(400))
    line = body + ';function parseInvoiceTotal(inv){return inv.lines.reduce((s,l)=>s+l.amount,0)}'
    chunk = ContextualChunk(Chunk("m", "bundle.min.js", line), "")
    result = ContextPruner(embedder, config=PruningConfig(budget=60)).prune("how is the invoice total parsed?", [chunk])
    assert "parseInvoiceTotal" in result.text
    assert result.report.reduction > 0.8
    piece = result.chunks[0].pieces[-1]
    assert line[piece.start : piece.end] == piece.text


def test_cjk_text_without_spaces(embedder):
    text = "信息检索是从大量文档中找到相关信息的过程。向量数据库存储嵌入向量。今天天气很好。我们中午吃了面条。会议提前结束了。"
    chunk = ContextualChunk(Chunk("z", "notes-zh.md", text), "")
    result = ContextPruner(embedder, config=PruningConfig(budget=20, min_tokens=1)).prune("向量数据库存储什么？", [chunk])
    assert "向量数据库存储嵌入向量。" in result.text
    assert result.report.units_kept["z"][1] == 5
    assert len(result.text) < len(text)


def test_input_chunks_are_not_changed(embedder):
    before = (REPORT.text, REPORT.context, HANDBOOK.text)
    ContextPruner(embedder, config=PruningConfig(budget=10)).prune("revenue", [REPORT, HANDBOOK])
    assert (REPORT.text, REPORT.context, HANDBOOK.text) == before
