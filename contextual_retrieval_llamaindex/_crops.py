"""LlamaIndex image inputs as the core's frames and crops, and contextual crops as `ImageNode`s.

`ContextualNodeParser` sends its image inputs here:

- a frame is a `Document` that carries an image (`ImageDocument(image_path=...)` or
  ``image=base64``) or detections in ``metadata["detections"]``; its metadata is the core's frame
  metadata (camera, source, timestamp, scene, detections, ...: `chunking.frames`);
- a crop already cut is an `ImageNode` (``image_path`` or ``image``) whose frame is its source
  document (``ref_doc_id``) or ``metadata["frame_id"]``, with its own detection in its metadata
  (box in frame pixels, label, ...).

Each crop comes back as an `ImageNode` with a stable id, the crop's text (``"crop_7.png: truck"``)
as its text, its context in ``metadata["context"]`` laid out as every contextual node is (the
EMBED text is context + crop text), the crop's image (its ``image_path`` kept when it had one, the
PNG bytes when it was cut from the frame), and the crop's metadata (frame id and path, camera,
time, scene, name, label, box, confidence, track), kept out of the EMBED / LLM text since the
context says it in words.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from typing import Any

from llama_index.core.schema import BaseNode, Document, ImageNode, NodeRelationship, RelatedNodeInfo

from contextual_retrieval_core.chunking.frames import (
    CROP_METADATA_KEYS,
    CropBatch,
    CropInput,
    FrameInput,
    crop_chunks,
    crop_metadata,
    crop_of,
    frame_of,
)
from contextual_retrieval_core.chunking.images import ImageData
from contextual_retrieval_core.contextualize.contextualizer import ContextualizeResult
from contextual_retrieval_core.errors import InputError
from contextual_retrieval_core.types import ContextPosition
from contextual_retrieval_llamaindex._convert import set_context

__all__ = ["is_image_input", "image_batch", "crop_nodes"]


def is_image_input(node: BaseNode) -> bool:
    """Whether `node` is a frame (a Document with an image or detections) or a crop (an ImageNode)."""
    if isinstance(node, ImageNode):
        return True
    return isinstance(node, Document) and (node.image_resource is not None or "detections" in node.metadata)


def image_batch(nodes: Sequence[BaseNode]) -> CropBatch:
    """The core's documents (frames) and chunks (crops) for `nodes` (all image inputs)."""
    frames: list[FrameInput] = []
    crops: list[CropInput] = []
    for node in nodes:
        if isinstance(node, ImageNode):
            frame_id = node.ref_doc_id or node.metadata.get("frame_id")
            if frame_id is None:
                raise InputError(
                    f"ImageNode {node.node_id!r} names no frame: set its SOURCE relationship to the frame's "
                    "Document, or metadata['frame_id'], and pass the frame too"
                )
            image = _node_image(node)
            name = node.metadata.get("crop_name")
            meta = {k: v for k, v in node.metadata.items() if k not in ("frame_id", "crop_name")}
            crops.append(CropInput(str(frame_id), image, name, meta))
        else:
            frames.append(FrameInput(node.node_id, _document_image(node), dict(node.metadata)))
    return crop_chunks(frames, crops)


def crop_nodes(result: ContextualizeResult, documents: Sequence[Any], position: ContextPosition, separator: str) -> list[ImageNode]:
    """An `ImageNode` per contextual crop (see the module docstring)."""
    frames = {d.id: frame_of(d) for d in documents}
    out: list[ImageNode] = []
    for chunk in result.chunks:
        crop = crop_of(chunk.chunk)
        frame = frames[chunk.document_id]
        image: ImageData | None = crop.image
        fields: dict[str, Any] = {}
        if image is not None and image.path:
            fields["image_path"] = image.path
        elif image is not None:
            fields["image"] = base64.b64encode(image.data).decode("ascii")
        if image is not None:
            fields["image_mimetype"] = image.media_type
        metadata = crop_metadata(crop, frame)
        node = ImageNode(
            id_=chunk.id,
            text=chunk.text,
            metadata=metadata,
            excluded_embed_metadata_keys=[k for k in metadata if k in CROP_METADATA_KEYS],
            excluded_llm_metadata_keys=[k for k in metadata if k in CROP_METADATA_KEYS],
            relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=chunk.document_id)},
            **fields,
        )
        out.append(set_context(node, chunk.context, position, separator))
    return out


def _decoded(data: bytes | str) -> bytes:
    """LlamaIndex keeps image bytes base64-encoded; raw bytes pass as they are."""
    raw = data.encode("ascii") if isinstance(data, str) else data
    try:
        return base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError):
        return raw


def _document_image(doc: Any) -> Any:
    """The image of a frame node: an `ImageDocument` or a Document given an image resource."""
    resource = doc.image_resource
    if resource is None:
        return None
    if resource.path is not None:
        return str(resource.path)
    if resource.data is not None:
        return _decoded(resource.data)
    if resource.url is not None:
        raise InputError(
            f"frame {doc.node_id!r} has only an image URL; download the image and pass image_path= or image= "
            "(nothing is fetched from the network)"
        )
    return None


def _node_image(node: ImageNode) -> Any:
    if node.image_path:
        return node.image_path
    if node.image:
        return _decoded(node.image)
    if node.image_url:
        raise InputError(
            f"crop {node.node_id!r} has only an image URL; download the image and pass image_path= or image= "
            "(nothing is fetched from the network)"
        )
    return None
