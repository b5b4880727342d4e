"""Evaluation questions from Claude: one realistic question per sampled chunk, and the bias guard.

`AnthropicQuestionGenerator` is an `AnthropicContextGenerator` with another prompt and another
store name, so a question goes through exactly the machinery a context does: the document in a
prompt-cached block, the SDK's retries, the `Contextualizer`'s store (each question committed the
moment it arrives, never paid twice), claims and Message Batches. Its store keys never collide
with contexts: the generator name (``anthropic-questions``) and the prompt identity both differ.
The chunk goes in bare, without any generated context.

- `sample_chunks(chunks, n, seed)`: n chunks stratified over documents (round robin over the
  documents in a seeded order, a seeded random chunk of each), so a corpus with a few long
  documents is not all questions about them.
- `quoted_words(question, chunk)`: the longest run of consecutive words of the question that
  occurs, word for word, in the chunk. A question above `DEFAULT_MAX_QUOTED_WORDS` is rejected:
  copying a long span makes BM25 (and the plain chunk) look better than a user's question would.

Example:
    >>> from contextual_retrieval_core.types import Chunk
    >>> chunks = [Chunk(f"{d}-{i}", d, f"text {d} {i}") for d in "ab" for i in range(3)]
    >>> sorted({c.document_id for c in sample_chunks(chunks, 2, seed=0)})
    ['a', 'b']
    >>> quoted_words("What does parse_config return on a missing file?",
    ...              "def parse_config(path): returns None on a missing file")
    4
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from typing import Any, Literal

from contextual_retrieval_core.checks import positive_int
from contextual_retrieval_core.errors import InputError
from contextual_retrieval_core.generators.anthropic import AnthropicContextGenerator
from contextual_retrieval_core.generators.prompts import DEFAULT_DOCUMENT_PROMPT, ContextPrompt
from contextual_retrieval_core.types import Chunk

__all__ = [
    "QUESTION_PROMPT",
    "RETRY_QUESTION_PROMPT",
    "DEFAULT_MAX_QUOTED_WORDS",
    "AnthropicQuestionGenerator",
    "sample_chunks",
    "quoted_words",
]

_QUESTION_CHUNK_PROMPT = (
    "Here is a chunk of the document above\n"
    "<chunk>\n"
    "{chunk_content}\n"
    "</chunk>\n"
    "Write one realistic question that a user of this document might ask and whose answer is in this "
    "chunk. Ask it in your own words, as someone who has not read the chunk would; do not copy phrases "
    "from it.\n"
    "Answer only with the question and nothing else."
)
#: the question prompt: the cookbook's document block (cached), then the bare chunk
QUESTION_PROMPT = ContextPrompt(DEFAULT_DOCUMENT_PROMPT, _QUESTION_CHUNK_PROMPT, name="question")
#: the prompt of the one regeneration a rejected question gets (its own store keys)
RETRY_QUESTION_PROMPT = ContextPrompt(
    DEFAULT_DOCUMENT_PROMPT,
    _QUESTION_CHUNK_PROMPT + "\nYour question must not repeat more than a few words of the chunk in a row.",
    name="question-retry",
)
#: a question quoting more consecutive words of its chunk than this is rejected
DEFAULT_MAX_QUOTED_WORDS = 8
_WORD = re.compile(r"\w+")


class AnthropicQuestionGenerator(AnthropicContextGenerator):
    """Writes one evaluation question per chunk with Claude (the document prompt-cached).

    Takes every argument of `AnthropicContextGenerator`; `prompt` defaults to `QUESTION_PROMPT`
    and `max_tokens` to 150. Its "contexts" are questions, stored under the generator name
    ``anthropic-questions``; run it through a `Contextualizer` with ``structural_header=False``.

    Example:
        >>> import anthropic
        >>> gen = AnthropicQuestionGenerator(client=anthropic.Anthropic(api_key="sk-..."))  # doctest: +SKIP
        >>> gen.generate(document, chunk).context  # doctest: +SKIP
        'How does the differential executor run the secondary executor?'
    """

    name = "anthropic-questions"
    label = "anthropic (questions)"
    #: what the run's progress bar counts
    writes = "questions"

    def __init__(
        self,
        model: str = "claude-haiku-4-5",
        *,
        prompt: ContextPrompt = QUESTION_PROMPT,
        max_tokens: int = 150,
        cache_ttl: Literal["5m", "1h"] = "5m",
        **options: Any,
    ) -> None:
        super().__init__(model, prompt=prompt, max_tokens=max_tokens, cache_ttl=cache_ttl, **options)


def sample_chunks(chunks: Sequence[Chunk], n: int, seed: int = 0) -> list[Chunk]:
    """`n` chunks stratified over documents, the same for the same inputs and `seed`.

    Documents are visited round robin in a seeded order; each visit takes a seeded random chunk
    of the document not taken yet (chunks with blank text are never taken). Raises ValueError
    when there are fewer usable chunks than `n`.
    """
    positive_int("the number of questions", n, what="a positive number of questions")
    rng = random.Random(seed)
    by_doc: dict[str, list[Chunk]] = {}
    for c in chunks:
        if c.text.strip():
            by_doc.setdefault(c.document_id, []).append(c)
    usable = sum(len(v) for v in by_doc.values())
    if usable < n:
        raise InputError(
            f"{n} questions asked for, but the corpus has only {usable} non-empty chunks in {len(by_doc)} "
            f"documents; ask for at most {usable} (--generate-questions {usable}) or add files"
        )
    order = sorted(by_doc)
    rng.shuffle(order)
    pools = {d: rng.sample(by_doc[d], len(by_doc[d])) for d in order}
    taken: list[Chunk] = []
    while len(taken) < n:
        for d in order:
            if pools[d] and len(taken) < n:
                taken.append(pools[d].pop())
    return taken


def quoted_words(question: str, chunk: str) -> int:
    """The longest run of consecutive words of `question` found consecutively in `chunk`
    (case-insensitive, words are ``\\w+`` runs)."""
    q = [w.lower() for w in _WORD.findall(question)]
    c = [w.lower() for w in _WORD.findall(chunk)]
    if not q or not c:
        return 0
    positions: dict[str, list[int]] = {}
    for j, w in enumerate(c):
        positions.setdefault(w, []).append(j)
    best = 0
    prev: dict[int, int] = {}
    for w in q:  # longest common substring over words, row by row of the question
        cur = {j: prev.get(j - 1, 0) + 1 for j in positions.get(w, ())}
        if cur:
            best = max(best, max(cur.values()))
        prev = cur
    return best
