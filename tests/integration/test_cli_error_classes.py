"""The `contextual-retrieval` command reports every library error class as one "error:" line
with exit code 2, no traceback: each class found in the three packages is raised through the real
CLI entry point (`main`), and the common ones are met for real (a spend-limit answer from the
loopback Anthropic API, a Cohere key the loopback API refuses, damaged index folders). `query`
never creates or alters an index folder, healthy or damaged."""

from __future__ import annotations

import importlib
import json
import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

from contextual_retrieval_core.app._errors import error_classes
from contextual_retrieval_core.app.cli import main
from contextual_retrieval_core.index.contextual_index import ContextualIndex
from contextual_retrieval_core.index.manifest import IndexManifest
from tests.fakes.anthropic_server import CREDIT_BALANCE_MESSAGE, FakeAnthropicServer
from tests.fakes.cohere_server import FakeCohereServer
from tests.notes_corpus import folder_digest, make_corpus

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("contextual_retrieval_core", "contextual_retrieval_llamaindex", "contextual_retrieval_langchain")
STORE = "/data/ix/contexts.sqlite3"
FIX = "re-run `contextual-retrieval index PATH... --index-dir /data/ix` to repair it"


def library_error_classes() -> dict[str, type[BaseException]]:
    """Every exception class defined in the three packages, by qualified name (warnings are
    gathered into one line, see test_index_cli_edges.py)."""
    found: dict[str, type[BaseException]] = {}
    for package in PACKAGES:
        for info in pkgutil.walk_packages(importlib.import_module(package).__path__, package + "."):
            module = importlib.import_module(info.name)
            for obj in vars(module).values():
                if (isinstance(obj, type) and issubclass(obj, BaseException) and not issubclass(obj, Warning)
                        and not issubclass(obj, KeyboardInterrupt)  # SIGTERM's Terminated: exits 143, test_sigterm.py
                        and obj.__module__ == module.__name__):
                    found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return found


#: one instance of each class, its message naming the file (where there is one) and the fix
EXAMPLES = {
    "contextual_retrieval_core.store.errors.ContextStoreError": lambda c: c(
        f"context store {STORE}: commit failed: database or disk is full — the disk is full; free some space "
        "and run again (what is stored is kept)", STORE),
    "contextual_retrieval_core.checks.IndexFileError": lambda c: c("/data/ix/bm25-1/indices.npy", "is empty"),
    "contextual_retrieval_core.index.manifest.IndexDamagedError": lambda c: c(f"/data/ix/chroma is missing; {FIX}"),
    "contextual_retrieval_core.index.manifest.IndexMismatchError": lambda c: c(
        "the index /data/ix was built with the embedder 'voyage-3', not 'all-MiniLM-L6-v2'; use the same "
        "embedder (contextual-retrieval index --embedder voyage)"),
    "contextual_retrieval_core.index.lock.IndexLockedError": lambda c: c(
        "/data/ix is updating (pid 4242); wait for it, or pass --lock-wait SECONDS"),
    "contextual_retrieval_core.index.files.UndecodableFileError": lambda c: c(
        "/data/docs/odd.txt: not UTF-8, UTF-16 or cp1252 (byte 0x81 at 6); convert it to UTF-8"),
    "contextual_retrieval_core.contextualize.contextualizer.ContextualizationError": lambda c: c(
        f"2 of 9 contexts could not be generated; those that were are in {STORE}: rerun to resume", {"a": "x"}),
    "contextual_retrieval_core.generators.base.GenerationError": lambda c: c(
        "unreadable response for chunk a; rerun to retry it"),
    "contextual_retrieval_core.generators.base.FatalGenerationError": lambda c: c(
        "invalid x-api-key: check ANTHROPIC_API_KEY"),
    "contextual_retrieval_core.generators.base.RateLimitedTooLong": lambda c: c(
        "only rate-limit answers (429) for 120 s; contexts so far are stored: rerun later"),
    "contextual_retrieval_core.generators._anthropic_http.SpendLimitReached": lambda c: c(
        "You have reached your specified API usage limits; raise them in the Console, then rerun"),
    "contextual_retrieval_core.chunking.code_outline.GrammarUnavailable": lambda c: c(
        "no tree-sitter grammar for 'lua'; install tree-sitter-language-pack"),
}


@pytest.fixture(scope="module")
def classes() -> dict[str, type[BaseException]]:
    return library_error_classes()


def raise_through_query(error: BaseException, monkeypatch, capsys) -> tuple[int, str]:
    """Run `contextual-retrieval query` through `main` with `error` raised by its first library call."""

    def fails(path):
        raise error

    monkeypatch.setattr(IndexManifest, "read", staticmethod(fails))  # what `query` reads first
    code = main(["query", "/data/ix", "refunds"])
    return code, capsys.readouterr().err


@pytest.mark.usefixtures("offline_env")
def test_every_library_error_class_is_reported_by_the_cli(classes, monkeypatch, capsys) -> None:
    assert set(EXAMPLES) <= set(classes), "EXAMPLES names a class that is gone"
    unreported = [name for name, cls in classes.items() if not issubclass(cls, error_classes())]
    assert unreported == []
    for name in sorted(set(classes) - set(EXAMPLES)):  # a class added since: raised with a plain message
        error = classes[name].__new__(classes[name])
        BaseException.__init__(error, f"/data/ix/file: {name} went wrong; do this to fix it")
        code, err = raise_through_query(error, monkeypatch, capsys)
        assert code == 2 and err == f"contextual-retrieval query: error: {error}\n", name


@pytest.mark.usefixtures("offline_env")
@pytest.mark.parametrize("name", sorted(EXAMPLES), ids=lambda n: n.rsplit(".", 1)[-1])
def test_each_error_class_exits_2_with_its_message_and_no_traceback(name, classes, monkeypatch, capsys) -> None:
    error = EXAMPLES[name](classes[name])
    code, err = raise_through_query(error, monkeypatch, capsys)
    assert code == 2
    assert err == f"contextual-retrieval query: error: {error}\n"
    assert "Traceback" not in err


# -- met for real ----------------------------------------------------------------------------------


@pytest.mark.usefixtures("offline_env")
@pytest.mark.parametrize("status,message", [(429, None), (400, CREDIT_BALANCE_MESSAGE)])
def test_a_spend_limit_answer_stops_index_with_the_apis_message(tmp_path, monkeypatch, capsys, status, message) -> None:
    folder = make_corpus(tmp_path)
    with FakeAnthropicServer() as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", server.api_key)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        server.spend_limit(True, status=status, **({"message": message} if message else {}))
        code = main(["index", str(folder), "--index-dir", str(tmp_path / "ix"), "--contexts", "anthropic",
                     "--no-progress", "--concurrency", "2"])
        sent = len([r for r in server.requests if r.path == "/v1/messages"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and server.api_key not in err
    assert "error:" in err and ("spend limit" in err if message is None else "credit balance is too low" in err)
    assert sent <= 2  # stopped at once: no more than the requests in flight


def test_a_hosted_reranker_refusing_the_key_is_an_error_line_naming_the_fix(tmp_path) -> None:
    folder = make_corpus(tmp_path)
    ix = tmp_path / "ix"
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "VOYAGE_API_KEY", "COHERE_API_KEY", "CO_API_KEY")}
    env.update(XDG_CACHE_HOME=str(tmp_path / "cache"), PYTHONPATH=str(ROOT))
    cli = [sys.executable, "-m", "contextual_retrieval_core.app.cli"]
    built = subprocess.run([*cli, "index", str(folder), "--index-dir", str(ix), "--no-progress"], env=env,
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    with FakeCohereServer() as server:
        wrong = "wrong-key-0123456789"
        got = subprocess.run([*cli, "query", str(ix), "refunds", "--rerank", "cohere"], capture_output=True, text=True,
                             env={**env, "COHERE_API_KEY": wrong, "CO_API_URL": server.base_url}, timeout=300)
        assert [r.status for r in server.requests][:1] == [401]  # the real SDK reached the loopback API
    assert got.returncode == 2 and got.stdout == ""
    assert "Traceback" not in got.stderr and wrong not in got.stderr
    assert "error: UnauthorizedError: HTTP 401" in got.stderr and "COHERE_API_KEY" in got.stderr and "--rerank none" in got.stderr


# -- `query` reads only -------------------------------------------------------------------------


def _healthy(ix: Path) -> None:
    return None


def _empty_npy(ix: Path) -> None:
    (ix / ContextualIndex.read_manifest(ix).bm25 / "indices.npy").write_bytes(b"")


def _deleted_rows(ix: Path) -> None:
    (ix / json.loads((ix / "manifest.json").read_text())["bm25"] / "vectors.npy").unlink()


@pytest.mark.usefixtures("offline_env")
@pytest.mark.parametrize("damage,code", [(_healthy, 0), (_empty_npy, 2), (_deleted_rows, 2)],
                         ids=["healthy", "damaged-bm25", "deleted-rows"])
def test_query_never_creates_or_alters_an_index_folder(tmp_path, capsys, damage, code) -> None:
    folder = make_corpus(tmp_path)
    ix = tmp_path / "ix"
    assert main(["index", str(folder), "--index-dir", str(ix), "--no-progress"]) == 0
    damage(ix)
    before = folder_digest(ix)
    names = sorted(p.relative_to(ix) for p in ix.rglob("*"))
    capsys.readouterr()
    for extra in ([], ["--json"], ["--prune"], ["-k", "1", "--full"]):
        assert main(["query", str(ix), "how many days until refunds", *extra]) == code
        err = capsys.readouterr().err
        assert "Traceback" not in err and (code == 0 or "re-run `contextual-retrieval index" in err)
    assert folder_digest(ix) == before
    assert sorted(p.relative_to(ix) for p in ix.rglob("*")) == names  # no file or folder created
