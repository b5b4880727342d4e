"""The BM25 tokenizer: code identifiers, stop words, stemming and text without spaces.

`Tokenizer` turns text into index terms:

- Unicode NFKC normalisation, then accents and compatibility forms are folded (version 3: NFKD,
  marks of the combining diacritical blocks dropped, NFC again: "café" and "cafe", "ﬁle" and
  "file" match; Devanagari vowel signs, kana voicing marks and Hangul are kept as they are); words
  are runs of letters, digits and underscores; combining marks (the vowel signs and viramas of
  Devanagari, Thai, Arabic, ...) stay inside their word.
- Code identifiers are split into their parts (``DiffExecutor`` -> ``diff``, ``executor``;
  ``run_target`` -> ``run``, ``target``; ``HTTPServer2`` -> ``http``, ``server``, ``2``) and the
  whole identifier is kept too (``diffexecutor``, ``run_target``), so an exact identifier in a
  query scores higher than its parts alone.
- Lowercasing, English stop words dropped, Snowball stemming (PyStemmer).
- Scripts written without spaces (Chinese, Japanese kana and kanji) become overlapping character
  bigrams, so a Chinese query finds a Chinese chunk without a word segmenter.

The settings are a plain dataclass that round-trips through JSON, and `BM25Index` saves them
with the index so a reloaded index tokenizes queries exactly as it tokenized the corpus.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from contextual_retrieval_core.checks import positive_int
from contextual_retrieval_core.chunking._unicode_marks import MARK_RANGES, scan_marks
from contextual_retrieval_core.errors import InputError, InputTypeError

__all__ = ["Tokenizer", "TokenizerConfig", "ENGLISH_STOP_WORDS"]

# A compact English stop-word list: Lucene's, plus common function words. Words that carry
# meaning in questions about code ("return", "class", "function", "error") are not in it.
ENGLISH_STOP_WORDS: frozenset[str] = frozenset(
    ["a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it", "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there", "these", "they", "this", "to", "was", "will", "with", "i", "me", "my", "we", "our", "you", "your", "he", "him", "his", "she", "her", "its", "them", "what", "which", "who", "whom", "whose", "when", "where", "why", "how", "all", "any", "both", "each", "few", "more", "most", "other", "some", "than", "too", "very", "can", "could", "should", "would", "do", "does", "did", "doing", "done", "have", "has", "had", "having", "am", "been", "being", "were", "so", "s", "t", "just", "from", "about", "above", "below", "up", "down", "out", "off", "over", "under", "again", "further", "once", "here", "only", "own", "same", "also", "may", "might", "must", "shall"]
)

#: the tokenizer version written by this release; see `TokenizerConfig.version`
TOKENIZER_VERSION = 3


def _mark_class() -> str:
    """A regex character class of every combining mark (Unicode category M) Python knows.

    Python's `\\w` matches letters and digits but not marks, so without them "हिन्दी" would fall
    apart at every vowel sign. The ranges come from `_unicode_marks.MARK_RANGES` for this Python's
    Unicode version, else from a scan of the Unicode database.
    """
    table = MARK_RANGES.get(unicodedata.unidata_version) or scan_marks()
    ranges = []
    for part in table.split():
        a, dash, b = part.partition("-")
        if dash and not b:
            raise InputError(f"malformed mark range {part!r} in _unicode_marks.MARK_RANGES")
        lo, hi = chr(int(a, 16)), chr(int(b or a, 16))
        ranges.append(re.escape(lo) if lo == hi else f"{re.escape(lo)}-{re.escape(hi)}")
    return "[" + "".join(ranges) + "]"


_MARK = _mark_class()


def _word_pattern(part: str) -> re.Pattern[str]:
    # words joined by underscores (snake_case), optionally led by underscores (_private)
    return re.compile(rf"{part}(?:_+{part})*|_+{part}(?:_+{part})*")


# version 1 (indexes saved before marks were kept): runs of letters and digits only
# version 2: a letter or digit, then letters, digits and combining marks
# version 3: version 2's words, after folding accents and compatibility forms (`_fold`)
_WORDS = {
    1: _word_pattern(r"[^\W_]+"),
    2: _word_pattern(rf"[^\W_](?:[^\W_]|{_MARK})*"),
    3: _word_pattern(rf"[^\W_](?:[^\W_]|{_MARK})*"),
}
_FOLDING_VERSIONS = frozenset({3})
# the combining diacritical blocks: Combining Diacritical Marks, its Extended and Supplement
# blocks, marks for symbols, half marks. Other scripts' marks (vowel signs, viramas, kana voicing)
# change the letter, not its accent, and are kept.
_DIACRITICS = re.compile("[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]+")


def _fold(text: str) -> str:
    """Accents and compatibility forms folded: NFKD, diacritical marks dropped, NFC."""
    return unicodedata.normalize("NFC", _DIACRITICS.sub("", unicodedata.normalize("NFKD", text)))
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
# Han, Hiragana, Katakana, CJK compatibility and extension blocks: scripts written without spaces.
_NO_SPACE = re.compile(
    r"[\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f"
    r"\U00020000-\U0002ffff]+"
)


@dataclass
class TokenizerConfig:
    """Settings of a `Tokenizer`; saved with every BM25 index.

    Args:
        lowercase: lowercase every term.
        split_identifiers: split camelCase / snake_case / letter-digit identifiers into parts.
        keep_identifiers: also keep the whole identifier as a term when it was split.
        stopwords: "en" for the built-in English list, None for none, or an explicit list.
        stemmer: a PyStemmer language ("english", "french", ...) or None for no stemming.
        cjk_bigrams: index text without spaces as overlapping character bigrams.
        min_token_length: drop shorter terms (CJK terms are exempt).
        version: the tokenization rules. New configs get the current one (3: accents and
            compatibility forms folded; 2: combining marks stay in their word, no folding; 1: words
            split at marks). An index keeps the version it was saved with, so its queries are
            tokenized exactly as its corpus was; rebuild it to get the current one.
    """

    lowercase: bool = True
    split_identifiers: bool = True
    keep_identifiers: bool = True
    stopwords: str | list[str] | None = "en"
    stemmer: str | None = "english"
    cjk_bigrams: bool = True
    min_token_length: int = 1
    version: int = field(default=TOKENIZER_VERSION)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TokenizerConfig:
        known = {f for f in cls.__dataclass_fields__}
        unknown = set(data) - known
        if unknown:
            raise InputError(
                f"unknown tokenizer settings {sorted(unknown)}; this index was written by a newer "
                "contextual-retrieval: upgrade the package to load it"
            )
        return cls(**data)


class Tokenizer:
    """Text to BM25 terms, tuned for prose and source code alike.

    Example:
        >>> Tokenizer().tokenize("How does DiffExecutor run_target work?")
        ['diff', 'executor', 'diffexecutor', 'run', 'target', 'run_target', 'work']
    """

    def __init__(self, config: TokenizerConfig | None = None, **settings: Any) -> None:
        if config is not None and settings:
            raise InputTypeError("pass either config=TokenizerConfig(...) or keyword settings, not both")
        self.config = config if config is not None else TokenizerConfig(**settings)
        c = self.config
        positive_int("min_token_length", c.min_token_length)
        if c.version not in _WORDS:
            raise InputError(
                f"tokenizer version {c.version!r} is unknown to this contextual-retrieval (it knows "
                f"{sorted(_WORDS)}); an index saved by a newer release needs an upgrade"
            )
        self._word = _WORDS[c.version]
        self._fold = c.version in _FOLDING_VERSIONS
        if c.stopwords is None:
            self._stop: frozenset[str] = frozenset()
        elif c.stopwords == "en":
            self._stop = ENGLISH_STOP_WORDS
        elif isinstance(c.stopwords, str):
            raise InputError(f"stopwords must be 'en', None or a list of words, not {c.stopwords!r}")
        else:
            self._stop = frozenset(w.lower() if c.lowercase else w for w in c.stopwords)
        self._stem = None
        if c.stemmer:
            import Stemmer  # PyStemmer

            try:
                self._stem = Stemmer.Stemmer(c.stemmer).stemWords
            except KeyError as exc:
                raise InputError(
                    f"unknown stemmer language {c.stemmer!r}; choose one of "
                    f"{sorted(Stemmer.algorithms())} or stemmer=None"
                ) from exc

    def __reduce__(self) -> tuple[Any, ...]:
        # rebuilt from its settings (the PyStemmer object cannot be pickled), so a retriever
        # holding a tokenizer can be pickled or deep-copied as the frameworks' stock ones can
        return (Tokenizer, (self.config,))

    def tokenize(self, text: str) -> list[str]:
        """The terms of one text, in order (duplicates kept: BM25 counts them)."""
        if isinstance(text, (bytes, bytearray)):
            raise InputTypeError("text is bytes; decode it first, e.g. data.decode('utf-8', errors='replace')")
        c = self.config
        text = _fold(text) if self._fold else unicodedata.normalize("NFKC", text)
        words: list[str] = []
        cjk: list[str] = []
        for match in self._word.finditer(text):
            word = match.group()
            if c.cjk_bigrams and _NO_SPACE.search(word):
                pos = 0
                for run in _NO_SPACE.finditer(word):
                    words.extend(self._identifier_terms(word[pos : run.start()]))
                    cjk.extend(_bigrams(run.group()))
                    pos = run.end()
                words.extend(self._identifier_terms(word[pos:]))
            else:
                words.extend(self._identifier_terms(word))
        if c.lowercase:
            words = [w.lower() for w in words]
        if self._stop:
            words = [w for w in words if w not in self._stop]
        if self._stem is not None and words:
            words = self._stem(words)
        if c.min_token_length > 1:
            words = [w for w in words if len(w) >= c.min_token_length]
        return words + cjk if cjk else words

    def tokenize_many(self, texts: Iterable[str]) -> list[list[str]]:
        return [self.tokenize(t) for t in texts]

    __call__ = tokenize

    def _identifier_terms(self, word: str) -> list[str]:
        word = word.strip("_")
        if not word:
            return []
        if not self.config.split_identifiers:
            return [word]
        parts: list[str] = []
        for piece in word.split("_"):
            if not piece:
                continue
            if piece.isascii():
                parts.extend(_CAMEL.findall(piece))
            else:
                parts.append(piece)
        if len(parts) <= 1:
            return parts or [word]
        if self.config.keep_identifiers:
            parts.append(word)
        return parts


def _bigrams(run: str) -> list[str]:
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]
