"""The query flow every query path runs, written once.

For a batch of queries over named ranked sources (a dense side, BM25, any retriever):

1. embed each query once on every dense side that feeds back (`DenseSide`);
2. search every source (a dense side by that vector, the others by the query text);
3. fuse the ranked lists (`FusionConfig.fuse`);
4. dense pseudo-relevance feedback: move each query vector toward the stored rows of the fused
   top `prf_top` chunks (`FeedbackRows.moved_query`), search the dense sides again, fuse again
   (a side that gives no rows back for a query's top chunks is not searched again for it: its
   first list stands, and nothing is embedded again);
5. rerank the fused candidates and keep the top `top_k` (`FusionConfig.rerank`), when asked.

Feedback runs when `FusionConfig.dense_prf` is not 0 and a dense side is fused with at least one
other source. The sequence is a generator of steps (lists of calls that may run together);
`QueryFlow.run` drives it synchronously and `QueryFlow.arun` drives it on an event loop, each
call's ``a``-prefixed method gathered concurrently. `HybridSearcher`, `ContextualIndex.search`,
LlamaIndex's `HybridRetriever` and LangChain's `ContextualEnsembleRetriever` only supply their
sources.

Example:
    >>> from contextual_retrieval_core.search.config import FusionConfig
    >>> class Listed(SyncSource):
    ...     def __init__(self, name, hits):
    ...         self.name, self.hits = name, hits
    ...     def search(self, queries):
    ...         return [list(self.hits) for _ in queries]
    >>> flow = QueryFlow(FusionConfig(top_k=2), [Listed("a", [("x", 1.0), ("y", 0.5)]), Listed("b", [("y", 3.0)])])
    >>> [[h.id for h in result.hits] for result in flow.run(["q"], text_of=str)]
    [['y', 'x']]
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from contextual_retrieval_core._sdk import in_thread
from contextual_retrieval_core.dense.server_errors import server_unavailable
from contextual_retrieval_core.errors import InputError
from contextual_retrieval_core.search.config import FusionConfig
from contextual_retrieval_core.search.feedback import FeedbackRows
from contextual_retrieval_core.search.ranked import RankedHit, unique_names

__all__ = ["DenseSide", "FlowResult", "QueryFlow", "ServerSource", "Source", "SyncSource", "SyncDenseSide"]

#: (id, the source's own score or None) best first
Hits = list[tuple[Hashable, float | None]]



@runtime_checkable
class Source(Protocol):
    """A ranked source: each query's best `depth` (id, score) pairs, searched by text."""

    name: str

    def search(self, queries: Sequence[str]) -> list[Hits]: ...

    async def asearch(self, queries: Sequence[str]) -> list[Hits]: ...


@runtime_checkable
class DenseSide(Source, Protocol):
    """A source searched by query vector that reads back the vectors it holds: dense feedback
    moves the query toward its stored rows of the fused top chunks and searches it again."""

    def embed_queries(self, queries: Sequence[str]) -> Any: ...

    async def aembed_queries(self, queries: Sequence[str]) -> Any: ...

    def search_vectors(self, vectors: Any) -> list[Hits]: ...

    async def asearch_vectors(self, vectors: Any) -> list[Hits]: ...

    def feedback_rows(self, top: Sequence[str]) -> FeedbackRows: ...

    async def afeedback_rows(self, top: Sequence[str]) -> FeedbackRows: ...


class SyncSource:
    """Base for a source with sync methods only: its async methods run them in a worker thread."""

    name: str

    def search(self, queries: Sequence[str]) -> list[Hits]:
        raise NotImplementedError

    async def asearch(self, queries: Sequence[str]) -> list[Hits]:
        return await in_thread(self.search, queries)


class SyncDenseSide(SyncSource):
    """Base for a `DenseSide` with sync methods only; `search` embeds, then searches by vector."""

    def embed_queries(self, queries: Sequence[str]) -> Any:
        raise NotImplementedError

    def search_vectors(self, vectors: Any) -> list[Hits]:
        raise NotImplementedError

    def feedback_rows(self, top: Sequence[str]) -> FeedbackRows:
        raise NotImplementedError

    def search(self, queries: Sequence[str]) -> list[Hits]:
        return self.search_vectors(self.embed_queries(queries))

    async def aembed_queries(self, queries: Sequence[str]) -> Any:
        return await in_thread(self.embed_queries, queries)

    async def asearch_vectors(self, vectors: Any) -> list[Hits]:
        return await in_thread(self.search_vectors, vectors)

    async def afeedback_rows(self, top: Sequence[str]) -> FeedbackRows:
        return await in_thread(self.feedback_rows, top)


@dataclass
class FlowResult:
    """One query's outcome.

    Attributes:
        lists: each source's final ranked list (after feedback), in source order.
        fused: the fused ranking of those lists (every candidate, best first).
        hits: the top `top_k`, reranked when the config has a reranker; None when the caller
            asked for the fused ranking only (`rerank=False`).
    """

    lists: list[Hits]
    fused: list[RankedHit]
    hits: list[RankedHit] | None = None


@runtime_checkable
class ServerSource(Protocol):
    """A source whose vectors live on a server (a framework's pgvector store): its address
    (``host:port``, never a password) names it in `VectorServerUnavailable` when the driver's
    error names none."""

    def server_address(self) -> str | None: ...


@dataclass(frozen=True)
class _Call:
    """One step's call: ``target.method(*args)``, or awaited ``target.amethod(*args)``. A call
    whose vector server does not answer is made once more (a pooled connection the server dropped
    when it restarted is discarded by the store's engine, and the call gets a fresh one); when it
    fails so again, `VectorServerUnavailable` (naming the server and the fix) is raised in place
    of the store's error."""

    target: Any
    method: str
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)

    def run(self) -> Any:
        try:
            return getattr(self.target, self.method)(*self.args, **self.kwargs)
        except Exception as exc:
            if self._clear(exc) is None:
                raise
        try:  # once more, on a fresh connection
            return getattr(self.target, self.method)(*self.args, **self.kwargs)
        except Exception as exc:
            self._raise_clear(exc)
            raise

    async def arun(self) -> Any:
        try:
            return await getattr(self.target, "a" + self.method)(*self.args, **self.kwargs)
        except Exception as exc:
            if self._clear(exc) is None:
                raise
        try:
            return await getattr(self.target, "a" + self.method)(*self.args, **self.kwargs)
        except Exception as exc:
            self._raise_clear(exc)
            raise

    def _clear(self, exc: Exception) -> Exception | None:
        """The clear error for a vector server that does not answer; None for other errors."""
        address = self.target.server_address() if isinstance(self.target, ServerSource) else None
        return server_unavailable(exc, address)

    def _raise_clear(self, exc: Exception) -> None:
        clear = self._clear(exc)
        if clear is not None:
            raise clear from exc


Steps = Generator[list[_Call], list[Any], list[FlowResult]]


class QueryFlow:
    """The query sequence over named `sources`, with the fusion settings of `config`.

    Args:
        config: the `FusionConfig` (its weights one per source, or None for the defaults).
        sources: `Source`s (a `DenseSide` among them is fed back), each with a unique `name`.

    Raises ValueError naming the fix when the weights do not match the sources or two sources
    share a name.
    """

    def __init__(self, config: FusionConfig, sources: Sequence[Source]) -> None:
        names = [s.name for s in sources]
        if not sources:
            raise InputError("no sources to search: pass at least one")
        if unique_names(names) != names:
            raise InputError(f"source names must be unique, got {names}")
        self.sources = list(sources)
        self.config = config.replace(weights=config.weights_for(len(sources), per="source"))
        fed = config.feeds_back(len(sources))
        #: indexes of the dense sides that feed back
        self.feedback = [i for i, s in enumerate(self.sources) if fed and isinstance(s, DenseSide)]

    def run(
        self, queries: Sequence[str], *, text_of: Callable[[Hashable], str] | None = None,
        top_k: int | None = None, rerank: bool = True,
    ) -> list[FlowResult]:
        """Each query's `FlowResult`, driving the sources' sync methods. With `rerank`, `text_of`
        gives the text the reranker reads for an id (needed when the config has a reranker)."""
        steps = self._steps(queries, text_of, top_k, rerank)
        try:
            calls = next(steps)
            while True:
                calls = steps.send([call.run() for call in calls])
        except StopIteration as done:
            return done.value

    async def arun(
        self, queries: Sequence[str], *, text_of: Callable[[Hashable], str] | None = None,
        top_k: int | None = None, rerank: bool = True,
    ) -> list[FlowResult]:
        """`run` on an event loop: each step's calls (the sources' async methods) run concurrently."""
        import asyncio  # loaded wherever an event loop runs; a sync query never imports it

        steps = self._steps(queries, text_of, top_k, rerank)
        try:
            calls = next(steps)
            while True:
                calls = steps.send(list(await asyncio.gather(*(call.arun() for call in calls))))
        except StopIteration as done:
            return done.value

    def _named(self, lists: list[list[Hits]], q: int) -> list[tuple[str, Hits]]:
        return [(s.name, per_query[q]) for s, per_query in zip(self.sources, lists)]

    def _steps(
        self, queries: Sequence[str], text_of: Callable[[Hashable], str] | None, top_k: int | None, rerank: bool
    ) -> Steps:
        """The sequence, as steps: each ``yield`` hands over calls that may run together and
        receives their results in order."""
        queries = list(queries)
        config, sources, feedback = self.config, self.sources, self.feedback
        # 1. embed once, on the sides that feed back
        vectors = dict(zip(feedback, (yield [_Call(sources[i], "embed_queries", (queries,)) for i in feedback])))
        # 2. search every source: a feedback side by its vectors, the others by text
        lists: list[list[Hits]] = list((yield [
            _Call(s, "search_vectors", (vectors[i],)) if i in vectors else _Call(s, "search", (queries,))
            for i, s in enumerate(sources)
        ]))
        # 3-4. dense feedback from the fused top: move, search the feedback sides again
        if feedback:
            tops = [config.feedback_top(self._named(lists, q)) for q in range(len(queries))]
            fed = [q for q, top in enumerate(tops) if top]
            if fed:
                reads = [_Call(sources[i], "feedback_rows", (tops[q],)) for i in feedback for q in fed]
                rows = iter((yield reads))
                # {side: {query: moved vector}}, for the queries whose top chunks the side gave rows for
                moved: dict[int, dict[int, Any]] = {i: {} for i in feedback}
                for i in feedback:
                    for q in fed:
                        held = next(rows)
                        if held.feeds(tops[q]):
                            moved[i][q] = held.moved_query(vectors[i][q], tops[q], config.dense_prf)
                again_on = [i for i in feedback if moved[i]]  # nothing fed back: the first search stands
                if again_on:
                    again = yield [_Call(sources[i], "search_vectors", (list(moved[i].values()),)) for i in again_on]
                    for i, hits in zip(again_on, again):
                        for q, found in zip(moved[i], hits):
                            lists[i][q] = found
        results = [FlowResult([per_query[q] for per_query in lists], config.fuse(self._named(lists, q)))
                   for q in range(len(queries))]
        # 5. rerank and cut
        if rerank:
            ranked = yield [
                _Call(config, "rerank", (query, result.fused, text_of or _no_text), {"top_k": top_k})
                for query, result in zip(queries, results)
            ]
            for result, hits in zip(results, ranked):
                result.hits = hits
        return results


def _no_text(item: Hashable) -> str:
    raise InputError("the config has a reranker: pass text_of= to QueryFlow.run so it can read each candidate")
