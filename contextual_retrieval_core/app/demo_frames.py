"""The crop demo: a small set of camera frames drawn with Pillow, their detections, the crops a
detector would save, and questions whose answer is one crop.

Three cameras (north-gate, loading-dock, staff-car-park), day and night shifts, and look-alike
objects across frames: the same truck, van, car, person and forklift drawings recur, so a crop
alone (``crop_7.png: truck``) cannot tell which truck it is; its frame's camera, time, scene and
neighbours can.

Example:
    >>> import tempfile
    >>> demo = write_demo_frames(tempfile.mkdtemp())
    >>> len(demo.frames), len(demo.crops), len(DEMO_CROP_QUERIES)
    (8, 18, 6)
    >>> demo.crops[0].name, demo.crops[0].metadata["label"]
    ('crop_1.png', 'truck')
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from contextual_retrieval_core._sdk import import_sdk

__all__ = ["DemoFrame", "DemoCrop", "DemoFrames", "CropQuery", "DEMO_CROP_QUERIES", "write_demo_frames"]


@dataclass(frozen=True)
class DemoFrame:
    """A frame file and its metadata (camera, timestamp, scene, detections in pixel xyxy)."""

    path: str
    metadata: dict[str, Any]


@dataclass(frozen=True)
class DemoCrop:
    """A crop file as a detector saves it, its frame's path, and its detection record."""

    path: str
    frame_path: str
    metadata: dict[str, Any]

    @property
    def name(self) -> str:
        return os.path.basename(self.path)


@dataclass
class DemoFrames:
    frames: list[DemoFrame] = field(default_factory=list)
    crops: list[DemoCrop] = field(default_factory=list)


@dataclass(frozen=True)
class CropQuery:
    """A question and its answer: the crop of `label` in the frame `frame` (a file name)."""

    query: str
    frame: str
    label: str


#: (file, camera, timestamp, scene, [(label, box x1, y1, x2, y2, confidence, track)])
_FRAMES = [
    ("frame_001.png", "north-gate", "2026-03-02T10:05:00", "day shift",
     [("truck", 40, 150, 330, 330, 0.93, 11), ("person", 430, 200, 480, 340, 0.88, 12)]),
    ("frame_002.png", "north-gate", "2026-03-02T23:20:00", "night shift",
     [("truck", 180, 140, 470, 320, 0.90, 21), ("van", 500, 190, 630, 310, 0.81, 22)]),
    ("frame_003.png", "north-gate", "2026-03-03T14:40:00", "day shift",
     [("van", 30, 180, 200, 320, 0.86, 31), ("car", 380, 230, 520, 320, 0.91, 32)]),
    ("frame_004.png", "loading-dock", "2026-03-02T09:30:00", "day shift",
     [("forklift", 20, 200, 150, 330, 0.84, 41), ("person", 250, 190, 300, 330, 0.90, 42),
      ("truck", 340, 140, 630, 320, 0.95, 43)]),
    ("frame_005.png", "loading-dock", "2026-03-03T01:15:00", "night shift",
     [("truck", 20, 150, 310, 330, 0.92, 51), ("forklift", 420, 200, 550, 330, 0.80, 52)]),
    ("frame_006.png", "staff-car-park", "2026-03-02T08:10:00", "day shift",
     [("car", 20, 240, 160, 330, 0.94, 61), ("car", 220, 240, 360, 330, 0.93, 62),
      ("person", 450, 190, 500, 330, 0.87, 63)]),
    ("frame_007.png", "staff-car-park", "2026-03-02T22:45:00", "night shift",
     [("car", 60, 240, 200, 330, 0.89, 71), ("person", 400, 190, 450, 330, 0.83, 72)]),
    ("frame_008.png", "loading-dock", "2026-03-03T15:00:00", "day shift",
     [("van", 100, 180, 270, 320, 0.88, 81), ("person", 380, 190, 430, 330, 0.85, 82)]),
]

DEMO_CROP_QUERIES = [
    CropQuery("the truck at the north gate on the night shift", "frame_002.png", "truck"),
    CropQuery("forklift at the loading dock at night", "frame_005.png", "forklift"),
    CropQuery("person in the staff car park at night", "frame_007.png", "person"),
    CropQuery("van at the north gate in the afternoon", "frame_003.png", "van"),
    CropQuery("truck at the loading dock in the morning", "frame_004.png", "truck"),
    CropQuery("person to the right of the truck at the north gate, day shift", "frame_001.png", "person"),
]

_SIZE = (640, 400)


def write_demo_frames(directory: str | os.PathLike[str], size: tuple[int, int] = _SIZE) -> DemoFrames:
    """Draw the demo frames into `directory` (frames/ and crops/) and return them with their crops.

    Crops are numbered across all frames (``crop_1.png``, ``crop_2.png``, ...), as a detector
    that saves each detection does. `size` scales the frames (boxes scale with them).
    """
    pil = import_sdk("PIL.Image", "images", "Pillow")
    draw_mod = import_sdk("PIL.ImageDraw", "images", "Pillow")
    root = os.fspath(directory)
    os.makedirs(os.path.join(root, "frames"), exist_ok=True)
    os.makedirs(os.path.join(root, "crops"), exist_ok=True)
    sx, sy = size[0] / _SIZE[0], size[1] / _SIZE[1]
    out = DemoFrames()
    n = 0
    for name, camera, timestamp, scene, objects in _FRAMES:
        night = scene.startswith("night")
        img = pil.new("RGB", size, (18, 22, 48) if night else (150, 200, 235))
        draw = draw_mod.Draw(img)
        draw.rectangle((0, int(260 * sy), size[0], size[1]), fill=(40, 40, 44) if night else (120, 120, 112))
        if night:
            draw.ellipse((int(560 * sx), int(20 * sy), int(600 * sx), int(60 * sy)), fill=(255, 240, 170))
        draw.text((8, 8), f"{camera.upper()}  {timestamp.replace('T', ' ')}", fill=(255, 255, 255))
        records: list[dict[str, Any]] = []
        for label, x1, y1, x2, y2, confidence, track in objects:
            box = (round(x1 * sx), round(y1 * sy), round(x2 * sx), round(y2 * sy))
            _draw(draw, label, box, night)
            records.append({"box": list(box), "label": label, "confidence": confidence, "track_id": track})
        path = os.path.join(root, "frames", name)
        img.save(path)
        out.frames.append(DemoFrame(path, {"camera": camera, "timestamp": timestamp, "scene": scene, "detections": records}))
        for record in records:
            n += 1
            crop_path = os.path.join(root, "crops", f"crop_{n}.png")
            left, top, right, bottom = record["box"]
            img.crop((left, top, right, bottom)).save(crop_path)
            out.crops.append(DemoCrop(crop_path, path, dict(record)))
    return out


def _draw(draw: Any, label: str, box: tuple[int, int, int, int], night: bool) -> None:
    """A recognisable, identical-looking object of `label` inside `box`."""
    x1, y1, x2, y2 = box
    w, h = x2 - x1, y2 - y1
    dim = 0.55 if night else 1.0

    def c(r: int, g: int, b: int) -> tuple[int, int, int]:
        return (int(r * dim), int(g * dim), int(b * dim))

    def wheel(cx: float) -> None:
        r = h * 0.12
        draw.ellipse((cx - r, y2 - 2 * r, cx + r, y2), fill=(10, 10, 10))

    if label == "truck":
        draw.rectangle((x1, y1, x1 + w * 0.72, y2 - h * 0.15), fill=c(225, 225, 225), outline=(0, 0, 0))
        draw.rectangle((x1 + w * 0.74, y1 + h * 0.35, x2, y2 - h * 0.15), fill=c(30, 80, 170), outline=(0, 0, 0))
        for f in (0.15, 0.55, 0.87):
            wheel(x1 + w * f)
    elif label == "van":
        draw.rounded_rectangle((x1, y1, x2, y2 - h * 0.15), radius=int(h * 0.15), fill=c(240, 240, 240), outline=(0, 0, 0))
        draw.rectangle((x2 - w * 0.3, y1 + h * 0.12, x2 - w * 0.05, y1 + h * 0.4), fill=c(90, 140, 190))
        for f in (0.2, 0.8):
            wheel(x1 + w * f)
    elif label == "car":
        draw.rectangle((x1, y1 + h * 0.35, x2, y2 - h * 0.15), fill=c(200, 30, 30), outline=(0, 0, 0))
        draw.polygon([(x1 + w * 0.2, y1 + h * 0.35), (x1 + w * 0.3, y1), (x1 + w * 0.7, y1), (x1 + w * 0.8, y1 + h * 0.35)],
                     fill=c(200, 30, 30), outline=(0, 0, 0))
        for f in (0.2, 0.8):
            wheel(x1 + w * f)
    elif label == "person":
        draw.ellipse((x1 + w * 0.25, y1, x2 - w * 0.25, y1 + h * 0.2), fill=c(230, 190, 150))
        draw.rectangle((x1, y1 + h * 0.2, x2, y1 + h * 0.6), fill=c(255, 140, 0))
        draw.rectangle((x1 + w * 0.1, y1 + h * 0.6, x2 - w * 0.1, y2), fill=c(30, 30, 90))
    elif label == "forklift":
        draw.rectangle((x1, y1 + h * 0.4, x1 + w * 0.7, y2 - h * 0.15), fill=c(240, 200, 0), outline=(0, 0, 0))
        draw.rectangle((x1 + w * 0.72, y1, x1 + w * 0.8, y2 - h * 0.1), fill=(60, 60, 60))
        draw.rectangle((x1 + w * 0.8, y2 - h * 0.14, x2, y2 - h * 0.1), fill=(60, 60, 60))
        for f in (0.15, 0.55):
            wheel(x1 + w * f)
    else:
        draw.rectangle(box, outline=c(255, 255, 255))
