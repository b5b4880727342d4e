"""`LocalMiniLMEmbedder`'s threads: explicit, from ``CONTEXTUAL_RETRIEVAL_ONNX_THREADS``, or all
cores; a bad value is refused with the variable's name and the fix. Nothing is loaded."""

from __future__ import annotations

import pytest

from contextual_retrieval_core import InputError
from contextual_retrieval_core.embeddings import LocalMiniLMEmbedder


def test_threads_come_from_the_argument_then_the_environment(monkeypatch) -> None:
    monkeypatch.delenv("CONTEXTUAL_RETRIEVAL_ONNX_THREADS", raising=False)
    assert LocalMiniLMEmbedder().threads is None  # onnxruntime's default: all cores
    monkeypatch.setenv("CONTEXTUAL_RETRIEVAL_ONNX_THREADS", "1")
    assert LocalMiniLMEmbedder().threads == 1
    assert LocalMiniLMEmbedder(threads=3).threads == 3


@pytest.mark.parametrize("value", ["0", "-2", "two", "1.5"])
def test_a_bad_value_names_the_variable_and_the_fix(monkeypatch, value: str) -> None:
    monkeypatch.setenv("CONTEXTUAL_RETRIEVAL_ONNX_THREADS", value)
    with pytest.raises(InputError, match=r"CONTEXTUAL_RETRIEVAL_ONNX_THREADS=.* set it to 1 or more, or unset it"):
        LocalMiniLMEmbedder()


def test_an_explicit_bad_count_is_refused(monkeypatch) -> None:
    monkeypatch.delenv("CONTEXTUAL_RETRIEVAL_ONNX_THREADS", raising=False)
    with pytest.raises(InputError, match="threads"):
        LocalMiniLMEmbedder(threads=0)
