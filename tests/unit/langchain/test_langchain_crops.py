"""Image crops through LangChain's `ContextualDocumentTransformer`: Documents that carry an image
path or bytes in metadata, as frames (cut by their detections) or crops already cut (named by
their frame), come back as Documents whose page_content is the crop's context then its text."""

from __future__ import annotations

import io

import anthropic
import pytest
from langchain_core.documents import Document
from langchain_text_splitters import RecursiveCharacterTextSplitter
from PIL import Image

from contextual_retrieval_core.app.demo_frames import write_demo_frames
from contextual_retrieval_core.chunking.frames import FrameInputError
from contextual_retrieval_core.generators.anthropic_crops import AnthropicCropContextGenerator
from contextual_retrieval_core.store.context_store import ContextStore
from contextual_retrieval_langchain import ContextualDocumentTransformer
from tests.fakes.anthropic_server import FakeAnthropicServer


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    return write_demo_frames(tmp_path_factory.mktemp("frames"))


def frame_docs(demo, with_detections=True):
    return [Document("", metadata={"source": f.path, "image_path": f.path,
                                   **{k: v for k, v in f.metadata.items() if with_detections or k != "detections"}})
            for f in demo.frames]


def crop_docs(demo, key="frame_id"):
    return [Document(c.name, metadata={key: c.frame_path, "image_path": c.path, **c.metadata}) for c in demo.crops]


def test_frames_with_an_image_path_are_cut_into_contextual_crop_documents(demo):
    transformer = ContextualDocumentTransformer(show_progress=False)
    docs = transformer.transform_documents(frame_docs(demo)[:2])
    assert len(docs) == 4
    first = docs[0]
    assert first.metadata["original_content"] == "crop_1: truck"
    assert first.page_content == first.metadata["context"] + "\n\ncrop_1: truck"
    assert first.metadata["context"].startswith("A truck (track 11) seen by camera north-gate on 2026-03-02 at 10:05 (morning)")
    assert first.metadata["parent_id"] == demo.frames[0].path and first.id == first.metadata["chunk_id"]
    assert Image.open(io.BytesIO(first.metadata["image_bytes"])).size == (290, 180)
    assert "image_path" not in first.metadata and first.metadata["frame_path"] == demo.frames[0].path
    assert transformer.last_report.generated == 4 and transformer.last_crop_report is transformer.last_report


def test_crops_already_cut_by_frame_id_or_with_parents_give_the_same_documents(demo):
    transformer = ContextualDocumentTransformer(show_progress=False)
    frames = frame_docs(demo, with_detections=False)
    by_frame_id = transformer.transform_documents(frames + crop_docs(demo))
    by_parents = transformer.transform_documents(crop_docs(demo, key="source"), parents=frames)
    assert len(by_frame_id) == len(demo.crops)
    assert [d.id for d in by_parents] == [d.id for d in by_frame_id]
    assert [d.page_content for d in by_parents] == [d.page_content for d in by_frame_id]
    night = next(d for d in by_frame_id if d.metadata["original_content"] == "crop_3.png: truck")
    assert night.metadata["image_path"] == demo.crops[2].path
    assert "seen by camera north-gate on 2026-03-02 at 23:20 (night), scene: night shift" in night.page_content
    assert transformer.last_crop_report.store_hits == len(demo.crops)  # the second call read the store


def test_text_and_images_in_one_call(demo):
    transformer = ContextualDocumentTransformer(
        text_splitter=RecursiveCharacterTextSplitter(chunk_size=200, chunk_overlap=0), show_progress=False)
    text = Document("# Gate rules\nTrucks wait at the north gate barrier.", metadata={"source": "rules.md"})
    docs = transformer.transform_documents([text, *frame_docs(demo)[:1]])
    assert docs[0].metadata["context"] == "From rules.md, section: Gate rules."
    assert [d.metadata["original_content"] for d in docs[1:]] == ["crop_1: truck", "crop_2: person"]
    assert transformer.last_report.generated == 1 and transformer.last_crop_report.generated == 2


def test_bad_frames_are_refused_before_any_context_is_generated(demo, tmp_path):
    store = ContextStore(tmp_path / "contexts.sqlite3")
    transformer = ContextualDocumentTransformer(
        text_splitter=RecursiveCharacterTextSplitter(chunk_size=200, chunk_overlap=0), store=store, show_progress=False)
    bad = [
        Document("", metadata={"source": "broken.png", "image_bytes": b"\x89PNG broken", "detections": []}),
        Document("", metadata={"source": "outside.png", "image_path": demo.frames[0].path,
                               "detections": [{"box": [700, 10, 800, 90], "label": "car"}]}),
        Document("", metadata={"source": "bare.png", "image_path": demo.frames[1].path}),
    ]
    text = Document("# Gate rules\nTrucks wait.", metadata={"source": "rules.md"})
    with pytest.raises(FrameInputError) as info:
        transformer.transform_documents([text, *bad])
    message = str(info.value)
    assert "3 problem(s) with the frames; nothing was generated" in message
    assert "cannot read image of frame broken.png" in message and "lies outside the 640x400 frame" in message
    assert "frame bare.png has no metadata['detections'] and no crops" in message
    assert store.export_jsonl(tmp_path / "out.jsonl") == 0  # not even the text chunk was generated
    with pytest.raises(ValueError, match="a crop Document names no frame"):
        transformer.transform_documents([Document("crop_1.png", metadata={"image_path": demo.crops[0].path, "frame_id": None,
                                                                           "label": "truck", "box": [1, 1, 5, 5]})],
                                        parents=[])


async def test_claude_crop_contexts_write_each_frame_to_the_cache_once(demo, tmp_path):
    big = write_demo_frames(tmp_path / "big", size=(1280, 800))
    with FakeAnthropicServer() as server:
        client = anthropic.Anthropic(api_key=server.api_key, base_url=server.url, max_retries=0)
        gen = AnthropicCropContextGenerator("claude-sonnet-4-5", client=client)
        transformer = ContextualDocumentTransformer(crop_generator=gen, store=tmp_path / "c.sqlite3", show_progress=False)
        docs = await transformer.atransform_documents(frame_docs(big)[3:6])
        assert len(docs) == len(server.requests_to("/v1/messages")) == 8
        assert server.stats()["cache_writes"] == 3 and transformer.last_crop_report.cache_writes == 3
        assert transformer.last_crop_report.cache_misses == 0
        assert docs[0].metadata["context"].split("\n")[0].startswith("A forklift (track 41) seen by camera loading-dock")
