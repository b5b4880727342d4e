from __future__ import annotations

import warnings

import numpy as np
import pytest

from contextual_retrieval_core.embeddings import LocalMiniLMEmbedder
from contextual_retrieval_core.embeddings.cache import CachedEmbedder


@pytest.fixture(scope="module")
def embedder(offline_embedder) -> LocalMiniLMEmbedder:
    return offline_embedder


def test_vectors_are_normalised_and_meaningful(embedder):
    texts = ["The cat sat on the mat.", "A kitten is sitting on a rug.", "Quarterly revenue grew by 3%."]
    v = embedder.embed_documents(texts)
    assert v.shape == (3, 384) and v.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert v[0] @ v[1] > v[0] @ v[2] + 0.2
    q = embedder.embed_queries(["company earnings growth"])
    assert int(np.argmax(v @ q[0])) == 2


def test_batching_does_not_change_vectors(embedder):
    texts = ["short", "a somewhat longer sentence about retrieval", "x " * 100]
    together = embedder.embed(texts)
    alone = np.stack([embedder.embed([t])[0] for t in texts])
    np.testing.assert_allclose(together, alone, atol=1e-4)


def test_truncation_warns_once():
    e = LocalMiniLMEmbedder()
    long = "token " * 600
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        e.embed([long, "short"])
        e.embed([long])
    msgs = [str(w.message) for w in caught if "truncated" in str(w.message)]
    assert len(msgs) == 1 and "256 tokens" in msgs[0]
    assert e.truncated_count == 2


def test_bad_input(embedder):
    assert embedder.embed([]).shape == (0, 384)
    with pytest.raises(TypeError, match="list of texts"):
        embedder.embed("a single string")
    with pytest.raises(TypeError, match="decode"):
        embedder.embed([b"\xff"])
    with pytest.raises(TypeError, match="decode"):
        embedder.embed(b"bytes, not texts")


async def test_async_matches_sync(embedder):
    texts = ["alpha beta", "gamma delta"]
    np.testing.assert_allclose(await embedder.aembed_documents(texts), embedder.embed_documents(texts), atol=1e-6)


def test_cache_serves_repeats_and_persists(tmp_path, embedder):
    path = tmp_path / "emb.sqlite3"
    cached = CachedEmbedder(embedder, path)
    first = cached.embed_documents(["one", "two", "one"])
    assert (cached.hits, cached.misses) == (1, 2)
    cached.close()
    again = CachedEmbedder(embedder, path)
    second = again.embed_documents(["two", "one"])
    assert (again.hits, again.misses) == (2, 0)
    np.testing.assert_array_equal(second, first[[1, 0]])
    # queries are cached apart from documents
    again.embed_queries(["one"])
    assert again.misses == 1


def test_cache_keys_a_long_text_as_the_model_reads_it(embedder):
    """A text past the window and the part of it the model reads are one cache entry, with the
    vector the model gives the whole text (truncated); texts that fit keep their own keys."""
    long = "retrieval " * 300 + "a tail the window never reaches"
    (head,) = embedder.window_prefixes([long])
    assert len(head) < len(long)
    cached = CachedEmbedder(embedder, ":memory:")
    first = cached.embed_documents([long])
    again = cached.embed_documents([head, long + " and more past the window"])
    assert (cached.hits, cached.misses) == (2, 1)
    np.testing.assert_array_equal(again[0], first[0])
    np.testing.assert_allclose(first[0], embedder.embed([long])[0], atol=1e-6)
    cached.embed_documents(["retrieval " * 10, "retrieval " * 11])
    assert cached.misses == 3


def test_cache_checks_input_like_the_embedder(embedder):
    cached = CachedEmbedder(embedder, ":memory:")
    assert cached.embed_documents([]).shape == (0, 384) and cached.embed_queries(()).shape == (0, 384)
    with pytest.raises(TypeError, match="list of texts"):
        cached.embed_documents("a single string")  # not 15 one-character texts
    with pytest.raises(TypeError, match="decode"):
        cached.embed_documents([b"\xff"])
    with pytest.raises(TypeError, match="expected str"):
        cached.embed_queries(["fine", 3])
    assert (cached.hits, cached.misses) == (0, 0)


def test_count_truncated_counts_texts_over_the_window():
    from contextual_retrieval_core.embeddings.minilm import LocalMiniLMEmbedder

    embedder = LocalMiniLMEmbedder()
    assert embedder.count_truncated(["short text", "word " * 400, "word " * 100]) == 1
    assert embedder.count_truncated([]) == 0
