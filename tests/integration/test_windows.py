"""Windowed contextual embeddings: long chunks as overlapping windows that all carry the context."""

from __future__ import annotations

import numpy as np
import pytest

from contextual_retrieval_core import Chunk, ContextualChunk
from contextual_retrieval_core.dense.windows import WINDOW_MARK, WindowConfig, build_dense_rows, window_texts
from contextual_retrieval_core.embeddings.cache import CachedEmbedder
from contextual_retrieval_core.embeddings.minilm import LocalMiniLMEmbedder
from contextual_retrieval_core.search.config import FusionConfig
from contextual_retrieval_core.search.hybrid import HybridSearcher

FILLER = " ".join(
    f"Step {i}: stir the soup slowly, add a pinch of salt and taste the broth again." for i in range(40)
)
TAIL = "Finally, the deployment signing key rotates every Tuesday at noon UTC."
CONTEXT = "From ops/handbook.md: the kitchen chapter of the operations handbook."


@pytest.fixture(scope="module")
def minilm(offline_embedder) -> LocalMiniLMEmbedder:
    return offline_embedder


def long_chunk(cid: str = "long") -> ContextualChunk:
    return ContextualChunk(Chunk(cid, "handbook", FILLER + " " + TAIL), CONTEXT)


def distractors() -> list[ContextualChunk]:
    texts = ["Cats sleep most of the day.", "The invoice is due at the end of the month.",
             "Tuesday lunch is pasta.", "Keys for the office are at the front desk."]
    return [ContextualChunk(Chunk(f"d{i}", f"doc{i}", t), "A short note.") for i, t in enumerate(texts)]


def test_long_chunk_windows_each_carry_the_context_fit_the_window_and_overlap(minilm: LocalMiniLMEmbedder) -> None:
    (windows,) = window_texts(minilm, [long_chunk()], WindowConfig())
    assert len(windows) >= 3
    counts = minilm.count_tokens(windows)
    assert all(n <= minilm.max_tokens for n in counts)
    assert all(w.startswith(CONTEXT + "\n\n") for w in windows)
    bodies = [w[len(CONTEXT) + 2 :] for w in windows]
    assert bodies[0].startswith("Step 0:") and bodies[-1].endswith(TAIL)
    for a, b in zip(bodies, bodies[1:]):  # consecutive windows share text: b starts inside a
        assert " ".join(b.split()[:5]) in a


def test_a_long_chunks_own_row_is_its_one_vector_row_so_windows_only_add(minilm: LocalMiniLMEmbedder) -> None:
    import warnings

    from contextual_retrieval_core.embeddings.minilm import TruncationWarning

    chunk = long_chunk()
    with warnings.catch_warnings():
        warnings.simplefilter("error", TruncationWarning)  # the own row is handed as the prefix the model reads
        rows = build_dense_rows(minilm, [chunk], WindowConfig())
    assert len(rows.ids) >= 3 and rows.extra == len(rows.ids) - 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TruncationWarning)
        truncated = minilm.embed_documents([chunk.indexed_text])[0]
    assert float(rows.vectors[0] @ truncated) > 0.9999  # exactly the vector one row per chunk gives it
    assert minilm.count_tokens(minilm.window_prefixes([chunk.indexed_text])) == [minilm.max_tokens]


def test_no_row_is_over_the_window_even_for_a_run_without_spaces_or_a_context_that_fills_it(
        minilm: LocalMiniLMEmbedder) -> None:
    from tokenizers import Tokenizer

    from contextual_retrieval_core.embeddings.minilm import TOKENIZER_PATH

    tok = Tokenizer.from_file(str(TOKENIZER_PATH))
    tok.no_truncation()
    blob = "+[+++++++>+<]>-.-[+>-----<]>++." * 60  # about 1,000 tokens, no space
    huge_context = " ".join(f"defines: Handler{i}::run_{i}," for i in range(40))  # over the window alone
    chunks = [ContextualChunk(Chunk("blob", "bf", f"program = \"{blob}\"\n{TAIL}"), CONTEXT),
              ContextualChunk(Chunk("ctx", "h", FILLER + " " + TAIL), huge_context)]
    per = window_texts(minilm, chunks, WindowConfig())
    counts = [len(tok.encode(t).ids) for rows in per for t in rows]
    assert max(counts) <= minilm.max_tokens and all(len(rows) > 2 for rows in per)
    assert all(TAIL.split()[-1] in rows[-1] for rows in per)  # every word reaches a row
    assert "".join(r.split("\n\n", 1)[1] for r in per[0][1:]).count("+[+++++++>+<]") > 0


def test_a_short_chunk_stays_exactly_one_vector_of_its_indexed_text(minilm: LocalMiniLMEmbedder) -> None:
    chunk = distractors()[0]
    assert window_texts(minilm, [chunk], WindowConfig()) == [[chunk.indexed_text]]
    rows = build_dense_rows(minilm, [chunk], WindowConfig())
    assert rows.ids == ["d0"] and rows.extra == 0
    np.testing.assert_allclose(rows.vectors, minilm.embed_documents([chunk.indexed_text]), atol=1e-6)


def test_windowed_dense_search_finds_the_tail_and_returns_each_chunk_once(minilm: LocalMiniLMEmbedder) -> None:
    chunks = [long_chunk()] + distractors()
    query = "when does the deployment signing key rotate?"
    windowed = HybridSearcher(chunks, minilm, use_bm25=False, windows=WindowConfig())
    plain = HybridSearcher(chunks, minilm, use_bm25=False, windows=False)

    hits = windowed.search(query, top_k=10)
    assert [h.id for h in hits][0] == "long"
    assert len({h.id for h in hits}) == len(hits) == len(chunks)  # one hit per chunk, not per window
    assert len(windowed.vectors.ids) > len(chunks) and len(plain.vectors.ids) == len(chunks)
    score = lambda s: next(h.score for h in s.search(query, top_k=10) if h.id == "long")  # noqa: E731
    assert score(windowed) > score(plain)  # the truncated single vector never saw the tail


def test_depth_counts_chunks_not_windows(minilm: LocalMiniLMEmbedder) -> None:
    chunks = [long_chunk("a"), long_chunk("b")] + distractors()
    searcher = HybridSearcher(chunks, minilm, use_bm25=False, windows=WindowConfig(), config=FusionConfig(depth=3))
    hits = searcher.search("stir the soup and add salt", top_k=10)
    assert len(hits) == 3 and len({h.id for h in hits}) == 3
    assert not any(WINDOW_MARK in h.id for h in hits)


def test_windowed_search_fetches_few_rows_yet_finds_exactly_the_best_window_per_chunk(minilm: LocalMiniLMEmbedder) -> None:
    """The dense side fetches `depth` extra rows first, and every row only for a query whose top rows
    hold too few chunks: the hits are the brute-force max-sim ranking either way."""
    chunks = [long_chunk("a")] + distractors()
    searcher = HybridSearcher(chunks, minilm, use_bm25=False, windows=WindowConfig(), config=FusionConfig(depth=2))
    fetched: list[int] = []
    search_many = searcher.vectors.search_many
    searcher.vectors.search_many = lambda q, k: fetched.append(k) or search_many(q, k)
    index, owners = searcher.vectors, searcher._owners

    def brute(query: str, depth: int) -> list[str]:
        sims = index.vectors @ minilm.embed_queries([query])[0]
        best: dict[str, float] = {}
        for rid, sim in zip(index.ids, sims):
            chunk = owners.get(rid, rid)
            best[chunk] = max(best.get(chunk, -9.0), float(sim))
        return sorted(best, key=lambda c: -best[c])[:depth]

    refetched = []
    for query in ("stir the soup and add salt", "when does the deployment signing key rotate?", "cats sleeping"):
        fetched.clear()
        assert [h.id for h in searcher.search(query, top_k=2)] == brute(query, 2), query
        assert fetched[0] == 2 + 2 and (len(fetched) == 1 or fetched[1] == 2 + searcher._extra_rows)
        refetched.append(len(fetched) == 2)
    # the soup query's top 4 rows are all windows of "a": one chunk, so it fetched every row
    assert searcher._extra_rows >= 3 and refetched[0] and not refetched[2]


def test_mean_pooling_keeps_one_row_per_chunk(minilm: LocalMiniLMEmbedder) -> None:
    chunks = [long_chunk()] + distractors()
    rows = build_dense_rows(minilm, chunks, WindowConfig(pooling="mean"))
    assert rows.ids == [c.id for c in chunks] and rows.extra == 0
    assert np.isfinite(rows.vectors).all()


def test_windows_look_through_an_embedding_cache(minilm: LocalMiniLMEmbedder) -> None:
    cached = CachedEmbedder(minilm, ":memory:")
    assert len(window_texts(cached, [long_chunk()], WindowConfig())[0]) >= 3


def test_an_embedder_without_a_window_is_never_windowed() -> None:
    class Plain:
        model_name = "plain"
        normalized = True

        def embed_documents(self, texts):  # noqa: ANN001
            return np.ones((len(texts), 4), dtype=np.float32)

        embed_queries = embed_documents

    assert window_texts(Plain(), [long_chunk()], WindowConfig()) == [[long_chunk().indexed_text]]


def test_window_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="overlap"):
        WindowConfig(size=100, overlap=60)
    with pytest.raises(ValueError, match="pooling"):
        WindowConfig(pooling="sum")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="size"):
        WindowConfig(size=4)
