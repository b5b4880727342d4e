"""Milvus as both sides of the contextual hybrid: one collection, two sources for the one query flow.

A `MilvusCollection` keeps every chunk in one row: its id, the indexed text (structural header +
context + chunk: what the in-process BM25 indexes and what is embedded), the BM25 terms, the dense
vector and a JSON metadata field. Milvus's BM25 function turns the terms field into a sparse vector
inside the server (the analyzer, the document frequencies and the average length are the
server's, sharded with the collection on a cluster), beside the dense field.

What the BM25 function reads (`analysis`):

- ``"ours"`` (default): the core tokenizer's terms (`chunking.tokenizer`: code identifiers split,
  English stop words dropped, Snowball stems), space-separated, and each query is tokenized the
  same way before it is sent; the function scores them with the in-process BM25's k1 and b. The
  two BM25 rankings then differ only where Milvus's statistics do (a segment's, on Milvus Lite).
- ``"milvus"``: Milvus's standard analyzer over the indexed text itself (words lowercased, no
  stemming, identifiers whole), with its own k1 and b.

`MilvusDenseSide` (the dense field searched by query vector; its stored vectors read back for
dense feedback) and `MilvusBM25Side` (the sparse field searched by query text) are the sources
`QueryFlow` fuses with the core's weighted RRF, feeds back and reranks, as it does the in-process
sides. A metadata filter (`search/_where.py`'s language) goes to both legs as one Milvus filter
expression (`milvus_filter`).

A server that does not answer (stopped, restarting, unreachable) is a `MilvusServerUnavailable`
naming its URI; the client is kept, so the same collection answers again once the server is back.
The URI is the only thing that changes between Milvus Lite (``milvus-lite server``), Milvus
standalone and a distributed cluster: they speak the same gRPC protocol.

Example:
    >>> milvus_filter({"$and": [{"team": "web"}, {"year": {"$gte": 2023}}]})
    '(metadata["team"] == "web" and metadata["year"] >= 2023)'
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar
from urllib.parse import urlsplit

import numpy as np

from contextual_retrieval_core._sdk import error_chain
from contextual_retrieval_core.checks import positive_int
from contextual_retrieval_core.chunking.tokenizer import Tokenizer, TokenizerConfig
from contextual_retrieval_core.dense.server_errors import VectorServerUnavailable
from contextual_retrieval_core.embeddings.base import Embedder
from contextual_retrieval_core.errors import InputError, MissingDependencyError
from contextual_retrieval_core.search._where import where_predicate
from contextual_retrieval_core.search.feedback import FeedbackRows, StoreRead
from contextual_retrieval_core.search.flow import Hits, SyncDenseSide, SyncSource

__all__ = [
    "ANALYSES",
    "GRPC_OPTIONS",
    "ANALYZER",
    "BM25_INDEX_PARAMS",
    "TERMS",
    "BM25_B",
    "BM25_K1",
    "DEFAULT_BATCH_ROWS",
    "DEFAULT_TIMEOUT_S",
    "MilvusBM25Side",
    "MilvusCollection",
    "MilvusDenseSide",
    "MilvusRow",
    "MilvusServerUnavailable",
    "Analysis",
    "collection_sides",
    "milvus_call",
    "milvus_filter",
    "milvus_terms",
    "milvus_uri_name",
]

T = TypeVar("T")
Analysis = Literal["ours", "milvus"]
ANALYSES: tuple[str, ...] = ("ours", "milvus")
#: the in-process BM25's k1 and b (`BM25Index`), given to Milvus's BM25 index for ``analysis="ours"``
BM25_K1, BM25_B = 1.2, 0.75
#: seconds a Milvus request may take, retries included, before the server counts as not answering
DEFAULT_TIMEOUT_S = 10.0
#: rows per upsert request, and ids per read
DEFAULT_BATCH_ROWS = 256
#: the collection's fields
ID, TEXT, TERMS, SPARSE, DENSE, METADATA = "id", "text", "bm25_terms", "sparse", "dense", "metadata"
#: the analyzer of the BM25 function's input field, and the BM25 index's k1 and b for ``"ours"``
#: (a nested "params" entry: the form every Milvus reads, Milvus Lite no other; pymilvus would
#: flatten a plain dict into top-level keys)
ANALYZER = {"tokenizer": "standard"}
BM25_INDEX_PARAMS = {"params": {"bm25_k1": BM25_K1, "bm25_b": BM25_B}}
#: the collection property that records the settings (JSON)
_SETTINGS = "contextual_retrieval.settings"
#: a client channel of its own that retries a server that went away within a second (gRPC's
#: default backoff waits up to 2 minutes, so a restarted server would go unanswered that long);
#: the core's client and both frameworks' Milvus stores are given it
GRPC_OPTIONS = {"grpc.use_local_subchannel_pool": 1, "grpc.initial_reconnect_backoff_ms": 100,
                 "grpc.min_reconnect_backoff_ms": 100, "grpc.max_reconnect_backoff_ms": 1000,
                 # no keepalive pings on an idle channel (pymilvus pings every 10 s; a server with gRPC's
                 # default policy, Milvus Lite's, answers that with GOAWAY "too_many_pings", logged to stderr)
                 "grpc.keepalive_permit_without_calls": 0, "grpc.keepalive_time_ms": 60_000}
#: a VARCHAR field's longest value in Milvus (bytes, UTF-8)
_MAX_VARCHAR = 65_535


class MilvusServerUnavailable(VectorServerUnavailable):
    """The Milvus server holding the collection did not answer; the message names its URI and the
    fix. The same `MilvusCollection` (and every query path over it) answers again once the server
    is back. A `VectorServerUnavailable`, as a PostgreSQL or Chroma server that does not answer is,
    so one ``except`` catches any."""


def milvus_uri_name(uri: str) -> str:
    """`uri` as errors name it: scheme, host and port, never a user or password in it.

    Example:
        >>> milvus_uri_name("https://app:s3cret@milvus.example:19530")
        'https://milvus.example:19530'
    """
    try:
        parts = urlsplit(uri)
        port = parts.port
    except ValueError:
        return uri.rsplit("@", 1)[-1]
    if not parts.hostname:
        return uri.rsplit("@", 1)[-1]
    return f"{parts.scheme}://{parts.hostname}{f':{port}' if port else ''}{parts.path.rstrip('/')}"


def _down(exc: BaseException) -> bool:
    """Whether `exc`, or an error it was raised from, says the server does not answer: gRPC's
    UNAVAILABLE (refused, reset, gone) or DEADLINE_EXCEEDED, or pymilvus's own "server
    unavailable" (it raises that when a reconnect fails)."""
    for error in error_chain(exc):
        code = getattr(error, "code", None)  # gRPC's code(), or what pymilvus copied of it after its retries
        try:
            status = code() if callable(code) else code
        except Exception:  # not gRPC's
            status = None
        if type(status).__name__ == "StatusCode" and getattr(status, "name", "") in ("UNAVAILABLE", "DEADLINE_EXCEEDED"):
            return True
        text = str(getattr(error, "message", "") or error)
        if type(error).__module__.startswith("pymilvus") and ("server unavailable" in text or "Fail connecting" in text
                                                                or "not connected" in text.lower()):
            return True
        if isinstance(error, (ConnectionRefusedError, ConnectionResetError)):
            return True
    return False


def _released(exc: BaseException) -> bool:
    """Whether `exc` is pymilvus's error for a collection that is not loaded (code 101)."""
    return type(exc).__module__.startswith("pymilvus") and getattr(exc, "code", None) == 101


def _unavailable(uri: str, exc: BaseException) -> MilvusServerUnavailable:
    message = " ".join(str(getattr(exc, "message", "") or exc).split())[:300] or type(exc).__name__
    return MilvusServerUnavailable(
        f"the Milvus server at {milvus_uri_name(uri)} does not answer ({type(exc).__name__}: {message}); start it "
        "again (`milvus-lite server --data-dir DIR --port PORT` for Milvus Lite, or your Milvus standalone or "
        "cluster) or pass --milvus-uri with its address, then retry: the same index answers once the server is back"
    )


def milvus_call(uri: str, client: Any, collection: str | None, call: Callable[[], T]) -> T:
    """`call()` (a request to the Milvus server at `uri` through the pymilvus `client`); a server
    that does not answer is `MilvusServerUnavailable` naming `uri`. When the server holds
    `collection` released (a restarted Milvus Lite, or one an operator released) it is loaded and
    the call made once more. Every Milvus request of the core and of both frameworks' Milvus
    parts goes through here."""
    for attempt in (1, 2):
        try:
            return call()
        except Exception as exc:
            if _down(exc):
                raise _unavailable(uri, exc) from exc
            if attempt == 2 or collection is None or not _released(exc):
                raise
        milvus_call(uri, client, None, lambda: client.load_collection(collection))
    raise AssertionError("unreachable")  # pragma: no cover


def milvus_terms(tokenizer: Tokenizer, text: str) -> str:
    """The BM25 terms of `text` as the ``"ours"`` analysis sends them: the tokenizer's terms,
    space-separated (Milvus's analyzer splits them back at the spaces).

    Example:
        >>> milvus_terms(Tokenizer(), "DiffExecutor runs the tests")
        'diff executor diffexecutor run test'
    """
    return " ".join(tokenizer.tokenize(text))


def _literal(value: Any) -> str:
    """A filter value as a Milvus expression literal."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        if isinstance(value, float) and not math.isfinite(value):
            raise InputError(f"filter: {value!r} is not a finite number")
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    raise InputError(f"filter: Milvus compares strings, numbers and booleans, got {type(value).__name__} {value!r}")


def _expression(where: Mapping[str, Any], field: str) -> str:
    parts: list[str] = []
    for key, cond in where.items():
        if key in ("$and", "$or"):
            joined = f" {key[1:]} ".join(_expression(sub, field) for sub in cond)
            parts.append(f"({joined})" if len(cond) > 1 else joined)
            continue
        path = f"{field}[{json.dumps(key, ensure_ascii=False)}]"
        ops = cond.items() if isinstance(cond, Mapping) else [("$eq", cond)]
        for op, operand in ops:
            if op == "$in":  # equalities: Milvus Lite takes `in` on plain fields only
                either = " or ".join(f"{path} == {_literal(v)}" for v in operand) or f"({path} is null and {path} is not null)"
                parts.append(f"({either})" if len(operand) > 1 else either)
            elif op == "$nin":
                neither = " and ".join(f"{path} != {_literal(v)}" for v in operand) or f"{path} is not null"
                parts.append(f"({path} is null or ({neither}))" if len(operand) > 1 else f"({path} is null or {neither})")
            elif op == "$ne":
                parts.append(f"({path} is null or {path} != {_literal(operand)})")
            else:
                symbol = {"$eq": "==", "$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}[op]
                parts.append(f"{path} {symbol} {_literal(operand)}")
    return parts[0] if len(parts) == 1 else "(" + " and ".join(parts) + ")"


def milvus_filter(where: Mapping[str, Any] | None, field: str = METADATA) -> str:
    """A where dict (`search/_where.py`: ``$eq $ne $gt $gte $lt $lte $in $nin $and $or``, as Chroma
    reads it) as a Milvus filter expression on the JSON `field`; "" for no filter. ``$ne`` and
    ``$nin`` also keep rows without the key (as `where_predicate` does). A bad where dict is the
    ValueError `where_predicate` raises. One difference: Milvus Lite matches a boolean with the
    number it equals in Python (``True`` with ``1``), which the where language keeps apart.

    Example:
        >>> milvus_filter({"path": {"$nin": ["a.py", "b.py"]}})
        '(metadata["path"] is null or (metadata["path"] != "a.py" and metadata["path"] != "b.py"))'
    """
    if where is None:
        return ""
    where_predicate(where)  # the one validation of the filter language
    return _expression(where, field)


@dataclass(frozen=True)
class MilvusRow:
    """One chunk as the collection holds it: its id, the indexed text (embedded and, for the
    ``"milvus"`` analysis, analyzed), its unit-length vector and its metadata (JSON)."""

    id: str
    text: str
    vector: Sequence[float]
    metadata: Mapping[str, Any]


class MilvusCollection:
    """A Milvus collection holding both sides of the hybrid for a set of chunks.

    Args:
        uri: the server (``http://host:19530``; Milvus Lite's ``milvus-lite server`` listens on
            one too). Named, without credentials, in errors.
        name: the collection.
        token: the server's credentials (``"user:password"`` or an API key), if it asks for any.
        analysis: what Milvus's BM25 function reads (``"ours"``: the core tokenizer's terms;
            ``"milvus"``: its standard analyzer over the text); a collection keeps the one it was
            created with (`create`), and one opened with another is an error (`check_settings`).
        tokenizer: the core tokenizer of the ``"ours"`` analysis (default: `Tokenizer()`; a
            collection records its settings).
        dense_index: the dense field's Milvus index (default: FLAT, exact inner product: what the
            in-process exact search returns; ``{"index_type": "HNSW", "params": {"M": 16,
            "efConstruction": 200}}`` past a few million rows).
        timeout: seconds a request may take, retries included (pymilvus retries a server that
            does not answer until then), before the server counts as not answering.
        batch_rows: rows per upsert request, and ids per read.
        client: a pymilvus `MilvusClient` to use (default: one made on first use, with a channel
            that retries a server that went away within a second).

    Every method that reaches the server raises `MilvusServerUnavailable` (naming the URI) when it
    does not answer. Thread-safe as pymilvus's client is: calls from many threads share one client.

    Example:
        >>> collection = MilvusCollection("http://127.0.0.1:19530", "chunks")  # doctest: +SKIP
        >>> collection.create(384, {"embedder": {"model": "all-MiniLM-L6-v2"}})  # doctest: +SKIP
        >>> collection.upsert([MilvusRow("c1", "ACME's Q2 filing.\\n\\nRevenue grew 3%.", vector, {"path": "a.md"})])  # doctest: +SKIP
        >>> collection.search_bm25(["ACME revenue"], 5)  # doctest: +SKIP
        [[('c1', 0.86)]]
    """

    def __init__(
        self, uri: str, name: str, *, token: str | None = None, analysis: Analysis = "ours", tokenizer: Tokenizer | None = None,
        dense_index: Mapping[str, Any] | None = None, timeout: float = DEFAULT_TIMEOUT_S, batch_rows: int = DEFAULT_BATCH_ROWS,
        client: Any = None,
    ) -> None:
        if not uri or not isinstance(uri, str):
            raise InputError(f"a Milvus URI is needed (http://host:19530), got {uri!r}")
        if not name or not isinstance(name, str):
            raise InputError(f"a Milvus collection name is needed, got {name!r}")
        if analysis not in ANALYSES:
            raise InputError(f"analysis must be one of {ANALYSES}, got {analysis!r}")
        self.uri, self.name, self.analysis = uri, name, analysis
        self.tokenizer = tokenizer or Tokenizer()
        self.dense_index = dict(dense_index or {"index_type": "FLAT", "metric_type": "IP", "params": {}})
        self.timeout = float(timeout)
        self.batch_rows = positive_int("batch_rows", batch_rows)
        self._token = token
        self._client: Any = client

    def __repr__(self) -> str:
        return f"MilvusCollection({milvus_uri_name(self.uri)!r}, {self.name!r}, analysis={self.analysis!r})"

    # -- the server ---------------------------------------------------------------------------------

    @property
    def client(self) -> Any:
        """The pymilvus `MilvusClient` (made on first use; kept, so it reconnects when the server is back)."""
        if self._client is None:
            try:
                from pymilvus import MilvusClient
            except ImportError as exc:  # pragma: no cover - depends on the environment
                raise MissingDependencyError("pymilvus is not installed; pip install 'contextual-retrieval-kit[milvus]'") from exc
            try:
                self._client = MilvusClient(uri=self.uri, token=self._token or "", timeout=self.timeout, grpc_options=GRPC_OPTIONS)
            except Exception as exc:
                if _down(exc):
                    raise _unavailable(self.uri, exc) from exc
                raise
        return self._client

    def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """``client.method(*args, **kwargs)`` through `milvus_call`."""
        client = self.client
        return milvus_call(self.uri, client, self.name, lambda: getattr(client, method)(*args, timeout=self.timeout, **kwargs))

    def exists(self) -> bool:
        """Whether the collection is on the server."""
        return bool(self._call("has_collection", self.name))

    def create(self, dimension: int, settings: Mapping[str, Any]) -> None:
        """Create the collection (nothing when it exists: its settings are then checked against
        `settings`, `check_settings`), recording `settings` (the embedder and whatever else a
        query must match) with the dimension, the analysis and the tokenizer in a collection
        property."""
        dimension = positive_int("dimension", dimension)
        recorded = {**settings, "dimension": dimension, "analysis": self.analysis}
        if self.analysis == "ours":
            recorded["tokenizer"] = self.tokenizer.config.to_dict()
        if self.exists():
            self.check_settings(recorded)
            return
        from pymilvus import DataType, Function, FunctionType

        client = self.client
        schema = client.create_schema(auto_id=False, enable_dynamic_field=False)
        schema.add_field(ID, DataType.VARCHAR, is_primary=True, max_length=_MAX_VARCHAR)
        ours = self.analysis == "ours"
        analyzer = {"enable_analyzer": True, "analyzer_params": dict(ANALYZER)}
        schema.add_field(TEXT, DataType.VARCHAR, max_length=_MAX_VARCHAR, **({} if ours else analyzer))
        if ours:
            schema.add_field(TERMS, DataType.VARCHAR, max_length=_MAX_VARCHAR, **analyzer)
        schema.add_field(SPARSE, DataType.SPARSE_FLOAT_VECTOR)
        schema.add_field(DENSE, DataType.FLOAT_VECTOR, dim=dimension)
        schema.add_field(METADATA, DataType.JSON)
        schema.add_function(Function(name="bm25", function_type=FunctionType.BM25,
                                     input_field_names=[TERMS if ours else TEXT], output_field_names=[SPARSE]))
        index = client.prepare_index_params()
        index.add_index(field_name=DENSE, **self.dense_index)
        index.add_index(field_name=SPARSE, index_type="SPARSE_INVERTED_INDEX", metric_type="BM25",
                        params=dict(BM25_INDEX_PARAMS) if ours else {})
        self._call("create_collection", self.name, schema=schema, index_params=index,
                   properties={_SETTINGS: json.dumps(recorded, sort_keys=True)})

    def settings(self) -> dict[str, Any]:
        """The settings the collection was created with (`create`); ValueError when it was not
        created by this library."""
        info = self._call("describe_collection", self.name)
        text = (info.get("properties") or {}).get(_SETTINGS)
        if not text:
            raise InputError(f"the Milvus collection {self.name!r} at {milvus_uri_name(self.uri)} was not written by "
                             f"contextual-retrieval (no {_SETTINGS} property); pass another collection name")
        return dict(json.loads(text))

    def check_settings(self, expected: Mapping[str, Any]) -> dict[str, Any]:
        """The recorded settings; ValueError naming the first setting that differs from `expected`
        (each key of `expected` the collection records)."""
        recorded = self.settings()
        for key, value in expected.items():
            if key in recorded and recorded[key] != value:
                raise InputError(f"the Milvus collection {self.name!r} at {milvus_uri_name(self.uri)} was written with "
                                 f"{key} {recorded[key]!r}, not {value!r}; use the same settings, or another collection")
        if recorded.get("analysis") != self.analysis:
            raise InputError(f"the Milvus collection {self.name!r} analyzes BM25 text as {recorded.get('analysis')!r}, "
                             f"not {self.analysis!r}; open it with analysis={recorded.get('analysis')!r}")
        if self.analysis == "ours" and "tokenizer" in recorded:
            self.tokenizer = Tokenizer(TokenizerConfig.from_dict(recorded["tokenizer"]))  # its queries as its rows
        return recorded

    def drop(self) -> None:
        """Delete the collection (nothing when there is none)."""
        if self.exists():
            self._call("drop_collection", self.name)

    # -- writing ------------------------------------------------------------------------------------

    def _entity(self, row: MilvusRow) -> dict[str, Any]:
        entity = {ID: row.id, TEXT: row.text, DENSE: [float(x) for x in row.vector], METADATA: dict(row.metadata)}
        if self.analysis == "ours":
            entity[TERMS] = milvus_terms(self.tokenizer, row.text)
        for field in (ID, TEXT, TERMS):
            if field in entity and len(str(entity[field]).encode("utf-8")) > _MAX_VARCHAR:
                raise InputError(f"chunk {row.id[:200]!r}: its {field} is over Milvus's {_MAX_VARCHAR}-byte limit for a "
                                 "text field; cut the text into smaller chunks (a smaller chunk size)")
        return entity

    def upsert(self, rows: Sequence[MilvusRow]) -> None:
        """Write `rows` (a row with an id already there replaces it: a rerun writes nothing twice)."""
        for start in range(0, len(rows), self.batch_rows):
            self._call("upsert", self.name, [self._entity(r) for r in rows[start : start + self.batch_rows]])

    def flush(self) -> None:
        """Seal what was written into segments (Milvus does so by itself in time; Milvus Lite
        searches rows still in memory by rebuilding their index for every search, so flush after
        a bulk write: benchmarks/RESULTS.md, "Both sides of the hybrid on Milvus")."""
        self._call("flush", self.name)

    def delete(self, ids: Sequence[str]) -> None:
        """Delete the rows of `ids` (ids it does not hold are ignored)."""
        ids = list(ids)
        for start in range(0, len(ids), self.batch_rows):
            self._call("delete", self.name, ids=ids[start : start + self.batch_rows])

    # -- reading ------------------------------------------------------------------------------------

    def ids(self) -> set[str]:
        """Every row id the collection holds."""
        found: set[str] = set()
        pages = self._call("query_iterator", self.name, batch_size=4096, output_fields=[ID])
        try:
            while True:
                try:
                    page = pages.next()
                except Exception as exc:
                    if _down(exc):
                        raise _unavailable(self.uri, exc) from exc
                    raise
                if not page:
                    return found
                found.update(str(r[ID]) for r in page)
        finally:
            pages.close()

    def count(self) -> int:
        """How many rows the collection holds."""
        return len(self.ids())

    def rows(self, ids: Sequence[str]) -> dict[str, tuple[str, dict[str, Any]]]:
        """{id: (indexed text, metadata)} of the `ids` the collection holds."""
        out: dict[str, tuple[str, dict[str, Any]]] = {}
        ids = list(dict.fromkeys(ids))
        for start in range(0, len(ids), self.batch_rows):
            for r in self._call("get", self.name, ids=ids[start : start + self.batch_rows], output_fields=[ID, TEXT, METADATA]):
                out[str(r[ID])] = (str(r[TEXT]), dict(r.get(METADATA) or {}))
        return out

    def vectors(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """{id: stored vector} of the `ids` the collection holds."""
        out: dict[str, np.ndarray] = {}
        ids = list(dict.fromkeys(ids))
        for start in range(0, len(ids), self.batch_rows):
            for r in self._call("get", self.name, ids=ids[start : start + self.batch_rows], output_fields=[ID, DENSE]):
                out[str(r[ID])] = np.asarray(r[DENSE], dtype=np.float32)
        return out

    def search_dense(self, vectors: Any, k: int, where: Mapping[str, Any] | None = None) -> list[Hits]:
        """Each query vector's top `k` (id, inner product) under the filter, best first."""
        queries = [[float(x) for x in v] for v in np.asarray(vectors, dtype=np.float32)]
        if not queries:
            return []
        found = self._call("search", self.name, data=queries, anns_field=DENSE, limit=positive_int("k", k),
                           filter=milvus_filter(where), output_fields=[ID], search_params={"metric_type": "IP"})
        return [[(str(h["id"]), float(h["distance"])) for h in hits] for hits in found]

    def query_terms(self, query: str) -> str:
        """What the BM25 leg sends for `query`: its terms (``"ours"``) or the text itself."""
        return milvus_terms(self.tokenizer, query) if self.analysis == "ours" else query

    def search_bm25(self, queries: Sequence[str], k: int, where: Mapping[str, Any] | None = None) -> list[Hits]:
        """Each query's top `k` (id, BM25 score) under the filter, best first, from Milvus's BM25
        function; a query with no terms finds nothing."""
        k = positive_int("k", k)
        sent = [self.query_terms(q) for q in queries]
        asked = [i for i, text in enumerate(sent) if text.strip()]
        out: list[Hits] = [[] for _ in queries]
        if not asked:
            return out
        found = self._call("search", self.name, data=[sent[i] for i in asked], anns_field=SPARSE, limit=k,
                           filter=milvus_filter(where), output_fields=[ID], search_params={"metric_type": "BM25"})
        for i, hits in zip(asked, found):
            # Milvus reports the score (Lite: its negative, as a distance); the order is best first either way
            out[i] = [(str(h["id"]), abs(float(h["distance"]))) for h in hits]
        return out


class MilvusDenseSide(SyncDenseSide):
    """The collection's dense field as the flow's dense side: the queries embedded in one batch,
    each searched for its top `depth` under the filter `where`; dense feedback reads the top
    chunks' stored vectors back from the collection (nothing is embedded again)."""

    def __init__(self, name: str, collection: MilvusCollection, embedder: Embedder, depth: int,
                 where: Mapping[str, Any] | None = None) -> None:
        self.name, self.collection, self.embedder, self.depth, self.where = name, collection, embedder, depth, where

    def embed_queries(self, queries: Sequence[str]) -> np.ndarray:
        return np.asarray(self.embedder.embed_queries(list(queries)), dtype=np.float32)

    def search_vectors(self, vectors: Any) -> list[Hits]:
        return self.collection.search_dense(vectors, self.depth, self.where)

    def feedback_rows(self, top: Sequence[str]) -> FeedbackRows:
        return StoreRead(top, {c: [c] for c in top}, self.collection.vectors(top)).rows()


class MilvusBM25Side(SyncSource):
    """The collection's BM25 function as the flow's BM25 side: each query's top `depth` under the
    filter `where`."""

    def __init__(self, name: str, collection: MilvusCollection, depth: int, where: Mapping[str, Any] | None = None) -> None:
        self.name, self.collection, self.depth, self.where = name, collection, depth, where

    def search(self, queries: Sequence[str]) -> list[Hits]:
        return self.collection.search_bm25(queries, self.depth, self.where)


def collection_sides(collection: MilvusCollection, embedder: Embedder, depth: int, where: Mapping[str, Any] | None = None,
                     names: tuple[str, str] = ("dense", "bm25")) -> list[SyncSource]:
    """The collection's two sources for `QueryFlow`, (dense, BM25)."""
    return [MilvusDenseSide(names[0], collection, embedder, depth, where), MilvusBM25Side(names[1], collection, depth, where)]

