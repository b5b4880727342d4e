"""`Detection`: one object a detector found in a frame, and `parse_detections` for the common
detector output shapes.

A detector's output for one frame comes as records or as columns:

- records: a list of dicts, one per object, e.g. ``{"box": [x1, y1, x2, y2], "label": "truck",
  "confidence": 0.91, "track_id": 7}``. The box may be under "box", "bbox", "xyxy" or "xywh"
  (a list, or Ultralytics' ``{"x1", "y1", "x2", "y2"}`` dict); the class under "label",
  "class_name" or "name" (or an integer "class" / "class_id" / "category_id" with
  `class_names`); the confidence under "confidence", "score" or "conf"; the track under
  "track_id" or "tracker_id". A box may also be the text ``"x1,y1,x2,y2"``. Ultralytics'
  ``Results.summary()`` and COCO result lists read as they are (COCO's "bbox" with
  ``box_format="xywh"``).
- columns: a dict of parallel lists (or numpy arrays): boxes under "boxes", "xyxy" or "bbox",
  classes under "labels", "class_names" or "names" (or integer "class_ids" with `class_names`),
  confidences under "scores" or "confidences", tracks under "track_ids" or "tracker_ids"; what
  torchvision detectors and `supervision.Detections` hold.

Boxes are "xyxy" (corners), "xywh" (top-left corner, width, height) or "cxcywh" (centre, width,
height: YOLO label files), in pixels or normalised to 0..1. With ``normalized=None`` (default) a
frame's boxes are read as normalised when every coordinate of every box lies within 0..1.
Every box ends in pixels, corners, inside the frame: a box that sticks out of the frame is cut at
its edge; one with no area, or with none of it inside the frame, is a `DetectionError` naming the
frame, the detection and the settings to check.

Example:
    >>> dets = parse_detections(
    ...     [{"bbox": [0.5, 0.5, 0.25, 0.5], "name": "truck", "score": 0.9, "track_id": 7}],
    ...     width=640, height=480, box_format="xywh")
    >>> dets[0]
    Detection(label='truck', box=(320.0, 240.0, 480.0, 480.0), confidence=0.9, track_id='7')
    >>> parse_detections({"boxes": [[700, 10, 800, 90]], "labels": ["car"]}, width=640, height=480, frame="gate.png")
    Traceback (most recent call last):
    ...
    contextual_retrieval_core.chunking.detections.DetectionError: frame gate.png, detection 0 (car): box [700.0, 10.0, 800.0, 90.0] lies outside the 640x480 frame; check box_format ('xyxy' read) and whether the boxes are normalised (guessed: pixels)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from contextual_retrieval_core.errors import ContextualRetrievalError, InputError

__all__ = ["Detection", "DetectionError", "BoxFormat", "parse_detections"]

BoxFormat = Literal["xyxy", "xywh", "cxcywh"]

_BOX_KEYS = ("box", "bbox", "xyxy", "xywh")
_LABEL_KEYS = ("label", "class_name", "name")
_CLASS_ID_KEYS = ("class", "class_id", "category_id")
_CONFIDENCE_KEYS = ("confidence", "score", "conf")
_TRACK_KEYS = ("track_id", "tracker_id")

_COLUMN_BOXES = ("boxes", "xyxy", "bbox")
_COLUMN_LABELS = ("labels", "class_names", "names")
_COLUMN_CLASS_IDS = ("class_ids", "class_id", "category_ids")
_COLUMN_CONFIDENCES = ("scores", "confidences", "confidence")
_COLUMN_TRACKS = ("track_ids", "tracker_ids", "tracker_id")


class DetectionError(ContextualRetrievalError, ValueError):
    """A detection that cannot be placed in its frame (bad box, no class name, ...)."""


@dataclass(frozen=True)
class Detection:
    """One detected object.

    Attributes:
        label: the class name ("truck").
        box: (x1, y1, x2, y2) in pixels, inside the frame.
        confidence: the detector's score, when given.
        track_id: the tracker's id, when given (as text).
    """

    label: str
    box: tuple[float, float, float, float]
    confidence: float | None = None
    track_id: str | None = None

    @property
    def pixel_box(self) -> tuple[int, int, int, int]:
        """The box rounded outwards to whole pixels (x2 / y2 exclusive), for cutting the crop."""
        x1, y1, x2, y2 = self.box
        return (math.floor(x1), math.floor(y1), max(math.ceil(x2), math.floor(x1) + 1), max(math.ceil(y2), math.floor(y1) + 1))

    @property
    def centre(self) -> tuple[float, float]:
        x1, y1, x2, y2 = self.box
        return ((x1 + x2) / 2, (y1 + y2) / 2)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able record (what framework metadata carries)."""
        out: dict[str, Any] = {"label": self.label, "box": [round(v, 2) for v in self.box]}
        if self.confidence is not None:
            out["confidence"] = self.confidence
        if self.track_id is not None:
            out["track_id"] = self.track_id
        return out


def parse_detections(
    raw: Any,
    *,
    width: int,
    height: int,
    box_format: BoxFormat = "xyxy",
    normalized: bool | None = None,
    class_names: Sequence[str] | Mapping[int, str] | None = None,
    frame: str = "frame",
) -> list[Detection]:
    """`raw` (records or columns, see the module docstring) as `Detection`s in pixel corners.

    Args:
        raw: the detector's output for one frame.
        width, height: the frame's size in pixels.
        box_format: "xyxy", "xywh" or "cxcywh".
        normalized: whether boxes are fractions of the frame (None: guessed, see above).
        class_names: names for integer class ids.
        frame: how errors name the frame.
    """
    if box_format not in ("xyxy", "xywh", "cxcywh"):
        raise InputError(f"box_format must be 'xyxy', 'xywh' or 'cxcywh', not {box_format!r}")
    if raw is None:
        raise DetectionError(f"frame {frame} has no detections; pass a list (an empty one for a frame with no objects)")
    records = _columns_to_records(raw, frame) if isinstance(raw, Mapping) else list(raw)
    parsed = [_record(r, i, class_names, frame) for i, r in enumerate(records)]
    if normalized is None:
        normalized = bool(parsed) and all(0.0 <= v <= 1.0 for _, box, _, _ in parsed for v in box)
        guessed = True
    else:
        guessed = False
    out = []
    for i, (label, box, confidence, track) in enumerate(parsed):
        corners = _corners(box, box_format)
        if normalized:
            corners = (corners[0] * width, corners[1] * height, corners[2] * width, corners[3] * height)
        where = f"frame {frame}, detection {i} ({label})"
        hint = (
            f"check box_format ({box_format!r} read) and whether the boxes are normalised "
            f"({'guessed' if guessed else 'given'}: {'normalised' if normalized else 'pixels'})"
        )
        x1, y1, x2, y2 = corners
        if not (x2 > x1 and y2 > y1):
            raise DetectionError(f"{where}: box {list(box)} has no area once read as {box_format!r}; {hint}")
        clipped = (max(0.0, x1), max(0.0, y1), min(float(width), x2), min(float(height), y2))
        if not (clipped[2] > clipped[0] and clipped[3] > clipped[1]):
            raise DetectionError(f"{where}: box {list(box)} lies outside the {width}x{height} frame; {hint}")
        out.append(Detection(label, clipped, confidence, track))
    return out


def _number(value: Any, what: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise DetectionError(f"{what}: {value!r} is not a number") from None
    if not math.isfinite(number):
        raise DetectionError(f"{what}: {value!r} is not a finite number")
    return number


def _first(record: Mapping[str, Any], keys: Sequence[str]) -> Any:
    for key in keys:
        if key in record and record[key] is not None:
            return record[key]
    return None


def _record(
    record: Any, i: int, class_names: Sequence[str] | Mapping[int, str] | None, frame: str
) -> tuple[str, tuple[float, float, float, float], float | None, str | None]:
    where = f"frame {frame}, detection {i}"
    if isinstance(record, Detection):
        return record.label, record.box, record.confidence, record.track_id
    if not isinstance(record, Mapping):
        raise DetectionError(f"{where}: expected a dict such as {{'box': [x1, y1, x2, y2], 'label': 'truck'}}, got {type(record).__name__}")
    box = _first(record, _BOX_KEYS)
    if box is None:
        raise DetectionError(f"{where} has no box; put it under one of {', '.join(_BOX_KEYS)}")
    if isinstance(box, Mapping):
        if not {"x1", "y1", "x2", "y2"} <= set(box):
            raise DetectionError(f"{where}: a box dict needs x1, y1, x2, y2, got {sorted(box)}")
        box = [box["x1"], box["y1"], box["x2"], box["y2"]]
    if isinstance(box, str):  # "x1,y1,x2,y2", as crop metadata holds it
        box = box.split(",")
    values = list(box.tolist() if hasattr(box, "tolist") else box)
    if len(values) != 4:
        raise DetectionError(f"{where}: a box has 4 numbers, got {len(values)}")
    numbers = tuple(_number(v, f"{where} box") for v in values)
    label = _first(record, _LABEL_KEYS)
    if label is None:
        class_id = _first(record, _CLASS_ID_KEYS)
        label = _class_name(class_id, class_names, where) if class_id is not None else None
    if not isinstance(label, str) or not label.strip():
        raise DetectionError(
            f"{where} has no class name; put it under 'label' (or pass class_names= for integer class ids)"
        )
    confidence = _first(record, _CONFIDENCE_KEYS)
    track = _first(record, _TRACK_KEYS)
    return (
        label.strip(),
        numbers,  # type: ignore[return-value]
        None if confidence is None else _number(confidence, f"{where} confidence"),
        None if track is None else _track(track),
    )


def _track(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if hasattr(value, "item"):  # a numpy scalar
        value = value.item()
        if isinstance(value, float) and value.is_integer():
            value = int(value)
    return str(value)


def _class_name(class_id: Any, class_names: Sequence[str] | Mapping[int, str] | None, where: str) -> str:
    if class_names is None:
        raise DetectionError(f"{where} has class id {class_id!r} but no name; pass class_names= (a list or dict of names)")
    try:
        return str(class_names[int(class_id)])
    except (KeyError, IndexError, TypeError, ValueError):
        raise DetectionError(f"{where}: class id {class_id!r} is not in class_names") from None


def _columns_to_records(columns: Mapping[str, Any], frame: str) -> list[dict[str, Any]]:
    def column(keys: Sequence[str]) -> list[Any] | None:
        value = _first(columns, keys)
        if value is None:
            return None
        return list(value.tolist() if hasattr(value, "tolist") else value)

    boxes = column(_COLUMN_BOXES)
    if boxes is None:
        raise DetectionError(f"frame {frame}: detection columns need boxes under one of {', '.join(_COLUMN_BOXES)}")
    named = {
        "label": column(_COLUMN_LABELS),
        "class_id": column(_COLUMN_CLASS_IDS),
        "confidence": column(_COLUMN_CONFIDENCES),
        "track_id": column(_COLUMN_TRACKS),
    }
    for key, values in named.items():
        if values is not None and len(values) != len(boxes):
            raise DetectionError(f"frame {frame}: {len(boxes)} boxes but {len(values)} values for {key}")
    return [
        {"box": box, **{key: values[i] for key, values in named.items() if values is not None}}
        for i, box in enumerate(boxes)
    ]


def _corners(box: tuple[float, float, float, float], box_format: BoxFormat) -> tuple[float, float, float, float]:
    a, b, c, d = box
    if box_format == "xyxy":
        return (a, b, c, d)
    if box_format == "xywh":
        return (a, b, a + c, b + d)
    return (a - c / 2, b - d / 2, a + c / 2, b + d / 2)
