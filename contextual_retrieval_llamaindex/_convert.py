"""The node layout of a contextual chunk, and fused hits as LlamaIndex results.

A contextual TextNode keeps the original chunk as its text and the context in metadata, laid out so
that ``get_content(MetadataMode.EMBED)`` is exactly the core's ``context + "\\n\\n" + chunk`` (what
is embedded and BM25-indexed) and ``get_content(MetadataMode.LLM)`` is the core's
`format_for_llm`: context and source text marked apart.
"""

from __future__ import annotations

from typing import Hashable

from llama_index.core.schema import BaseNode, MetadataMode, NodeWithScore, TextNode

from contextual_retrieval_core.ensemble import FUSED_SCORE_KEY, RANKS_KEY, RERANK_ERROR_KEY, RERANK_SCORE_KEY, RankedHit
from contextual_retrieval_core.types import CONTEXT_KEY, CONTEXT_LABEL, SOURCE_LABEL

_CONTEXT_LABEL_KEY = "context_label"
_SOURCE_LABEL_KEY = "source_label"
_LAYOUT_KEYS = (_CONTEXT_LABEL_KEY, CONTEXT_KEY, _SOURCE_LABEL_KEY)
#: metadata keys a fused / reranked result carries (excluded from what is embedded or shown)
RESULT_KEYS = (FUSED_SCORE_KEY, RANKS_KEY, RERANK_SCORE_KEY, RERANK_ERROR_KEY)


def set_context(node: TextNode, context: str) -> TextNode:
    """Put `context` on `node` in the contextual layout (in place); the node's other metadata is
    kept for filters and display, but neither embedded nor shown to the LLM."""
    meta = {k: v for k, v in node.metadata.items() if k not in _LAYOUT_KEYS}
    user_keys = list(meta)
    if context:
        meta.update({_CONTEXT_LABEL_KEY: CONTEXT_LABEL, CONTEXT_KEY: context, _SOURCE_LABEL_KEY: SOURCE_LABEL})
    node.metadata = meta
    node.excluded_embed_metadata_keys = [*user_keys, _CONTEXT_LABEL_KEY, _SOURCE_LABEL_KEY, *RESULT_KEYS]
    node.excluded_llm_metadata_keys = [*user_keys, *RESULT_KEYS]
    node.metadata_template = "{value}"
    node.metadata_separator = "\n\n"
    node.text_template = "{metadata_str}\n\n{content}"
    return node


def indexed_text(node: BaseNode) -> str:
    """What is embedded and BM25-indexed for a node: context + chunk for contextual nodes."""
    return node.get_content(metadata_mode=MetadataMode.EMBED)


def with_result(node: BaseNode, hit: RankedHit) -> NodeWithScore:
    """A NodeWithScore for a fused hit; a copy of the node carries the fused score and ranks."""
    copy = node.model_copy(deep=False)
    copy.metadata = {**node.metadata, FUSED_SCORE_KEY: hit.fused_score, RANKS_KEY: dict(hit.ranks)}
    if hit.rerank_score is not None:
        copy.metadata[RERANK_SCORE_KEY] = hit.rerank_score
    if hit.rerank_error is not None:
        copy.metadata[RERANK_ERROR_KEY] = hit.rerank_error
    for attr in ("excluded_embed_metadata_keys", "excluded_llm_metadata_keys"):
        keys = list(getattr(node, attr))
        setattr(copy, attr, keys + [k for k in RESULT_KEYS if k not in keys])
    return NodeWithScore(node=copy, score=float(hit.score))


def scored_ids(results: list[NodeWithScore]) -> list[tuple[Hashable, float | None]]:
    """(node id, score) pairs, best first (the core keeps each id's first occurrence and scores a
    missing score as 1 / rank)."""
    return [(r.node.node_id, float(r.score) if r.score is not None else None) for r in results]
