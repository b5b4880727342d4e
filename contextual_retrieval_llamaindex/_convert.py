"""The node layout of a contextual chunk, and fused hits as LlamaIndex results.

A contextual TextNode keeps the original chunk as its text and the context in metadata. It is laid
out (`set_context`) so that LlamaIndex's own `get_content` gives, with ``H`` the node's metadata
string by LlamaIndex's rules (its template, separator and ``excluded_*_metadata_keys``):

- ``MetadataMode.EMBED`` (what is embedded and BM25-indexed): ``H + "\\n\\n" + indexed`` where
  ``indexed`` is the core's `compose_indexed_text(context, chunk, position, separator)`; just
  ``indexed`` when H is empty. With ``position="after"`` the metadata follows the context instead.
- ``MetadataMode.LLM``: ``H`` then the core's `format_for_llm` layout: context and source text
  marked apart.

A node without a context is left exactly as its splitter made it.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import TypeVar

from llama_index.core.schema import BaseNode, MetadataMode, NodeWithScore, TextNode

from contextual_retrieval_core.search.ranked import FUSED_SCORE_KEY, RANKS_KEY, RERANK_ERROR_KEY, RERANK_SCORE_KEY, RankedHit
from contextual_retrieval_core.types import (
    CONTEXT_KEY,
    CONTEXT_LABEL,
    SOURCE_LABEL,
    ContextPosition,
    compose_indexed_text,
)

_CONTEXT_LABEL_KEY = "context_label"
_SOURCE_LABEL_KEY = "source_label"
#: the node's own metadata, rendered by LlamaIndex's rules for each mode when it was laid out
EMBED_METADATA_KEY = "metadata_text_embed"
LLM_METADATA_KEY = "metadata_text_llm"
_LAYOUT_KEYS = (_CONTEXT_LABEL_KEY, CONTEXT_KEY, _SOURCE_LABEL_KEY, EMBED_METADATA_KEY, LLM_METADATA_KEY)
#: metadata keys a fused / reranked result carries (excluded from what is embedded or shown)
RESULT_KEYS = (FUSED_SCORE_KEY, RANKS_KEY, RERANK_SCORE_KEY, RERANK_ERROR_KEY)
#: with position="after" the context follows the source text
_CONTEXT_AFTER_LABEL = CONTEXT_LABEL.replace("below", "above")


#: a TextNode or a subclass (ImageNode): `set_context` returns the node it was given
_Node = TypeVar("_Node", bound=TextNode)


def set_context(
    node: _Node, context: str, position: ContextPosition = "before", separator: str = "\n\n"
) -> _Node:
    """Lay `node` out with `context` (in place; see the module docstring). The node's own metadata
    stays as it is, for filters and display, and reaches the EMBED / LLM text through the
    rendered copies this layout adds (so a later change to a metadata value is not re-rendered)."""
    user = {k: v for k, v in node.metadata.items() if k not in _LAYOUT_KEYS}
    if not context:
        node.metadata = user
        return node
    node.metadata = user
    embed_header = node.get_metadata_str(MetadataMode.EMBED).strip()
    llm_header = node.get_metadata_str(MetadataMode.LLM).strip()
    headers = {EMBED_METADATA_KEY: embed_header, LLM_METADATA_KEY: llm_header}
    headers = {k: v for k, v in headers.items() if v}
    if position == "after":
        layout = {_CONTEXT_LABEL_KEY: _CONTEXT_AFTER_LABEL, CONTEXT_KEY: context, **headers}
    else:
        layout = {**headers, _CONTEXT_LABEL_KEY: CONTEXT_LABEL, CONTEXT_KEY: context, _SOURCE_LABEL_KEY: SOURCE_LABEL}
    node.metadata = {**user, **layout}
    hidden = [*user, *RESULT_KEYS]
    node.excluded_embed_metadata_keys = [*hidden, _CONTEXT_LABEL_KEY, _SOURCE_LABEL_KEY, LLM_METADATA_KEY]
    node.excluded_llm_metadata_keys = [*hidden, EMBED_METADATA_KEY]
    node.metadata_template = "{value}"
    node.metadata_separator = "\n\n"
    if position == "none":
        node.excluded_embed_metadata_keys.append(CONTEXT_KEY)
        node.text_template = "{metadata_str}\n\n{content}"
    else:  # the core's composition, with LlamaIndex's placeholders for the context and the chunk
        brace_safe = separator.replace("{", "{{").replace("}", "}}")
        node.text_template = compose_indexed_text("{metadata_str}", "{content}", position, brace_safe)
    return node


def indexed_text(node: BaseNode) -> str:
    """What is embedded and BM25-indexed for a node: context + chunk for contextual nodes."""
    return node.get_content(metadata_mode=MetadataMode.EMBED)


def with_result(node: BaseNode, hit: RankedHit) -> NodeWithScore:
    """A NodeWithScore for a fused hit; a copy of the node carries the fused score and ranks."""
    copy = node.model_copy(deep=False)
    copy.metadata = {**node.metadata, **hit.result_metadata()}
    for attr in ("excluded_embed_metadata_keys", "excluded_llm_metadata_keys"):
        keys = list(getattr(node, attr))
        setattr(copy, attr, keys + [k for k in RESULT_KEYS if k not in keys])
    return NodeWithScore(node=copy, score=float(hit.score))


def scored_ids(results: list[NodeWithScore]) -> list[tuple[Hashable, float | None]]:
    """(node id, score) pairs, best first (the core keeps each id's first occurrence and scores a
    missing score as 1 / rank)."""
    return [(r.node.node_id, float(r.score) if r.score is not None else None) for r in results]
