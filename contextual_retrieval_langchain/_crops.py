"""LangChain image Documents as the core's frames and crops, and contextual crops as Documents.

`ContextualDocumentTransformer` sends its image inputs here. An image Document carries its image
in metadata: ``metadata["image_path"]`` (a file) or ``metadata["image_bytes"]`` (the encoded
bytes); a frame may also carry only ``metadata["detections"]`` (with "width" and "height").

- A frame's metadata is the core's frame metadata (camera, source, timestamp, scene, detections,
  ...: `contextual_retrieval_core.chunking.frames`); its id is `Document.id`, else
  ``metadata[parent_id_key]``, else its image path.
- A crop already cut names its frame by ``metadata["frame_id"]`` (or, when frames come as
  ``parents=``, by ``metadata[parent_id_key]``) and carries its own detection (box in frame
  pixels, label, ...).

Each crop comes back as a Document whose page_content is its context then its own text
(``"crop_7.png: truck"``), with the crop's metadata (frame id and path, camera, time, scene, name,
label, box, confidence, track), its image (``image_path`` kept, or ``image_bytes`` of the PNG cut
from the frame) and the keys of every contextual chunk (context, original_content, parent_id,
chunk_index, chunk_id). Box lists and bytes are not scalars: a vector store that takes only scalar
metadata (Chroma) needs `langchain_community`'s ``filter_complex_metadata`` first.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.documents import Document as LCDocument

from contextual_retrieval_core.chunking.frames import (
    CropBatch,
    CropInput,
    FrameInput,
    crop_chunks,
    crop_metadata,
    crop_of,
    frame_of,
)
from contextual_retrieval_core.contextualize.contextualizer import ContextualizeResult
from contextual_retrieval_core.errors import InputError
from contextual_retrieval_langchain._documents import contextual_document

__all__ = ["IMAGE_PATH_KEY", "IMAGE_BYTES_KEY", "FRAME_ID_KEY", "is_image_document", "image_batch", "crop_documents"]

IMAGE_PATH_KEY = "image_path"
IMAGE_BYTES_KEY = "image_bytes"
FRAME_ID_KEY = "frame_id"


def is_image_document(doc: LCDocument) -> bool:
    """Whether `doc` is a frame or a crop (it carries an image, or detections, in metadata)."""
    meta = doc.metadata
    return IMAGE_PATH_KEY in meta or IMAGE_BYTES_KEY in meta or "detections" in meta


def image_batch(frames: Sequence[LCDocument], crops: Sequence[LCDocument], parent_id_key: str, *, crops_by_parent: bool) -> CropBatch:
    """The core's documents (frames) and chunks (crops); crops name their frame by
    ``metadata["frame_id"]``, or by ``metadata[parent_id_key]`` when `crops_by_parent`."""
    frame_inputs = [FrameInput(_frame_id(d, parent_id_key), _image(d), _own(d.metadata)) for d in frames]
    crop_inputs = []
    for doc in crops:
        frame_id = doc.metadata.get(FRAME_ID_KEY)
        if frame_id is None and crops_by_parent:
            frame_id = doc.metadata.get(parent_id_key)
        if frame_id is None:
            raise InputError(
                "a crop Document names no frame: set metadata['frame_id'] (or, with parents=, "
                f"metadata[{parent_id_key!r}]) to its frame's id and pass the frame too"
            )
        meta = {k: v for k, v in _own(doc.metadata).items() if k not in (FRAME_ID_KEY, "crop_name")}
        if crops_by_parent:
            meta.pop(parent_id_key, None)
        name = doc.metadata.get("crop_name") or (None if doc.metadata.get(IMAGE_PATH_KEY) else doc.page_content.strip() or None)
        crop_inputs.append(CropInput(str(frame_id), _image(doc), name, meta))
    return crop_chunks(frame_inputs, crop_inputs)


def crop_documents(result: ContextualizeResult, documents: Sequence[Any]) -> list[LCDocument]:
    """A Document per contextual crop (see the module docstring)."""
    frames = {d.id: frame_of(d) for d in documents}
    out = []
    for chunk in result.chunks:
        crop = crop_of(chunk.chunk)
        metadata = crop_metadata(crop, frames[chunk.document_id])
        if crop.image is not None and crop.image.path:
            metadata[IMAGE_PATH_KEY] = crop.image.path
        elif crop.image is not None:
            metadata[IMAGE_BYTES_KEY] = crop.image.data
        out.append(contextual_document(chunk, metadata))
    return out


def _own(meta: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in meta.items() if k not in (IMAGE_PATH_KEY, IMAGE_BYTES_KEY)}


def _image(doc: LCDocument) -> Any:
    meta = doc.metadata
    if meta.get(IMAGE_PATH_KEY):
        return str(meta[IMAGE_PATH_KEY])
    if meta.get(IMAGE_BYTES_KEY) is not None:
        return meta[IMAGE_BYTES_KEY]
    return None


def _frame_id(doc: LCDocument, parent_id_key: str) -> str:
    if doc.id:
        return str(doc.id)
    for key in (parent_id_key, IMAGE_PATH_KEY):
        if doc.metadata.get(key) not in (None, ""):
            return str(doc.metadata[key])
    raise InputError(
        f"a frame Document has no id: give it Document.id, metadata[{parent_id_key!r}] or metadata['image_path']"
    )
