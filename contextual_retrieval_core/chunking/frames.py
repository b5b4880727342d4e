"""Frames and their crops as documents and chunks: a crop is a chunk of its frame.

A `Frame` is one image from a camera or other source, with when it was taken, an optional scene
label and the objects a detector found in it (`Detection`s). Each detection becomes a `Crop`, cut
from the frame's pixels, or given already cut (a detector that saved ``crop_1.jpg``,
``crop_2.jpg``). `crop_chunks` turns frames and crops into the core's `Document` / `Chunk`, so the
`Contextualizer` situates crops exactly as it situates text chunks (store, claims, prompt caching
per frame):

- the frame's document text lists its source, time, scene, size, image digest and one line per
  crop; it keys the context store, so a changed image, box or label is situated again;
- a crop's chunk text is its name and class, ``"crop_3.png: truck"``, a line of its frame's text;
- the `Frame` rides in ``document.metadata[FRAME_KEY]`` and the `Crop` in
  ``chunk.metadata[CROP_KEY]``: the crop context generators read them there.

Frame metadata (what both framework adapters read, `FrameInput.metadata`): "camera" and / or
"source" (names of the camera or source), "timestamp" (ISO 8601 text, a `datetime`, or Unix
seconds), "scene" (a label such as "night shift"), "detections" (the detector's output, see
`parse_detections`), and "box_format", "normalized", "class_names" for reading it; "width" and
"height" when the frame has no image. Crop metadata (`CropInput.metadata`): the crop's own
detection in frame coordinates ("box", "label", "confidence", "track_id", as one detection record).

Bad input is refused before anything is generated, every problem of a batch listed at once
(`FrameInputError`): an image that cannot be read, a box with none of it inside its frame, a frame
with no "detections" key and no crops, a crop naming no known frame, two crops of one frame under
one name. Stated fallbacks: a box sticking out of the frame is cut at the frame's edge; a frame
whose detections are an empty list has no crops (it is listed in `CropBatch.empty_frames`); a
frame without camera, source, time or scene is named by its id; a timestamp that does not parse
is kept as written.

Example:
    >>> batch = crop_chunks([FrameInput("gate-0001.png", metadata={
    ...     "camera": "north-gate", "timestamp": "2026-03-02T23:14:00", "scene": "night shift",
    ...     "width": 640, "height": 480,
    ...     "detections": [{"box": [20, 200, 300, 460], "label": "truck", "confidence": 0.91},
    ...                    {"box": [400, 220, 460, 420], "label": "person"}]})])
    >>> [c.text for c in batch.chunks]
    ['crop_1: truck', 'crop_2: person']
    >>> print(batch.documents[0].text)
    frame: gate-0001.png
    camera: north-gate
    time: 2026-03-02 23:14:00
    scene: night shift
    size: 640x480
    objects:
    crop_1: truck, confidence 0.91, box 20,200,300,460
    crop_2: person, box 400,220,460,420
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any

from contextual_retrieval_core.checks import positive_int
from contextual_retrieval_core.chunking.detections import Detection, DetectionError, parse_detections
from contextual_retrieval_core.chunking.images import ImageData, ImageSource, UnreadableImageError, cut_all, read_image
from contextual_retrieval_core.errors import ContextualRetrievalError, InputError, InputTypeError
from contextual_retrieval_core.types import Chunk, Document, stable_chunk_id

__all__ = [
    "Frame",
    "Crop",
    "FrameInput",
    "CropInput",
    "CropBatch",
    "FrameInputError",
    "crop_chunks",
    "crop_metadata",
    "frame_of",
    "crop_of",
    "prompt_view",
    "FRAME_KEY",
    "CROP_KEY",
    "CROP_METADATA_KEYS",
    "IMAGE_KEYS",
]

#: where a frame / crop rides in the core Document / Chunk metadata
FRAME_KEY = "frame"
CROP_KEY = "crop"
#: metadata keys of a frame's own description (everything else in its metadata is the user's)
FRAME_METADATA_KEYS = ("camera", "source", "timestamp", "scene", "detections", "box_format", "normalized",
                       "class_names", "width", "height")
#: metadata keys `crop_metadata` writes (a crop's place, kept out of embedded text: its context says it)
CROP_METADATA_KEYS = ("frame_id", "frame_path", "camera", "source", "timestamp", "scene", "crop_name", "label", "box",
                      "confidence", "track_id")
#: metadata keys that carry an image in framework objects: a path, or the encoded bytes
IMAGE_KEYS = ("image_path", "image_bytes")

_MAX_PROBLEMS = 10
_DIGEST = "image sha256"


class FrameInputError(ContextualRetrievalError, ValueError):
    """Frames or crops that cannot be situated; `problems` lists each, naming the frame."""

    def __init__(self, problems: list[str]) -> None:
        shown = problems[:_MAX_PROBLEMS]
        more = f"\n  ... and {len(problems) - len(shown)} more" if len(problems) > len(shown) else ""
        super().__init__(
            f"{len(problems)} problem(s) with the frames; nothing was generated. Fix them, or leave those frames out:\n  "
            + "\n  ".join(shown) + more
        )
        self.problems = problems


@dataclass(frozen=True)
class Frame:
    """One image and the objects found in it.

    Attributes:
        id: unique within a corpus (a path, a camera and time, a uuid).
        width, height: its size in pixels.
        detections: the objects found in it.
        image: its pixels, when given.
        camera, source: names of the camera or source.
        timestamp: when it was taken (a `datetime` when it parsed, else the text as given).
        scene: a scene label ("night shift", "loading dock").
        metadata: the rest of the caller's metadata.
    """

    id: str
    width: int
    height: int
    detections: tuple[Detection, ...] = ()
    image: ImageData | None = field(default=None, repr=False)
    camera: str | None = None
    source: str | None = None
    timestamp: datetime | str | None = None
    scene: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def time_text(self) -> str | None:
        """The timestamp as "YYYY-MM-DD HH:MM:SS" (as given when it did not parse)."""
        if isinstance(self.timestamp, datetime):
            return self.timestamp.strftime("%Y-%m-%d %H:%M:%S")
        return self.timestamp

    def describe(self) -> str:
        """What is known of the frame apart from its objects, one "key: value" line each."""
        lines = [f"frame: {self.id}"]
        for key, value in (("camera", self.camera), ("source", self.source), ("time", self.time_text), ("scene", self.scene)):
            if value:
                lines.append(f"{key}: {value}")
        lines.append(f"size: {self.width}x{self.height}")
        return "\n".join(lines)


@dataclass(frozen=True)
class Crop:
    """One detected object of a frame, a chunk of it.

    Attributes:
        frame_id: the frame it belongs to.
        index: its position among the frame's crops.
        detection: what was detected, where (frame pixels).
        name: its file name when given cut, else "crop_N".
        image: its pixels (given, or cut from the frame; None when the frame has no image).
        given: True when the crop came already cut (its image is not the frame's pixels in its box).
        metadata: the caller's metadata of a crop given already cut.
    """

    frame_id: str
    index: int
    detection: Detection
    name: str
    image: ImageData | None = field(default=None, repr=False)
    given: bool = False
    metadata: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def text(self) -> str:
        """The crop's own text: its name and class (what is indexed after its context)."""
        return f"{self.name}: {self.detection.label}"

    def line(self) -> str:
        """The crop's line in its frame's document text."""
        d = self.detection
        parts = [self.text]
        if d.confidence is not None:
            parts.append(f"confidence {d.confidence:.2f}")
        if d.track_id is not None:
            parts.append(f"track {d.track_id}")
        parts.append("box " + ",".join(str(round(v)) for v in d.box))
        if self.given and self.image is not None:
            parts.append(f"{_DIGEST} {self.image.sha256[:16]}")
        return ", ".join(parts)


@dataclass(frozen=True)
class FrameInput:
    """A frame as a framework object holds it: an id, an image (path or bytes, optional) and
    metadata (see the module docstring)."""

    id: str
    image: ImageSource | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CropInput:
    """A crop given already cut: its frame's id, its image, its name and its metadata (its own
    detection in frame coordinates)."""

    frame_id: str
    image: ImageSource | None = None
    name: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class CropBatch:
    """Frames and crops as the core's documents and chunks (chunks in frame order, then crop order).

    Attributes:
        documents: one per frame that has crops.
        chunks: one per crop.
        empty_frames: ids of frames whose detections were an empty list (no chunks).
    """

    documents: list[Document]
    chunks: list[Chunk]
    empty_frames: list[str] = field(default_factory=list)


def frame_of(document: Document) -> Frame:
    """The `Frame` a crop document carries; TypeError naming the fix for any other document."""
    frame = document.metadata.get(FRAME_KEY)
    if not isinstance(frame, Frame):
        raise InputTypeError(
            f"document {document.id!r} is not a frame: crop context generators situate crops of frames; "
            "build documents and chunks with crop_chunks(...)"
        )
    return frame


def crop_of(chunk: Chunk) -> Crop:
    """The `Crop` a crop chunk carries; TypeError naming the fix for any other chunk."""
    crop = chunk.metadata.get(CROP_KEY)
    if not isinstance(crop, Crop):
        raise InputTypeError(
            f"chunk {chunk.id!r} is not a crop: crop context generators situate crops of frames; "
            "build documents and chunks with crop_chunks(...)"
        )
    return crop


def crop_chunks(frames: Sequence[FrameInput], crops: Sequence[CropInput] = ()) -> CropBatch:
    """Documents (frames) and chunks (crops) for the `Contextualizer`.

    A frame with crops in `crops` (given already cut) has those as its objects; any other frame
    is cut into one crop per detection in its metadata. Every problem is collected first and
    raised as one `FrameInputError` before anything is returned.
    """
    if isinstance(frames, FrameInput) or isinstance(crops, CropInput):
        raise InputTypeError("pass lists: crop_chunks([FrameInput(...), ...], [CropInput(...), ...])")
    problems: list[str] = []
    given: dict[str, list[CropInput]] = {}
    for given_crop in crops:
        given.setdefault(str(given_crop.frame_id), []).append(given_crop)
    seen: set[str] = set()
    documents: list[Document] = []
    chunks: list[Chunk] = []
    empty: list[str] = []
    for spec in frames:
        if not isinstance(spec, FrameInput):
            raise InputTypeError(f"frames must be FrameInput objects, got {type(spec).__name__}")
        if spec.id in seen:
            problems.append(f"frame {spec.id}: passed twice; give every frame a unique id")
            continue
        seen.add(spec.id)
        try:
            frame, frame_crops = _frame(spec, given.get(spec.id, []))
        except (UnreadableImageError, DetectionError, ValueError) as exc:
            problems.append(str(exc))
            continue
        if not frame_crops:
            empty.append(frame.id)
            continue
        frame = replace(frame, detections=tuple(c.detection for c in frame_crops))
        frame_crops = [replace(c, frame_id=frame.id) for c in frame_crops]
        text = frame.describe() + _image_line(frame) + "\nobjects:\n" + "\n".join(c.line() for c in frame_crops)
        documents.append(Document(frame.id, text, {**frame.metadata, FRAME_KEY: frame}))
        for crop in frame_crops:
            chunks.append(Chunk(stable_chunk_id(frame.id, crop.index, crop.text), frame.id, crop.text, crop.index, {CROP_KEY: crop}))
    for frame_id in sorted(set(given) - seen):
        problems.append(f"crop {given[frame_id][0].name or '(unnamed)'} names frame {frame_id!r}, which is not among the frames passed")
    if problems:
        raise FrameInputError(problems)
    return CropBatch(documents, chunks, empty)


def crop_metadata(crop: Crop, frame: Frame) -> dict[str, Any]:
    """Flat metadata (scalars only, as vector stores want) for a crop's framework object: the
    frame's own metadata (without its detections), then the crop's frame, camera, time, scene,
    name, class, box (``"x1,y1,x2,y2"`` in frame pixels, which `parse_detections` reads back),
    confidence and track."""
    out: dict[str, Any] = {k: v for k, v in frame.metadata.items() if k not in FRAME_METADATA_KEYS and k not in IMAGE_KEYS}
    out.update(crop.metadata)
    out["frame_id"] = frame.id
    if frame.image is not None and frame.image.path:
        out["frame_path"] = frame.image.path
    for key, value in (("camera", frame.camera), ("source", frame.source), ("timestamp", frame.time_text), ("scene", frame.scene)):
        if value:
            out[key] = value
    out.update({"crop_name": crop.name, **crop.detection.to_dict()})
    out["box"] = ",".join(str(round(v)) for v in crop.detection.box)  # flat: vector stores take scalars only
    return out


def prompt_view(text: str) -> str:
    """A frame's document text or a crop's line without its image digests (which key the store
    but tell a model nothing).

    Example:
        >>> prompt_view("frame: a.png\\nimage sha256: 0f3a\\nobjects:\\ncrop_1.jpg: car, box 1,2,3,4, image sha256 99ab")
        'frame: a.png\\nobjects:\\ncrop_1.jpg: car, box 1,2,3,4'
    """
    lines = []
    for line in text.split("\n"):
        if line.startswith(_DIGEST + ":"):
            continue
        lines.append(line.split(", " + _DIGEST + " ")[0])
    return "\n".join(lines)


# -- building -------------------------------------------------------------------------------------


def _image_line(frame: Frame) -> str:
    return f"\n{_DIGEST}: {frame.image.sha256}" if frame.image is not None else ""


def _frame(spec: FrameInput, given: list[CropInput]) -> tuple[Frame, list[Crop]]:
    meta = dict(spec.metadata)
    image = read_image(spec.image, name=f"of frame {spec.id}") if spec.image is not None else None
    if image is not None:
        width, height = image.width, image.height
    else:
        width, height = _size(meta, spec.id)
    frame = Frame(
        id=str(spec.id),
        width=width,
        height=height,
        image=image,
        camera=_text(meta.get("camera")),
        source=_text(meta.get("source")) if _text(meta.get("source")) != str(spec.id) else None,
        timestamp=_timestamp(meta.get("timestamp", meta.get("time"))),
        scene=_text(meta.get("scene")),
        metadata={k: v for k, v in meta.items() if k not in ("detections",)},
    )
    read = {
        "width": width,
        "height": height,
        "box_format": meta.get("box_format", "xyxy"),
        "normalized": meta.get("normalized"),
        "class_names": meta.get("class_names"),
        "frame": frame.id,
    }
    if given:
        return frame, _given_crops(frame, given, read)
    if "detections" not in meta:
        raise DetectionError(
            f"frame {frame.id} has no metadata['detections'] and no crops: pass the detector's output "
            "(an empty list for a frame with no objects) or its crops already cut"
        )
    detections = parse_detections(meta["detections"], **read)
    pixels: list[ImageData | None] = [None] * len(detections) if image is None else [*cut_all(image, [d.pixel_box for d in detections])]
    return frame, [Crop(frame.id, i, det, f"crop_{i + 1}", pixels[i]) for i, det in enumerate(detections)]


def _given_crops(frame: Frame, given: list[CropInput], read: dict[str, Any]) -> list[Crop]:
    crops: list[Crop] = []
    names: set[str] = set()
    for i, spec in enumerate(given):
        path = os.fspath(spec.image) if isinstance(spec.image, (str, os.PathLike)) else None
        name = spec.name or (os.path.basename(path) if path else f"crop_{i + 1}")
        if name in names:
            raise InputError(f"frame {frame.id} has two crops named {name}; give each crop its own name")
        names.add(name)
        meta = dict(spec.metadata)
        (detection,) = parse_detections([meta], **{**read, "frame": f"{frame.id}, crop {name}"})
        image = read_image(spec.image, name=f"{name} of frame {frame.id}") if spec.image is not None else None
        own = {k: v for k, v in meta.items() if k not in ("box", "bbox", "xyxy", "xywh", "label", "class_name", "name",
                                                         "confidence", "score", "conf", "track_id", "tracker_id")}
        crops.append(Crop(frame.id, i, detection, name, image, True, own))
    return crops


def _size(meta: dict[str, Any], frame_id: str) -> tuple[int, int]:
    try:
        width, height = int(meta["width"]), int(meta["height"])
    except (KeyError, TypeError, ValueError):
        raise InputError(
            f"frame {frame_id} has no image and no size: pass its image, or metadata 'width' and 'height' in pixels"
        ) from None
    positive_int(f"frame {frame_id}: metadata 'width'", width, what="a positive number of pixels")
    positive_int(f"frame {frame_id}: metadata 'height'", height, what="a positive number of pixels")
    return width, height


def _text(value: Any) -> str | None:
    if value is None:
        return None
    text = " ".join(str(value).split())
    return text or None


def _timestamp(value: Any) -> datetime | str | None:
    """A `datetime` from a datetime, ISO 8601 text or Unix seconds; other text kept as written."""
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return datetime.fromtimestamp(value, tz=timezone.utc)
    text = " ".join(str(value).split())
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return text
