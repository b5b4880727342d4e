"""The one place the core sets or reads another package's internals, where no public API exists.

Each accessor names the versions it is tested with (tests/unit/project/test_compat.py pins them):

- chromadb (1.x): a `Collection` reaches its client (and so the client's batch-size limit) only
  through ``_client``.
- voyageai (0.3 - 0.5): `Client.contextualized_embed` returns results in the order the server sent them,
  dropping each input's ``index``; `VoyageContextualizedEmbedder` maps vectors back by those
  indices, so it sends the request as the SDK method does (API-key check, the client's retry
  controller and connection parameters ``_params``) and keeps the raw response.
"""

from __future__ import annotations

from typing import Any

__all__ = ["chroma_max_batch_size", "voyage_contextualized_create", "voyage_contextualized_acreate"]

#: what Chroma accepts per call when the client does not say
DEFAULT_CHROMA_BATCH = 5000


def chroma_max_batch_size(collection: Any) -> int:
    """The most rows one call on `collection` may carry: its client's limit, else 5000."""
    client = getattr(collection, "_client", None)
    size = getattr(client, "get_max_batch_size", None)
    return int(size()) if callable(size) else DEFAULT_CHROMA_BATCH


def voyage_contextualized_create(client: Any, **request: Any) -> Any:
    """The raw `/contextualizedembeddings` response for `request`, sent as `client` sends it."""
    import voyageai

    client._require_api_key()
    response = None
    for attempt in client._make_retry_controller():
        with attempt:
            response = voyageai.ContextualizedEmbedding.create(**request, **client._params)
    return response


async def voyage_contextualized_acreate(client: Any, **request: Any) -> Any:
    """Async `voyage_contextualized_create` on a `voyageai.AsyncClient`."""
    import voyageai

    client._require_api_key()
    async for attempt in client._make_retry_controller():
        with attempt:
            return await voyageai.ContextualizedEmbedding.acreate(**request, **client._params)
    return None
