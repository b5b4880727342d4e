"""eval --generate-questions: questions from Claude on the user's own corpus (loopback Anthropic server)."""

from __future__ import annotations

import io
import json
import re

import anthropic
import pytest

from contextual_retrieval_core.app.cli import main
from contextual_retrieval_core.app.evaluation import load_cookbook
from contextual_retrieval_core.app.question_eval import (
    estimate_cost,
    evaluate_own_corpus,
    generate_questions,
    load_corpus,
)
from contextual_retrieval_core.contextualize.contextualizer import ContextualizationError
from contextual_retrieval_core.generators.anthropic import AnthropicContextGenerator
from contextual_retrieval_core.generators.questions import AnthropicQuestionGenerator, quoted_words, sample_chunks
from contextual_retrieval_core.store.context_store import ContextStore
from contextual_retrieval_core.store.errors import ContextStoreError
from tests.fakes.anthropic_server import FakeAnthropicServer

TOPICS = ["billing", "shipping", "returns", "accounts", "security", "search"]


def _corpus(folder, files=6, sections=4):
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(files):
        topic = TOPICS[i % len(TOPICS)]
        body = "\n\n".join(
            f"## {topic} rule {j}\n\n" + " ".join(f"The {topic} team handles case {j}-{k} within {k + 2} days." for k in range(40))
            for j in range(sections)
        )
        (folder / f"{topic}-{i}.md").write_text(f"# {topic.title()} handbook {i}\n\n{body}\n", encoding="utf-8")
    return folder


def _question(document: str, chunk: str, prompt: str) -> str | None:
    """Questions in the user's words; a chunk about rule 1 is first answered with a verbatim copy."""
    if "realistic question" not in prompt:
        return None
    words = re.findall(r"\w+", chunk)
    if "rule 1" in chunk and "must not repeat" not in prompt:
        return " ".join(words[:20]) + "?"
    return f"How long does the {words[1]} team take for {words[3]} cases?"


@pytest.fixture()
def server():
    with FakeAnthropicServer(answerer=_question) as srv:  # the real cache minimums (4096 for Haiku 4.5)
        yield srv


@pytest.fixture(scope="module")
def shared_embeddings(tmp_path_factory, offline_embedder):
    """The offline embedder behind one SQLite embedding cache for this module's tests, which embed
    largely the same chunks (`_corpus`'s texts, and the fake server's contexts for them): each text
    is embedded once for the module. Only for tests whose assertions do not depend on what is
    embedded or cached (none of them counts embeddings); the eval commands get the same file
    (--embedding-cache)."""
    from contextual_retrieval_core.embeddings.cache import CachedEmbedder

    cached = CachedEmbedder(offline_embedder, tmp_path_factory.mktemp("embeddings") / "embeddings.sqlite3")
    yield cached
    cached.close()


def _gens(server):
    client = anthropic.Anthropic(api_key=server.api_key, base_url=server.url, max_retries=2)
    return AnthropicQuestionGenerator(client=client), AnthropicContextGenerator(client=client)


def test_sample_is_stratified_seeded_and_refuses_too_few_chunks(tmp_path):
    corpus = load_corpus(_corpus(tmp_path / "docs"))
    a, b = sample_chunks(corpus.chunks, 6, seed=3), sample_chunks(corpus.chunks, 6, seed=3)
    assert [c.id for c in a] == [c.id for c in b]
    assert len({c.document_id for c in a}) == 6  # one per document before any document gets two
    assert [c.id for c in sample_chunks(corpus.chunks, 6, seed=4)] != [c.id for c in a]
    with pytest.raises(ValueError, match=rf"only {len(corpus.chunks)} non-empty chunks.*at most {len(corpus.chunks)}"):
        sample_chunks(corpus.chunks, len(corpus.chunks) + 1)


def test_quoted_words_counts_the_longest_verbatim_run():
    assert quoted_words("where is the retry layer configured", "the SDK has a retry layer; it is configured here") == 2
    assert quoted_words("Does THE SDK have a retry layer?", "the SDK has a retry layer; the sdk have a retry layer") == 6
    assert quoted_words("Nothing shared", "at all") == 0


def test_generated_set_is_in_the_cookbook_format_and_scores_again(server, tmp_path, shared_embeddings):
    questions, contexts = _gens(server)
    store = ContextStore(tmp_path / "store.sqlite3")
    result = evaluate_own_corpus(_corpus(tmp_path / "docs"), 8, question_generator=questions, context_generator=contexts,
                                 store=store, embedder=shared_embeddings, out=tmp_path / "set")
    lines = [json.loads(x) for x in (tmp_path / "set" / "evaluation_set.jsonl").read_text().splitlines()]
    assert len(lines) == len(result.questions.questions) == 8 - result.questions.dropped
    assert set(lines[0]) == {"query", "answer", "golden_doc_uuids", "golden_chunk_uuids", "golden_documents",
                             "golden_chunks", "meta"}
    dataset = load_cookbook(tmp_path / "set")
    chunks = {c.id: c for c in dataset.chunks}
    assert len(dataset.chunks) == len(result.dataset.chunks)
    for line, q in zip(lines, dataset.queries):
        (golden,) = q.golden
        assert line["golden_chunks"][0]["content"] == chunks[golden].text
        assert line["golden_chunk_uuids"] == [[line["golden_doc_uuids"][0], chunks[golden].index]]
    # the rule-1 chunks were answered verbatim first: rejected, asked again with the retry prompt, kept
    assert result.questions.rejected >= 1 and result.questions.dropped == 0
    assert all(q.quoted_words <= 8 for q in result.questions.questions)
    assert {q.attempt for q in result.questions.questions} == {1, 2}
    assert [r.name for r in result.results] == ["hybrid", "contextual-hybrid"]
    # the question prompts carry the bare chunk, never a generated context
    asked = [r for r in server.requests_to("/v1/messages") if "realistic question" in json.dumps(r.body)]
    assert asked and not any("This chunk is from" in json.dumps(r.body) for r in asked)


def test_a_rerun_pays_for_nothing(server, tmp_path):
    questions, _ = _gens(server)
    corpus = load_corpus(_corpus(tmp_path / "docs"))
    store_path = tmp_path / "store.sqlite3"
    with ContextStore(store_path) as store:
        first = generate_questions(corpus, 10, questions, store)
    paid = [r for r in server.requests_to("/v1/messages") if r.status == 200]
    assert len(paid) == first.usage.requests == 10 + first.rejected
    with ContextStore(store_path) as store:
        again = generate_questions(corpus, 10, questions, store)
    assert again.usage.requests == 0  # every question, the retried ones too, came from the store
    assert len([r for r in server.requests_to("/v1/messages") if r.status == 200]) == len(paid)
    assert [q.question for q in again.questions] == [q.question for q in first.questions]


def test_a_crash_midway_keeps_what_arrived(tmp_path):
    corpus = load_corpus(_corpus(tmp_path / "docs"))
    with FakeAnthropicServer(answerer=_question) as srv:
        questions, _ = _gens(srv)
        with ContextStore(tmp_path / "s.sqlite3") as store:
            srv.fail_next(400, times=1, body={"type": "error", "error": {"type": "invalid_request_error", "message": "boom"}})
            with pytest.raises(ContextualizationError, match="boom"):
                generate_questions(corpus, 6, questions, store, concurrency=1)
            stored = len(store)
            before = len([r for r in srv.requests_to("/v1/messages") if r.status == 200])
            done = generate_questions(corpus, 6, questions, store, concurrency=1)
            paid = len([r for r in srv.requests_to("/v1/messages") if r.status == 200]) - before
    assert stored + paid == 6 + done.rejected  # the second run paid only for what the first had not stored


def test_dry_run_estimate_matches_the_paid_usage_within_ten_percent(server, tmp_path, shared_embeddings):
    questions, contexts = _gens(server)
    # documents of ~1,600 to ~6,300 tokens: some under the cache minimum, some over
    corpus = load_corpus(_corpus(tmp_path / "docs", files=6, sections=6))
    for i, d in enumerate(corpus.documents[:3]):
        (tmp_path / "docs" / d.id.split("/", 1)[1]).write_text(d.text * (2 if i < 2 else 1) if i else d.text[:6400])
    corpus = load_corpus(tmp_path / "docs")
    with ContextStore(tmp_path / "store.sqlite3") as store:
        estimate = estimate_cost(corpus, 12, questions, contexts, store)
        assert estimate.questions_to_generate == 12 and estimate.contexts_to_generate == len({(c.document_id, c.text) for c in corpus.chunks})
        # the estimate says how many chunks, so context requests, the run makes
        assert estimate.chunks == len(corpus.chunks) and f"chunks: {len(corpus.chunks)} (one context request each" in estimate.format()
        result = evaluate_own_corpus(corpus, 12, question_generator=questions, context_generator=contexts, store=store,
                                     embedder=shared_embeddings, max_quoted_words=100)
        again = estimate_cost(corpus, 12, questions, contexts, store)
    paid = result.paid_cost_usd()
    assert paid and abs(estimate.total_cost_usd - paid) <= 0.10 * paid, (estimate.format(), result.format())
    assert abs(estimate.total_tokens - sum(result.paid_usage.to_dict()[k] for k in (
        "input_tokens", "cache_write_tokens", "cache_write_1h_tokens", "cache_read_tokens", "output_tokens"))) <= 0.10 * estimate.total_tokens
    assert again.total_cost_usd == 0 and again.questions_to_generate == 0 and again.contexts_to_generate == 0


def test_cli_dry_run_pays_nothing_and_needs_yes(server, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ANTHROPIC_API_KEY", server.api_key)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
    docs = _corpus(tmp_path / "docs")
    base = ["eval", "--generate-questions", "5", str(docs), "--store", str(tmp_path / "s.sqlite3"), "--no-progress",
            "--embedding-cache", "none", "--out", str(tmp_path / "set")]
    assert main([*base, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "questions: 5 to generate" in out and "contexts: " in out and "$" in out
    assert server.requests_to("/v1/messages") == []
    monkeypatch.setattr("sys.stdin", io.StringIO(""))  # not a terminal: no one to ask
    assert main(base) == 2
    assert "pass --yes" in capsys.readouterr().err
    assert server.requests_to("/v1/messages") == [] and not (tmp_path / "set").exists()


def test_cli_dry_run_needs_no_key_and_counts_the_chunks(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")  # nothing listens: a request would fail
    docs = _corpus(tmp_path / "docs")
    args = ["eval", "--generate-questions", "5", str(docs), "--store", str(tmp_path / "s.sqlite3"), "--dry-run",
            "--json", str(tmp_path / "e.json")]
    assert main(args) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    estimate = json.loads((tmp_path / "e.json").read_text())["estimate"]
    assert "questions: 5 to generate" in out and f"chunks: {estimate['chunks']} (one context request each" in out
    assert estimate["chunks"] == estimate["contexts_to_generate"] > 5 and estimate["total_cost_usd"] > 0
    # without --dry-run the key is still asked for, before anything is paid
    assert main(args[:-3]) == 2
    err = capsys.readouterr().err
    assert "ANTHROPIC_API_KEY is not set: export ANTHROPIC_API_KEY" in err and "--dry-run" in err
    assert "client=anthropic" not in err  # a command-line user gets command-line advice


def test_cli_errors_name_the_fix(server, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ANTHROPIC_API_KEY", server.api_key)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
    small = tmp_path / "small"
    small.mkdir()
    (small / "a.md").write_text("# One\n\nA single short chunk.\n", encoding="utf-8")
    assert main(["eval", "--generate-questions", "5", str(small), "--dry-run"]) == 2
    assert "only 1 non-empty chunks" in capsys.readouterr().err
    bad = _corpus(tmp_path / "bad", files=2)
    (bad / "broken.md").write_bytes(b"\x81\x8d\x8f\x90\x9d" * 10)  # not UTF-8, UTF-16 or cp1252
    assert main(["eval", "--generate-questions", "2", str(bad), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "broken.md" in err and "UTF-8" in err
    assert main(["eval", "--generate-questions", "2"]) == 2
    assert "--generate-questions N PATH" in capsys.readouterr().err
    assert main(["eval", "--generate-questions", "2", str(tmp_path / "nowhere"), "--dry-run"]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_batch_mode_is_half_price_and_estimated_as_such(server, tmp_path, shared_embeddings):
    questions, contexts = _gens(server)
    corpus = load_corpus(_corpus(tmp_path / "docs"))
    with ContextStore(tmp_path / "store.sqlite3") as store:
        estimate = estimate_cost(corpus, 6, questions, contexts, store, mode="batch")
        realtime = estimate_cost(corpus, 6, questions, contexts, store)
        result = evaluate_own_corpus(corpus, 6, question_generator=questions, context_generator=contexts, store=store,
                                     embedder=shared_embeddings, mode="batch", batch_poll_interval=0.05, max_quoted_words=100)
    assert server.requests_to("/v1/messages") == []  # everything went through Message Batches
    assert len(server.requests_to("/v1/messages/batches", "POST")) == 2  # one for the questions, one for the contexts
    assert estimate.batch and estimate.total_cost_usd < 0.6 * realtime.total_cost_usd
    paid = result.paid_cost_usd()
    assert paid and abs(estimate.total_cost_usd - paid) <= 0.10 * paid


def test_with_a_reranker_every_configuration_is_also_scored_reranked(server, cohere_server, tmp_path, shared_embeddings):
    questions, contexts = _gens(server)
    with ContextStore(tmp_path / "store.sqlite3") as store:
        result = evaluate_own_corpus(_corpus(tmp_path / "docs"), 4, question_generator=questions, context_generator=contexts,
                                     store=store, embedder=shared_embeddings, reranker=cohere_server.reranker())
    assert [r.name for r in result.results] == ["hybrid", "hybrid+rerank", "contextual-hybrid", "contextual-hybrid+rerank"]
    assert len(cohere_server.rerank_requests()) == 2 * 4  # each reranked row reranked every query (fake Cohere)


def test_an_index_folder_gives_the_chunks_it_indexed(tmp_path, offline_embedder):
    from contextual_retrieval_core.index.contextual_index import ContextualIndex

    docs = _corpus(tmp_path / "docs", files=2, sections=2)
    index = ContextualIndex(tmp_path / "idx", embedder=offline_embedder, chunk_chars=600)
    index.update([docs], show_progress=False)
    index.close()
    from_index = load_corpus(tmp_path / "idx")
    assert sorted(c.id for c in from_index.chunks) == sorted(ContextualIndex.read_manifest(tmp_path / "idx").chunk_ids())
    assert len(from_index.chunks) > len(load_corpus(docs).chunks)  # its own chunk size (600), not the default


_CHILD = """
import sys
from contextual_retrieval_core.app.question_eval import generate_questions, load_corpus
from contextual_retrieval_core.generators.questions import AnthropicQuestionGenerator
from contextual_retrieval_core.store.context_store import ContextStore
with ContextStore(sys.argv[2]) as store:
    generate_questions(load_corpus(sys.argv[1]), 10, AnthropicQuestionGenerator(), store, concurrency=1, max_quoted_words=100)
"""


def test_a_killed_run_loses_at_most_the_request_in_flight(tmp_path, monkeypatch):
    import os
    import signal
    import sqlite3
    import subprocess
    import sys
    import time

    docs, store_path = _corpus(tmp_path / "docs"), tmp_path / "store.sqlite3"
    with FakeAnthropicServer(answerer=_question, latency_s=0.3) as srv:
        env = {**os.environ, "ANTHROPIC_API_KEY": srv.api_key, "ANTHROPIC_BASE_URL": srv.url}
        child = subprocess.Popen([sys.executable, "-c", _CHILD, str(docs), str(store_path)], env=env)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and child.poll() is None:
            try:  # the child may be creating the file right now
                with ContextStore(store_path, read_only=True) as peek:
                    if len(peek) >= 3:
                        break
            except (ContextStoreError, sqlite3.Error, ValueError):
                pass
            time.sleep(0.05)
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        with ContextStore(store_path) as store:
            stored = len(store)
            assert 3 <= stored < 10
            killed_paid = len([r for r in srv.requests_to("/v1/messages") if r.status == 200])
            assert killed_paid <= stored + 1  # at most the one request in flight was lost
            monkeypatch.setenv("ANTHROPIC_API_KEY", srv.api_key)
            monkeypatch.setenv("ANTHROPIC_BASE_URL", srv.url)
            done = generate_questions(load_corpus(docs), 10, AnthropicQuestionGenerator(), store, max_quoted_words=100)
        assert done.usage.requests == 10 - stored  # the rerun paid only for the questions not stored
        assert len(done.questions) == 10


def _context_requests(server) -> int:
    """Context requests the loopback server answered (question requests ask for "a realistic question")."""
    return len([r for r in server.requests_to("/v1/messages")
                if r.status == 200 and "realistic question" not in json.dumps(r.body)])


@pytest.mark.parametrize("first", ["eval", "index"])
def test_eval_and_index_pay_for_each_context_once_in_either_order(server, tmp_path, monkeypatch, capsys, first,
                                                                  shared_embeddings):
    """`eval --generate-questions` and `index` on one folder chunk alike and share the user's context
    store: whichever runs second pays no context request, and its dry run counts none to generate."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", server.api_key)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # the shared store of both commands
    docs = _corpus(tmp_path / "docs", files=3, sections=3)
    # the module's embedding cache: what is embedded is not what this test checks
    evaluate = ["eval", "--generate-questions", "3", str(docs), "--no-progress", "--embedding-cache", shared_embeddings.path,
                "--out", str(tmp_path / "set"), "--max-quoted-words", "100"]
    index = ["index", str(docs), "-o", str(tmp_path / "idx"), "--contexts", "anthropic", "--embedder", "local",
             "--no-progress", "--json", str(tmp_path / "index.json")]
    commands = {"eval": [*evaluate, "--yes"], "index": index}
    assert main(commands[first]) == 0, capsys.readouterr().err
    paid = _context_requests(server)
    assert paid >= 3 * 3  # at least a chunk per section: contexts were paid for once
    second = "index" if first == "eval" else "eval"
    if second == "eval":
        assert main([*evaluate, "--dry-run", "--json", str(tmp_path / "dry.json")]) == 0
        estimate = json.loads((tmp_path / "dry.json").read_text())["estimate"]
        assert estimate["contexts_to_generate"] == 0 and estimate["chunks"] == paid, estimate
    capsys.readouterr()
    assert main(commands[second]) == 0, capsys.readouterr().err
    assert _context_requests(server) == paid  # the second command paid no context
    if second == "index":
        report = json.loads((tmp_path / "index.json").read_text())
        assert report["contexts"]["store_hits"] == report["contexts"]["chunks"] == paid, report["contexts"]
    # the index's own store holds every context: the folder needs no shared store to be rebuilt
    with ContextStore(tmp_path / "idx" / "contexts.sqlite3", read_only=True) as own:
        assert len(own) == paid


def test_eval_on_an_index_folder_reads_the_contexts_in_the_folder(server, tmp_path, monkeypatch, capsys):
    """An index built with its own store only (`--store none`, or before stores were shared): `eval`
    on that folder takes its contexts from the folder and chunks as the index did."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", server.api_key)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    docs = _corpus(tmp_path / "docs", files=2, sections=3)
    assert main(["index", str(docs), "-o", str(tmp_path / "idx"), "--contexts", "anthropic", "--embedder", "local",
                 "--no-progress", "--chunk-chars", "500", "--store", "none"]) == 0, capsys.readouterr().err
    assert not (tmp_path / "cache" / "contextual-retrieval" / "contexts.sqlite3").exists()
    paid = _context_requests(server)
    assert main(["eval", "--generate-questions", "2", str(tmp_path / "idx"), "--dry-run", "--json",
                 str(tmp_path / "dry.json")]) == 0, capsys.readouterr().err
    estimate = json.loads((tmp_path / "dry.json").read_text())["estimate"]
    assert estimate["chunks"] == paid and estimate["contexts_to_generate"] == 0, estimate


def test_eval_chunks_with_indexs_options(tmp_path, offline_embedder):
    from contextual_retrieval_core.index.contextual_index import ContextualIndex

    docs = _corpus(tmp_path / "docs", files=2, sections=3)
    for fit in (False, True):
        index = ContextualIndex(tmp_path / f"idx-{fit}", embedder=offline_embedder, chunk_chars=1500, fit_chunks=fit)
        index.update([docs], show_progress=False, shared_contexts=False)
        index.close()
        indexed = sorted(ContextualIndex.read_manifest(tmp_path / f"idx-{fit}").chunk_ids())
        from_folder = load_corpus(docs, chunk_chars=1500, fit_chunks=fit, embedder=offline_embedder)
        assert sorted(c.id for c in from_folder.chunks) == indexed
    assert len(load_corpus(docs, chunk_chars=1500, fit_chunks=True, embedder=offline_embedder).chunks) > len(
        load_corpus(docs, chunk_chars=1500).chunks)  # fitting made a difference here
