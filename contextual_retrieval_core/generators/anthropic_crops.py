"""`AnthropicCropContextGenerator`: a crop's context from Claude, which sees the frame and the crop.

The frame is the cached "document": its image and its metadata text (camera, time, scene, size and
one line per object) go first, the text block marked ``cache_control``; the crop's image and its
line follow, uncached. Every crop of a frame after the first then reads the frame from the prompt
cache, exactly as a text document's chunks do, and the `Contextualizer` sends a frame's first crop
alone so the frame is written to the cache once. Everything else (clients, the SDK's retries, the
spend-limit stop, usage, Message Batches) is `AnthropicContextGenerator`'s.

Images go as base64 image blocks. One whose longer side exceeds `max_image_edge` (default 1568,
where the API would scale it down anyway) is scaled down first. A frame's image costs about
``width * height / 750`` tokens (`image_tokens`). Whether it reaches the model's cache minimum is
settled as for text: Claude Haiku 4.5 caches prefixes of 4096 tokens and more, so a single frame
(at most about 1,600 tokens) is not cached with it; Sonnet 4 / 4.5 (1024) caches frames from about
0.8 megapixels.

Grouped requests (one request for all of a document's chunks) are text only: crops are always
situated one request each.

Example:
    >>> image_tokens(1280, 720), image_tokens(4000, 3000)
    (1229, 1534)
    >>> import anthropic
    >>> gen = AnthropicCropContextGenerator("claude-sonnet-4-5", client=anthropic.Anthropic(api_key="sk-..."))  # doctest: +SKIP
"""

from __future__ import annotations

import base64
import math
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Literal

from contextual_retrieval_core.chunking.frames import Crop, Frame, crop_of, frame_of, prompt_view
from contextual_retrieval_core.chunking.images import ImageData, cut, scaled_to_fit
from contextual_retrieval_core.errors import InputError
from contextual_retrieval_core.generators.anthropic import AnthropicContextGenerator, _Request
from contextual_retrieval_core.generators.base import ContextGenerator, TokenUsage
from contextual_retrieval_core.generators.crop_structural import StructuralCropContextGenerator
from contextual_retrieval_core.generators.prompts import ContextPrompt
from contextual_retrieval_core.generators.usage import estimate_tokens
from contextual_retrieval_core.types import Chunk, Document

__all__ = ["AnthropicCropContextGenerator", "CROP_PROMPT", "image_tokens"]

#: The situating prompt for crops: the cookbook's, with the frame as the document and the crop as
#: the chunk (each image goes just before its text block).
CROP_PROMPT = ContextPrompt(
    document_template="<frame>\n{doc_content}\n</frame>",
    chunk_template=(
        "Here is the crop we want to situate within the whole frame (its image is just above)\n"
        "<crop>\n"
        "{chunk_content}\n"
        "</crop>\n"
        "Please give a short succinct context to situate this crop within the overall frame for the "
        "purposes of improving search retrieval of the crop: what it shows, where and when, and "
        "what is around it.\n"
        "Answer only with the succinct context and nothing else."
    ),
    name="crop",
)

_MAX_PIXELS = 1_150_000  # the API scales larger images down to about this many pixels
_ENCODED_CACHE = 32


def image_tokens(width: int, height: int, max_edge: int = 1568) -> int:
    """The tokens an image of `width` x `height` pixels costs: ``width * height / 750`` after the
    API scales it to at most `max_edge` pixels a side and about 1.15 megapixels."""
    scale = min(1.0, max_edge / max(width, height), math.sqrt(_MAX_PIXELS / (width * height)))
    return math.ceil(round(width * scale) * round(height * scale) / 750)


class AnthropicCropContextGenerator(AnthropicContextGenerator):
    """Situates crops within their frames with Claude; the frame is prompt-cached.

    Documents and chunks come from `crop_chunks`. Arguments are `AnthropicContextGenerator`'s
    (the prompt defaults to `CROP_PROMPT`), plus:

    Args:
        max_image_edge: images whose longer side exceeds this many pixels are scaled down before
            they are sent (default 1568).

    Under ``Contextualizer(structural_header=True)`` (the default) each context follows the
    crop's structural context (`StructuralCropContextGenerator`).

    Example:
        >>> import anthropic
        >>> gen = AnthropicCropContextGenerator(client=anthropic.Anthropic(api_key="sk-..."))
        >>> gen.name, gen.prompt.name
        ('anthropic-crop', 'crop')
    """

    name = "anthropic-crop"
    label = "anthropic (crops)"

    def __init__(
        self,
        model: str = "claude-haiku-4-5",
        *,
        prompt: ContextPrompt = CROP_PROMPT,
        max_image_edge: int = 1568,
        **kwargs: Any,
    ) -> None:
        super().__init__(model, prompt=prompt, **kwargs)
        if not isinstance(max_image_edge, int) or isinstance(max_image_edge, bool) or max_image_edge < 8:
            raise InputError(f"max_image_edge must be a whole number of pixels, at least 8; got {max_image_edge!r}")
        self.max_image_edge = max_image_edge
        self._blocks: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._blocks_lock = threading.Lock()
        self._header = StructuralCropContextGenerator()

    def structural_header_generator(self) -> ContextGenerator | None:
        """The crop's structural context goes before Claude's (`StructuralHeaderSource`)."""
        return self._header

    # -- sizes --------------------------------------------------------------------------------

    def document_tokens(self, document: Document, *, exact: bool = False) -> int:
        """Tokens of the cached frame blocks (image and text): an estimate, or with `exact=True`
        the count_tokens endpoint's figure (the estimate where it is missing)."""
        frame = frame_of(document)
        text = self.prompt.render_document(prompt_view(document.text))
        image = frame.image
        estimate = estimate_tokens(text) + (image_tokens(image.width, image.height, self.max_image_edge) if image else 0)
        if not exact:
            return estimate
        try:
            client = self._client or (self._sync() if self._own_clients else None)
            if client is None:
                return estimate
            blocks = self._frame_blocks(frame, document)
            result = client.messages.count_tokens(model=self.model, messages=[{"role": "user", "content": blocks}])
            return int(result.input_tokens)
        except Exception:  # count_tokens is an optimisation: Bedrock / Vertex may lack it
            return estimate

    # -- requests -------------------------------------------------------------------------------

    def build_request(
        self, document: Document, chunk: Chunk, *, cache_ttl: Literal["5m", "1h"] | None = None
    ) -> _Request:
        """The Messages API parameters for one crop: frame image and text (cached), crop image and text."""
        frame, crop = frame_of(document), crop_of(chunk)
        blocks = self._frame_blocks(frame, document)
        cached = self.cacheable(document) is not False
        if cached:
            blocks[-1]["cache_control"] = self._cache_control(cache_ttl)
        crop_image = self._crop_image(frame, crop)
        if crop_image is not None:
            blocks.append(self._image_block(crop_image))
        blocks.append({"type": "text", "text": self.prompt.render_chunk(prompt_view(crop.line()))})
        params = {"model": self.model, "max_tokens": self.max_tokens, "messages": [{"role": "user", "content": blocks}]}
        return _Request(params, False, cached)

    def build_group_request(self, document: Document, chunks: Sequence[Chunk]) -> tuple[dict[str, Any], list[str]]:
        """No grouped request for crops: nothing is marked, so every crop gets its own request."""
        return {}, []

    async def agenerate_group(self, document: Document, chunks: Sequence[Chunk]) -> tuple[dict[str, str], TokenUsage]:
        return {}, TokenUsage()

    def generate_group(self, document: Document, chunks: Sequence[Chunk]) -> tuple[dict[str, str], TokenUsage]:
        return {}, TokenUsage()

    def _frame_blocks(self, frame: Frame, document: Document) -> list[dict[str, Any]]:
        blocks: list[dict[str, Any]] = []
        if frame.image is not None:
            blocks.append(self._image_block(frame.image))
        blocks.append({"type": "text", "text": self.prompt.render_document(prompt_view(document.text))})
        return blocks

    @staticmethod
    def _crop_image(frame: Frame, crop: Crop) -> ImageData | None:
        if crop.image is not None:
            return crop.image
        if frame.image is not None:
            return cut(frame.image, crop.detection.pixel_box)
        return None

    def _image(self, image: ImageData) -> ImageData:
        return scaled_to_fit(image, self.max_image_edge)

    def _image_block(self, image: ImageData) -> dict[str, Any]:
        """A base64 image block; a frame's is encoded once and reused for its other crops."""
        key = image.sha256
        with self._blocks_lock:
            block = self._blocks.get(key)
            if block is not None:
                self._blocks.move_to_end(key)
                return dict(block)
        sent = self._image(image)
        block = {
            "type": "image",
            "source": {"type": "base64", "media_type": sent.media_type, "data": base64.b64encode(sent.data).decode("ascii")},
        }
        with self._blocks_lock:
            self._blocks[key] = block
            while len(self._blocks) > _ENCODED_CACHE:
                self._blocks.popitem(last=False)
        return dict(block)
