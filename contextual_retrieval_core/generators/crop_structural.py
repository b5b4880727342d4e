"""`StructuralCropContextGenerator`: a crop's context from its frame's detection metadata, offline.

It calls no model and reads no pixels. One sentence names what the crop shows, the camera or
source, the date, time and part of the day, the scene label, where the crop sits in the frame, and
the other objects in the frame with where they are relative to it (nearest first, at most five).
A frame without camera, source, time or scene is named by its id. The same input always gives the
same context.

Parts of the day (from the timestamp's hour): night 21-5, morning 5-12, afternoon 12-17,
evening 17-21. Positions: the frame in thirds ("in the top left", "on the right", "at the
bottom", "in the centre", ...);
another object is "to its left / right" or "above / below it" by the larger offset between the
two boxes' centres, "overlapping it" when the boxes share more than a third of the smaller one.

Example:
    >>> from contextual_retrieval_core.chunking.frames import FrameInput, crop_chunks
    >>> batch = crop_chunks([FrameInput("gate-0001.png", metadata={
    ...     "camera": "north-gate", "timestamp": "2026-03-02T23:14:00", "scene": "night shift",
    ...     "width": 640, "height": 480,
    ...     "detections": [{"box": [20, 250, 300, 460], "label": "truck", "track_id": 7},
    ...                    {"box": [400, 220, 460, 420], "label": "person"}]})])
    >>> gen = StructuralCropContextGenerator()
    >>> print(gen.generate(batch.documents[0], batch.chunks[0]).context)
    A truck (track 7) seen by camera north-gate on 2026-03-02 at 23:14 (night), scene: night shift; in the bottom left of the frame; also in the frame: a person to its right.
"""

from __future__ import annotations

import hashlib
from datetime import datetime

from contextual_retrieval_core.chunking.detections import Detection
from contextual_retrieval_core.chunking.frames import Crop, Frame, crop_of, frame_of
from contextual_retrieval_core.generators.base import ContextGenerator, Generation
from contextual_retrieval_core.types import Chunk, Document

__all__ = ["StructuralCropContextGenerator", "part_of_day"]

_MAX_OTHERS = 5
_VERSION = "crop-structural/v1"


def part_of_day(when: datetime) -> str:
    """"night" (21-5), "morning" (5-12), "afternoon" (12-17) or "evening" (17-21).

    Example:
        >>> part_of_day(datetime(2026, 3, 2, 23, 14)), part_of_day(datetime(2026, 3, 2, 7, 0))
        ('night', 'morning')
    """
    hour = when.hour
    if 5 <= hour < 12:
        return "morning"
    if 12 <= hour < 17:
        return "afternoon"
    if 17 <= hour < 21:
        return "evening"
    return "night"


class StructuralCropContextGenerator:
    """The offline crop `ContextGenerator`: situates a crop by its frame's metadata.

    Documents and chunks come from `crop_chunks` (a frame rides in the document's metadata, a crop
    in the chunk's). Its contexts are structural themselves, so the `Contextualizer` puts no
    structural header before them.

    Example:
        >>> gen = StructuralCropContextGenerator()
        >>> gen.is_llm, gen.label
        (False, 'structural crop (no LLM)')
    """

    name = "structural-crop"
    model = ""
    prompt_identity = hashlib.sha256(_VERSION.encode()).hexdigest()
    is_llm = False
    label = "structural crop (no LLM)"

    def generate(self, document: Document, chunk: Chunk) -> Generation:
        return Generation(self.describe(frame_of(document), crop_of(chunk)))

    async def agenerate(self, document: Document, chunk: Chunk) -> Generation:
        return self.generate(document, chunk)

    def structural_header_generator(self) -> ContextGenerator | None:
        """None: these contexts are the structural header (`StructuralHeaderSource`)."""
        return None

    def describe(self, frame: Frame, crop: Crop) -> str:
        """The context of `crop` in `frame` (one sentence)."""
        det = crop.detection
        text = _article(det.label).capitalize()
        if det.track_id is not None:
            text += f" (track {det.track_id})"
        named = False
        if frame.camera:
            text += f" seen by camera {frame.camera}"
            named = True
        if frame.source:
            text += f" from {frame.source}"
            named = True
        if isinstance(frame.timestamp, datetime):
            when = frame.timestamp
            text += f" on {when:%Y-%m-%d} at {when:%H:%M} ({part_of_day(when)})"
            named = True
        elif frame.timestamp:
            text += f" at {frame.timestamp}"
            named = True
        if not named:
            text += f" in frame {frame.id}"
        if frame.scene:
            text += f", scene: {frame.scene}"
        text += f"; {_placement(det, frame)}"
        others = [d for i, d in enumerate(frame.detections) if i != crop.index]
        if others:
            text += "; also in the frame: " + _neighbours(det, others, frame)
        return text + "."


def _article(label: str) -> str:
    return ("an " if label[:1].lower() in "aeiou" else "a ") + label


def _placement(det: Detection, frame: Frame) -> str:
    x, y = det.centre
    col = ("left", "", "right")[min(2, int(3 * x / frame.width))]
    row = ("top", "", "bottom")[min(2, int(3 * y / frame.height))]
    if row and col:
        where = f"in the {row} {col}"
    elif col:
        where = f"on the {col}"
    elif row:
        where = f"at the {row}"
    else:
        where = "in the centre"
    x1, y1, x2, y2 = det.box
    share = (x2 - x1) * (y2 - y1) / (frame.width * frame.height)
    size = ", filling most of the frame" if share > 0.5 else ""
    return f"{where} of the frame{size}"


def _relation(det: Detection, other: Detection, frame: Frame) -> str:
    ax1, ay1, ax2, ay2 = det.box
    bx1, by1, bx2, by2 = other.box
    inter = max(0.0, min(ax2, bx2) - max(ax1, bx1)) * max(0.0, min(ay2, by2) - max(ay1, by1))
    smaller = min((ax2 - ax1) * (ay2 - ay1), (bx2 - bx1) * (by2 - by1))
    if smaller > 0 and inter / smaller > 1 / 3:
        return "overlapping it"
    (x, y), (ox, oy) = det.centre, other.centre
    dx, dy = (ox - x) / frame.width, (oy - y) / frame.height
    if abs(dx) >= abs(dy):
        return "to its right" if dx > 0 else "to its left"
    return "below it" if dy > 0 else "above it"


def _neighbours(det: Detection, others: list[Detection], frame: Frame) -> str:
    x, y = det.centre

    def distance(other: Detection) -> float:
        ox, oy = other.centre
        return ((ox - x) / frame.width) ** 2 + ((oy - y) / frame.height) ** 2

    nearest = sorted(others, key=distance)
    shown = [f"{_article(o.label)} {_relation(det, o, frame)}" for o in nearest[:_MAX_OTHERS]]
    more = len(nearest) - len(shown)
    return ", ".join(shown) + (f" and {more} more object{'s' if more > 1 else ''}" if more else "")
