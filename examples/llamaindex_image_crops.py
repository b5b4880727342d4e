# %% [markdown]
# # Image crops that keep their scene, in a LlamaIndex pipeline
#
# A detector saves each object it finds as `crop_1.png`, `crop_2.png`, ... and the crop loses
# which camera, place, time and scene it came from, as a chunk loses its company and quarter.
# Here the crops go through `ContextualNodeParser` with their frames: each crop is situated within
# its frame (camera, time, scene, where it sits, what is around it) and that context is indexed
# with it, for vector search and BM25 alike.
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

from llama_index.core import VectorStoreIndex
from llama_index.core.ingestion import IngestionPipeline
from llama_index.core.schema import ImageDocument, ImageNode, NodeRelationship, RelatedNodeInfo

from contextual_retrieval_core.app.demo_frames import DEMO_CROP_QUERIES, write_demo_frames
from contextual_retrieval_llamaindex import (
    ContextualNodeParser,
    HybridRetriever,
    LocalMiniLMEmbedding,
    chroma_vector_store,
)

workdir = tempfile.mkdtemp()
demo = write_demo_frames(workdir)
frame_id = {f.path: f.path.rsplit("/", 1)[1] for f in demo.frames}
embed_model = LocalMiniLMEmbedding()
print(f"{len(demo.frames)} frames, {len(demo.crops)} crops, {len(DEMO_CROP_QUERIES)} queries")


def answers(hits, query):
    """Rank (1-based) of the crop that answers `query` among `hits`, or None."""
    for rank, hit in enumerate(hits, 1):
        crop = next(c for c in demo.crops if c.path == hit.node.image_path)
        if frame_id[crop.frame_path] == query.frame and crop.metadata["label"] == query.label:
            return rank
    return None


# %% [markdown]
# ## Before: crops named only by file
#
# Each crop is an `ImageNode` whose text is what the detector left: its file name and class.

# %%
plain_nodes = [ImageNode(text=f"{c.name}: {c.metadata['label']}", image_path=c.path, id_=f"plain-{i}")
               for i, c in enumerate(demo.crops)]
plain_store = chroma_vector_store(f"{workdir}/chroma", "plain")
plain_nodes = IngestionPipeline(transformations=[embed_model], vector_store=plain_store).run(nodes=plain_nodes)
plain_index = VectorStoreIndex.from_vector_store(plain_store, embed_model=embed_model)
plain = HybridRetriever.from_defaults(plain_index, nodes=plain_nodes, similarity_top_k=3)
print(plain_nodes[2].text)

# %% [markdown]
# ## After: the same crops, each situated within its frame
#
# The frames go in as `ImageDocument`s with their metadata (camera, timestamp, scene); each crop as
# an `ImageNode` whose source is its frame, with its detection (box in frame pixels, class,
# confidence, track id). The parser returns one `ImageNode` per crop, its image path kept and its
# context in the text that is embedded and BM25-indexed.

# %%
frames = [ImageDocument(image_path=f.path, id_=frame_id[f.path],
                        metadata={k: v for k, v in f.metadata.items() if k != "detections"}) for f in demo.frames]
crops = [ImageNode(image_path=c.path, metadata=dict(c.metadata),
                   relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=frame_id[c.frame_path])})
         for c in demo.crops]
parser = ContextualNodeParser(show_progress=False)
contextual_store = chroma_vector_store(f"{workdir}/chroma", "contextual")
nodes = IngestionPipeline(transformations=[parser, embed_model], vector_store=contextual_store).run(documents=[*frames, *crops])
contextual_index = VectorStoreIndex.from_vector_store(contextual_store, embed_model=embed_model)
contextual = HybridRetriever.from_defaults(contextual_index, nodes=nodes, similarity_top_k=3)
print(parser.last_report.format())
print("\nA crop and its context:\n")
print(nodes[2].metadata["context"], "|", nodes[2].text, "|", nodes[2].image_path.rsplit("/", 1)[1])

# %% [markdown]
# ## Side by side: where does the crop that answers each question rank (top 3)?

# %%
ranks = {"plain": [], "contextual": []}
for query in DEMO_CROP_QUERIES:
    ranks["plain"].append(answers(plain.retrieve(query.query), query))
    ranks["contextual"].append(answers(contextual.retrieve(query.query), query))
    print(f"{query.query}\n    plain: {ranks['plain'][-1] or 'missed'}   contextual: {ranks['contextual'][-1] or 'missed'}")
for name, got in ranks.items():
    print(f"{name:>10}: {sum(r is not None for r in got)}/{len(got)} answers in the top 3, {got.count(1)} ranked first")
assert sum(r is not None for r in ranks["contextual"]) > sum(r is not None for r in ranks["plain"])
