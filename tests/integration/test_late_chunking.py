"""Late chunking over the offline MiniLM model: macro-windows, pooling from the tokenizer's
offsets, contexts before chunks, grouping, and the same vectors from the core, LlamaIndex's
ingestion pipeline and LangChain's Documents."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from contextual_retrieval_core.embeddings.late_chunking import LateChunkingEmbedder, MacroWindow, macro_windows
from contextual_retrieval_core.embeddings.minilm import LocalMiniLMEmbedder

DOC_A = [
    "BM25 ranks documents by term overlap with the query, weighted by inverse document frequency.",
    "It needs no GPU and no training data.",
    "Its two parameters, k1 and b, control term saturation and length normalisation.",
]
DOC_B = [
    "The espresso machine heats water to ninety degrees before pressing it through the coffee.",
    "It needs no GPU and no training data.",
]


@pytest.fixture(scope="module")
def late() -> LateChunkingEmbedder:
    return LateChunkingEmbedder()


def reference_vectors(embedder: LateChunkingEmbedder, chunks: list[str]) -> np.ndarray:
    """Late chunking written out plainly for a document that fits one window: one model run over
    [CLS] + all tokens + [SEP], each chunk the mean of its own tokens' rows (chunks tokenized one
    by one, which for whitespace-joined chunks gives the document's tokens)."""
    embedder._load()
    tok = embedder._tokenizer
    pieces = [tok.encode(c, add_special_tokens=False).ids for c in chunks]
    ids = [embedder._cls] + [i for p in pieces for i in p] + [embedder._sep]
    assert len(ids) <= 512
    feeds = {"input_ids": np.array([ids]), "attention_mask": np.ones((1, len(ids)), dtype=np.int64),
             "token_type_ids": np.zeros((1, len(ids)), dtype=np.int64)}
    hidden = embedder._session.run(None, feeds)[0][0]
    out, start = [], 1
    for p in pieces:
        v = hidden[start : start + len(p)].mean(axis=0)
        out.append(v / np.linalg.norm(v))
        start += len(p)
    return np.stack(out)


# -- macro-windows ---------------------------------------------------------------------------


@pytest.mark.parametrize("window,overlap", [(512, 128), (256, 64), (16, 0), (16, 7), (40, 19)])
def test_macro_windows_tile_every_token_once_within_the_position_limit(window, overlap):
    for n in [0, 1, window - 3, window - 2, window - 1, window, 2 * window, 3 * window + 5, 1000]:
        wins = macro_windows(n, window=window, overlap=overlap)
        kept = [i for w in wins for i in range(w.keep_start, w.keep_end)]
        assert kept == list(range(n))
        for w in wins:
            assert 0 <= w.start <= w.keep_start <= w.keep_end <= w.end <= n
            assert w.end - w.start <= window - 2  # [CLS] and [SEP] take two positions
        for a, b in zip(wins, wins[1:]):
            assert a.end - b.start >= overlap  # consecutive windows share at least `overlap` tokens
            # a shared token is kept by the window where it is further from an edge
            assert b.keep_start - b.start == pytest.approx((a.end - b.start) / 2, abs=1)


def test_macro_windows_of_a_short_document_is_one_window():
    assert macro_windows(5, window=512, overlap=128) == [MacroWindow(0, 5, 0, 5)]


@pytest.mark.parametrize("kwargs,match", [
    ({"window": 513}, "window must be an int in 16..512"),
    ({"window": 8}, "window must be an int in 16..512"),
    ({"window": 64, "overlap": 40}, "overlap must be an int in 0..31"),
    ({"joiner": " | "}, "joiner must be whitespace"),
])
def test_settings_outside_the_model_limits_name_the_range(kwargs, match):
    with pytest.raises(ValueError, match=match):
        LateChunkingEmbedder(**kwargs)


# -- pooling ---------------------------------------------------------------------------------


def test_a_document_in_one_window_pools_each_chunk_from_its_own_tokens(late):
    got = late.embed_document_chunks([DOC_A])[0]
    assert got.shape == (3, 384) and got.dtype == np.float32
    np.testing.assert_allclose(got, reference_vectors(late, DOC_A), atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)


def test_the_same_chunk_text_gets_its_documents_context(late):
    a, b = late.embed_document_chunks([DOC_A, DOC_B])
    alone = late.embed_documents([DOC_A[1]])[0]
    assert not np.allclose(a[1], b[1], atol=1e-3)  # same text, different documents
    query = late.embed_queries(["does BM25 ranking need a GPU?"])[0]
    assert float(a[1] @ query) > float(b[1] @ query)
    assert float(a[1] @ query) > float(alone @ query)


def test_a_long_document_runs_in_macro_windows_and_matches_each_window_run_alone():
    late = LateChunkingEmbedder(window=64, overlap=16)
    chunks = [f"Section {i}: the parser reads token {i} and stores it in slot {i * 3}." for i in range(12)]
    late._load()
    ids = np.array(late._tokenizer.encode("\n".join(chunks), add_special_tokens=False).ids)
    wins = macro_windows(len(ids), window=64, overlap=16)
    assert len(wins) > 3
    rows = []
    for w in wins:  # each window run alone, [CLS] ... [SEP], keep its kept range
        x = np.concatenate([[late._cls], ids[w.start : w.end], [late._sep]])[None, :]
        h = late._session.run(None, {"input_ids": x, "attention_mask": np.ones_like(x), "token_type_ids": np.zeros_like(x)})[0][0]
        rows.append(h[1 + w.keep_start - w.start : 1 + w.keep_end - w.start])
    tokens = np.concatenate(rows)
    sizes = [len(late._tokenizer.encode(c, add_special_tokens=False).ids) for c in chunks]
    bounds = np.cumsum([0] + sizes)
    expected = np.stack([tokens[a:b].mean(axis=0) for a, b in zip(bounds, bounds[1:])])
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    np.testing.assert_allclose(late.embed_document_chunks([chunks])[0], expected, atol=1e-5)


def test_a_document_longer_than_512_positions_is_embedded_without_a_model_error(late):
    chunks = [" ".join(f"word{i}_{j}" for j in range(120)) for i in range(6)]
    vectors = late.embed_document_chunks([chunks])[0]
    assert vectors.shape == (6, 384)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_a_chunk_without_tokens_gets_its_ordinary_embedding(late):
    vectors = late.embed_document_chunks([["BM25 ranks by overlap.", "   ", "Dense vectors compare meaning."]])[0]
    np.testing.assert_allclose(vectors[1], LocalMiniLMEmbedder().embed(["   "])[0], atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


# -- contexts and grouping -------------------------------------------------------------------


def test_contexts_are_placed_before_their_chunks_and_pooled_with_them(late):
    contexts = [["From a BM25 guide.", "", "From a BM25 guide, parameters."]]
    with_ctx = late.embed_document_chunks([DOC_A], contexts)[0]
    composed = [f"{c}\n\n{t}".strip() for c, t in zip(contexts[0], DOC_A)]
    np.testing.assert_allclose(with_ctx, reference_vectors(late, composed), atol=1e-5)
    np.testing.assert_allclose(with_ctx, late.embed_grouped(composed, ["a"] * 3), atol=1e-6)
    assert not np.allclose(with_ctx[1], late.embed_document_chunks([DOC_A])[0][1], atol=1e-3)
    with pytest.raises(ValueError, match="one context per chunk"):
        late.embed_document_chunks([DOC_A], [["only one"]])


def test_grouped_texts_in_any_interleaving_equal_one_call_per_document(late):
    texts = [DOC_A[0], DOC_B[0], DOC_A[1], DOC_B[1], DOC_A[2]]
    groups = ["a", "b", "a", "b", "a"]
    got = late.embed_grouped(texts, groups)
    a, b = late.embed_document_chunks([DOC_A, DOC_B])
    np.testing.assert_allclose(got[[0, 2, 4]], a, atol=1e-6)
    np.testing.assert_allclose(got[[1, 3]], b, atol=1e-6)
    with pytest.raises(ValueError, match="one document key per text"):
        late.embed_grouped(texts, groups[:2])


def test_contextual_chunks_are_grouped_by_document_and_pooled_over_their_indexed_text(late):
    from contextual_retrieval_core.types import Chunk, ContextualChunk

    chunks = [ContextualChunk(Chunk(f"a{i}", "a", t, i), "From a BM25 guide.") for i, t in enumerate(DOC_A)]
    chunks += [ContextualChunk(Chunk(f"b{i}", "b", t, i), "") for i, t in enumerate(DOC_B)]
    got = late.embed_contextual_chunks(chunks)
    expected = late.embed_document_chunks([DOC_A, DOC_B], [["From a BM25 guide."] * 3, ["", ""]])
    np.testing.assert_allclose(got, np.concatenate(expected), atol=1e-6)


def test_queries_are_embedded_as_usual_and_async_matches_sync(late):
    q = ["what does BM25 need?"]
    np.testing.assert_allclose(late.embed_queries(q), LocalMiniLMEmbedder().embed(q), atol=1e-6)

    async def both():
        return await late.aembed_document_chunks([DOC_A]), await late.aembed_grouped(DOC_B, ["b", "b"])

    docs, grouped = asyncio.run(both())
    np.testing.assert_allclose(docs[0], late.embed_document_chunks([DOC_A])[0], atol=1e-6)
    np.testing.assert_allclose(grouped, late.embed_document_chunks([DOC_B])[0], atol=1e-6)


def test_bad_input_is_refused_before_the_model_runs(late):
    with pytest.raises(TypeError, match="list of lists"):
        late.embed_document_chunks("one text")
    with pytest.raises(ValueError, match="has no chunks"):
        late.embed_document_chunks([[]])
    assert late.embed_grouped([], []).shape == (0, 384)


# -- the same vectors from both frameworks ---------------------------------------------------

GUIDE = (
    "# Billing\nInvoices go out on the first of each month. Payment is due within thirty days.\n\n"
    "## Late payments\nLate payments accrue interest at one percent a month.\n\n"
    "# Deploy\nRun make deploy from the release branch. Rollbacks redeploy the previous tag."
)
FAQ = "# FAQ\nThe service needs no GPU. Support answers within a day.\n\n# Limits\nUploads stop at 10 MB."


def test_llamaindex_pipeline_and_langchain_documents_give_the_cores_vectors(late):
    from langchain_core.documents import Document as LCDocument
    from langchain_text_splitters import RecursiveCharacterTextSplitter
    from llama_index.core import Document
    from llama_index.core.ingestion import IngestionPipeline
    from llama_index.core.node_parser import SentenceSplitter
    from llama_index.core.schema import MetadataMode

    from contextual_retrieval_langchain import ContextualDocumentTransformer, LateChunkingEmbeddings
    from contextual_retrieval_llamaindex import ContextualNodeParser, LateChunkingEmbedding

    pipeline = IngestionPipeline(transformations=[
        ContextualNodeParser(node_parser=SentenceSplitter(chunk_size=24, chunk_overlap=0), show_progress=False),
        LateChunkingEmbedding(),
    ])
    nodes = pipeline.run(documents=[Document(text=GUIDE, id_="guide.md"), Document(text=FAQ, id_="faq.md")])
    assert len({n.ref_doc_id for n in nodes}) == 2 and len(nodes) > 3
    li_texts = [n.get_content(metadata_mode=MetadataMode.EMBED) for n in nodes]
    li_core = late.embed_grouped(li_texts, [n.ref_doc_id for n in nodes])
    np.testing.assert_allclose(np.array([n.embedding for n in nodes]), li_core, atol=1e-6)
    # nodes of one document embedded together: a node's vector is not its text embedded alone
    assert not np.allclose(li_core[0], late.embed_documents([li_texts[0]])[0], atol=1e-3)
    assert asyncio.run(pipeline.arun(documents=[Document(text=GUIDE, id_="guide.md")]))[0].embedding is not None

    transformer = ContextualDocumentTransformer(
        text_splitter=RecursiveCharacterTextSplitter(chunk_size=200, chunk_overlap=0), show_progress=False)
    docs = transformer.transform_documents([LCDocument(GUIDE, metadata={"source": "guide.md"}),
                                            LCDocument(FAQ, metadata={"source": "faq.md"})])
    emb = LateChunkingEmbeddings()
    lc = np.array(emb.embed_grouped_documents(docs))
    lc_core = late.embed_grouped([d.page_content for d in docs], [d.metadata["parent_id"] for d in docs])
    np.testing.assert_allclose(lc, lc_core, atol=1e-6)
    np.testing.assert_allclose(np.array(asyncio.run(emb.aembed_grouped_documents(docs))), lc, atol=1e-6)
    np.testing.assert_allclose(emb.embed_query("who pays interest?"), late.embed_queries(["who pays interest?"])[0], atol=1e-6)
    with pytest.raises(ValueError, match="pass key= naming the parent document field"):
        emb.embed_grouped_documents([LCDocument("no parent")])

    # one input, two frameworks: the same texts in the same groups give the same vectors
    from llama_index.core.callbacks import CallbackManager, CBEventType, LlamaDebugHandler

    debug = LlamaDebugHandler()
    shared = [("guide.md", t) for t in ("Invoices go out monthly.", "Late payments accrue interest.")]
    li_nodes = LateChunkingEmbedding(callback_manager=CallbackManager([debug]))([_text_node(t, doc) for doc, t in shared])
    assert len(debug.get_event_pairs(CBEventType.EMBEDDING)) == 1  # the framework's embedding event
    lc_vecs = emb.embed_grouped_documents([LCDocument(t, metadata={"parent_id": doc}) for doc, t in shared])
    np.testing.assert_allclose(np.array([n.embedding for n in li_nodes]), np.array(lc_vecs), atol=1e-6)


def _text_node(text: str, doc: str):
    from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode

    return TextNode(text=text, relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=doc)})
