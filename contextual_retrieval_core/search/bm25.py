"""`BM25Index`: an in-process BM25 index over contextualized chunks, in numpy alone.

The index is a sparse term-by-document matrix stored term-major (CSR: each term's postings
contiguous, the "eager" layout of bm25s). Each posting holds its text number (int32) and its term
count (uint16): 6 bytes, where a float64 weight would take 8; a weight is idf * tf / (tf + norm),
computed when a query reads it with the same operations the build used, so the scores are the
bits a stored weight would give. The build streams:
texts arrive in blocks (`index_blocks`, `index_token_blocks`; `index` cuts its lists into blocks
too), each reduced to its distinct (term, text, count) triples before the next is read.

A top-k query (`search`) sums the postings of the query's rarer terms, which together hold a small
share of its postings (1/16, doubled up to a half while the proof fails), and proves that no text
without one of them can reach the k-th score (the common terms' largest weights, summed, are below
it); the common terms are then looked up only for the texts that can still reach it (MaxScore,
exact: the same ids, order and scores bit for bit as summing every posting, which it falls back to
where the proof fails). So a query on a large
corpus reads a few pages of the long postings of frequent terms instead of all of them.
`get_scores` sums every posting (`Postings.scores`).

Saved as JSON plus `.npy` arrays read with ``allow_pickle=False`` and memory-mapped on load (a
query process reads only the postings of the terms it is asked for): loading an index never
executes code.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np

from contextual_retrieval_core.checks import IndexFileError, not_a_string, positive_int, read_blocks, read_json, string_list
from contextual_retrieval_core.chunking.tokenizer import Tokenizer, TokenizerConfig
from contextual_retrieval_core.errors import DiskError, InputError, NotFoundError, RunError

__all__ = ["BM25Index", "Postings", "save_with_records", "load_with_records", "BM25Method"]

BM25Method = Literal["lucene", "robertson"]
_FORMAT = "contextual-retrieval/bm25"
_FORMAT_VERSION = 2
#: the arrays of each format version: 1 stored each posting's weight, 2 its term count (weights
#: are computed from the counts, the terms' idf and the texts' length norms, to the same bits)
_FILES = {1: ("data", "indices", "indptr"), 2: ("indices", "indptr", "tf", "idf", "norms", "term_max")}


class BM25Index:
    """A BM25 index over ids and texts, with a tokenizer for code and prose.

    Args:
        tokenizer: the `Tokenizer` (default: identifiers split, English stop words, stemming,
            CJK bigrams); saved with the index.
        k1: term-frequency saturation (default 1.2, as Lucene and Elasticsearch).
        b: length normalisation (default 0.75).
        method: "lucene" (default; idf = ln(1 + (N - n + 0.5) / (n + 0.5)), never negative, as in
            Lucene and Elasticsearch) or "robertson" (rank_bm25's BM25Okapi: idf =
            ln((N - n + 0.5) / (n + 0.5)), with the idf of terms in more than half the documents
            floored at `epsilon` times the mean idf). Scores equal rank_bm25's divided by (k1 + 1).
        epsilon: the idf floor factor of "robertson".

    Example:
        >>> index = BM25Index().index(["a", "b"], ["DiffExecutor runs two executors", "a tokenizer"])
        >>> [hit_id for hit_id, _ in index.search("diff executor", k=5)]
        ['a']
    """

    def __init__(
        self,
        tokenizer: Tokenizer | None = None,
        *,
        k1: float = 1.2,
        b: float = 0.75,
        method: BM25Method = "lucene",
        epsilon: float = 0.25,
    ) -> None:
        if method not in ("lucene", "robertson"):
            raise InputError(f"method must be 'lucene' or 'robertson', not {method!r}")
        if k1 < 0 or not 0 <= b <= 1:
            raise InputError(f"need k1 >= 0 and 0 <= b <= 1, got k1={k1}, b={b}")
        self.tokenizer = tokenizer or Tokenizer()
        self.k1, self.b, self.method, self.epsilon = float(k1), float(b), method, float(epsilon)
        self.ids: list[str] = []
        self.vocab: dict[str, int] = {}
        self._engine: Postings | None = None

    # -- building ---------------------------------------------------------------------------

    def index(self, ids: Sequence[str], texts: Sequence[str]) -> BM25Index:
        """Index `texts` under `ids` (replacing anything indexed before); returns self. Texts are
        tokenized a block at a time, so the token lists of the whole corpus are never held at once."""
        not_a_string("ids", ids, "ids")
        not_a_string("texts", texts, "texts")
        if len(ids) != len(texts):
            raise InputError(f"got {len(ids)} ids for {len(texts)} texts; pass one id per text")
        return self.index_blocks((ids[i : i + _BUILD_BLOCK], texts[i : i + _BUILD_BLOCK]) for i in range(0, len(ids), _BUILD_BLOCK))

    def index_blocks(self, blocks: Iterable[tuple[Sequence[str], Sequence[str]]]) -> BM25Index:
        """Index a corpus that arrives in blocks of (ids, texts), a generator say, without holding
        it: each block is tokenized and reduced to its (term, text, count) triples before the next
        is read. Returns self."""
        return self.index_token_blocks((ids, self.tokenizer.tokenize_many(texts)) for ids, texts in blocks)

    def index_tokens(self, ids: Sequence[str], tokens: Sequence[Sequence[str]]) -> BM25Index:
        """Index already-tokenized texts (the tokenizer is then only used for queries)."""
        not_a_string("ids", ids, "ids")
        not_a_string("tokens", tokens, "token lists")
        if len(ids) != len(tokens):
            raise InputError(f"got {len(ids)} ids for {len(tokens)} token lists; pass one id per text")
        return self.index_token_blocks((ids[i : i + _BUILD_BLOCK], tokens[i : i + _BUILD_BLOCK]) for i in range(0, len(ids), _BUILD_BLOCK))

    def index_token_blocks(self, blocks: Iterable[tuple[Sequence[str], Sequence[Sequence[str]]]]) -> BM25Index:
        """`index_blocks` for already-tokenized texts: blocks of (ids, token lists). Memory while
        building: the ids, the vocabulary, one block's work and the finished postings (12 bytes a
        distinct (term, text) pair: float64 weights, int32 document numbers); the (term, text,
        count) triples wait in a temporary file (TMPDIR) once they pass 128 MB."""
        build = _Build()
        for number, (ids, tokens) in enumerate(blocks):
            build.add(ids, tokens, number)
        if not build.ids:
            raise InputError("cannot index an empty corpus: pass at least one text")
        build.seen.clear()
        lengths = np.concatenate(build.lengths)
        n_docs, n_terms = len(build.ids), len(build.vocab)
        df = np.zeros(n_terms, dtype=np.int64)
        df[: len(build.df)] = build.df
        idf = self.idf(df.astype(np.float64), n_docs)
        avgdl = float(lengths.mean())
        norms = self.k1 * (1.0 - self.b + self.b * lengths / max(avgdl, 1e-12))  # each text's length term
        indptr = np.zeros(n_terms + 1, dtype=np.int64)
        np.cumsum(df, out=indptr[1:])
        indices = np.empty(int(indptr[-1]), dtype=_doc_dtype(n_docs))
        counts_dtype = np.uint16 if build.max_tf <= np.iinfo(np.uint16).max else np.uint32
        tf_out = np.empty(int(indptr[-1]), dtype=counts_dtype)
        term_max = np.zeros(n_terms, dtype=np.float64)
        cursor = indptr[:-1].copy()
        for terms, docs, tf in build.blocks():  # in corpus order, so each term's postings stay ordered by text
            counts = np.bincount(terms, minlength=n_terms)
            first = np.zeros(n_terms, dtype=np.int64)
            np.cumsum(counts[:-1], out=first[1:])
            at = cursor[terms] + (np.arange(len(terms)) - first[terms])  # pairs are term-major within a block
            indices[at] = docs
            tf_out[at] = tf
            present = np.flatnonzero(counts)
            weights = idf[terms] * tf / (tf + norms[docs])  # as `Postings.weights` computes them
            term_max[present] = np.maximum(term_max[present], np.maximum.reduceat(weights, first[present]))
            cursor += counts
        self.ids, self.vocab = build.ids, build.vocab
        self._engine = Postings(None, indices, indptr, n_docs, term_max, bool(idf.min(initial=0.0) >= 0.0),
                                tf=tf_out, idf=idf, norms=norms)
        return self

    def idf(self, df: np.ndarray, n_docs: int) -> np.ndarray:
        ratio = (n_docs - df + 0.5) / (df + 0.5)
        if self.method == "lucene":
            return np.log1p(ratio)
        idf = np.log(ratio)
        if idf.size:
            floor = self.epsilon * float(idf.mean())
            idf = np.where(idf < 0, floor, idf)
        return idf

    # -- querying ---------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.ids)

    def get_scores(self, query: str | Sequence[str]) -> np.ndarray:
        """BM25 scores of every indexed text for a query (text, or a list of terms)."""
        return self._require().scores(self._term_ids(query))

    def _term_ids(self, query: str | Sequence[str]) -> list[int]:
        """The query's indexed terms (tokenized when it is text), repeats kept, in query order."""
        terms = self.tokenizer.tokenize(query) if isinstance(query, str) else string_list("query", query, "terms")
        return [self.vocab[t] for t in terms if t in self.vocab]

    def mask(self, keep: Callable[[str], Any]) -> np.ndarray:
        """`search`'s `allowed` from a predicate on the indexed ids (a metadata filter, say)."""
        return np.fromiter((bool(keep(i)) for i in self.ids), dtype=bool, count=len(self.ids))

    def search(
        self, query: str | Sequence[str], k: int = 10, *, allowed: np.ndarray | None = None
    ) -> list[tuple[str, float]]:
        """The top `k` (id, score) pairs, best first; texts with score 0 are never returned.

        An empty query, or one with no indexed term, returns []. `k` larger than the corpus
        returns every matching text. Ties are broken by indexing order. `allowed` (a boolean
        array, one entry per indexed text in `ids` order) restricts the search to a subset, as
        metadata filters do.
        """
        k = positive_int("k", k)
        if isinstance(query, str) and not query.strip():
            return []
        engine = self._require()
        if allowed is not None:
            allowed = np.asarray(allowed, dtype=bool)
            if allowed.shape != (len(self.ids),):
                raise InputError(f"allowed has {allowed.size} entries for {len(self.ids)} indexed texts; pass one per id")
        term_ids = self._term_ids(query)
        top = engine.top(term_ids, k, allowed)
        if top is not None:
            return [(self.ids[i], float(score)) for i, score in zip(*top)]
        scores = engine.scores(term_ids)
        if allowed is not None:
            scores = np.where(allowed, scores, 0.0)
        positive = np.flatnonzero(scores > 0)
        if positive.size > k:  # every text tied with the k-th stays in, so ties at the cut go by indexing order too
            kth = np.partition(scores[positive], positive.size - k)[positive.size - k]
            positive = positive[scores[positive] >= kth]
        order = np.lexsort((positive, -scores[positive]))[:k]
        hits = positive[order]
        return [(self.ids[i], float(scores[i])) for i in hits]

    def search_many(self, queries: Iterable[str | Sequence[str]], k: int = 10) -> list[list[tuple[str, float]]]:
        """`search` for each query in a list (a bare string is a TypeError, not one query per character)."""
        not_a_string("queries", queries, "queries")
        return [self.search(q, k) for q in queries]

    # -- persistence ------------------------------------------------------------------------

    def save(self, path: str | Path) -> Path:
        """Write the index to directory `path` (JSON + .npy; no pickle)."""
        engine = self._require()
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        terms = [""] * len(self.vocab)
        for term, i in self.vocab.items():
            terms[i] = term
        meta = {
            "format": _FORMAT,
            "format_version": _FORMAT_VERSION,
            "k1": self.k1,
            "b": self.b,
            "method": self.method,
            "epsilon": self.epsilon,
            "tokenizer": self.tokenizer.config.to_dict(),
            "ids": self.ids,
            "vocab": terms,
        }
        version = 1 if engine.data is not None else _FORMAT_VERSION  # a version 1 folder's index keeps its weights
        meta["format_version"] = version
        (path / "bm25.json").write_text(json.dumps(meta, ensure_ascii=False), encoding="utf-8")
        names = _FILES[version]
        for name in names:
            np.save(path / f"{name}.npy", getattr(engine, name), allow_pickle=False)
        for stale in set(_FILES[1] + _FILES[2]) - set(names):
            (path / f"{stale}.npy").unlink(missing_ok=True)
        return path

    @staticmethod
    def saved_files(path: str | Path) -> tuple[str, ...]:
        """The files a saved index folder holds: ``bm25.json`` and the arrays of its format version
        (the current version's when bm25.json cannot be read)."""
        try:
            version = int(json.loads((Path(path) / "bm25.json").read_text(encoding="utf-8"))["format_version"])
        except (OSError, ValueError, KeyError, TypeError):
            version = _FORMAT_VERSION
        return ("bm25.json", *(f"{name}.npy" for name in _FILES.get(version, _FILES[_FORMAT_VERSION])))

    @classmethod
    def load(cls, path: str | Path) -> BM25Index:
        """Load an index written by `save` (never unpickles anything).

        Every file is checked before the index is returned: a missing, truncated, corrupted or
        inconsistent file (array shapes, document numbers out of range, non-finite weights, an id
        or term list of the wrong length) is an `IndexFileError` naming it.
        """
        path = Path(path)
        meta_file = path / "bm25.json"
        if not meta_file.is_file():
            raise NotFoundError(f"{meta_file} not found: {path} is not a saved BM25Index directory")
        meta = read_json(meta_file)
        if not isinstance(meta, dict) or meta.get("format") != _FORMAT:
            raise InputError(f"{meta_file} is not a BM25 index this version of contextual-retrieval can read")
        if not isinstance(meta.get("format_version"), int) or meta["format_version"] > _FORMAT_VERSION:
            raise InputError(f"{meta_file} is not a BM25 index this version of contextual-retrieval can read")
        missing = [key for key in ("k1", "b", "method", "epsilon", "tokenizer", "ids", "vocab") if key not in meta]
        if missing:
            raise IndexFileError(meta_file, f"missing {', '.join(missing)}")
        ids, vocab = _strings(meta_file, meta, "ids"), _strings(meta_file, meta, "vocab")
        try:
            tokenizer = Tokenizer(TokenizerConfig.from_dict(meta["tokenizer"]))
            index = cls(tokenizer, k1=meta["k1"], b=meta["b"], method=meta["method"], epsilon=meta["epsilon"])
        except (TypeError, ValueError) as exc:
            raise IndexFileError(meta_file, f"bad settings ({exc})") from None
        arrays = {n: _load_array(path / f"{n}.npy") for n in _FILES[meta["format_version"]]}
        index.ids = ids
        index.vocab = {t: i for i, t in enumerate(vocab)}
        index._engine = _checked_postings(path, arrays, len(ids), len(vocab), index)
        return index

    def _require(self) -> Postings:
        if self._engine is None:
            raise RunError("the index is empty: call index(ids, texts) or BM25Index.load(path) first")
        return self._engine


def _doc_dtype(n_docs: int) -> type[np.signedinteger]:
    return np.int32 if n_docs < 2**31 else np.int64


_BUILD_BLOCK = 1 << 14  # texts reduced to (term, text, count) triples at a time while building


class _Build:
    """The state of one streaming build: ids, vocabulary, lengths, document frequencies and each
    block's distinct (term, text, count) triples, term-major (int32 each: 12 bytes a triple). Past
    `_SPILL_BYTES` the triples go to an unnamed temporary file (TMPDIR) instead of the heap, and are
    read back a block at a time when the postings are written."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.seen: set[str] = set()
        self.vocab: dict[str, int] = {}
        self.lengths: list[np.ndarray] = []
        self.df = np.zeros(0, dtype=np.int64)
        self.pairs: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.held = 0  # bytes of triples in `pairs`
        self.max_tf = 0
        self.spill: Any = None  # the temporary file, once there is one
        self.spilled: list[tuple[int, np.dtype]] = []  # (triples, dtype of the text numbers) per block in the file, in order

    def add(self, ids: Sequence[str], tokens: Sequence[Sequence[str]], number: int) -> None:
        not_a_string(f"block {number} ids", ids, "ids")
        not_a_string(f"block {number} tokens", tokens, "token lists")
        if len(ids) != len(tokens):
            raise InputError(f"block {number}: got {len(ids)} ids for {len(tokens)} token lists; pass one id per text")
        for i, terms in enumerate(tokens):
            not_a_string(f"tokens[{len(self.ids) + i}]", terms, "terms")
        names = [str(i) for i in ids]
        for name in names:
            if name in self.seen:
                raise InputError(f"duplicate id {name!r}: every indexed text needs a unique id")
            self.seen.add(name)
        start, vocab = len(self.ids), self.vocab
        self.ids.extend(names)
        lengths = np.fromiter((len(t) for t in tokens), dtype=np.int64, count=len(tokens))
        self.lengths.append(lengths)
        if not len(names):
            return
        flat = np.fromiter((vocab.setdefault(term, len(vocab)) for doc in tokens for term in doc), dtype=np.int64, count=int(lengths.sum()))
        local = np.repeat(np.arange(len(names), dtype=np.int64), lengths)
        pair, tf = np.unique(flat * len(names) + local, return_counts=True)
        del flat, local
        terms, docs = np.divmod(pair, len(names))
        triple = (terms.astype(np.int32), (docs + start).astype(_doc_dtype(start + len(names))), tf.astype(np.int32))
        self.max_tf = max(self.max_tf, int(tf.max()))
        counts = np.bincount(triple[0], minlength=len(vocab))
        counts[: len(self.df)] += self.df
        self.df = counts
        self.pairs.append(triple)
        self.held += sum(a.nbytes for a in triple)
        if self.held > _SPILL_BYTES:
            self._spill()

    def _spill(self) -> None:
        import tempfile

        try:
            if self.spill is None:
                self.spill = tempfile.TemporaryFile(prefix="bm25-build-")  # noqa: SIM115 - closed in blocks(), once read back
            for triple in self.pairs:
                for array in triple:
                    array.tofile(self.spill)
                self.spilled.append((len(triple[0]), triple[1].dtype))
        except OSError as exc:
            raise DiskError(f"building the BM25 index: could not write its temporary file in {tempfile.gettempdir()} ({exc}); "
                          "free space there or point TMPDIR at a disk with room") from None
        self.pairs, self.held = [], 0

    def blocks(self) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Every block's triples, in corpus order, each handed over once."""
        if self.spill is not None:
            self.spill.seek(0)
            for count, docs_dtype in self.spilled:
                yield (np.fromfile(self.spill, dtype=np.int32, count=count), np.fromfile(self.spill, dtype=docs_dtype, count=count),
                       np.fromfile(self.spill, dtype=np.int32, count=count))
            self.spill.close()
            self.spill = None
        while self.pairs:
            yield self.pairs.pop(0)


_SPILL_BYTES = 128 << 20  # triples held on the heap before a build writes them to a temporary file


def _strings(file: Path, meta: dict, key: str) -> list[str]:
    values = meta[key]
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise IndexFileError(file, f"{key!r} must be a list of strings")
    if len(set(values)) != len(values):
        raise IndexFileError(file, f"{key!r} lists an entry twice")
    return values


_CHECK_BLOCK = 1 << 22  # entries read at a time when a mapped array is checked


def _load_array(file: Path) -> np.ndarray:
    """The array in `file`, memory-mapped read-only (pages shared, read on demand)."""
    if not file.is_file():
        raise IndexFileError(file, "missing")
    try:
        array = np.load(file, allow_pickle=False, mmap_mode="r")
    except (OSError, ValueError, EOFError) as exc:
        raise IndexFileError(file, f"truncated or corrupted ({type(exc).__name__}: {exc})") from None
    return array


def _checked_postings(path: Path, arrays: dict[str, np.ndarray], n_docs: int, n_terms: int, settings: BM25Index) -> Postings:
    """The term-major sparse matrix, checked whole: shapes agree, document numbers are in range
    and ascending within each term, counts are positive and every number is finite; in a version 2
    folder, the arrays hold what the build writes (`_checked_weights`). A version 1 folder's term
    bounds (for `Postings.top`) are found on the same pass over its weights."""

    def need(name: str, kinds: str, size: int | None = None) -> np.ndarray:
        array = arrays[name]
        if array.ndim != 1 or array.dtype.kind not in kinds:
            what = "float" if kinds == "f" else "integer"
            raise IndexFileError(path / f"{name}.npy", f"expected a 1-D {what} array, got {array.dtype} of shape {array.shape}")
        if size is not None and array.size != size:
            raise IndexFileError(path / f"{name}.npy", f"{array.size} entries where {size} were expected")
        return array

    if n_docs == 0:
        raise IndexFileError(path / "bm25.json", "no ids: an index holds at least one text")
    indices, indptr = need("indices", "iu"), need("indptr", "iu")
    if indptr.size != n_terms + 1:
        raise IndexFileError(path / "indptr.npy", f"{indptr.size} entries for {n_terms} terms in bm25.json (expected {n_terms + 1})")
    if indptr[0] != 0 or indptr[-1] != indices.size or np.any(np.diff(indptr) < 0):
        raise IndexFileError(path / "indptr.npy", f"offsets are not ordered from 0 to {indices.size} (the size of indices.npy)")
    previous = -1
    for offset, block in read_blocks(indices, _CHECK_BLOCK):
        if block.min() < 0 or block.max() >= n_docs:
            raise IndexFileError(path / "indices.npy", f"a document number outside 0..{n_docs - 1} (bm25.json lists {n_docs} ids)")
        steps = np.diff(block, prepend=previous)
        falls = np.flatnonzero(steps <= 0) + offset  # allowed only where a term's postings start
        if falls.size and not np.all(indptr[np.searchsorted(indptr, falls).clip(max=indptr.size - 1)] == falls):
            raise IndexFileError(path / "indices.npy", "a term's document numbers are not in ascending order")
        previous = int(block[-1])
    if "data" in arrays:
        data = need("data", "f", indices.size)

        def finite(blocks: Iterable[tuple[int, np.ndarray]]) -> Iterable[tuple[int, np.ndarray]]:
            for offset, block in blocks:
                if not np.all(np.isfinite(block)):
                    raise IndexFileError(path / "data.npy", "a weight is NaN or infinite")
                yield offset, block

        term_max, low = _term_bounds(finite(read_blocks(data, _CHECK_BLOCK)), indptr)
        return Postings(_plain(data), _plain(indices), np.asarray(indptr), n_docs, term_max, low >= 0.0)
    tf = need("tf", "u", indices.size)
    for _, block in read_blocks(tf, _CHECK_BLOCK):
        if block.min() == 0:
            raise IndexFileError(path / "tf.npy", "a term count of 0 (every posting counts its term at least once)")
    idf, norms, term_max = (np.asarray(need(name, "f", size)) for name, size in (("idf", n_terms), ("norms", n_docs), ("term_max", n_terms)))
    postings = Postings(None, _plain(indices), np.asarray(indptr), n_docs, term_max, bool(idf.min(initial=0.0) >= 0.0),
                        tf=_plain(tf), idf=idf, norms=norms)
    _checked_weights(path, postings, settings)
    return postings


#: terms of ``term_max.npy`` per sampled term: 256 float64 entries are 2 KB, so every 4 KB block of
#: the file holds all of one such run, and the run's term with the fewest postings is checked
_SAMPLE_RUN = 256
_RTOL = 1e-9  # relative tolerance on recomputed floats: the same operations, a margin for the last bits
_MEAN_RTOL = 1e-6  # on the norms' mean: a sum of a million floats, in another order than the build's


def _checked_weights(path: Path, postings: Postings, settings: BM25Index) -> None:
    """Check that a version 2 folder's float arrays hold what the build writes, at O(texts + terms)
    cost and a few postings' pages, so a zeroed or overwritten block is an `IndexFileError` naming
    its file instead of different answers:

    - every value finite;
    - ``norms.npy``: each at least k1 * (1 - b) (a text's length term k1 * (1 - b + b * len
      / avgdl)), and their mean is k1 (the lengths' mean is avgdl);
    - ``idf.npy``: the idf of each term's document frequency (its number of postings);
    - ``term_max.npy``: each term's bound lies between the least weight any of its postings
      can have (idf / (1 + the largest norm)) and its idf (0 where the idf is not positive); and, on a
      sample (one term in every 256, so one in every 4 KB block of the file) it is the largest weight
      of the term's postings, recomputed.
    """
    assert postings.tf is not None and postings.idf is not None and postings.norms is not None
    norms, idf, term_max, indptr = postings.norms, postings.idf, postings.term_max, postings.indptr
    k1, b = settings.k1, settings.b
    for name, array in (("idf", idf), ("norms", norms), ("term_max", term_max)):
        if not np.all(np.isfinite(array)):
            raise IndexFileError(path / f"{name}.npy", "a value is NaN or infinite")
    floor = k1 * (1.0 - b)
    low = int(np.argmin(norms))
    if norms[low] < floor * (1 - _RTOL):
        raise IndexFileError(path / "norms.npy", f"the length norm of text {low} is {norms[low]!r}, below k1 * (1 - b) = {floor!r} "
                             "(a zeroed or overwritten block)")
    mean = float(norms.mean())
    if indptr[-1] > 0 and abs(mean - k1) > _MEAN_RTOL * max(k1, 1.0):
        raise IndexFileError(path / "norms.npy", f"the length norms' mean is {mean!r}, not k1 = {k1!r} (a zeroed or overwritten block)")
    df = np.diff(indptr).astype(np.float64)
    expected = settings.idf(df, postings.n_docs)
    wrong = np.flatnonzero(~np.isclose(idf, expected, rtol=_RTOL, atol=0.0))
    if wrong.size:
        raise IndexFileError(path / "idf.npy", f"the idf of term {int(wrong[0])} is {idf[wrong[0]]!r}, its {int(df[wrong[0]])} "
                             f"postings give {expected[wrong[0]]!r} ({wrong.size} terms wrong: a zeroed or overwritten block)")
    positive = (idf > 0) & (df > 0)  # else every weight is <= 0 (or there is none): the bound is 0
    least = np.where(positive, idf / (1.0 + float(norms.max())), 0.0) * (1 - _RTOL)
    most = np.where(positive, idf, 0.0) * (1 + _RTOL)
    wrong = np.flatnonzero((term_max < least) | (term_max > most))
    if wrong.size:
        t = int(wrong[0])
        raise IndexFileError(path / "term_max.npy", f"term bounds out of range: term {t}'s is {term_max[t]!r}, its postings "
                             f"allow {least[t]!r} to {most[t]!r} ({wrong.size} terms wrong: a zeroed or overwritten block)")
    sample = _sample_terms(indptr)
    if sample.size:
        got = _largest_weights(postings, sample)
        wrong = np.flatnonzero(~np.isclose(term_max[sample], got, rtol=_RTOL, atol=0.0))
        if wrong.size:
            t = int(sample[wrong[0]])
            raise IndexFileError(path / "term_max.npy", f"term bounds out of range: term {t}'s is {term_max[t]!r}, its "
                                 f"postings' largest weight is {got[wrong[0]]!r} (an overwritten block)")


def _sample_terms(indptr: np.ndarray) -> np.ndarray:
    """In each run of `_SAMPLE_RUN` terms, the one with the fewest postings (at least one)."""
    df = np.diff(indptr)
    n = df.size
    if not n:
        return np.zeros(0, dtype=np.int64)
    padded = np.full(-(-n // _SAMPLE_RUN) * _SAMPLE_RUN, np.iinfo(np.int64).max, dtype=np.int64)
    padded[:n] = np.where(df > 0, df, np.iinfo(np.int64).max)
    runs = padded.reshape(-1, _SAMPLE_RUN)
    picks = np.argmin(runs, axis=1) + np.arange(runs.shape[0]) * _SAMPLE_RUN
    return picks[runs.min(axis=1) < np.iinfo(np.int64).max]


def _largest_weights(postings: Postings, terms: np.ndarray) -> np.ndarray:
    """Each of `terms`' largest posting weight (0.0 where that is negative, as the build bounds
    them), computed with the operations of `Postings.weights`, for all of them at once."""
    assert postings.tf is not None and postings.idf is not None and postings.norms is not None
    lo = postings.indptr[terms].astype(np.int64)
    counts = (postings.indptr[terms + 1] - lo).astype(np.int64)
    starts = np.cumsum(counts) - counts
    at = np.repeat(lo - starts, counts) + np.arange(int(counts.sum()), dtype=np.int64)
    weights = postings.tf[at].astype(np.float64)
    lengths = postings.norms[postings.indices[at]]
    lengths += weights
    weights *= np.repeat(postings.idf[terms], counts)
    weights /= lengths
    return np.maximum(np.maximum.reduceat(weights, starts), 0.0)


def _plain(array: np.ndarray) -> np.ndarray:
    """The same mapped pages as a plain ndarray (slicing a np.memmap costs a Python call each time)."""
    return array.view(np.ndarray)


class Postings:
    """Term-major sparse BM25 weights (CSR): term t's postings are ``indices[indptr[t]:indptr[t + 1]]``
    (document numbers, ascending) with their weights in `data`.

    `top` finds the k best documents without summing the long postings of common terms where it
    can (MaxScore, exact): a document that holds none of a query's rarer terms scores at most the
    sum of the common terms' largest weights (`term_max`), so once k documents holding a rarer term
    score above that bound, the common terms are only looked up for those documents.

    Example:
        >>> p = Postings(np.array([0.5, 1.0, 2.0]), np.array([0, 2, 1]), np.array([0, 2, 3]), 3)
        >>> p.scores([0, 1]).tolist()
        [0.5, 2.0, 1.0]
    """

    __slots__ = ("data", "indices", "indptr", "n_docs", "term_max", "nonnegative", "tf", "idf", "norms")

    def __init__(self, data: np.ndarray | None, indices: np.ndarray, indptr: np.ndarray, n_docs: int,
                 term_max: np.ndarray | None = None, nonnegative: bool | None = None, *,
                 tf: np.ndarray | None = None, idf: np.ndarray | None = None, norms: np.ndarray | None = None) -> None:
        if data is None and (tf is None or idf is None or norms is None):
            raise InputError("Postings needs each posting's weight (data) or its term count with the idf and length norms (tf, idf, norms)")
        self.data, self.indices, self.indptr, self.n_docs = data, indices, indptr, int(n_docs)
        self.tf, self.idf, self.norms = tf, idf, norms
        if term_max is None or nonnegative is None:
            n_terms = len(indptr) - 1
            term_max, low = _term_bounds(((int(indptr[t]), self.weights(t)) for t in range(n_terms)), indptr)
            nonnegative = low >= 0.0
        self.term_max, self.nonnegative = term_max, bool(nonnegative)

    def weights(self, term: int, at: np.ndarray | None = None) -> np.ndarray:
        """Term `term`'s posting weights (float64), or those at positions `at` of its postings:
        stored, or idf * tf / (tf + norm) from the counts, the same operations as the build's."""
        lo, hi = int(self.indptr[term]), int(self.indptr[term + 1])
        if self.data is not None:
            stored = np.asarray(self.data[lo:hi], dtype=np.float64)
            return stored if at is None else stored[at]
        assert self.tf is not None and self.idf is not None and self.norms is not None
        tf, docs = self.tf[lo:hi], self.indices[lo:hi]
        if at is not None:
            tf, docs = tf[at], docs[at]
        weights = tf.astype(np.float64)  # exact: the counts the build divided
        lengths = self.norms[docs]
        lengths += weights  # tf + norm
        weights *= self.idf[term]  # idf * tf
        weights /= lengths  # the build's idf * tf / (tf + norm), operation for operation
        return weights

    def scores(self, term_ids: Sequence[int]) -> np.ndarray:
        """Every document's score (float64): the sum of the query terms' weights, a repeated term
        counted each time, added term by term in query order (as bm25s adds them)."""
        if not len(term_ids):
            return np.zeros(self.n_docs, dtype=np.float64)
        docs = np.concatenate([self.indices[int(self.indptr[t]) : int(self.indptr[t + 1])] for t in term_ids])
        return np.bincount(docs, weights=np.concatenate([self.weights(t) for t in term_ids]), minlength=self.n_docs)

    def top(self, term_ids: Sequence[int], k: int, allowed: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray] | None:
        """The `k` best (documents, scores) with positive scores, best first, ties by document
        number: exactly what sorting `scores` gives, scores bit for bit (each document's weights are
        added in the same order). None where pruning cannot prove its answer cheaply (the caller
        then sums every posting)."""
        if not len(term_ids) or not self.nonnegative:
            return None
        unique = sorted(set(term_ids), key=lambda t: (int(self.indptr[t + 1] - self.indptr[t]), t))  # rarest first
        sizes = np.cumsum([term_ids.count(t) * int(self.indptr[t + 1] - self.indptr[t]) for t in unique])
        split = max(1, int(np.searchsorted(sizes, _PRUNE_SHARES[0] * sizes[-1], side="right")))
        while split < len(unique):
            found, floor = self._top_past(set(unique[:split]), term_ids, k, allowed)
            if found is not None:
                return found
            # the next try: the fewest more terms whose absence that floor already outweighs (it can
            # only rise as terms join), else the next share of the postings
            proven = [s for s in range(split + 1, len(unique)) if floor * (1 - 2 * _SLACK) > self._most(unique[s:], term_ids)]
            shares = [s for s in (max(1, int(np.searchsorted(sizes, share * sizes[-1], side="right"))) for share in _PRUNE_SHARES) if s > split]
            split = proven[0] if proven else (shares[0] if shares else len(unique))
        return None

    def _top_past(self, rare: set[int], term_ids: Sequence[int], k: int,
                  allowed: np.ndarray | None) -> tuple[tuple[np.ndarray, np.ndarray] | None, float]:
        """(`top`'s answer, its floor) with `rare` as the terms whose postings are summed whole;
        (None, the k-th partial score) where the other terms' largest weights might lift a text
        holding none of `rare` into the top k (0.0 where fewer than k texts hold one of `rare`)."""
        rest = sorted({t for t in term_ids if t not in rare}, key=lambda t: (-float(self.term_max[t]), t))  # largest weight first
        spans = [(int(self.indptr[t]), int(self.indptr[t + 1])) for t in term_ids if t in rare]
        partial = np.bincount(np.concatenate([self.indices[lo:hi] for lo, hi in spans]),
                              weights=np.concatenate([self.weights(t) for t in term_ids if t in rare]), minlength=self.n_docs)
        if allowed is not None:
            partial[~allowed] = 0.0
        docs = np.flatnonzero(partial > 0).astype(self.indices.dtype)
        if len(docs) < k:
            return None, 0.0
        partial = partial[docs]
        # partial sums never exceed final scores; `slack` covers sums taken in another order
        floor = float(np.partition(partial, len(partial) - k)[len(partial) - k])  # the k-th score is at least this
        slack = _SLACK * floor
        if not floor - slack > self._most(rest, term_ids) + slack:
            return None, floor
        seen: dict[int, np.ndarray] = {}  # the common terms' weights looked up so far, one per text in `docs`
        for done in range(len(rest) + 1):  # drop the texts that cannot reach the floor, then look one more term up
            live = partial + self._most(rest[done:], term_ids) + slack >= floor - slack
            docs, partial = docs[live], partial[live]
            seen = {t: w[live] for t, w in seen.items()}
            if done == len(rest) or len(docs) <= k:
                break
            seen[rest[done]] = self._weights(rest[done], docs)
            partial = partial + term_ids.count(rest[done]) * seen[rest[done]]
            floor = max(floor, float(np.partition(partial, len(partial) - k)[len(partial) - k]))
        scores = np.zeros(len(docs), dtype=np.float64)
        for t in term_ids:  # every term, in query order: the same additions as `scores`
            scores += seen[t] if t in seen else self._weights(t, docs)
        order = np.lexsort((docs, -scores))[:k]
        return (docs[order], scores[order]), floor

    def _most(self, terms: Sequence[int], query: Sequence[int]) -> float:
        """The most `terms` can add to a text's score, each counted as often as the query asks it."""
        return sum(query.count(t) * float(self.term_max[t]) for t in terms)

    def _weights(self, term: int, docs: np.ndarray) -> np.ndarray:
        """Term `term`'s weight in each of `docs` (ascending document numbers), 0.0 where absent."""
        lo, hi = int(self.indptr[term]), int(self.indptr[term + 1])
        if hi == lo:  # a term with no postings (a version 1 folder may hold one)
            return np.zeros(len(docs), dtype=np.float64)
        postings = self.indices[lo:hi]
        at = np.minimum(np.searchsorted(postings, docs), hi - lo - 1)  # `docs` in the postings' own dtype: no copy
        return np.where(postings[at] == docs, self.weights(term, at), 0.0)


#: shares of a query's postings the rarer terms may hold, tried in turn: the smallest first (least
#: to sum), doubled while the bound fails to prove the top k; past a half, every posting is summed
_PRUNE_SHARES = (1 / 16, 1 / 8, 1 / 4, 1 / 2)
_SLACK = 1e-9  # relative margin on the bounds: partial sums taken in another order differ in the last bits


def _term_bounds(blocks: Iterable[tuple[int, np.ndarray]], indptr: np.ndarray) -> tuple[np.ndarray, float]:
    """Each term's largest weight, and the smallest weight of all, from the weights read a block
    at a time ((offset, block) pairs covering `data` in order)."""
    n_terms = len(indptr) - 1
    term_max = np.zeros(n_terms, dtype=np.float64)
    low = 0.0
    for offset, block in blocks:
        if not block.size:
            continue
        low = min(low, float(block.min()))
        end = offset + block.size
        first = int(np.searchsorted(indptr, offset, side="right")) - 1
        last = int(np.searchsorted(indptr, end - 1, side="right")) - 1
        starts = np.clip(indptr[first : last + 1], offset, end) - offset
        term_max[first : last + 1] = np.maximum(term_max[first : last + 1], np.maximum.reduceat(block, starts))
    return term_max, low


_RECORDS_FILE = "records.jsonl"
_SETTINGS_FILE = "settings.json"


def save_with_records(
    path: str | os.PathLike[str], index: BM25Index, records: Iterable[dict], settings: dict | None = None
) -> Path:
    """A retriever on disk: `index` (JSON + .npy), one JSON record per indexed text (the framework's
    node or document, as a dict) and the retriever's settings. No pickle anywhere."""
    path = Path(path)
    index.save(path)
    with open(path / _RECORDS_FILE, "w", encoding="utf-8") as fh:
        for record in records:
            fh.write(json.dumps(record, ensure_ascii=False) + "\n")
    (path / _SETTINGS_FILE).write_text(json.dumps(settings or {}), encoding="utf-8")
    return path


def load_with_records(path: str | os.PathLike[str]) -> tuple[BM25Index, list[dict], dict]:
    """What `save_with_records` wrote: (index, records, settings)."""
    path = Path(path)
    if not (path / _RECORDS_FILE).is_file():
        raise NotFoundError(
            f"{path / _RECORDS_FILE} not found: {path} is not a saved BM25 retriever (write one with the retriever's save() / persist())"
        )
    index = BM25Index.load(path)
    records_file = path / _RECORDS_FILE
    records = []
    try:
        with open(records_file, encoding="utf-8") as fh:
            for number, line in enumerate(fh, start=1):
                if line.strip():
                    record = json.loads(line)
                    if not isinstance(record, dict):
                        raise InputError(f"line {number} is a {type(record).__name__}, not a JSON object")
                    records.append(record)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise IndexFileError(records_file, f"not readable ({exc})", "save the retriever again") from None
    if len(records) != len(index.ids):
        raise IndexFileError(records_file, f"{len(records)} records for {len(index.ids)} indexed texts", "save the retriever again")
    settings_file = path / _SETTINGS_FILE
    settings = read_json(settings_file) if settings_file.is_file() else {}
    if not isinstance(settings, dict):
        raise IndexFileError(settings_file, "not a JSON object", "save the retriever again")
    return index, records, settings
