"""`BM25Index`: an in-process BM25 index over contextualized chunks, built on bm25s.

The term weights are computed once, vectorised, into a sparse term-by-document matrix (the bm25s
"eager" layout); a query sums the rows of its terms, so query time grows with the postings of the
query's terms, never with a Python loop over the corpus. Saved as JSON plus `.npy` arrays read
with ``allow_pickle=False``: loading an index never executes code.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable, Literal, Sequence

import bm25s
import numpy as np

from ._compat import bm25s_scorer
from .tokenizer import Tokenizer, TokenizerConfig

__all__ = ["BM25Index", "save_with_records", "load_with_records", "BM25Method"]

BM25Method = Literal["lucene", "robertson"]
_FORMAT = "contextual-retrieval/bm25"
_FORMAT_VERSION = 1


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
            raise ValueError(f"method must be 'lucene' or 'robertson', not {method!r}")
        if k1 < 0 or not 0 <= b <= 1:
            raise ValueError(f"need k1 >= 0 and 0 <= b <= 1, got k1={k1}, b={b}")
        self.tokenizer = tokenizer or Tokenizer()
        self.k1, self.b, self.method, self.epsilon = float(k1), float(b), method, float(epsilon)
        self.ids: list[str] = []
        self.vocab: dict[str, int] = {}
        self._engine: bm25s.BM25 | None = None

    # -- building ---------------------------------------------------------------------------

    def index(self, ids: Sequence[str], texts: Sequence[str]) -> "BM25Index":
        """Index `texts` under `ids` (replacing anything indexed before); returns self."""
        if len(ids) != len(texts):
            raise ValueError(f"got {len(ids)} ids for {len(texts)} texts; pass one id per text")
        return self.index_tokens(ids, self.tokenizer.tokenize_many(texts))

    def index_tokens(self, ids: Sequence[str], tokens: Sequence[Sequence[str]]) -> "BM25Index":
        """Index already-tokenized texts (the tokenizer is then only used for queries)."""
        ids = [str(i) for i in ids]
        if len(ids) != len(tokens):
            raise ValueError(f"got {len(ids)} ids for {len(tokens)} token lists; pass one id per text")
        if not ids:
            raise ValueError("cannot index an empty corpus: pass at least one text")
        if len(set(ids)) != len(ids):
            seen: set[str] = set()
            dup = next(i for i in ids if i in seen or seen.add(i))  # type: ignore[func-returns-value]
            raise ValueError(f"duplicate id {dup!r}: every indexed text needs a unique id")

        vocab: dict[str, int] = {}
        lengths = np.fromiter((len(t) for t in tokens), dtype=np.int64, count=len(tokens))
        flat = np.fromiter(
            (vocab.setdefault(term, len(vocab)) for doc in tokens for term in doc),
            dtype=np.int64,
            count=int(lengths.sum()),
        )
        n_docs, n_terms = len(ids), len(vocab)
        doc_of = np.repeat(np.arange(n_docs, dtype=np.int64), lengths)

        # term frequencies: unique (term, doc) pairs, term-major so rows are contiguous postings
        pair = flat * n_docs + doc_of
        pair, tf = np.unique(pair, return_counts=True)
        term_idx, doc_idx = np.divmod(pair, n_docs)
        df = np.bincount(term_idx, minlength=n_terms).astype(np.float64)

        idf = self._idf(df, n_docs)
        avgdl = float(lengths.mean()) if n_docs else 0.0
        norm = self.k1 * (1.0 - self.b + self.b * lengths[doc_idx] / max(avgdl, 1e-12))
        data = idf[term_idx] * tf / (tf + norm)
        indptr = np.zeros(n_terms + 1, dtype=np.int64)
        np.cumsum(np.bincount(term_idx, minlength=n_terms), out=indptr[1:])

        self.ids, self.vocab = ids, vocab
        self._engine = _engine(data.astype(np.float64), doc_idx.astype(np.int64), indptr, n_docs, vocab)
        return self

    def _idf(self, df: np.ndarray, n_docs: int) -> np.ndarray:
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
        engine = self._require()
        terms = self.tokenizer.tokenize(query) if isinstance(query, str) else list(query)
        term_ids = [self.vocab[t] for t in terms if t in self.vocab]
        if not term_ids:
            return np.zeros(len(self.ids), dtype=np.float64)
        return engine.get_scores_from_ids(term_ids)

    def search(
        self, query: str | Sequence[str], k: int = 10, *, allowed: np.ndarray | None = None
    ) -> list[tuple[str, float]]:
        """The top `k` (id, score) pairs, best first; texts with score 0 are never returned.

        An empty query, or one with no indexed term, returns []. `k` larger than the corpus
        returns every matching text. Ties are broken by indexing order. `allowed` (a boolean
        array, one entry per indexed text in `ids` order) restricts the search to a subset, as
        metadata filters do.
        """
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k <= 0:
            raise ValueError(f"k must be a positive integer, got {k!r}")
        if isinstance(query, str) and not query.strip():
            return []
        scores = self.get_scores(query)
        if allowed is not None:
            allowed = np.asarray(allowed, dtype=bool)
            if allowed.shape != scores.shape:
                raise ValueError(f"allowed has {allowed.size} entries for {scores.size} indexed texts; pass one per id")
            scores = np.where(allowed, scores, 0.0)
        positive = np.flatnonzero(scores > 0)
        if positive.size > k:
            top = np.argpartition(-scores[positive], k - 1)[:k]
            positive = positive[top]
        order = np.lexsort((positive, -scores[positive]))
        hits = positive[order]
        return [(self.ids[i], float(scores[i])) for i in hits]

    def search_many(self, queries: Iterable[str | Sequence[str]], k: int = 10) -> list[list[tuple[str, float]]]:
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
        (path / "bm25.json").write_text(json.dumps(meta, ensure_ascii=False), encoding="utf-8")
        for name in ("data", "indices", "indptr"):
            np.save(path / f"{name}.npy", engine.scores[name], allow_pickle=False)
        return path

    @classmethod
    def load(cls, path: str | Path) -> "BM25Index":
        """Load an index written by `save` (never unpickles anything)."""
        path = Path(path)
        meta_file = path / "bm25.json"
        if not meta_file.is_file():
            raise FileNotFoundError(f"{meta_file} not found: {path} is not a saved BM25Index directory")
        meta = json.loads(meta_file.read_text(encoding="utf-8"))
        if meta.get("format") != _FORMAT or meta.get("format_version", 0) > _FORMAT_VERSION:
            raise ValueError(f"{meta_file} is not a BM25 index this version of contextual-retrieval can read")
        index = cls(
            Tokenizer(TokenizerConfig.from_dict(meta["tokenizer"])),
            k1=meta["k1"],
            b=meta["b"],
            method=meta["method"],
            epsilon=meta["epsilon"],
        )
        arrays = {n: np.load(path / f"{n}.npy", allow_pickle=False) for n in ("data", "indices", "indptr")}
        index.ids = list(meta["ids"])
        index.vocab = {t: i for i, t in enumerate(meta["vocab"])}
        index._engine = _engine(arrays["data"], arrays["indices"], arrays["indptr"], len(index.ids), index.vocab)
        return index

    def _require(self) -> bm25s.BM25:
        if self._engine is None:
            raise RuntimeError("the index is empty: call index(ids, texts) or BM25Index.load(path) first")
        return self._engine


def _engine(data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, n_docs: int, vocab: dict[str, int]) -> bm25s.BM25:
    """A bm25s scorer holding our precomputed term-major sparse weights (set through `_compat`)."""
    return bm25s_scorer(data, indices, indptr, n_docs, vocab)


_RECORDS_FILE = "records.jsonl"
_SETTINGS_FILE = "settings.json"


def save_with_records(
    path: str | Path, index: BM25Index, records: Iterable[dict], settings: dict | None = None
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


def load_with_records(path: str | Path) -> tuple[BM25Index, list[dict], dict]:
    """What `save_with_records` wrote: (index, records, settings)."""
    path = Path(path)
    if not (path / _RECORDS_FILE).is_file():
        raise FileNotFoundError(
            f"{path / _RECORDS_FILE} not found: {path} is not a saved BM25 retriever (write one with the retriever's save() / persist())"
        )
    index = BM25Index.load(path)
    with open(path / _RECORDS_FILE, encoding="utf-8") as fh:
        records = [json.loads(line) for line in fh if line.strip()]
    if len(records) != len(index.ids):
        raise ValueError(f"{path}: {len(index.ids)} indexed texts but {len(records)} records; save the retriever again")
    settings_file = path / _SETTINGS_FILE
    settings = json.loads(settings_file.read_text(encoding="utf-8")) if settings_file.is_file() else {}
    return index, records, settings
