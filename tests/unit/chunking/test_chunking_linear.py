"""Chunking is linear in the text's size, whatever its spaces (issue 43, item 4): a long run
without whitespace (base64, a minified line) is counted in bounded parts and cut between them
(`budget._TextCosts.bound`, `fitting_end`), every count is of a span of at most `max_chars`
characters, and the chunks still cover the text and fit the window. Timings are in
`benchmarks/chunk_linear.py`; these tests count the work instead."""

from __future__ import annotations

import base64
import random
import string
from collections.abc import Sequence

import pytest
from tokenizers import Tokenizer

from contextual_retrieval_core import Chunk, Document
from contextual_retrieval_core.chunking.budget import LONG_RUN_CHARS, RUN_PART_CHARS, TokenWindow, _TextCosts
from contextual_retrieval_core.chunking.code_outline import definition_boundaries, statement_starts
from contextual_retrieval_core.chunking.split import DEFAULT_CHUNK_CHARS
from contextual_retrieval_core.contextualize.fit import chunk_to_fit
from contextual_retrieval_core.embeddings.minilm import TOKENIZER_PATH, LocalMiniLMEmbedder
from contextual_retrieval_core.generators.structural import StructuralContextGenerator

WINDOW = 256


@pytest.fixture(scope="module")
def minilm() -> LocalMiniLMEmbedder:
    return LocalMiniLMEmbedder()


def exact_tokens(texts: list[str]) -> list[int]:
    """Tokens per text as MiniLM would read them were it not cut, special tokens included."""
    tok = Tokenizer.from_file(str(TOKENIZER_PATH))
    tok.no_truncation()
    tok.no_padding()
    return [len(e.ids) for e in tok.encode_batch(texts)]


class CountingWindow(TokenWindow):
    """MiniLM's window, counting the tokenizer's calls and the characters it is given."""

    def __init__(self, embedder: LocalMiniLMEmbedder) -> None:
        self.calls = self.chars = 0

        def count(texts: Sequence[str]) -> list[int]:
            self.calls += 1
            self.chars += sum(map(len, texts))
            return embedder.count_tokens(texts)

        super().__init__(embedder.max_tokens, count)
        self.calls = self.chars = 0


def no_whitespace(size: int, seed: int = 1) -> str:
    return "".join(random.Random(seed).choices(string.ascii_letters + string.digits + "_-.", k=size))


def base64_text(size: int, seed: int = 2) -> str:
    return base64.b64encode(random.Random(seed).randbytes(size)).decode()[:size]


def minified(size: int) -> str:
    parts = [f"function f{i}(a,b){{var c=a+b*{i};return g{i}(c)}};" for i in range(size // 30 + 1)]
    return "".join(parts)[:size]


@pytest.mark.parametrize("make", [no_whitespace, base64_text], ids=["no whitespace", "base64"])
def test_fitted_chunking_of_a_run_counts_each_character_about_once(minilm: LocalMiniLMEmbedder, make) -> None:
    work = {}
    for size in (20_000, 200_000):
        window = CountingWindow(minilm)
        pieces = chunk_to_fit(Document("blob.txt", make(size)), window)
        work[size] = (window.calls, window.chars, len(pieces))
        # each character goes to the tokenizer about once (the binary search before: ~10 times
        # per chunk, each over the rest of the run)
        assert window.chars <= 1.5 * size, (size, window.chars)
    (calls_small, chars_small, _), (calls_large, chars_large, chunks_large) = work[20_000], work[200_000]
    assert chars_large <= 11 * chars_small
    assert calls_large <= 11 * calls_small
    assert calls_large <= 3 * chunks_large  # a bounded number of counts per chunk


def test_minified_code_is_chunked_with_a_bounded_count_per_chunk(minilm: LocalMiniLMEmbedder) -> None:
    window = CountingWindow(minilm)
    text = minified(60_000)
    pieces = chunk_to_fit(Document("bundle.min.js", text), window)
    assert "".join("".join(p.split()) for _, p in pieces) == "".join(text.split())
    assert window.chars <= 30 * len(text)  # short words: each probe counts at most one word's part
    assert window.calls <= 40 * len(pieces)


def test_a_run_without_whitespace_is_cut_into_bounded_fitting_chunks_that_cover_it(minilm: LocalMiniLMEmbedder) -> None:
    head = "# Data\n\nThe payload follows.\n\n"
    run = base64_text(30_000)
    text = head + run + "\n\nThe end of the data.\n"
    doc = Document("data.md", text)
    pieces = chunk_to_fit(doc, TokenWindow(minilm.max_tokens, minilm.count_tokens))
    assert "".join("".join(p.split()) for _, p in pieces) == "".join(text.split())  # nothing lost, in order
    assert all(text[o:o + len(p)] == p for o, p in pieces)  # verbatim
    assert max(len(p) for _, p in pieces) <= DEFAULT_CHUNK_CHARS
    inside = [o for o, _ in pieces if len(head) < o < len(head) + len(run)]
    assert len(inside) > 50
    # cut between the run's parts, but where a chunk's reach takes in the text around the run
    # (the chunk into it and the one out of it, cut where the text fits)
    assert sum((o - len(head)) % RUN_PART_CHARS != 0 for o in inside) <= 2
    gen = StructuralContextGenerator()
    embedded = [f"{gen.generate(doc, Chunk(f'd#{i}', doc.id, p, i, {'start_index': o})).context}\n\n{p}"
                for i, (o, p) in enumerate(pieces)]
    counts = exact_tokens(embedded)
    assert max(counts) <= WINDOW  # every chunk, with its context, is embedded whole
    assert sorted(counts)[len(counts) // 2] >= WINDOW * 0.85  # and the chunks are not needlessly short


def test_the_default_chunks_of_a_megabyte_without_whitespace_are_800_characters() -> None:
    text = no_whitespace(1_000_000)
    pieces = chunk_to_fit(Document("blob.txt", text), None)
    assert [len(p) for _, p in pieces] == [DEFAULT_CHUNK_CHARS] * (len(text) // DEFAULT_CHUNK_CHARS)
    assert "".join(p for _, p in pieces) == text


def hex_text(size: int) -> str:
    return "".join(random.Random(3).choices("0123456789abcdef", k=size))


def letters(size: int) -> str:  # one word far past WordPiece's 100 characters: [UNK] whole
    return "".join(random.Random(4).choices(string.ascii_lowercase, k=size))


def cjk(size: int) -> str:
    rng = random.Random(5)
    return "".join(chr(rng.randint(0x4E00, 0x9FFF)) for _ in range(size))


@pytest.mark.parametrize(("make", "words"), [(no_whitespace, True), (base64_text, True), (minified, True), (cjk, True),
                                             (hex_text, False), (letters, False)],
                         ids=["no whitespace", "base64", "minified", "CJK", "hex", "letters"])
def test_a_long_run_is_never_counted_under_its_tokens(minilm: LocalMiniLMEmbedder, make, words: bool) -> None:
    text = "Some words first, then " + make(6_000) + " and words after it."
    costs = _TextCosts(text, TokenWindow(minilm.max_tokens, minilm.count_tokens))
    rng = random.Random(43)
    spans = [(a, a + rng.randint(1, DEFAULT_CHUNK_CHARS)) for a in (rng.randrange(len(text) - 10) for _ in range(300))]
    exact = [n - 2 for n in exact_tokens([text[a:b] for a, b in spans])]
    bounds = [costs.bound(a, b) for a, b in spans]
    assert all(b >= e for b, e in zip(bounds, exact) if e <= WINDOW), [(s, b, e) for s, b, e in zip(spans, bounds, exact) if b < e]
    within = [(b, e) for b, e in zip(bounds, exact) if e <= WINDOW]
    assert len(within) > 50
    if words:  # not much over either where the tokenizer reads the run as words (a token a part)
        assert sum(b for b, _ in within) <= 1.25 * sum(e for _, e in within)
    # else one word past WordPiece's 100 characters, one [UNK] whole: the parts count far more


def test_ordinary_text_is_counted_as_before(minilm: LocalMiniLMEmbedder) -> None:
    words = ["index", "chunk", "window", "https://example.com/a/b", "naïve", "東京", "x" * LONG_RUN_CHARS]
    rng = random.Random(5)
    text = "\n".join(" ".join(rng.choice(words) for _ in range(rng.randint(1, 30))) for _ in range(200))
    costs = _TextCosts(text, TokenWindow(minilm.max_tokens, minilm.count_tokens))
    spans = [(a, a + rng.randint(1, 900)) for a in (rng.randrange(len(text)) for _ in range(300))]
    assert [costs.bound(a, b) for a, b in spans] == [costs.span(a, b) for a, b in spans]


def test_cuts_of_a_minified_file_are_found_without_searching_its_line() -> None:
    text = minified(3_000)
    assert definition_boundaries(text, "javascript") == [0]  # one line: its start
    assert statement_starts(text, "javascript") == [0]
    multi = text.replace("};", "};\n")
    expected = sorted({multi.rfind("\n", 0, multi.index(f"function f{i}(")) + 1 for i in range(20)})
    assert definition_boundaries(multi, "javascript")[:20] == expected
