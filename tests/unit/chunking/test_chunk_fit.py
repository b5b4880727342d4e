"""Chunks against the embedder's window (chunking.budget, contextualize.fit), on every path that
chunks whole documents (`ContextualIndex` / `index`, LlamaIndex's `ContextualNodeParser`,
LangChain's `ContextualDocumentTransformer`): by default cut by characters whatever the contexts,
every word embedded (long texts as windows, nothing truncated); fitted, as an option, so that
context + chunk is within MiniLM's window, counted with its own tokenizer."""

from __future__ import annotations

import json
import textwrap
import warnings
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from contextual_retrieval_core import Chunk, Document
from contextual_retrieval_core.chunking.budget import window_of
from contextual_retrieval_core.chunking.code_outline import statement_starts
from contextual_retrieval_core.chunking.split import split_text
from contextual_retrieval_core.contextualize.config import ContextualizeConfig
from contextual_retrieval_core.contextualize.fit import chunk_to_fit
from contextual_retrieval_core.embeddings.minilm import TOKENIZER_PATH, LocalMiniLMEmbedder, TruncationWarning
from contextual_retrieval_core.generators.base import Generation
from contextual_retrieval_core.generators.structural import StructuralContextGenerator
from contextual_retrieval_core.generators.usage import TokenUsage
from contextual_retrieval_core.index.contextual_index import ContextualIndex
from contextual_retrieval_core.index.manifest import IndexManifest
from contextual_retrieval_core.types import ContextualChunk

WINDOW = 256


def _uncapped() -> Tokenizer:
    tok = Tokenizer.from_file(str(TOKENIZER_PATH))
    tok.no_truncation()
    tok.no_padding()
    return tok


def tokens(texts: list[str]) -> list[int]:
    """Tokens per text as MiniLM would read them were it not cut, special tokens included."""
    return [len(e.ids) for e in _uncapped().encode_batch(texts)]


def long_function(name: str, statements: int) -> str:
    """A function whose body is far over one window: multi-line calls, no blank lines."""
    body = "".join(
        f"    r{i} = np.asarray(x{i}[..., ::2],\n        dtype=np.float32).reshape(-1, {i}) + cfg[\"k{i}\"]\n"
        f"    t{i}[:{i}] = (r{i} ** 2).sum(axis=(0, 1)) / max(1, len(t{i}) - {i})  # {i}\n"
        for i in range(statements)
    )
    return f"def {name}(first_argument_0, second_argument_0):\n    \"\"\"Compute {name}.\"\"\"\n{body}    return result_0\n"


def long_markdown(sections: int, paragraphs: int) -> str:
    out = ["# Operations guide\n"]
    for s in range(sections):
        out.append(f"\n## Section {s} about deployments and rollbacks\n")
        for p in range(paragraphs):
            out.append("\n" + " ".join(f"Paragraph {p} of section {s} explains step {w} of the rollout." for w in range(6)) + "\n")
    return "".join(out)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("src") / "project"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "compute.py").write_text(
        "import math\n\n\n" + long_function("transform_records", 40) + "\n\nclass Engine:\n"
        + textwrap.indent(long_function("run_every_stage_of_the_pipeline", 30), "    "),
        encoding="utf-8")
    (root / "docs").mkdir()
    (root / "docs" / "operations.md").write_text(long_markdown(4, 8), encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def shared_embedder(offline_embedder):
    """The offline embedder behind an embedding cache for this module: the plain and fitted indexes
    of `corpus` are embedded once between the tests that take it. Only for tests that neither count
    embeddings nor turn truncation warnings into errors (a cached text never reaches the model)."""
    from contextual_retrieval_core.embeddings.cache import CachedEmbedder

    cached = CachedEmbedder(offline_embedder, ":memory:")
    yield cached
    cached.close()


def test_piece_counts_add_up_to_the_whole_texts_count() -> None:
    window = window_of(LocalMiniLMEmbedder())
    assert window is not None and window.size == WINDOW and window.special == 2
    texts = [long_function("f", 12), long_markdown(2, 3), "émigré naïve café — ünïcödé 東京 tokens\tand\ttabs"]
    assert [window.tokens(t) + window.special for t in texts] == tokens(texts)



def test_any_span_is_counted_exactly_even_cut_inside_a_word_or_its_indentation() -> None:
    import base64
    import random

    from contextual_retrieval_core.chunking.budget import _TextCosts

    window = window_of(LocalMiniLMEmbedder())
    assert window is not None
    blob = base64.b64encode(bytes(range(256)) * 4).decode()  # one piece far over the window
    text = long_function("g", 6) + "\n\n# Notes\n\n" + blob + "\n\n" + long_markdown(1, 2)
    costs = _TextCosts(text, window)
    rng = random.Random(35)
    spans = [(a, rng.randrange(a, len(text) + 1)) for a in (rng.randrange(len(text)) for _ in range(400))]
    got = [costs.span(a, b) for a, b in spans]
    exact = [t - window.special for t in tokens([text[a:b] for a, b in spans])]
    # exact up to the window; past it (MiniLM's tokenizer reports no more) counted as past it too
    assert [g if e <= window.room else "over" for g, e in zip(got, exact)] == [
        e if e <= window.room else "over" for e in exact]
    assert all(g > window.room for g, e in zip(got, exact) if e > window.room)
    assert sum(e <= window.room for e in exact) > 100

    doc = Document("notes.md", text)
    gen = StructuralContextGenerator()
    pieces = chunk_to_fit(doc, window)
    embedded = [f"{gen.generate(doc, Chunk(f'n#{i}', 'notes.md', p, i, {'start_index': o})).context}\n\n{p}"
                for i, (o, p) in enumerate(pieces)]
    assert max(tokens(embedded)) <= WINDOW
    assert blob in "".join(p for _, p in pieces)  # cut inside, nothing lost

def test_a_long_function_is_split_between_its_statements(corpus: Path) -> None:
    text = (corpus / "pkg" / "compute.py").read_text()
    window = window_of(LocalMiniLMEmbedder())
    pieces = chunk_to_fit(Document("pkg/compute.py", text), window)
    starts = set(statement_starts(text, "python"))
    assert len(pieces) > 4
    for offset, _ in pieces[1:]:
        line = text.rfind("\n", 0, offset) + 1
        assert line in starts, f"cut inside a statement: {text[line:line + 60]!r}"
    # the plain line rules would cut inside a two-line call
    plain = split_text(text, max_chars=400, code=True)
    assert any(text.rfind("\n", 0, o) + 1 not in starts for o, _ in plain[1:])


def test_index_with_the_defaults_cuts_by_characters_and_embeds_every_word(corpus: Path, tmp_path: Path) -> None:
    from contextual_retrieval_core.dense.windows import WindowConfig, window_texts

    embedder = LocalMiniLMEmbedder()
    index = ContextualIndex(tmp_path / "ix", embedder=embedder)
    with warnings.catch_warnings():
        warnings.simplefilter("error", TruncationWarning)
        report = index.update([corpus], show_progress=False)
    manifest = IndexManifest.read(tmp_path / "ix")
    assert manifest.chunk_tokens is None and manifest.windows is not None  # characters alone, long texts windowed
    # the chunks are the character budget's, whatever their contexts will be
    files = sorted(corpus.rglob("*.*"))
    by_chars = sum(len(chunk_to_fit(Document(str(f.relative_to(corpus)), f.read_text()), None, path=str(f))) for f in files)
    assert report.chunks_total == by_chars
    hits = index.search("rollback step of the rollout", top_k=report.chunks_total)
    texts = [(f"{h.context}\n\n{h.text}" if h.context else h.text) for h in hits]
    long = [t for t, n in zip(texts, tokens(texts)) if n > WINDOW]
    assert long, "the test needs chunks over the window to mean anything"
    # nothing was cut: every text the embedder was handed fits its window, and the long chunks
    # were handed as more than one row
    assert embedder.truncated_count == 0 and embedder.embedded_count > report.chunks_total
    rows = window_texts(embedder, [ContextualChunk(Chunk(str(i), "d", h.text), h.context) for i, h in enumerate(hits)],
                        WindowConfig())
    assert all(len(r) > 1 for r, t in zip(rows, texts) if t in long)
    assert max(tokens([x for r in rows for x in r])) <= WINDOW


def test_fitted_chunks_are_an_option_that_costs_more_chunks(corpus: Path, tmp_path: Path, shared_embedder) -> None:
    index = ContextualIndex(tmp_path / "ix", embedder=LocalMiniLMEmbedder(), fit_chunks=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", TruncationWarning)
        report = index.update([corpus], show_progress=False)
    assert IndexManifest.read(tmp_path / "ix").chunk_tokens == WINDOW
    hits = index.search("rollback step of the rollout", top_k=report.chunks_total)
    assert max(tokens([f"{h.context}\n\n{h.text}" for h in hits])) <= WINDOW
    plain = ContextualIndex(tmp_path / "plain", embedder=shared_embedder).update([corpus], show_progress=False)
    assert report.chunks_total > plain.chunks_total


@pytest.mark.filterwarnings("ignore::contextual_retrieval_core.embeddings.minilm.TruncationWarning")
def test_an_index_built_before_fitting_keeps_its_chunks_until_asked(corpus: Path, tmp_path: Path, shared_embedder) -> None:
    ContextualIndex(tmp_path / "ix", embedder=shared_embedder, fit_chunks=False).update([corpus], show_progress=False)
    data = json.loads((tmp_path / "ix" / "manifest.json").read_text())
    data.pop("chunk_tokens")  # as an older version wrote it
    (tmp_path / "ix" / "manifest.json").write_text(json.dumps(data))
    again = ContextualIndex(tmp_path / "ix", embedder=shared_embedder).update([corpus], show_progress=False)
    assert again.files_unchanged == 2 and not again.note  # as recorded: nothing re-chunked, nothing paid
    fitted = ContextualIndex(tmp_path / "ix", embedder=shared_embedder, fit_chunks=True).update([corpus], show_progress=False)
    assert "chunk token budget changed (None -> 256)" in fitted.note


class _LongContexts:
    """A generator that writes LLM-length contexts (about 90 tokens), so the reserve matters."""

    name, model, prompt_identity, is_llm = "long-contexts", "m", "p", False

    def generate(self, document: Document, chunk: Chunk) -> Generation:
        return Generation(" ".join(["This chunk belongs to the deployment guide and explains"] * 10), TokenUsage())

    async def agenerate(self, document: Document, chunk: Chunk) -> Generation:
        return self.generate(document, chunk)


def test_an_llm_context_gets_its_reserve(corpus: Path) -> None:
    text = (corpus / "docs" / "operations.md").read_text()
    window = window_of(LocalMiniLMEmbedder())
    structural = chunk_to_fit(Document("docs/operations.md", text), window)
    llm = chunk_to_fit(Document("docs/operations.md", text), window, generator=_LongContexts())
    assert len(llm) > len(structural)
    context = _LongContexts().generate(Document("d", ""), Chunk("c", "d", "")).context
    header = "From docs/operations.md, section: Operations guide > Section 3 about deployments and rollbacks."
    assert max(tokens([f"{header}\n{context}\n\n{p}" for _, p in llm])) <= WINDOW



def test_the_cores_chunk_documents_feeds_a_searcher_that_truncates_nothing(corpus: Path) -> None:
    from contextual_retrieval_core import Contextualizer, HybridSearcher, chunk_documents
    from contextual_retrieval_core.types import stable_chunk_id

    docs = [Document(str(p.relative_to(corpus)), p.read_text()) for p in sorted(corpus.rglob("*.*"))]
    embedder = LocalMiniLMEmbedder()
    chunks = chunk_documents(docs)
    assert [(c.document_id, c.index) for c in chunks if c.index == 0] == [(d.id, 0) for d in docs]
    assert all(c.id == stable_chunk_id(c.document_id, c.index, c.text) for c in chunks)
    by_doc = {d.id: d.text for d in docs}
    assert all(by_doc[c.document_id][c.metadata["start_index"]:].startswith(c.text) for c in chunks)
    # an LLM's contexts change nothing: one request a chunk, whatever the contexts will be
    assert [c.id for c in chunk_documents(docs, embedder, generator=_LongContexts())] == [c.id for c in chunks]
    contextual = Contextualizer(config=ContextualizeConfig(show_progress=False)).contextualize(docs, chunks).chunks
    assert max(tokens([c.indexed_text for c in contextual])) > WINDOW  # long texts to embed whole
    with warnings.catch_warnings():
        warnings.simplefilter("error", TruncationWarning)
        hits = HybridSearcher(contextual, embedder).search("rollback step 5 of section 2", top_k=3)
    assert hits and embedder.truncated_count == 0
    # fitted: every text within the window, and an LLM's contexts get their room
    fitted = chunk_documents(docs, embedder, fit=True)
    situated = Contextualizer(config=ContextualizeConfig(show_progress=False)).contextualize(docs, fitted).chunks
    assert len(fitted) > len(chunks) and max(tokens([c.indexed_text for c in situated])) <= WINDOW
    assert len(chunk_documents(docs, embedder, fit=True, generator=_LongContexts())) > len(fitted)


def test_llamaindex_default_parser_cuts_by_characters_and_fitted_splitter_fits_the_window(corpus: Path) -> None:
    from llama_index.core import SimpleDirectoryReader
    from llama_index.core.schema import MetadataMode

    from contextual_retrieval_llamaindex import ContextualNodeParser, FittedSplitter, StructureSplitter

    docs = SimpleDirectoryReader(str(corpus), recursive=True, filename_as_id=True).load_data()
    parser = ContextualNodeParser(show_progress=False)
    assert type(parser.node_parser) is StructureSplitter
    nodes = parser.get_nodes_from_documents(docs)
    assert len(nodes) > 10 and max(tokens([n.get_content(MetadataMode.EMBED) for n in nodes])) > WINDOW
    loaded = ContextualNodeParser.from_dict(parser.to_dict())
    assert type(loaded.node_parser) is StructureSplitter
    assert [n.text for n in loaded.get_nodes_from_documents(docs)] == [n.text for n in nodes]

    fitted = ContextualNodeParser(node_parser=FittedSplitter(), show_progress=False)
    assert fitted.node_parser.window_tokens == WINDOW
    fitted_nodes = fitted.get_nodes_from_documents(docs)
    assert len(fitted_nodes) > len(nodes) and max(tokens([n.get_content(MetadataMode.EMBED) for n in fitted_nodes])) <= WINDOW
    again = ContextualNodeParser.from_dict(fitted.to_dict())
    assert isinstance(again.node_parser, FittedSplitter)
    assert [n.text for n in again.get_nodes_from_documents(docs)] == [n.text for n in fitted_nodes]


def test_langchain_transformer_without_a_splitter_cuts_by_characters_or_fits_when_asked(corpus: Path) -> None:
    from langchain_core.documents import Document as LCDocument

    from contextual_retrieval_langchain import ContextualDocumentTransformer

    docs = [LCDocument(page_content=p.read_text(), metadata={"source": str(p.relative_to(corpus))})
            for p in sorted(corpus.rglob("*.*"))]
    out = ContextualDocumentTransformer(show_progress=False).transform_documents(docs)
    assert len(out) > 10 and all(d.page_content.startswith("From ") for d in out)
    assert max(tokens([d.page_content for d in out])) > WINDOW
    fitted = ContextualDocumentTransformer(fit_chunks=True, show_progress=False).transform_documents(docs)
    assert len(fitted) > len(out) and max(tokens([d.page_content for d in fitted])) <= WINDOW


def test_the_warning_for_a_users_long_chunks_names_the_setting() -> None:
    embedder = LocalMiniLMEmbedder()
    with pytest.warns(TruncationWarning, match=r"embed long texts whole as windows .*windows=WindowConfig\(\)"):
        embedder.embed_documents([long_function("f", 20)])
