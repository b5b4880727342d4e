"""`ContextualEnsembleRetriever`'s settings: its fusion fields, generated from `FusionConfig`, and
their resolution through one `FusionConfig` at construction.

Every `FusionConfig` setting is a pydantic field of the retriever, under LangChain's name (`k`
for `top_k`, `SETTING_NAMES`) with the config's type, default and description; the fields a
caller gives are validated by the core (`FusionConfig.from_settings`) and, after construction,
every field holds the setting in force.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, get_type_hints

from langchain_core.retrievers import BaseRetriever
from langchain_core.vectorstores import VectorStoreRetriever
from pydantic import Field, create_model

from contextual_retrieval_core.errors import InputError, InputTypeError
from contextual_retrieval_core.rerank.base import Reranker
from contextual_retrieval_core.search.config import FusionConfig
from contextual_retrieval_core.search.ranked import unique_names
from contextual_retrieval_langchain.bm25 import ContextualBM25Retriever, metadata_predicate
from contextual_retrieval_langchain.rerank import RerankCompressor

__all__ = ["SETTING_NAMES", "FusionFields", "resolved_settings"]

#: LangChain's names for `FusionConfig` fields (the result count is `k`, as on LangChain's
#: retrievers); every other setting keeps its `FusionConfig` name
SETTING_NAMES = {"k": "top_k"}
#: field types wider than the core's: a weights list, a reranker that may be a compressor
_FIELD_TYPES: dict[str, Any] = {"weights": list[float], "reranker": Reranker | RerankCompressor | None}
_OWNER = "ContextualEnsembleRetriever"


def _fusion_fields() -> dict[str, Any]:
    """A pydantic field per `FusionConfig` setting, under LangChain's name, with its type,
    default and description: the flat fields are derived here, from the config's own list."""
    hints = get_type_hints(FusionConfig)
    names = {core: own for own, core in SETTING_NAMES.items()}
    fields: dict[str, Any] = {}
    for f in dataclasses.fields(FusionConfig):
        doc = FusionConfig.field_doc(f.name)
        default = Field(default_factory=list, description=doc) if f.name == "weights" else Field(default=f.default, description=doc)
        fields[names.get(f.name, f.name)] = (_FIELD_TYPES.get(f.name, hints[f.name]), default)
    return fields


_FUSION_FIELDS = _fusion_fields()
_FIELDS = list(_FUSION_FIELDS)

if TYPE_CHECKING:  # the generated fields are read through `config`; to a type checker this is the base
    FusionFields = BaseRetriever
else:
    FusionFields = create_model("_WithFusionFields", __base__=BaseRetriever, **_FUSION_FIELDS)


def resolved_settings(data: Any) -> Any:
    """The retriever's constructor data with names and weights one per retriever and the fusion
    fields resolved through one `FusionConfig` (validated there), so each field holds the setting
    in force; data that is not a dict of retrievers is left to the field validation."""
    if not isinstance(data, dict) or not isinstance(data.get("retrievers"), (list, tuple)):
        return data  # the field validation names what is wrong
    data = dict(data)
    retrievers = data["retrievers"]
    n = len(retrievers)
    if n == 0:
        raise InputError("no retrievers: pass at least one (e.g. a vector store retriever and a ContextualBM25Retriever)")
    names = data.get("names") or _default_names(retrievers)
    if len(names) != n or len(set(names)) != n:
        raise InputError(f"names must be {n} unique names, one per retriever; got {names}")
    reranker = data.get("reranker")
    if isinstance(reranker, RerankCompressor):
        reranker = reranker.reranker  # a compressor: its core reranker (its top_n caps k)
    elif reranker is not None and not isinstance(reranker, Reranker):
        raise InputTypeError(
            f"reranker must be a core Reranker or a RerankCompressor, got {type(reranker).__name__}; "
            "wrap other compressors in ContextualCompressionRetriever(base_retriever=this, ...)"
        )
    given = {name: data.get(name) for name in _FIELDS}
    given["reranker"] = reranker
    config = FusionConfig.from_settings(data.get("config"), given, names=SETTING_NAMES, owner=_OWNER)
    config = config.replace(weights=config.weights_for(n, per="retriever"))
    if data.get("filter") is not None:
        metadata_predicate(data["filter"])  # a bad where dict fails here, naming the operator
    in_force = {own: getattr(config, SETTING_NAMES.get(own, own)) for own in _FIELDS if own != "reranker"}
    data.update(in_force, names=list(names), config=config, weights=list(config.weights or ()))
    return data


def _default_names(retrievers: Sequence[Any]) -> list[str]:
    """A name per source: "dense" for a vector-store retriever, "bm25" for a
    `ContextualBM25Retriever`, else the runnable's name; repeats numbered "_2", ..."""
    kinds = [
        "dense" if isinstance(r, VectorStoreRetriever)
        else "bm25" if isinstance(r, ContextualBM25Retriever)
        else r.get_name() if callable(getattr(r, "get_name", None)) else type(r).__name__
        for r in retrievers
    ]
    return unique_names(kinds)
