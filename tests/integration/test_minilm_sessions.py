"""`LocalMiniLMEmbedder`: one loaded model per process and options, batches bounded in tokens."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from contextual_retrieval_core.embeddings.minilm import LocalMiniLMEmbedder, length_batches


def test_embedders_with_the_same_options_share_one_session(offline_embedder):
    offline_embedder.embed(["load"])
    other = LocalMiniLMEmbedder(batch_size=8, max_batch_tokens=64)  # batching is not part of the session
    other.embed(["load"])
    assert other._session is offline_embedder._session and other._tokenizer is offline_embedder._tokenizer
    threads = 2 if offline_embedder.threads == 1 else 1  # other options than the session's (1 under pytest -n)
    one_thread = LocalMiniLMEmbedder(threads=threads)
    one_thread.embed(["load"])
    assert one_thread._session is not offline_embedder._session
    assert np.array_equal(one_thread.embed(["same vector"]), other.embed(["same vector"]))


def test_embedders_created_in_many_threads_load_one_session_and_agree(offline_embedder):
    texts = ["Revenue grew 3% to $412 million.", "def run(self): return self.target()", "x " * 300]
    expected = offline_embedder.embed(texts)
    sessions, vectors, errors = [], [], []

    def work() -> None:
        try:
            embedder = LocalMiniLMEmbedder(threads=2)
            vectors.append(embedder.embed(texts))
            sessions.append(embedder._session)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len({id(s) for s in sessions}) == 1
    assert all(np.array_equal(v, expected) for v in vectors)


def test_token_bounded_batches_give_the_same_vectors(offline_embedder):
    texts = ["short", "a somewhat longer sentence about retrieval and ranking", "word " * 120, "x " * 300, "mid length text here"]
    unbounded = LocalMiniLMEmbedder(max_batch_tokens=None).embed(texts)
    tight = LocalMiniLMEmbedder(max_batch_tokens=16, batch_size=2).embed(texts)
    assert np.array_equal(unbounded, tight)


def test_length_batches_bound_rows_and_padded_tokens():
    lengths = [256, 3, 40, 256, 12, 100, 7, 256]
    batches = length_batches(lengths, batch_size=4, max_batch_tokens=512)
    assert sorted(i for b in batches for i in b.tolist()) == list(range(len(lengths)))
    for b in batches:
        assert len(b) <= 4
        assert len(b) == 1 or len(b) * max(lengths[i] for i in b) <= 512
    widths = [max(lengths[i] for i in b) for b in batches]
    assert widths == sorted(widths)  # shortest first
    assert [len(b) for b in length_batches(lengths, batch_size=3, max_batch_tokens=None)] == [3, 3, 2]
    with pytest.raises(ValueError, match="max_batch_tokens"):
        LocalMiniLMEmbedder(max_batch_tokens=0)
