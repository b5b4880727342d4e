# %% [markdown]
# # Image crops that keep their scene, in a LangChain pipeline
#
# A detector saves each object it finds as `crop_1.png`, `crop_2.png`, ... and the crop loses
# which camera, place, time and scene it came from, as a chunk loses its company and quarter.
# Here the crops go through `ContextualDocumentTransformer` with their frames: each crop is
# situated within its frame (camera, time, scene, where it sits, what is around it) and that
# context is indexed with it, for vector search and BM25 alike.
#
# Everything runs offline: structural crop contexts from the detection metadata (no LLM), the
# local MiniLM embedder, embedded Chroma, in-process BM25. With `ANTHROPIC_API_KEY` set, pass
# `crop_generator=AnthropicCropContextGenerator()` for contexts written by Claude, which sees the
# frame (prompt-cached, one cache write per frame) and the crop.
#
# The frames are drawn with Pillow: three cameras, day and night shifts, and look-alike objects
# (the same truck, van, car, person and forklift drawings) across frames.

# %%
import tempfile

from langchain_core.documents import Document

from contextual_retrieval_core.app.demo_frames import DEMO_CROP_QUERIES, write_demo_frames
from contextual_retrieval_langchain import (
    ContextualDocumentTransformer,
    ContextualEnsembleRetriever,
    LocalMiniLMEmbeddings,
)

demo = write_demo_frames(tempfile.mkdtemp())
frame_name = {f.path: f.path.rsplit("/", 1)[1] for f in demo.frames}
embeddings = LocalMiniLMEmbeddings()
print(f"{len(demo.frames)} frames, {len(demo.crops)} crops, {len(DEMO_CROP_QUERIES)} queries")


def answers(docs, query):
    """Rank (1-based) of the crop that answers `query` among `docs`, or None."""
    for rank, doc in enumerate(docs, 1):
        crop = next(c for c in demo.crops if c.path == doc.metadata["image_path"])
        if frame_name[crop.frame_path] == query.frame and crop.metadata["label"] == query.label:
            return rank
    return None


# %% [markdown]
# ## Before: crops named only by file
#
# Each crop is a Document whose text is what the detector left, its file name and class, with
# the image path in its metadata. Vector search and BM25, fused, as on the contextual side.

# %%
plain_docs = [Document(f"{c.name}: {c.metadata['label']}", id=f"plain-{i}", metadata={"image_path": c.path})
              for i, c in enumerate(demo.crops)]
plain = ContextualEnsembleRetriever.from_documents(plain_docs, embeddings, k=3)
print(plain_docs[2].page_content)

# %% [markdown]
# ## After: the same crops, each situated within its frame
#
# The frames are Documents carrying `image_path` and their metadata (camera, timestamp, scene);
# the crops, Documents carrying their `image_path`, their detection (box in frame pixels, class,
# confidence, track id) and their frame's path under `source`, passed with the frames as
# `parents=`. Each crop comes back with its context before its text in `page_content`.

# %%
frames = [Document("", metadata={"source": f.path, "image_path": f.path,
                                 **{k: v for k, v in f.metadata.items() if k != "detections"}}) for f in demo.frames]
crops = [Document(c.name, metadata={"source": c.frame_path, "image_path": c.path, **c.metadata}) for c in demo.crops]
transformer = ContextualDocumentTransformer(show_progress=False)
contextual_docs = transformer.transform_documents(crops, parents=frames)
contextual = ContextualEnsembleRetriever.from_documents(contextual_docs, embeddings, k=3)
print(transformer.last_report.format())
print("\nA crop and its context:\n")
print(contextual_docs[2].page_content, "|", contextual_docs[2].metadata["image_path"].rsplit("/", 1)[1])

# %% [markdown]
# ## Side by side: where does the crop that answers each question rank (top 3)?

# %%
ranks = {"plain": [], "contextual": []}
for query in DEMO_CROP_QUERIES:
    ranks["plain"].append(answers(plain.invoke(query.query), query))
    ranks["contextual"].append(answers(contextual.invoke(query.query), query))
    print(f"{query.query}\n    plain: {ranks['plain'][-1] or 'missed'}   contextual: {ranks['contextual'][-1] or 'missed'}")
for name, got in ranks.items():
    print(f"{name:>10}: {sum(r is not None for r in got)}/{len(got)} answers in the top 3, {got.count(1)} ranked first")
assert sum(r is not None for r in ranks["contextual"]) > sum(r is not None for r in ranks["plain"])
