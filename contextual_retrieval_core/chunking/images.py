"""`ImageData`: an encoded image (its bytes, media type and size), read and checked once.

Frames and crops carry their pixels as `ImageData`. `read_image` opens a path or bytes with Pillow
(the ``images`` extra), so an unreadable file fails with `UnreadableImageError` naming it before
any context is generated. Formats the Messages API does not take (anything but JPEG, PNG, GIF and
WebP) are re-encoded as PNG when read; `cut` returns a box of an image as a new PNG (`cut_all`, several
boxes of one image, decoding it once).

Example:
    >>> import io
    >>> from PIL import Image
    >>> buffer = io.BytesIO()
    >>> Image.new("RGB", (64, 48), "navy").save(buffer, format="BMP")
    >>> image = read_image(buffer.getvalue(), name="frame.bmp")
    >>> image.media_type, image.width, image.height
    ('image/png', 64, 48)
    >>> cut(image, (8, 8, 40, 24)).size
    (32, 16)
    >>> [piece.size for piece in cut_all(image, [(0, 0, 8, 8), (8, 8, 40, 24)])]
    [(8, 8), (32, 16)]
    >>> cut_all(image, [(8, 8, 40, 24)])[0].data == cut(image, (8, 8, 40, 24)).data
    True
    >>> read_image(b"not an image", name="crop_1.jpg")
    Traceback (most recent call last):
    ...
    contextual_retrieval_core.chunking.images.UnreadableImageError: cannot read image crop_1.jpg (not a picture Pillow can open); pass a JPEG, PNG, GIF or WebP file
"""

from __future__ import annotations

import hashlib
import io
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Union

from contextual_retrieval_core._sdk import import_sdk
from contextual_retrieval_core.errors import ContextualRetrievalError, InputTypeError

__all__ = ["ImageData", "UnreadableImageError", "read_image", "cut", "cut_all", "scaled_to_fit", "API_MEDIA_TYPES", "ImageSource"]

#: what the Messages API accepts in an image block
API_MEDIA_TYPES = {"JPEG": "image/jpeg", "PNG": "image/png", "GIF": "image/gif", "WEBP": "image/webp"}

ImageSource = Union[str, "os.PathLike[str]", bytes, bytearray, "ImageData"]


class UnreadableImageError(ContextualRetrievalError, ValueError):
    """An image file or bytes that Pillow cannot open (missing, truncated, not an image)."""


@dataclass(frozen=True)
class ImageData:
    """An encoded image.

    Attributes:
        data: the encoded bytes (JPEG, PNG, GIF or WebP).
        media_type: e.g. "image/png".
        width, height: its size in pixels.
        path: the file it was read from (None for bytes).
    """

    data: bytes = field(repr=False)
    media_type: str
    width: int
    height: int
    path: str | None = None

    @property
    def size(self) -> tuple[int, int]:
        return (self.width, self.height)

    @property
    def sha256(self) -> str:
        """sha256 hex of the encoded bytes (what identifies the image in the context store)."""
        return hashlib.sha256(self.data).hexdigest()


def _pil() -> Any:
    return import_sdk("PIL.Image", "images", "Pillow")


def read_image(source: ImageSource, *, name: str | None = None) -> ImageData:
    """`source` (a path, encoded bytes or an `ImageData`) as a checked `ImageData`.

    Raises `UnreadableImageError` naming `name` (or the path) when the file is missing or is not
    an image Pillow can decode.
    """
    if isinstance(source, ImageData):
        return source
    pil = _pil()
    path: str | None = None
    if isinstance(source, (bytes, bytearray)):
        data = bytes(source)
    elif isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        try:
            with open(path, "rb") as handle:
                data = handle.read()
        except OSError as exc:
            raise UnreadableImageError(
                f"cannot read image {name or path} ({exc.strerror or exc}); check the path"
            ) from None
    else:
        raise InputTypeError(f"an image is a path or bytes, got {type(source).__name__}")
    label = name or path or "bytes"
    try:
        with pil.open(io.BytesIO(data)) as img:
            img.load()  # decodes every pixel: a truncated file fails here, not mid-run
            fmt = (img.format or "").upper()
            width, height = img.size
            if fmt not in API_MEDIA_TYPES:
                out = io.BytesIO()
                img.convert("RGBA" if "A" in img.getbands() else "RGB").save(out, format="PNG")
                data, fmt = out.getvalue(), "PNG"
    except Exception as exc:
        reason = "not a picture Pillow can open" if isinstance(exc, pil.UnidentifiedImageError) else str(exc)
        raise UnreadableImageError(
            f"cannot read image {label} ({reason}); pass a JPEG, PNG, GIF or WebP file"
        ) from None
    if width < 1 or height < 1:
        raise UnreadableImageError(f"image {label} is empty ({width}x{height} pixels)")
    return ImageData(data, API_MEDIA_TYPES[fmt], width, height, path)


def cut(image: ImageData, box: tuple[int, int, int, int]) -> ImageData:
    """The pixels of `image` inside `box` (x1, y1, x2, y2 in pixels, x2 / y2 exclusive), as PNG."""
    return cut_all(image, [box])[0]


def cut_all(image: ImageData, boxes: Sequence[tuple[int, int, int, int]]) -> list[ImageData]:
    """`cut` for each of `boxes`, decoding `image` once (a frame's detections are cut together)."""
    if not boxes:
        return []
    pil = _pil()
    pieces = []
    with pil.open(io.BytesIO(image.data)) as img:
        img.load()
        for box in boxes:
            piece = img.crop(box)
            if piece.mode not in ("RGB", "RGBA", "L"):
                piece = piece.convert("RGBA" if "A" in piece.getbands() else "RGB")
            out = io.BytesIO()
            piece.save(out, format="PNG")
            pieces.append(ImageData(out.getvalue(), "image/png", piece.width, piece.height))
    return pieces


def scaled_to_fit(image: ImageData, long_edge: int) -> ImageData:
    """`image` scaled down (aspect kept) so its longer side is at most `long_edge` pixels; the
    image itself when it already fits. Re-encoded as JPEG for photos, PNG when it has alpha."""
    if max(image.width, image.height) <= long_edge:
        return image
    pil = _pil()
    ratio = long_edge / max(image.width, image.height)
    size = (max(1, round(image.width * ratio)), max(1, round(image.height * ratio)))
    with pil.open(io.BytesIO(image.data)) as img:
        small = img.resize(size)
        out = io.BytesIO()
        if "A" in small.getbands():
            small.save(out, format="PNG")
            media = "image/png"
        else:
            small.convert("RGB").save(out, format="JPEG", quality=90)
            media = "image/jpeg"
    return ImageData(out.getvalue(), media, size[0], size[1], image.path)
