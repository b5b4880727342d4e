"""Image crops as chunks of their frame, in the core: detections in the common detector shapes,
frames and crops as documents and chunks, the structural crop context, and the Claude crop
context on the loopback Anthropic server (the frame cached: one write per frame, reads for its
other crops). Bad input is refused before anything is generated; a failure mid-run keeps what
was stored."""

from __future__ import annotations

import io

import anthropic
import pytest
from PIL import Image, ImageDraw

from contextual_retrieval_core.chunking.detections import DetectionError, parse_detections
from contextual_retrieval_core.chunking.frames import (
    CROP_KEY,
    CropInput,
    FrameInput,
    FrameInputError,
    crop_chunks,
    crop_metadata,
)
from contextual_retrieval_core.chunking.images import read_image
from contextual_retrieval_core.contextualize.config import ContextualizeConfig
from contextual_retrieval_core.contextualize.contextualizer import ContextualizationError, Contextualizer
from contextual_retrieval_core.generators.anthropic_crops import AnthropicCropContextGenerator, image_tokens
from contextual_retrieval_core.generators.crop_structural import StructuralCropContextGenerator
from contextual_retrieval_core.store.context_store import ContextStore
from tests.fakes.anthropic_server import FakeAnthropicServer

SONNET = "claude-sonnet-4-5"  # 1024-token cache minimum: a 1024x768 frame (1049 tokens) is cached
HAIKU = "claude-haiku-4-5"  # 4096: no single frame reaches it


def png(size=(1024, 768), colour="steelblue", boxes=()) -> bytes:
    img = Image.new("RGB", size, colour)
    draw = ImageDraw.Draw(img)
    for i, box in enumerate(boxes):
        draw.rectangle(box, fill=(40 * i % 255, 200, 90))
    out = io.BytesIO()
    img.save(out, format="PNG")
    return out.getvalue()


DETECTIONS = [
    {"box": [40, 300, 420, 700], "label": "truck", "confidence": 0.93, "track_id": 3},
    {"box": [600, 320, 680, 640], "label": "person", "confidence": 0.88},
    {"box": [760, 400, 1000, 700], "label": "car", "confidence": 0.9},
]


def frames(n=3, **meta):
    out = []
    for i in range(n):
        boxes = [tuple(d["box"]) for d in DETECTIONS]
        metadata = {"camera": f"cam-{i}", "timestamp": f"2026-03-0{i + 1}T2{i}:15:00", "scene": "night shift",
                    "detections": DETECTIONS, **meta}
        out.append(FrameInput(f"frame_{i}.png", png(colour=("steelblue", "olive", "maroon")[i % 3], boxes=boxes), metadata))
    return out


# -- detections -----------------------------------------------------------------------------------


def test_detections_in_every_common_shape_end_as_the_same_pixel_corners():
    want = (64.0, 48.0, 320.0, 240.0)
    shapes = [
        ([{"box": [64, 48, 320, 240], "label": "truck"}], {}),
        ([{"bbox": [64, 48, 256, 192], "name": "truck"}], {"box_format": "xywh"}),
        ([{"xyxy": [0.1, 0.1, 0.5, 0.5], "class_name": "truck"}], {}),  # normalised, guessed
        ([{"box": [0.3, 0.3, 0.4, 0.4], "class": 2}], {"box_format": "cxcywh", "class_names": ["car", "van", "truck"]}),
        ([{"box": {"x1": 64, "y1": 48, "x2": 320, "y2": 240}, "name": "truck", "class": 7}], {}),  # Ultralytics summary()
        ({"boxes": [[64, 48, 320, 240]], "labels": ["truck"], "scores": [0.5]}, {}),  # columns
        ({"xyxy": [[64, 48, 320, 240]], "class_ids": [0], "tracker_ids": [4.0]}, {"class_names": {0: "truck"}}),
    ]
    for raw, kw in shapes:
        (det,) = parse_detections(raw, width=640, height=480, **kw)
        assert det.label == "truck" and det.box == pytest.approx(want), (raw, det)
    (tracked,) = parse_detections({"xyxy": [[64, 48, 320, 240]], "class_ids": [0], "tracker_ids": [4.0]},
                                  width=640, height=480, class_names={0: "truck"})
    assert tracked.track_id == "4"
    # normalised given explicitly: a pixel-looking 1x1 box is read as the whole frame
    (whole,) = parse_detections([{"box": [0, 0, 1, 1], "label": "scene"}], width=640, height=480, normalized=True)
    assert whole.box == (0, 0, 640, 480)


def test_a_box_sticking_out_is_cut_at_the_frame_edge_and_one_outside_or_empty_is_refused():
    (det,) = parse_detections([{"box": [-20, 400, 700, 600], "label": "truck"}], width=640, height=480)
    assert det.box == (0.0, 400.0, 640.0, 480.0)
    with pytest.raises(DetectionError, match=r"frame f, detection 0 \(car\): box .* lies outside the 640x480 frame; check box_format"):
        parse_detections([{"box": [650, 10, 700, 90], "label": "car"}], width=640, height=480, frame="f")
    with pytest.raises(DetectionError, match="has no area once read as 'xyxy'.*'xywh'|has no area"):
        parse_detections([{"box": [100, 100, 50, 50], "label": "car"}], width=640, height=480)
    with pytest.raises(DetectionError, match="has no class name"):
        parse_detections([{"box": [1, 2, 3, 4]}], width=640, height=480)
    with pytest.raises(DetectionError, match="class id 3 but no name; pass class_names="):
        parse_detections([{"box": [1, 2, 3, 4], "class_id": 3}], width=640, height=480)
    with pytest.raises(DetectionError, match="2 boxes but 1 values for label"):
        parse_detections({"boxes": [[1, 2, 3, 4], [5, 6, 7, 8]], "labels": ["a"]}, width=640, height=480)


# -- frames and crops -----------------------------------------------------------------------------


def test_frames_become_documents_and_their_crops_chunks_cut_from_the_pixels():
    batch = crop_chunks(frames(2))
    assert [d.id for d in batch.documents] == ["frame_0.png", "frame_1.png"]
    assert [c.text for c in batch.chunks[:3]] == ["crop_1: truck", "crop_2: person", "crop_3: car"]
    doc, chunk = batch.documents[0], batch.chunks[0]
    assert chunk.text in doc.text and "camera: cam-0" in doc.text and "image sha256: " in doc.text
    crop = chunk.metadata[CROP_KEY]
    assert crop.image.size == (380, 400) and crop.image.media_type == "image/png"
    # the crop's pixels are the frame's inside its box
    frame_img = Image.open(io.BytesIO(frames(1)[0].image)).convert("RGB")
    assert Image.open(io.BytesIO(crop.image.data)).convert("RGB").tobytes() == frame_img.crop((40, 300, 420, 700)).tobytes()
    # ids are stable, and a changed image re-keys the frame's text
    assert [c.id for c in crop_chunks(frames(2)).chunks] == [c.id for c in batch.chunks]
    other = crop_chunks([FrameInput("frame_0.png", png(colour="black"), frames(1)[0].metadata)])
    assert other.documents[0].text != doc.text
    meta = crop_metadata(crop, doc.metadata["frame"])
    assert meta == {"frame_id": "frame_0.png", "camera": "cam-0", "timestamp": "2026-03-01 20:15:00",
                    "scene": "night shift", "crop_name": "crop_1", "label": "truck", "box": "40,300,420,700",
                    "confidence": 0.93, "track_id": "3"}


def test_crops_given_already_cut_keep_their_names_and_images(tmp_path):
    frame_path = tmp_path / "gate.png"
    frame_path.write_bytes(png(size=(640, 480)))
    crop_path = tmp_path / "crop_7.jpg"
    Image.new("RGB", (50, 60), "red").save(crop_path, format="JPEG")
    batch = crop_chunks(
        [FrameInput("gate", str(frame_path), {"camera": "north-gate"})],
        [CropInput("gate", str(crop_path), metadata={"box": [10, 10, 60, 70], "label": "van", "owner": "ops"}),
         CropInput("gate", None, "crop_8.jpg", {"bbox": [100, 100, 150, 200], "name": "person"})],
    )
    assert [c.text for c in batch.chunks] == ["crop_7.jpg: van", "crop_8.jpg: person"]
    crop = batch.chunks[0].metadata[CROP_KEY]
    assert crop.given and crop.image.path == str(crop_path) and crop.image.media_type == "image/jpeg"
    assert "image sha256 " in batch.documents[0].text  # a given crop's pixels key the frame too
    assert crop_metadata(crop, batch.documents[0].metadata["frame"])["owner"] == "ops"
    assert crop_metadata(crop, batch.documents[0].metadata["frame"])["frame_path"] == str(frame_path)


def test_bad_frames_are_refused_together_before_anything_is_generated(tmp_path):
    broken = tmp_path / "broken.png"
    broken.write_bytes(png()[:200])  # truncated
    good = frames(1)[0]
    specs = [
        good,
        FrameInput("broken.png", str(broken), {"detections": []}),
        FrameInput("missing.png", str(tmp_path / "missing.png"), {"detections": []}),
        FrameInput("outside.png", png(size=(320, 240)), {"detections": [{"box": [400, 10, 500, 90], "label": "car"}]}),
        FrameInput("undetected.png", png(size=(320, 240)), {"camera": "x"}),
        FrameInput("sizeless", None, {"detections": []}),
    ]
    with pytest.raises(FrameInputError) as info:
        crop_chunks(specs, [CropInput("nowhere", None, "crop_9.png", {"box": [1, 1, 5, 5], "label": "car"})])
    problems = info.value.problems
    assert len(problems) == 6, problems
    text = str(info.value)
    assert "6 problem(s) with the frames; nothing was generated" in text
    assert "cannot read image of frame broken.png" in text and "pass a JPEG, PNG, GIF or WebP file" in text
    assert "cannot read image of frame missing.png" in text and "check the path" in text
    assert "frame outside.png, detection 0 (car)" in text and "lies outside the 320x240 frame" in text
    assert "frame undetected.png has no metadata['detections'] and no crops" in text
    assert "frame sizeless has no image and no size" in text
    assert "crop crop_9.png names frame 'nowhere'" in text
    with pytest.raises(FrameInputError, match="two crops named crop_1.png"):
        crop_chunks([FrameInput("f", None, {"width": 10, "height": 10})],
                    [CropInput("f", None, "crop_1.png", {"box": [1, 1, 5, 5], "label": "car"})] * 2)


def test_a_frame_with_no_objects_has_no_crops_and_is_listed():
    batch = crop_chunks([FrameInput("empty.png", png(size=(64, 48)), {"detections": []}), frames(1)[0]])
    assert batch.empty_frames == ["empty.png"] and [d.id for d in batch.documents] == ["frame_0.png"]


# -- the structural crop context -------------------------------------------------------------------


def test_structural_crop_contexts_name_camera_time_scene_position_and_neighbours_through_the_store(tmp_path):
    batch = crop_chunks(frames(1))
    store = ContextStore(tmp_path / "contexts.sqlite3")
    result = Contextualizer(StructuralCropContextGenerator(), store, config=ContextualizeConfig(show_progress=False)).contextualize(batch.documents, batch.chunks)
    contexts = [c.context for c in result.chunks]
    assert contexts[0] == (
        "A truck (track 3) seen by camera cam-0 on 2026-03-01 at 20:15 (evening), scene: night shift; on the left "
        "of the frame; also in the frame: a person to its right, a car to its right."
    )
    assert contexts[1].startswith("A person seen by camera cam-0") and "a truck to its left" in contexts[1]
    assert result.chunks[0].indexed_text == contexts[0] + "\n\ncrop_1: truck"
    assert result.report.generated == 3
    again = Contextualizer(StructuralCropContextGenerator(), store, config=ContextualizeConfig(show_progress=False)).contextualize(batch.documents, batch.chunks)
    assert again.report.generated == 0 and [c.context for c in again.chunks] == contexts


def test_a_frame_without_metadata_is_named_by_its_id():
    batch = crop_chunks([FrameInput("cam/0042.png", png(size=(300, 300)), {"detections": [{"box": [100, 100, 200, 200], "label": "dog"}]})])
    context = StructuralCropContextGenerator().generate(batch.documents[0], batch.chunks[0]).context
    assert context == "A dog in frame cam/0042.png; in the centre of the frame."


def test_crop_generators_refuse_text_chunks_naming_the_fix():
    from contextual_retrieval_core.types import Chunk, Document

    with pytest.raises(TypeError, match=r"not a frame.*build documents and chunks with crop_chunks"):
        StructuralCropContextGenerator().generate(Document("d", "text"), Chunk("c", "d", "text"))


# -- the Claude crop context -------------------------------------------------------------------------


@pytest.fixture()
def server():
    with FakeAnthropicServer(latency_s=0.01) as srv:
        yield srv


def claude(server, model=SONNET, **kw):
    client = anthropic.Anthropic(api_key=server.api_key, base_url=server.url, max_retries=0)
    return AnthropicCropContextGenerator(model, client=client, **kw)


def test_claude_sees_frame_and_crop_and_the_frame_is_written_to_the_cache_once_per_frame(server, tmp_path):
    batch = crop_chunks(frames(3))
    store = ContextStore(tmp_path / "contexts.sqlite3")
    result = Contextualizer(claude(server), store, config=ContextualizeConfig(concurrency=4, show_progress=False)).contextualize(batch.documents, batch.chunks)
    requests = server.requests_to("/v1/messages")
    assert len(requests) == 9
    content = requests[0].body["messages"][0]["content"]
    assert [b["type"] for b in content] == ["image", "text", "image", "text"]
    assert content[1]["cache_control"] == {"type": "ephemeral"} and "cache_control" not in content[3]
    assert content[1]["text"].startswith("<frame>\nframe: frame_") and "sha256" not in content[1]["text"]
    assert "<crop>\ncrop_" in content[3]["text"]
    # one cache write per frame, a read for each of its other crops, counted from usage
    frame_tokens = image_tokens(1024, 768)
    writes = [r.usage["cache_creation_input_tokens"] for r in requests if r.usage["cache_creation_input_tokens"]]
    reads = [r.usage["cache_read_input_tokens"] for r in requests if r.usage["cache_read_input_tokens"]]
    assert len(writes) == 3 and len(reads) == 6 and all(w > frame_tokens for w in writes)
    assert server.stats()["cache_writes"] == 3
    report = result.report
    assert report.cacheable_documents == 3 and report.cache_writes == 3 and report.cache_misses == 0
    assert report.usage.cache_read_tokens == sum(reads) == report.ideal_cache_read_tokens
    # each context: the crop's structural context, then Claude's
    first = result.chunks[0].context.split("\n")
    assert first[0].startswith("A truck (track 3) seen by camera cam-0") and first[1].startswith("This chunk is from")
    # a second run reads every context from the store
    server.reset()
    again = Contextualizer(claude(server), store, config=ContextualizeConfig(show_progress=False)).contextualize(batch.documents, batch.chunks)
    assert again.report.generated == 0 and not server.requests_to("/v1/messages")


def test_with_haiku_4_5_a_frame_is_below_the_cache_minimum_and_no_breakpoint_is_sent(server):
    batch = crop_chunks(frames(1))
    gen = claude(server, HAIKU)
    assert gen.cacheable(batch.documents[0]) is False
    Contextualizer(gen, ":memory:", config=ContextualizeConfig(show_progress=False)).contextualize(batch.documents, batch.chunks)
    bodies = [r.body for r in server.requests_to("/v1/messages")]
    assert len(bodies) == 3 and not any("cache_control" in b for body in bodies for b in body["messages"][0]["content"])


def test_large_frames_are_scaled_down_before_they_are_sent(server):
    big = FrameInput("big.png", png(size=(3200, 2400)), {"detections": [{"box": [100, 100, 900, 900], "label": "truck"}]})
    batch = crop_chunks([big])
    Contextualizer(claude(server, max_image_edge=800), ":memory:", config=ContextualizeConfig(show_progress=False)).contextualize(batch.documents, batch.chunks)
    (request,) = server.requests_to("/v1/messages")
    frame_block, crop_block = request.body["messages"][0]["content"][0], request.body["messages"][0]["content"][2]
    import base64

    assert Image.open(io.BytesIO(base64.b64decode(frame_block["source"]["data"]))).size == (800, 600)
    assert Image.open(io.BytesIO(base64.b64decode(crop_block["source"]["data"]))).size == (800, 800)


def test_a_failure_mid_run_keeps_every_context_already_stored_and_the_rerun_pays_only_the_rest(server, tmp_path):
    batch = crop_chunks(frames(3))
    store = ContextStore(tmp_path / "contexts.sqlite3")
    server.fail_next(400, times=1, body={"type": "error", "error": {"type": "invalid_request_error", "message": "Could not process image"}})
    with pytest.raises(ContextualizationError) as info:
        Contextualizer(claude(server), store, config=ContextualizeConfig(concurrency=1, show_progress=False)).contextualize(batch.documents, batch.chunks)
    assert len(info.value.failures) >= 1
    stored = len(batch.chunks) - len(info.value.failures)
    assert stored >= 1
    server.reset()
    result = Contextualizer(claude(server), store, config=ContextualizeConfig(show_progress=False)).contextualize(batch.documents, batch.chunks)
    assert result.report.store_hits == stored and result.report.generated == len(info.value.failures)
    assert len(server.requests_to("/v1/messages")) == len(info.value.failures)


def test_the_fake_server_refuses_bad_image_blocks(server):
    client = anthropic.Anthropic(api_key=server.api_key, base_url=server.url, max_retries=0)

    def send(source):
        return client.messages.create(model=SONNET, max_tokens=50, messages=[{"role": "user", "content": [
            {"type": "image", "source": source}, {"type": "text", "text": "what is this?"}]}])

    import base64

    good = base64.b64encode(png(size=(100, 100))).decode()
    msg = send({"type": "base64", "media_type": "image/png", "data": good})
    assert msg.usage.input_tokens == image_tokens(100, 100) + 4
    for source, words in (
        ({"type": "base64", "media_type": "image/jpeg", "data": good}, "Could not process image"),
        ({"type": "base64", "media_type": "image/bmp", "data": good}, "media_type"),
        ({"type": "base64", "media_type": "image/png", "data": "***"}, "invalid base64"),
        ({"type": "url", "url": "https://example.com/a.png"}, "cannot be fetched"),
    ):
        with pytest.raises(anthropic.BadRequestError, match=words):
            send(source)


def test_read_image_names_an_unreadable_file(tmp_path):
    bad = tmp_path / "crop_1.jpg"
    bad.write_bytes(b"\xff\xd8 not really a jpeg")
    with pytest.raises(ValueError, match="cannot read image .*crop_1.jpg"):
        read_image(str(bad))


def test_message_batches_carry_the_images_and_read_each_frame_from_the_cache(server, tmp_path):
    batch = crop_chunks(frames(2))
    result = Contextualizer(claude(server), tmp_path / "contexts.sqlite3", config=ContextualizeConfig(mode="batch", batch_poll_interval=0.02, show_progress=False)).contextualize(batch.documents, batch.chunks)
    assert all(c.context for c in result.chunks) and result.report.generated == 6
    requests = [q["params"] for r in server.requests_to("/v1/messages/batches") if r.method == "POST" for q in r.body["requests"]]
    assert len(requests) == 6 and all(p["messages"][0]["content"][0]["type"] == "image" for p in requests)
    assert requests[0]["messages"][0]["content"][1]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert result.report.cache_writes == 2 and result.report.usage.cache_read_tokens > 0


def test_grouped_mode_sends_crops_one_request_each(server):
    batch = crop_chunks(frames(1))
    result = Contextualizer(claude(server), ":memory:", config=ContextualizeConfig(grouped=True, show_progress=False)).contextualize(batch.documents, batch.chunks)
    assert all(c.context for c in result.chunks) and len(server.requests_to("/v1/messages")) == 3


def test_crops_without_pixels_are_situated_from_the_frame_text():
    batch = crop_chunks([FrameInput("gate", None, {"width": 640, "height": 480, "camera": "north-gate"})],
                        [CropInput("gate", None, "crop_1.png", {"box": [10, 10, 100, 100], "label": "van"})])
    with FakeAnthropicServer() as srv:
        gen = claude(srv)
        Contextualizer(gen, ":memory:", config=ContextualizeConfig(show_progress=False)).contextualize(batch.documents, batch.chunks)
        (request,) = srv.requests_to("/v1/messages")
    assert [b["type"] for b in request.body["messages"][0]["content"]] == ["text", "text"]
    # the crop generators declare their structural header (the index manifest reads it too)
    from contextual_retrieval_core.contextualize.contextualizer import is_structural_generator

    assert is_structural_generator(StructuralCropContextGenerator()) and not is_structural_generator(gen)
    assert isinstance(gen.structural_header_generator(), StructuralCropContextGenerator)
