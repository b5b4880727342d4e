"""Image crops through LlamaIndex's `ContextualNodeParser`: frames as `ImageDocument`s (cut into
crops by their detections) or crops already cut as `ImageNode`s, each coming back as an
`ImageNode` whose EMBED text is its context then its own text, its image kept."""

from __future__ import annotations

import base64
import io

import anthropic
import pytest
from llama_index.core import Document
from llama_index.core.schema import ImageDocument, ImageNode, MetadataMode, NodeRelationship, RelatedNodeInfo
from PIL import Image

from contextual_retrieval_core.app.demo_frames import write_demo_frames
from contextual_retrieval_core.chunking.frames import FrameInputError
from contextual_retrieval_core.generators.anthropic_crops import AnthropicCropContextGenerator
from contextual_retrieval_core.store.context_store import ContextStore
from contextual_retrieval_llamaindex import ContextualNodeParser
from tests.fakes.anthropic_server import FakeAnthropicServer


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    return write_demo_frames(tmp_path_factory.mktemp("frames"))


def frame_documents(demo):
    return [ImageDocument(image_path=f.path, id_=f.path.rsplit("/", 1)[1], metadata=dict(f.metadata)) for f in demo.frames]


def crop_inputs(demo):
    by_path = {f.path: f.path.rsplit("/", 1)[1] for f in demo.frames}
    frames = [ImageDocument(image_path=f.path, id_=by_path[f.path],
                            metadata={k: v for k, v in f.metadata.items() if k != "detections"}) for f in demo.frames]
    crops = [ImageNode(text=c.name, image_path=c.path, metadata=dict(c.metadata),
                       relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=by_path[c.frame_path])})
             for c in demo.crops]
    return frames, crops


def test_frames_are_cut_into_image_nodes_whose_embed_text_is_context_then_crop(demo):
    parser = ContextualNodeParser(show_progress=False)
    nodes = parser.get_nodes_from_documents(frame_documents(demo)[:2])
    assert [type(n) for n in nodes] == [ImageNode] * 4
    first = nodes[0]
    assert first.text == "crop_1: truck" and first.ref_doc_id == "frame_001.png"
    assert first.metadata["context"].startswith("A truck (track 11) seen by camera north-gate on 2026-03-02 at 10:05 (morning)")
    assert first.get_content(MetadataMode.EMBED) == first.metadata["context"] + "\n\ncrop_1: truck"
    # the crop's pixels, cut from the frame, ride on the node
    crop = Image.open(io.BytesIO(base64.b64decode(first.image)))
    assert crop.size == (290, 180) and first.image_mimetype == "image/png"
    assert first.metadata["frame_path"].endswith("frame_001.png") and first.metadata["box"] == "40,150,330,330"
    assert parser.last_report.generated == 4 and parser.last_crop_report is parser.last_report
    again = parser.get_nodes_from_documents(frame_documents(demo)[:2])
    assert [n.node_id for n in again] == [n.node_id for n in nodes] and parser.last_report.store_hits == 4


def test_crops_already_cut_keep_their_image_path_and_mixed_text_documents_still_split(demo):
    frames, crops = crop_inputs(demo)
    parser = ContextualNodeParser(show_progress=False)
    text = Document(text="# Gate rules\nTrucks wait at the north gate barrier.", id_="rules.md")
    nodes = parser.get_nodes_from_documents([text, *frames, *crops])
    assert not isinstance(nodes[0], ImageNode) and nodes[0].metadata["context"] == "From rules.md, section: Gate rules."
    images = nodes[1:]
    assert len(images) == len(demo.crops)
    assert [n.image_path for n in images] == [c.path for c in demo.crops]
    night_truck = next(n for n in images if n.text == "crop_3.png: truck")
    assert "north-gate on 2026-03-02 at 23:20 (night), scene: night shift" in night_truck.get_content(MetadataMode.EMBED)
    assert parser.last_report.generated == 1 and parser.last_crop_report.generated == len(demo.crops)


def test_bad_frames_are_refused_before_any_context_is_generated(demo, tmp_path):
    store = ContextStore(tmp_path / "contexts.sqlite3")
    parser = ContextualNodeParser(store=store, show_progress=False)
    docs = frame_documents(demo)[:2] + [
        ImageDocument(image=base64.b64encode(b"garbage").decode(), id_="broken.png", metadata={"detections": []}),
        ImageDocument(image_path=demo.frames[2].path, id_="undetected.png", metadata={"camera": "north-gate"}),
    ]
    with pytest.raises(FrameInputError) as info:
        parser.get_nodes_from_documents(docs)
    assert "cannot read image of frame broken.png" in str(info.value)
    assert "frame undetected.png has no metadata['detections'] and no crops" in str(info.value)
    assert store.export_jsonl(tmp_path / "contexts.jsonl") == 0 and parser.last_crop_report is None
    orphan = ImageNode(text="crop_9.png", image_path=demo.crops[0].path, metadata={"label": "truck", "box": [1, 1, 9, 9]})
    with pytest.raises(ValueError, match="names no frame: set its SOURCE relationship"):
        parser.get_nodes_from_documents([orphan])


async def test_claude_crop_contexts_through_the_parser_write_each_frame_to_the_cache_once(demo):
    with FakeAnthropicServer() as server:
        client = anthropic.AsyncAnthropic(api_key=server.api_key, base_url=server.url, max_retries=0)
        gen = AnthropicCropContextGenerator("claude-sonnet-4-5", async_client=client)
        big = write_demo_frames(demo.frames[0].path.rsplit("/", 2)[0] + "-big", size=(1280, 800))
        parser = ContextualNodeParser(crop_generator=gen, show_progress=False)
        nodes = await parser.aget_nodes_from_documents(frame_documents(big)[:3])
        requests = server.requests_to("/v1/messages")
        assert len(nodes) == len(requests) == 6
        assert server.stats()["cache_writes"] == 3 and parser.last_report.cache_writes == 3
        assert parser.last_report.usage.cache_read_tokens > 0 and parser.last_report.cache_misses == 0
        context = nodes[0].metadata["context"].split("\n")
        assert context[0].startswith("A truck (track 11) seen by camera north-gate") and context[1].startswith("This chunk is from")
        assert parser.crop_generator_id.startswith("anthropic-crop/claude-sonnet-4-5/")


def test_a_saved_parser_rebuilds_only_with_the_same_crop_generator():
    gen = AnthropicCropContextGenerator("claude-sonnet-4-5", client=anthropic.Anthropic(api_key="sk-test"))
    data = ContextualNodeParser(crop_generator=gen, show_progress=False).to_dict()
    assert ContextualNodeParser.from_dict(data, crop_generator=gen).crop_generator_id == data["crop_generator_id"]
    with pytest.raises(ValueError, match="saved with crop generator 'anthropic-crop/claude-sonnet-4-5/"):
        ContextualNodeParser.from_dict(data)
    assert ContextualNodeParser.from_dict(ContextualNodeParser(show_progress=False).to_dict()).crop_generator_id.startswith("structural-crop//")
