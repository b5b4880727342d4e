"""`ContextualRerank`: a core reranker (Cohere by default, Voyage, cross-encoder) as a node postprocessor."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import llama_index.core.instrumentation as instrument
from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.callbacks import CallbackManager, CBEventType, EventPayload
from llama_index.core.instrumentation.events.rerank import ReRankEndEvent, ReRankStartEvent
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeWithScore, QueryBundle

from contextual_retrieval_core.errors import InputError, InputTypeError
from contextual_retrieval_core.rerank.base import Reranker, RerankResult
from contextual_retrieval_core.search.ranked import DEFAULT_TOP_K
from contextual_retrieval_llamaindex._convert import indexed_text

__all__ = ["ContextualRerank", "rerank_events"]

dispatcher = instrument.get_dispatcher(__name__)


@contextmanager
def rerank_events(
    query_bundle: QueryBundle,
    nodes: list[NodeWithScore],
    *,
    top_n: int,
    model_name: str,
    callback_manager: CallbackManager,
) -> Iterator[list[NodeWithScore]]:
    """LlamaIndex's rerank events around a rerank, as its own rerankers emit them:
    `ReRankStartEvent` on the instrumentation dispatcher and the RERANKING callback event on entry;
    on exit the callback event's end and `ReRankEndEvent`, both with the nodes the caller put in the
    yielded list (the reranked result).

    Example:
        >>> from llama_index.core.schema import TextNode
        >>> candidates = [NodeWithScore(node=TextNode(text="a"), score=0.1)]
        >>> with rerank_events(QueryBundle("q"), candidates, top_n=1, model_name="m",
        ...                    callback_manager=CallbackManager()) as reranked:
        ...     reranked.extend(candidates)
        >>> len(reranked)
        1
    """
    dispatcher.event(ReRankStartEvent(query=query_bundle, nodes=nodes, top_n=top_n, model_name=model_name))
    payload: dict[str, Any] = {  # EventPayload members are str
        EventPayload.NODES: nodes,
        EventPayload.MODEL_NAME: model_name,
        EventPayload.QUERY_STR: query_bundle.query_str,
        EventPayload.TOP_K: top_n,
    }
    out: list[NodeWithScore] = []
    with callback_manager.event(CBEventType.RERANKING, payload=payload) as event:
        yield out
        event.on_end(payload={EventPayload.NODES: out})
    dispatcher.event(ReRankEndEvent(nodes=out))

_BACKENDS = ("cohere", "voyage")


def _build(backend: str, model: str | None) -> Reranker:
    """A hosted reranker by name, with the core's default model unless `model` is given."""
    if backend == "cohere":
        from contextual_retrieval_core.rerank.cohere import CohereReranker

        return CohereReranker(model) if model else CohereReranker()
    if backend == "voyage":
        from contextual_retrieval_core.rerank.voyage import VoyageReranker

        return VoyageReranker(model) if model else VoyageReranker()
    raise InputError(
        f"unknown reranker {backend!r}: use 'cohere' or 'voyage', or pass reranker=<a contextual_retrieval_core Reranker> "
        "(a saved ContextualRerank with a custom reranker needs it back: ContextualRerank.from_dict(data, reranker=...))"
    )


class ContextualRerank(BaseNodePostprocessor):
    """Reranks nodes on their contextual text (context + chunk) with a core `Reranker`.

    Named so that it does not shadow llama-index's own `CohereRerank`. Cohere's rerank-v3.5 by
    default (COHERE_API_KEY), "voyage" for Voyage (VOYAGE_API_KEY), or any core `Reranker`
    instance (`CohereReranker(client=...)`, `VoyageReranker`, `CrossEncoderReranker`). Emits
    LlamaIndex's `ReRankStartEvent` / `ReRankEndEvent` and the RERANKING callback event; the
    async path awaits the backend's async client.

    Args:
        reranker: "cohere" (default), "voyage", or a core `Reranker`.
        top_n: nodes kept (default 20).
        model: the backend's model when built by name (default rerank-v3.5 / rerank-2.5).

    Example:
        >>> from llama_index.core.schema import NodeWithScore, TextNode
        >>> from contextual_retrieval_core.rerank import PassThroughReranker
        >>> rerank = ContextualRerank(PassThroughReranker(), top_n=1)
        >>> nodes = [NodeWithScore(node=TextNode(text=t), score=0.0) for t in ("a", "b")]
        >>> [n.node.text for n in rerank.postprocess_nodes(nodes, query_str="q")]
        ['a']
    """

    top_n: int = Field(default=DEFAULT_TOP_K, gt=0, description="Nodes kept.")
    backend: str = Field(default="cohere", description="'cohere', 'voyage', or the class of a custom reranker.")
    model: str | None = Field(default=None, description="The reranking model.")

    _reranker: Reranker = PrivateAttr()

    def __init__(self, reranker: str | Reranker | None = None, top_n: int = DEFAULT_TOP_K, **kwargs: Any) -> None:
        backend = kwargs.pop("backend", None)
        if reranker is None:
            reranker = backend or "cohere"
        if isinstance(reranker, str):
            built = _build(reranker, kwargs.get("model"))
            backend = reranker
        elif isinstance(reranker, Reranker):
            built, backend = reranker, type(reranker).__name__
        else:
            raise InputTypeError(
                f"reranker must be 'cohere', 'voyage' or a contextual_retrieval_core Reranker, got {type(reranker).__name__}"
            )
        kwargs["model"] = built.model_name
        super().__init__(top_n=top_n, backend=backend, **kwargs)
        self._reranker = built

    @classmethod
    def class_name(cls) -> str:
        return "ContextualRerank"

    @property
    def reranker(self) -> Reranker:
        return self._reranker

    def _events(self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None) -> AbstractContextManager[list[NodeWithScore]]:
        if query_bundle is None:
            raise InputError("reranking needs the query: pass query_bundle= or query_str=")
        return rerank_events(
            query_bundle, nodes, top_n=self.top_n, model_name=self.model or "", callback_manager=self.callback_manager
        )

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        with self._events(nodes, query_bundle) as out:
            query = query_bundle.query_str  # type: ignore[union-attr]
            results = self._reranker.rerank(query, [indexed_text(n.node) for n in nodes], top_n=self.top_n) if nodes else []
            out.extend(_reranked(nodes, results))
        return out

    async def _apostprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        with self._events(nodes, query_bundle) as out:
            query = query_bundle.query_str  # type: ignore[union-attr]
            texts = [indexed_text(n.node) for n in nodes]
            results = await self._reranker.arerank(query, texts, top_n=self.top_n) if nodes else []
            out.extend(_reranked(nodes, results))
        return out


def _reranked(nodes: list[NodeWithScore], results: list[RerankResult]) -> list[NodeWithScore]:
    return [NodeWithScore(node=nodes[r.index].node, score=float(r.score)) for r in results]
