"""`structural_header`: the chunk's structural context on a line before an LLM's context.

Core `Contextualizer` (against the fake Anthropic server, through the real SDK), both framework
ingestion parts, `evaluate` and `contextual-retrieval eval --structural-header`.
"""

from __future__ import annotations

import json

import anthropic
import pytest

from contextual_retrieval_core import Chunk, Document
from contextual_retrieval_core.app.evaluation import evaluate, load_contexts_jsonl, load_cookbook, structural_contexts
from contextual_retrieval_core.contextualize.config import ContextualizeConfig
from contextual_retrieval_core.contextualize.contextualizer import Contextualizer
from contextual_retrieval_core.generators import AnthropicContextGenerator, CallableContextGenerator, Generation
from contextual_retrieval_core.generators.structural import StructuralContextGenerator, with_structural_header
from tests.fakes.anthropic_server import FakeAnthropicServer

SOURCE = (
    "class DiffExecutor:\n"
    "    def __init__(self, primary, secondary):\n"
    "        self.primary = primary\n"
    "        self.secondary = secondary\n\n"
    "    def run_target(self, data):\n"
    "        first = self.primary.run(data)\n"
    "        second = self.secondary.run(data)\n"
    "        return first == second\n"
)
DOC = Document("fuzz/differential.py", SOURCE)
CHUNKS = [
    Chunk("c0", DOC.id, SOURCE[: SOURCE.index("    def run_target")], 0),
    Chunk("c1", DOC.id, SOURCE[SOURCE.index("    def run_target") :], 1),
]


def test_with_structural_header_joins_and_skips_empty_parts():
    assert with_structural_header("From a.py.", "Runs it.") == "From a.py.\nRuns it."
    assert with_structural_header("From a.py.", "  ") == "From a.py."
    assert with_structural_header("", "Runs it.") == "Runs it."


def test_contextualizer_puts_the_header_before_the_llm_context_and_stores_the_llm_text(tmp_path):
    store = tmp_path / "contexts.sqlite3"
    with FakeAnthropicServer() as server:
        client = anthropic.Anthropic(api_key=server.api_key, base_url=server.url, max_retries=0)
        gen = AnthropicContextGenerator("claude-3-haiku-20240307", client=client)
        plain = Contextualizer(gen, store, config=ContextualizeConfig(show_progress=False, structural_header=False)).contextualize([DOC], CHUNKS)
        requests = len([r for r in server.requests if r.path == "/v1/messages"])
        assert requests == len(CHUNKS)
        headed = Contextualizer(gen, store, config=ContextualizeConfig(show_progress=False)).contextualize([DOC], CHUNKS)  # the default
        # the store answered: no second payment, and it holds the LLM's text as written
        assert len([r for r in server.requests if r.path == "/v1/messages"]) == requests
        assert headed.report.store_hits == len(CHUNKS) and headed.report.generated == 0
    structural = StructuralContextGenerator()
    for p, h, chunk in zip(plain.chunks, headed.chunks, CHUNKS):
        header = structural.generate(DOC, chunk).context
        assert header.startswith("From fuzz/differential.py") and p.context and header not in p.context
        assert h.context == f"{header}\n{p.context}"
        assert h.indexed_text == f"{header}\n{p.context}\n\n{chunk.text}".strip()
    assert "def run_target" in headed.chunks[1].context  # the header names the enclosing definition


def test_the_structural_generator_gets_no_second_header_and_bad_values_are_refused():
    plain = Contextualizer(config=ContextualizeConfig(show_progress=False, structural_header=False)).contextualize([DOC], CHUNKS)
    headed = Contextualizer(config=ContextualizeConfig(show_progress=False)).contextualize([DOC], CHUNKS)
    assert [c.context for c in headed.chunks] == [c.context for c in plain.chunks]
    with pytest.raises(TypeError, match="structural_header must be True or False"):
        Contextualizer(config=ContextualizeConfig(show_progress=False, structural_header="yes"))


def _fixed_generator() -> CallableContextGenerator:
    return CallableContextGenerator(lambda document, chunk: Generation(f"Part {chunk.index} of the differential executor."),
                                    name="fixed-contexts", is_llm=False)


def test_both_framework_parts_pass_it_to_the_core():
    from langchain_core.documents import Document as LCDocument
    from llama_index.core import Document as LIDocument
    from llama_index.core.node_parser import SentenceSplitter

    from contextual_retrieval_langchain import ContextualDocumentTransformer
    from contextual_retrieval_llamaindex import ContextualNodeParser

    core = Contextualizer(_fixed_generator(), None, config=ContextualizeConfig(show_progress=False, structural_header=True)).contextualize([DOC], CHUNKS)
    expected = [c.context for c in core.chunks]

    transformer = ContextualDocumentTransformer(generator=_fixed_generator(), show_progress=False, structural_header=True)
    docs = transformer.transform_documents([LCDocument(c.text, metadata={"source": DOC.id}) for c in CHUNKS],
                                           parents=[LCDocument(SOURCE, metadata={"source": DOC.id})])
    assert [d.metadata["context"] for d in docs] == expected

    parser = ContextualNodeParser(node_parser=SentenceSplitter(chunk_size=1024), generator=_fixed_generator(),
                                  show_progress=False, structural_header=True)
    nodes = parser.get_nodes_from_documents([LIDocument(text=SOURCE, id_=DOC.id)])
    assert len(nodes) == 1
    header = StructuralContextGenerator().generate(DOC, Chunk("n", DOC.id, nodes[0].get_content(), 0)).context
    assert nodes[0].metadata["context"] == f"{header}\nPart 0 of the differential executor."
    off = ContextualNodeParser(node_parser=SentenceSplitter(chunk_size=1024), generator=_fixed_generator(), show_progress=False,
                               structural_header=False)
    assert off.get_nodes_from_documents([LIDocument(text=SOURCE, id_=DOC.id)])[0].metadata["context"] == "Part 0 of the differential executor."


class _Recorder:
    model_name, normalized = "recorder", True

    def __init__(self):
        self.documents: list[str] = []

    def _vec(self, texts):
        import numpy as np

        return np.ones((len(texts), 4), dtype=np.float32) / 2.0

    def embed_documents(self, texts):
        self.documents.extend(texts)
        return self._vec(texts)

    def embed_queries(self, texts):
        return self._vec(texts)


def test_evaluate_and_the_eval_command_index_the_headed_contexts(tiny_dataset, tmp_path, capsys):
    from contextual_retrieval_core.app.cli import main
    from contextual_retrieval_core.types import ContextualChunk

    ds = load_cookbook(tiny_dataset)
    contexts = load_contexts_jsonl(tiny_dataset / "contexts.jsonl", ds)
    structural = structural_contexts(ds)
    recorder = _Recorder()
    evaluate(ds, recorder, contexts, ["contextual-dense"])  # the default: headed
    headed = {ContextualChunk(c, with_structural_header(structural[c.id], contexts[c.id])).indexed_text for c in ds.chunks}
    assert set(recorder.documents) == headed
    # the BM25 side sees the same text: headed contexts in, the same ranking as pre-composed ones
    composed = {cid: with_structural_header(structural[cid], text) for cid, text in contexts.items()}
    a = evaluate(ds, _Recorder(), contexts, ["contextual-bm25"], structural_header=True)[0]
    b = evaluate(ds, _Recorder(), composed, ["contextual-bm25"], structural_header=False)[0]
    assert a.pass_at == b.pass_at and a.mrr == b.mrr
    plain = evaluate(ds, _Recorder(), contexts, ["contextual-bm25"], structural_header=False)[0]
    # BM25 sees the header: a query only the header answers ("target": the header of the chunk
    # inside run_target names it; neither chunk's text nor any LLM context has the word)
    from contextual_retrieval_core.app.evaluation import EvalDataset, EvalQuery

    tail = Chunk("c1", DOC.id, SOURCE[SOURCE.index("        first = ") :], 1)
    mini = EvalDataset([DOC], [Chunk("other", DOC.id, "self.secondary = secondary", 2), tail],
                       [EvalQuery("target", ("c1",))])
    mini_contexts = {"c1": "Calls both sides.", "other": "Stores the executor pair."}
    scores = {h: evaluate(mini, _Recorder(), mini_contexts, ["contextual-bm25"], structural_header=h, ks=(1,))[0].pass_at[1]
              for h in (True, False)}
    assert scores == {True: 100.0, False: 0.0}

    out = tmp_path / "r.json"
    assert main(["eval", "--dataset", str(tiny_dataset), "--contexts", str(tiny_dataset / "contexts.jsonl"),
                 "--configs", "contextual-bm25", "--json", str(out),
                 "--embedding-cache", "none", "--no-progress"]) == 0
    payload = json.loads(out.read_text())
    assert payload["structural_header"] is True
    assert payload["configs"][0]["mrr"] == round(a.mrr, 2)
    assert main(["eval", "--dataset", str(tiny_dataset), "--contexts", str(tiny_dataset / "contexts.jsonl"),
                 "--configs", "contextual-bm25", "--no-structural-header", "--json", str(out),
                 "--embedding-cache", "none", "--no-progress"]) == 0
    payload = json.loads(out.read_text())
    assert payload["structural_header"] is False and payload["configs"][0]["mrr"] == round(plain.mrr, 2)
    assert payload["configs"][0]["pass_at"] == {str(k): round(v, 2) for k, v in plain.pass_at.items()}


def test_an_index_records_the_header_and_an_older_index_is_re_embedded_with_it_at_no_llm_cost(tmp_path, offline_embedder):
    from contextual_retrieval_core.embeddings.cache import CachedEmbedder
    from contextual_retrieval_core.index.contextual_index import ContextualIndex

    folder = tmp_path / "src"
    folder.mkdir()
    (folder / "differential.py").write_text(SOURCE, encoding="utf-8")
    calls: list[str] = []

    def situate(document, chunk):
        calls.append(chunk.id)
        return "Part of the differential executor."

    gen = CallableContextGenerator(situate, name="fixed-llm", model="m1", is_llm=True)
    embedder = CachedEmbedder(offline_embedder, ":memory:")
    index = ContextualIndex(tmp_path / "ix", embedder=embedder, generator=gen)
    index.update([folder], show_progress=False)
    n = len(calls)
    manifest = json.loads((tmp_path / "ix" / "manifest.json").read_text())
    assert manifest["generator"]["header"] == "structural" and manifest["generator"]["label"].endswith("+ structural header")
    hit = index.search("run_target compares the two executors", top_k=1)[0]
    assert hit.context.startswith("From ") and hit.context.endswith("\nPart of the differential executor.")

    # an index written before the header was the default: its manifest has no "header"
    manifest["generator"].pop("header")
    manifest["generator"]["label"] = manifest["generator"]["label"].replace(" + structural header", "")
    (tmp_path / "ix" / "manifest.json").write_text(json.dumps(manifest))
    again = ContextualIndex(tmp_path / "ix", embedder=embedder, generator=gen)
    report = again.update([folder], show_progress=False)
    assert "every file is re-situated" in report.note and "+ structural header" in report.note
    assert len(calls) == n  # the contexts came from the index's store: no second generation
    assert again.search("run_target compares the two executors", top_k=1)[0].context == hit.context


def test_results_md_quotes_structural_header_json():
    from pathlib import Path

    bench = Path(__file__).resolve().parents[3] / "benchmarks"
    data = json.loads((bench / "structural_header.json").read_text(encoding="utf-8"))
    results = (bench / "RESULTS.md").read_text(encoding="utf-8")
    section = results[results.index("## The structural header on LLM contexts"):]
    section = section[: section.index("\n## ", 1)]

    def cells(row):
        return " ".join(f"{row['pass_at'][k]:.2f}" for k in ("5", "10", "20")) + f"  {row['mrr']:.2f}"

    for without, with_ in zip(data["without"], data["with"]):
        d = data["delta"][with_["name"]]
        change = " ".join(f"{d[k]:+.2f}" for k in ("5", "10", "20")) + f"  {d['mrr']:+.2f}"
        line = next(line for line in section.splitlines() if line.startswith(with_["name"] + " "))
        assert line.split() == [with_["name"], *cells(without).split(), *cells(with_).split(), *change.split()]
    fall = data["failure_fall_vs_hybrid_percent"]
    assert f"alone (without the header) cut them by {round(fall['without'])}%" in results
    h = data["header_tokens"]
    assert f"{round(h['mean'])} more tokens" in section and f"median {h['median']}, at most {h['max']}" in section


def test_a_setting_changed_after_construction_counts_in_both_frameworks_and_extra_context_ids_are_ignored(tiny_dataset):
    from langchain_core.documents import Document as LCDocument
    from llama_index.core import Document as LIDocument
    from llama_index.core.node_parser import SentenceSplitter

    from contextual_retrieval_core.app.evaluation import headed_contexts
    from contextual_retrieval_langchain import ContextualDocumentTransformer
    from contextual_retrieval_llamaindex import ContextualNodeParser

    parser = ContextualNodeParser(node_parser=SentenceSplitter(chunk_size=1024), generator=_fixed_generator(), show_progress=False)
    assert parser.get_nodes_from_documents([LIDocument(text=SOURCE, id_=DOC.id)])[0].metadata["context"].startswith("From ")
    parser.structural_header = False  # the pipeline cache key follows the field; so must the nodes
    assert parser.get_nodes_from_documents([LIDocument(text=SOURCE, id_=DOC.id)])[0].metadata["context"] == \
        "Part 0 of the differential executor."

    transformer = ContextualDocumentTransformer(generator=_fixed_generator(), show_progress=False)
    chunks = [LCDocument(c.text, metadata={"source": DOC.id}) for c in CHUNKS]
    parents = [LCDocument(SOURCE, metadata={"source": DOC.id})]
    assert transformer.transform_documents(chunks, parents=parents)[0].metadata["context"].startswith("From ")
    transformer.structural_header = False
    assert transformer.transform_documents(chunks, parents=parents)[0].metadata["context"] == "Part 0 of the differential executor."

    ds = load_cookbook(tiny_dataset)
    contexts = load_contexts_jsonl(tiny_dataset / "contexts.jsonl", ds)
    assert headed_contexts(ds, {**contexts, "not-a-chunk": "x"}) == headed_contexts(ds, contexts)
