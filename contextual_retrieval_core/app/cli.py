"""The `contextual-retrieval` command.

    contextual-retrieval demo [--offline] [--save-corpus DIR]
    contextual-retrieval index PATH... [--index-dir DIR] [--contexts auto|structural|anthropic]
    contextual-retrieval remove PATH... [--index-dir DIR]
    contextual-retrieval query INDEX "question" [-k N] [--rerank auto|none|cohere|voyage]
    contextual-retrieval eval --dataset DIR [--contexts FILE] [--json PATH] [--plot PATH]
    contextual-retrieval eval --generate-questions N PATH [--out DIR] [--dry-run] [--yes] [--batch]

Every subcommand has --help. Exit codes: 0 success (also when the output pipe closes early, as
with ``| head``), 2 bad usage, input or a damaged file (with a message that names the file and the
fix), 130 interrupted. Library warnings are gathered into one line at the end of the run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from contextual_retrieval_core.app._errors import describe, error_classes, gathered_warnings, quiet_broken_pipe
from contextual_retrieval_core.contextualize.interrupts import TERMINATED_EXIT_CODE, Terminated, sigterm_as_interrupt
from contextual_retrieval_core.errors import InputError, MissingDependencyError, RunError

__all__ = ["main", "build_parser"]


def _default_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "contextual-retrieval" / "embeddings.sqlite3"


def build_parser() -> argparse.ArgumentParser:
    from contextual_retrieval_core.app.evaluation import DATASET_ENV
    from contextual_retrieval_core.chunking.split import DEFAULT_CHUNK_CHARS

    parser = argparse.ArgumentParser(
        prog="contextual-retrieval",
        description="Contextual Retrieval (contextual embeddings + contextual BM25 + rank fusion) tools.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    ev = sub.add_parser(
        "eval",
        help="score retrieval configurations on a labelled dataset (cookbook format)",
        description=(
            "Run the configurations dense, bm25, hybrid (no contexts), structural-dense, structural-bm25, "
            "structural-hybrid (the offline structural contexts, computed here) and, with --contexts, "
            "contextual-dense, contextual-bm25, contextual-hybrid (the file's LLM contexts) with the library's "
            "defaults, and print Pass@k (the cookbook's definition), recall@k and MRR. Offline: the local "
            "MiniLM embedder; each distinct text is embedded once per run."
        ),
    )
    ev.add_argument(
        "--dataset",
        metavar="DIR",
        help="folder with codebase_chunks.json and evaluation_set.jsonl "
        f"(default: ${DATASET_ENV})",
    )
    ev.add_argument("--contexts", metavar="FILE", help="JSONL of precomputed contexts (doc_id, original_index, context)")
    ev.add_argument("--embedder", choices=["local", "voyage-context", "late-chunking"], default="local",
                    help="local (offline MiniLM, default), voyage-context (voyage-context-3, VOYAGE_API_KEY: "
                    "each document's chunks embedded together) or late-chunking (offline MiniLM run over each "
                    "document in 512-position macro-windows, each chunk pooled from its own tokens)")
    ev.add_argument("--windows", action=argparse.BooleanOptionalAction, default=True,
                    help="embed texts longer than the embedder's window whole: a chunk's own vector plus one per "
                    "further overlapping window, each with the chunk's context, scored by the best (default); "
                    "--no-windows: one vector per chunk, truncated at the window")
    ev.add_argument("--structural-header", action=argparse.BooleanOptionalAction, default=True,
                    help="put each chunk's structural context (file, section, definitions) on a line before the "
                    "--contexts context in the contextual-* configurations, as indexing does (default; "
                    "--no-structural-header: the contexts as given)")
    _dense_prf_options(ev, "in every configuration that fuses a dense side with BM25")
    ev.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    ev.add_argument("--plot", metavar="PATH", help="also write a PNG bar chart of Pass@k (needs matplotlib: "
                    "the `plot` extra, pip install 'contextual-retrieval-kit[plot]')")
    ev.add_argument(
        "--configs",
        metavar="NAME,...",
        help="comma-separated subset of configurations (default: all the inputs allow)",
    )
    ev.add_argument(
        "--embedding-cache",
        metavar="PATH",
        default=None,
        help=f"SQLite embedding cache (default: {_default_cache()}); 'none' disables it",
    )
    ev.add_argument("--no-progress", action="store_true", help="hide progress bars")
    own = ev.add_argument_group(
        "your own corpus", "eval --generate-questions N PATH: sample N chunks of PATH (a folder of files, an index "
        "folder or a cookbook folder), ask Claude (ANTHROPIC_API_KEY) for one question each, situate every chunk, "
        "write the set in the cookbook's format and print plain hybrid against contextual hybrid on it")
    own.add_argument("source", nargs="?", metavar="PATH", help="with --generate-questions: the corpus")
    own.add_argument("--generate-questions", type=int, metavar="N", help="how many questions to generate")
    own.add_argument("--out", metavar="DIR", help="where to write the generated set (default: ./eval-<PATH name>)")
    own.add_argument("--model", help="the Claude model (default: AnthropicContextGenerator's)")
    own.add_argument("--seed", type=int, default=0, help="the sample's seed (default 0)")
    own.add_argument("--batch", action="store_true", help="use Message Batches (50%% off; results within 24 h)")
    own.add_argument("--store", metavar="PATH", help="the context store questions and contexts go through "
                     f"(default: {_default_cache().with_name('contexts.sqlite3')}, which `index` also reads from and "
                     "adds to, so neither pays for a context the other paid for)")
    own.add_argument("--chunk-chars", type=int, default=None, metavar="N",
                     help="characters per chunk, as `index --chunk-chars` (default: an index folder's, else "
                     f"{DEFAULT_CHUNK_CHARS})")
    own.add_argument("--fit-chunks", action=argparse.BooleanOptionalAction, default=None,
                     help="cut chunks as `index --fit-chunks` does (default: an index folder's setting, else off)")
    own.add_argument("--max-quoted-words", type=int, metavar="N",
                     help="reject (and ask once more) a question repeating more than N consecutive words of its chunk "
                          "(default 8)")  # questions.DEFAULT_MAX_QUOTED_WORDS: tests/unit/app/test_cli.py ties the two
    own.add_argument("--rerank", choices=["auto", "none", "cohere", "voyage"], default="auto",
                     help="also score each configuration reranked (auto: Cohere when COHERE_API_KEY is set, else none)")
    own.add_argument("--dry-run", action="store_true", help="print the estimated tokens and dollars, pay nothing")
    own.add_argument("--yes", "-y", action="store_true", help="do not ask before paying")
    ev.set_defaults(func=_cmd_eval)
    _add_demo(sub)
    _add_index(sub)
    _add_remove(sub)
    _add_query(sub)
    return parser


_KEYS_NOTE = (
    "Offline by default; with ANTHROPIC_API_KEY set, contexts come from Claude; with VOYAGE_API_KEY, "
    "embeddings from Voyage; with COHERE_API_KEY, results are reranked by Cohere."
)


def _add_demo(sub: argparse._SubParsersAction) -> None:
    demo = sub.add_parser(
        "demo",
        help="see what contextual retrieval changes, on a small built-in corpus (offline by default)",
        description=(
            "Situate every chunk of a small built-in corpus (quarterly reports, handbooks, manuals, code) "
            "whose chunks are ambiguous on their own, index it twice, plain and contextual (dense + BM25, "
            "rank fusion), run sample queries on both and print what changed and why. " + _KEYS_NOTE
        ),
    )
    demo.add_argument("--offline", action="store_true", help="use the offline parts even when API keys are set")
    demo.add_argument("--save-corpus", metavar="DIR", help="also write the corpus's files to DIR (to try `index` on them)")
    demo.add_argument("-k", type=int, default=3, help="a target counts as found within the top K (default 3)")
    demo.add_argument("--no-progress", action="store_true", help="hide progress bars")
    demo.set_defaults(func=_cmd_demo)


def _add_index(sub: argparse._SubParsersAction) -> None:
    from contextual_retrieval_core.chunking.split import DEFAULT_CHUNK_CHARS
    from contextual_retrieval_core.contextualize.config import ContextualizeConfig
    from contextual_retrieval_core.index.files import MAX_FILE_BYTES, TEXT_EXTENSIONS

    ix = sub.add_parser(
        "index",
        help="build or update a persistent contextual index of folders of text, markdown and code",
        description=(
            "Chunk every text, markdown and code file under PATH..., situate each chunk within its file, "
            "and store contextual embeddings (embedded Chroma) and contextual BM25 in --index-dir. "
            "Incremental: unchanged files cost nothing; changed and deleted files are replaced and "
            "removed. Prints a file, chunk, cost and cache report. " + _KEYS_NOTE
        ),
        epilog=(
            f"Indexed extensions (in folders; a file named explicitly is indexed whatever its name): "
            f"{' '.join(sorted(TEXT_EXTENSIONS))}. Binary files (NUL bytes) and files over --max-file-size are "
            "skipped and named in the report. Decoding: UTF-8; else UTF-16 when the file starts with a "
            "byte-order mark; else cp1252 (Windows Latin-1); files read as UTF-16 or cp1252 are named in the "
            "report, files that are none of these are skipped as undecodable. The index folder may not be "
            "inside a PATH (nor a PATH inside it). One update at a time: an update locks the index folder."
        ),
    )
    ix.add_argument("paths", nargs="*", metavar="PATH", help="files or folders to index (hidden folders, "
                    "virtualenvs, node_modules and __pycache__ are skipped)")
    ix.add_argument("--index-dir", "-o", metavar="DIR", default="contextual-index",
                    help="where the index lives (default: ./contextual-index)")
    ix.add_argument("--contexts", choices=["auto", "structural", "anthropic"], default="auto",
                    help="who writes the contexts: structural (offline, no LLM), anthropic (Claude), or "
                    "auto: what the index was built with, else Claude when ANTHROPIC_API_KEY is set")
    ix.add_argument("--model", metavar="NAME", help="the Claude model for --contexts anthropic (default claude-haiku-4-5)")
    ix.add_argument("--embedder", choices=["auto", "local", "voyage", "voyage-context"], default="auto",
                    help="local (offline MiniLM), voyage, or voyage-context (voyage-context-3: each file's "
                    "chunks embedded together, no LLM call); auto: what the index was built with, else Voyage "
                    "when VOYAGE_API_KEY is set")
    ix.add_argument("--chunk-chars", type=int, default=None, metavar="N",
                    help=f"characters per chunk (default: the index's, else {DEFAULT_CHUNK_CHARS})")
    ix.add_argument("--fit-chunks", action=argparse.BooleanOptionalAction, default=None,
                    help="cut chunks so that each, with its context, fits the embedder's window (counted with its "
                    "tokenizer): more chunks, so more LLM requests (docs/defaults.md); --no-fit-chunks: --chunk-chars "
                    "alone, definitions and headings first; default: the index's setting, off for a new index. "
                    "Changing it re-chunks every file")
    ix.add_argument("--concurrency", type=int, default=None, metavar="N",
                    help=f"generation requests in flight (default {ContextualizeConfig().concurrency})")
    ix.add_argument("--store", metavar="PATH", help="the context store shared with `eval` and other runs: Claude's contexts "
                    "found there are copied into the index's own contexts.sqlite3 instead of being paid for again, and "
                    f"the index's are copied to it (default: {_default_cache().with_name('contexts.sqlite3')}; 'none': "
                    "the index's own store only)")
    ix.add_argument("--windows", action=argparse.BooleanOptionalAction, default=None,
                    help="embed chunks longer than the embedder's window whole: extra vector rows for the overlapping "
                    "windows past it, each with the chunk's context, a chunk scoring as its best row; --no-windows: one vector "
                    "per chunk, truncated at the window; default: the index's setting, on for a new index. Changing it re-embeds "
                    "every file")
    ix.add_argument("--rebuild", action="store_true", help="build the index from scratch (e.g. with another "
                    "embedder); stored contexts and cached embeddings are reused, and the current version serves "
                    "queries until the new one replaces it")
    ix.add_argument("--check", action="store_true", help="check every file of the index (sizes, checksums, arrays) and "
                    "exit: 0 when sound, else an error naming the damaged file (running `index` repairs it)")
    ix.add_argument("--max-file-size", type=float, default=MAX_FILE_BYTES / 1e6, metavar="MB",
                    help=f"skip files larger than MB megabytes, naming them in the report (default {MAX_FILE_BYTES / 1e6:.1f})")
    ix.add_argument("--prune-missing", action="store_true", help="also drop indexed files that no longer exist, "
                    "wherever they were indexed from (`remove` drops chosen ones)")
    ix.add_argument("--lock-wait", type=float, default=0.0, metavar="SECONDS",
                    help="when another run is updating the index, wait up to SECONDS for it (default 0: stop at "
                    "once with a message)")
    ix.add_argument("--json", metavar="PATH", help="also write the report as JSON")
    ix.add_argument("--chroma-url", metavar="URL", help="keep the vectors on a Chroma server (`chroma run --path DB --port PORT`) instead of "
                    "the embedded Chroma in the index folder; the folder remembers it")
    _milvus_options(ix)
    ix.add_argument("--no-progress", action="store_true", help="hide progress bars")
    ix.set_defaults(func=_cmd_index)


def _add_remove(sub: argparse._SubParsersAction) -> None:
    rm = sub.add_parser(
        "remove",
        help="drop files or folders from a contextual index (e.g. ones deleted from disk)",
        description=(
            "Drop every indexed file at or under PATH... (paths on disk, existing or not, or the paths "
            "`query` shows) from --index-dir. Nothing is re-embedded or re-situated. "
            "`index --prune-missing` drops every indexed file that no longer exists."
        ),
    )
    rm.add_argument("paths", nargs="+", metavar="PATH", help="files or folders to drop from the index")
    rm.add_argument("--index-dir", "-o", metavar="DIR", default="contextual-index",
                    help="the index (default: ./contextual-index)")
    rm.add_argument("--lock-wait", type=float, default=0.0, metavar="SECONDS",
                    help="wait up to SECONDS for another run updating the index (default 0)")
    rm.set_defaults(func=_cmd_remove)


def _add_query(sub: argparse._SubParsersAction) -> None:
    q = sub.add_parser(
        "query",
        help="search a contextual index: ranked chunks with their contexts and scores",
        description=(
            "Search INDEX (built by `contextual-retrieval index`) for QUESTION: vector top-150 and BM25 "
            "top-150 over the contextualized chunks, fused with weighted reciprocal-rank fusion, reranked "
            "when a reranker is available, and print the top K with their file, lines, context and scores."
        ),
    )
    q.add_argument("index", metavar="INDEX", help="the index folder (e.g. contextual-index)")
    q.add_argument("question", metavar="QUESTION", help="what to search for, in quotes")
    q.add_argument("-k", type=int, default=5, help="how many chunks to show (default 5)")
    q.add_argument("--rerank", choices=["auto", "none", "cohere", "voyage"], default="auto",
                   help="rerank the fused candidates (auto: Cohere when COHERE_API_KEY is set, else none)")
    q.add_argument("--full", action="store_true", help="print whole chunks, not their first lines")
    q.add_argument("--json", action="store_true", help="print the results as JSON")
    q.add_argument("--chroma-url", metavar="URL", help="the Chroma server of an index built with --chroma-url, "
                   "when it moved (default: the one the index folder names)")

    q.add_argument("--milvus-uri", metavar="URI", help="the Milvus server of an index built with --milvus-uri, when "
                   "it moved (default: the one the index folder names)")
    _dense_prf_options(q, "")
    q.add_argument("--prune", action="store_true", help="show only the evidence: the sentences / statements "
                   "of the hits that answer QUESTION, with their line spans (ContextPruner)")
    q.add_argument("--budget", type=int, default=None, metavar="N",
                   help="with --prune: tokens of evidence to keep (default: 30%% of the hits' tokens)")
    q.set_defaults(func=_cmd_query)


def _milvus_options(ix: argparse.ArgumentParser) -> None:
    group = ix.add_argument_group("Milvus", "keep both sides of the hybrid (the dense vectors and BM25) in a Milvus "
                                  "collection, for several query machines or a corpus past one machine")
    group.add_argument("--milvus-uri", metavar="URI", help="the Milvus server, e.g. http://127.0.0.1:19530 (Milvus Lite: "
                       "`milvus-lite server --data-dir DIR --port PORT`; standalone or a cluster's proxy alike; credentials, if "
                       "it asks for any, in $MILVUS_TOKEN, never written down); the index folder remembers it and keeps "
                       "only the update's state (record, contexts, embedding cache)")
    group.add_argument("--collection", metavar="NAME", help="the collection (default: the one the folder records, "
                       "else a new unique name)")


def _dense_prf_options(parser: argparse.ArgumentParser, where: str) -> None:
    """--dense-prf [BETA] / --no-dense-prf: the feedback weight (None: the library's default)."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--dense-prf", nargs="?", type=float, const=0.5, default=None, metavar="BETA",
                       help="weight of dense pseudo-relevance feedback: the query vector moved toward the "
                       f"fused top 3 and the dense side searched again{' ' + where if where else ''} "
                       "(default 0.5, on; see benchmarks/RESULTS.md)")
    group.add_argument("--no-dense-prf", dest="dense_prf", action="store_const", const=0.0,
                       help="turn dense pseudo-relevance feedback off (one dense search per query)")


def _version() -> str:
    from contextual_retrieval_core._version import __version__

    return __version__


def _cmd_eval(args: argparse.Namespace) -> int:
    from contextual_retrieval_core.app.evaluation import (
        evaluate,
        format_table,
        load_contexts_jsonl,
        load_cookbook,
        plot_results,
        resolve_dataset,
        results_to_json,
    )
    from contextual_retrieval_core.search.config import FusionConfig

    if args.plot:
        _require_plotting()
    if args.generate_questions is not None or args.source is not None:
        return _cmd_eval_own(args)
    folder = resolve_dataset(args.dataset)
    dataset = load_cookbook(folder)
    contexts = load_contexts_jsonl(args.contexts, dataset) if args.contexts else None
    embedder = _eval_embedder(args)
    configs = [c.strip() for c in args.configs.split(",") if c.strip()] if args.configs else None
    started = time.perf_counter()
    from contextual_retrieval_core.dense.windows import WindowConfig

    results = evaluate(dataset, embedder, contexts, configs, show_progress=not args.no_progress,
                       windows=WindowConfig() if getattr(args, "windows", True) else None,
                       structural_header=getattr(args, "structural_header", True),
                       dense_prf=getattr(args, "dense_prf", None))
    elapsed = time.perf_counter() - started
    print(
        f"dataset: {len(dataset.documents)} documents, {len(dataset.chunks)} chunks, "
        f"{len(dataset.queries)} queries; embedder: {embedder.model_name}; "
        f"contexts: {Path(args.contexts).name if args.contexts else 'none'}"
    )
    print(format_table(results))
    print(f"({elapsed:.1f} s)")
    if args.json:
        payload = results_to_json(
            results,
            dataset=folder.resolve().name,
            embedder=embedder.model_name,
            contexts=Path(args.contexts).name if args.contexts else None,
            structural_header=bool(getattr(args, "structural_header", True)),
            dense_prf=FusionConfig.merged(dense_prf=getattr(args, "dense_prf", None)).dense_prf,
            elapsed_s=round(elapsed, 1),
        )
        _write_json(args.json, payload)
    if args.plot:
        plot_results(results, args.plot, title=f"Pass@k, {len(dataset.queries)} queries, {embedder.model_name}")
    return 0


def _eval_embedder(args: argparse.Namespace) -> Any:
    """The embedder `eval` scores with (--embedder), behind the embedding cache (--embedding-cache)."""
    from contextual_retrieval_core.embeddings.minilm import LocalMiniLMEmbedder

    embedder: Any
    if getattr(args, "embedder", "local") == "voyage-context":
        from contextual_retrieval_core._factories import choose_embedder

        embedder = choose_embedder("voyage-context")
    elif getattr(args, "embedder", "local") == "late-chunking":
        from contextual_retrieval_core.embeddings.late_chunking import LateChunkingEmbedder

        embedder = LateChunkingEmbedder()
    else:
        embedder = LocalMiniLMEmbedder()
    cache = args.embedding_cache
    if cache is None:
        cache = str(_default_cache())
    if cache.lower() != "none":
        from contextual_retrieval_core.embeddings.cache import CachedEmbedder

        embedder = CachedEmbedder(embedder, cache)
    return embedder


def _cmd_eval_own(args: argparse.Namespace) -> int:
    """eval --generate-questions N PATH: the set generated from the user's corpus, then the table."""
    from contextual_retrieval_core._factories import choose_reranker
    from contextual_retrieval_core.app.evaluation import load_contexts_jsonl
    from contextual_retrieval_core.app.question_eval import DEFAULT_CONFIGS, estimate_cost, evaluate_own_corpus, load_corpus
    from contextual_retrieval_core.contextualize.contextualizer import default_store_path
    from contextual_retrieval_core.generators.anthropic import AnthropicContextGenerator
    from contextual_retrieval_core.generators.questions import AnthropicQuestionGenerator
    from contextual_retrieval_core.store.context_store import ContextStore

    if args.generate_questions is None or args.source is None:
        raise InputError("pass both: contextual-retrieval eval --generate-questions N PATH (PATH: a folder of files, "
                         "an index folder or a cookbook folder)")
    if args.dataset:
        raise InputError("--dataset scores an existing set; with --generate-questions pass the corpus as PATH instead")
    # an estimate sends no request, so it needs no key: the generators get a client that refuses to send
    client: Any = _NoRequests() if args.dry_run else None
    index = _index_folder(args.source)
    model = args.model or (index.generator["model"] if index is not None and index.generator["name"] == "anthropic" else None)
    questions = AnthropicQuestionGenerator(model, client=client) if model else AnthropicQuestionGenerator(client=client)
    situate = None if args.contexts else AnthropicContextGenerator(questions.model, client=client)
    embedder = _eval_embedder(args)
    # chunked as `index` would with the same options (an index folder: as it was), so the contexts are the index's
    corpus = load_corpus(args.source, chunk_chars=args.chunk_chars, fit_chunks=args.fit_chunks, embedder=embedder,
                         generator=situate)
    contexts = load_contexts_jsonl(args.contexts, corpus) if args.contexts else None
    mode: Literal["realtime", "batch"] = "batch" if args.batch else "realtime"
    own_store = Path(args.source).expanduser() / "contexts.sqlite3"
    with ContextStore(args.store or default_store_path()) as store:
        if situate is not None and index is not None and own_store.is_file():
            _adopt_index_contexts(own_store, store, situate, corpus)
        estimate = estimate_cost(corpus, args.generate_questions, questions, situate, store, seed=args.seed, mode=mode)
        print(f"corpus: {len(corpus.documents)} documents, {len(corpus.chunks)} chunks; "
              f"{args.generate_questions} questions (seed {args.seed})")
        print(estimate.format())
        if args.dry_run:
            if args.json:
                _write_json(args.json, {"dry_run": True, "estimate": estimate.to_dict()})
            return 0
        if not args.yes and (estimate.questions_to_generate or estimate.contexts_to_generate):
            if not sys.stdin.isatty():
                raise InputError("not confirmed: pass --yes to pay without being asked (or --dry-run to see the estimate only)")
            if input("go on and pay? [y/N] ").strip().lower() not in ("y", "yes"):
                print("nothing paid", file=sys.stderr)
                return 1
        configs = [c.strip() for c in args.configs.split(",") if c.strip()] if args.configs else DEFAULT_CONFIGS
        out = Path(args.out) if args.out else Path(f"eval-{Path(args.source).resolve().name}")
        result = evaluate_own_corpus(
            corpus, args.generate_questions, question_generator=questions, context_generator=situate,
            contexts=contexts, store=store, embedder=embedder, out=out, seed=args.seed, mode=mode,
            **({} if args.max_quoted_words is None else {"max_quoted_words": args.max_quoted_words}), configs=configs, show_progress=not args.no_progress,
            estimate=estimate, structural_header=getattr(args, "structural_header", True),
            dense_prf=getattr(args, "dense_prf", None), reranker=choose_reranker(args.rerank),
        )
    print(result.format())
    print(f"({result.elapsed_s:.1f} s)")
    if args.json:
        _write_json(args.json, result.to_dict())
    return 0


def _check_index(index_dir: Path) -> int:
    """index --check: every byte of the index's current version checked; exit 0 when sound."""
    from contextual_retrieval_core.index.contextual_index import ContextualIndex

    manifest = ContextualIndex.read_manifest(index_dir)

    class _Named:  # the check reads files, never embeds: any object with the recorded model name will do
        model_name = manifest.embedder["model"]

    ContextualIndex(index_dir, embedder=_Named()).check()  # type: ignore[arg-type]
    print(f"{index_dir}: {manifest.chunk_count} chunks in {len(manifest.files)} files; every file of the current version "
          "checked (sizes, checksums, arrays): sound")
    return 0


def _index_folder(source: str) -> Any:
    """The manifest of `source` when it is an index folder, else None."""
    from contextual_retrieval_core.index.manifest import MANIFEST_NAME, IndexManifest

    folder = Path(source).expanduser()
    return IndexManifest.read(folder) if (folder / MANIFEST_NAME).is_file() else None


def _adopt_index_contexts(path: Path, store: Any, generator: Any, corpus: Any) -> None:
    """The contexts an index folder's own store holds for `corpus`, copied into `store`, so that
    none the index paid for is paid again (also when the index shared them with another store)."""
    from contextual_retrieval_core.contextualize.contextualizer import store_keys
    from contextual_retrieval_core.index._shared_contexts import share
    from contextual_retrieval_core.store.context_store import ContextStore

    with ContextStore(path, read_only=True) as own:
        share(own, store, store_keys(generator, {d.id: d for d in corpus.documents}, corpus.chunks).values())


class _NoRequests:
    """The Anthropic client of `eval --dry-run`: the estimate builds requests but sends none."""

    @property
    def messages(self) -> Any:
        raise RunError("eval --dry-run sends no request to Anthropic")


def _write_json(path: str, payload: Any) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")


def _require_plotting() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise MissingDependencyError("--plot needs matplotlib, which is not installed: pip install 'contextual-retrieval-kit[plot]' "
                          "(from a clone: pip install '.[plot]'), or leave out --plot") from None


def _cmd_demo(args: argparse.Namespace) -> int:
    from contextual_retrieval_core.app._demo import run_demo

    run_demo(offline=args.offline, k=args.k, save_corpus=args.save_corpus, show_progress=not args.no_progress)
    return 0


def _cmd_index(args: argparse.Namespace) -> int:
    from contextual_retrieval_core._factories import choose_embedder, choose_generator, unused_keys, weights_for
    from contextual_retrieval_core.chunking.split import DEFAULT_CHUNK_CHARS
    from contextual_retrieval_core.generators.base import label_of
    from contextual_retrieval_core.index.contextual_index import ContextualIndex
    from contextual_retrieval_core.index.manifest import MANIFEST_NAME

    index_dir = Path(args.index_dir)
    if _on_milvus(index_dir, args.milvus_uri, args.collection):
        return _cmd_index_milvus(args)
    if args.rebuild and index_dir.exists() and not (index_dir / MANIFEST_NAME).is_file() and any(index_dir.iterdir()):
        raise InputError(f"{index_dir} is not empty and is not a contextual-retrieval index; "
                         "refusing to rebuild in it: pass another --index-dir")
    if args.check:
        return _check_index(index_dir)
    if not args.paths:
        raise InputError("pass the files or folders to index: contextual-retrieval index PATH... (or --check)")
    # a rebuild starts from a new index's defaults; the folder is not touched before update() holds its lock
    old = ContextualIndex.read_manifest(index_dir) if (index_dir / MANIFEST_NAME).is_file() and not args.rebuild else None
    embedder_kind, contexts, model = args.embedder, args.contexts, args.model
    if old is not None:
        if embedder_kind == "auto":
            embedder_kind = old.embedder["kind"]
        if contexts == "auto":
            contexts = old.generator["name"]
            model = model or old.generator["model"] or None
    embedder = choose_embedder(embedder_kind, old.embedder["model"] if old and embedder_kind == old.embedder["kind"] else None)
    generator = choose_generator(contexts, model)
    chunk_chars = args.chunk_chars or (old.chunk_chars if old else None) or DEFAULT_CHUNK_CHARS
    index = ContextualIndex(index_dir, embedder=embedder, generator=generator, chunk_chars=chunk_chars,
                            concurrency=args.concurrency, weights=weights_for(embedder), chroma_url=args.chroma_url,
                            windows=args.windows, fit_chunks=args.fit_chunks)
    for note in unused_keys():
        print(f"note: {note}", file=sys.stderr)
    print(f"indexing {', '.join(args.paths)} into {index_dir} — contexts: "
          f"{label_of(generator)}{' / ' + generator.model if generator.model else ''}; "
          f"embedder: {embedder.model_name}", file=sys.stderr)
    if not args.max_file_size > 0:
        raise InputError(f"--max-file-size must be a positive number of megabytes, got {args.max_file_size}")
    report = index.update(args.paths, show_progress=not args.no_progress, max_file_bytes=int(args.max_file_size * 1e6),
                          prune_missing=args.prune_missing, lock_wait=args.lock_wait,
                          shared_contexts=True if args.store is None else (False if args.store.lower() == "none" else args.store),
                          rebuild=args.rebuild)
    print(report.format())
    print(f'search it: contextual-retrieval query {index_dir} "your question"')
    if args.json:
        _write_json(args.json, report.to_dict())
    return 0


def _cmd_remove(args: argparse.Namespace) -> int:
    from contextual_retrieval_core._factories import choose_embedder
    from contextual_retrieval_core.index.contextual_index import ContextualIndex

    if _on_milvus(Path(args.index_dir), None, None):
        report = _milvus_index(args.index_dir, None).remove(args.paths, lock_wait=args.lock_wait)
    else:
        manifest = ContextualIndex.read_manifest(args.index_dir)
        embedder = choose_embedder(manifest.embedder["kind"], manifest.embedder["model"])
        report = ContextualIndex(args.index_dir, embedder=embedder, weights=manifest.weights).remove(args.paths, lock_wait=args.lock_wait)
    print(f"removed {report.files_removed} files ({report.chunks_removed} chunks); {report.chunks_total} chunks "
          f"remain in {args.index_dir}")
    return 0


def _cmd_query(args: argparse.Namespace) -> int:
    from contextual_retrieval_core._factories import choose_embedder, choose_reranker, weights_for
    from contextual_retrieval_core.checks import is_blank
    from contextual_retrieval_core.index.manifest import IndexManifest

    if is_blank(args.question):  # no results in every query path: said before any work
        raise InputError('the question is empty; ask one in quotes, e.g. "how are contexts cached?"')
    from contextual_retrieval_core.index.contextual_index import ContextualIndex
    from contextual_retrieval_core.search.config import FusionConfig
    from contextual_retrieval_core.types import labelled

    index: Any
    if _on_milvus(Path(args.index), args.milvus_uri, None):
        index = _milvus_index(args.index, args.milvus_uri)
        embedder = index.embedder
    else:
        manifest = IndexManifest.read(args.index)
        embedder = choose_embedder(manifest.embedder["kind"], manifest.embedder["model"])
        index = ContextualIndex(args.index, embedder=embedder, weights=manifest.weights or weights_for(embedder),
                                chroma_url=args.chroma_url)
    reranker = choose_reranker(args.rerank)
    config = FusionConfig.from_settings(None, {"reranker": reranker, "dense_prf": args.dense_prf})
    hits = index.search(args.question, top_k=args.k, config=config)
    if args.prune or args.budget is not None:
        from contextual_retrieval_core.pruning._evidence import evidence_records, format_evidence, prune_hits

        # a query never writes to the index folder: the units are embedded in this process only
        result = prune_hits(args.question, hits, embedder, args.budget)
        print(json.dumps(evidence_records(hits, result), indent=2, ensure_ascii=False) if args.json
              else format_evidence(args.question, hits, result))
        return 0
    if args.json:
        print(json.dumps([h.__dict__ for h in hits], indent=2, ensure_ascii=False))
        return 0
    how = f"reranked by {reranker.model_name}" if reranker else "dense + BM25, rank fusion"
    print(f'{len(hits)} results for "{args.question}" ({how}; {len(index)} chunks indexed)')
    for rank, h in enumerate(hits, 1):
        ranks = ", ".join(f"{name} {'-' if r is None else r}" for name, r in h.ranks.items())
        print(f"\n{rank}. {h.path}:{h.start_line}-{h.end_line}  score {h.score:.4f}  ({ranks})")
        if h.context:
            print(labelled("   context: ", h.context))
        lines = h.text.splitlines()
        shown = lines if args.full else lines[:6]
        for line in shown:
            print(f"   | {line}")
        if len(shown) < len(lines):
            print(f"   | ... ({len(lines) - len(shown)} more lines; --full shows them)")
    if not hits:
        print("nothing matched; try other words, or check what was indexed")
    return 0


def _on_milvus(folder: Path, uri: str | None, collection: str | None) -> bool:
    """Whether the index in `folder` is (or, with `uri`, becomes) an index on Milvus."""
    from contextual_retrieval_core.index.manifest import MANIFEST_NAME
    from contextual_retrieval_core.index.milvus_index import uses_milvus

    if uses_milvus(folder):
        return True
    if (uri or collection) and (folder / MANIFEST_NAME).is_file():
        raise InputError(f"{folder} is an index of its own files, not on Milvus: pass another --index-dir for an index "
                         "on Milvus")
    if collection and not uri:
        raise InputError("--collection names a collection on a Milvus server: pass --milvus-uri too")
    return bool(uri)


def _quiet_pymilvus() -> None:
    """pymilvus logs every failed call with its traceback; the error it raises is reported instead."""
    import logging

    for name in ("pymilvus", "pymilvus.milvus_client"):
        logging.getLogger(name).setLevel(logging.CRITICAL)


def _milvus_index(folder: str, uri: str | None) -> Any:
    """The index on Milvus in `folder`, with the embedder it records (`uri`: where its server moved)."""
    from contextual_retrieval_core._factories import choose_embedder
    from contextual_retrieval_core.index.milvus_config import MilvusConfig
    from contextual_retrieval_core.index.milvus_index import MilvusContextualIndex, MilvusIndexRecord

    _quiet_pymilvus()
    record = MilvusIndexRecord.read(folder)
    return MilvusContextualIndex(folder, embedder=choose_embedder(record.embedder["kind"], record.embedder["model"]),
                                 milvus=MilvusConfig(uri=uri, token=os.environ.get("MILVUS_TOKEN") or None))


def _cmd_index_milvus(args: argparse.Namespace) -> int:
    """`index` into a Milvus collection (`MilvusContextualIndex`)."""
    from contextual_retrieval_core._factories import choose_embedder, choose_generator, unused_keys, weights_for
    from contextual_retrieval_core.chunking.split import DEFAULT_CHUNK_CHARS
    from contextual_retrieval_core.generators.base import label_of
    from contextual_retrieval_core.index.milvus_config import MilvusConfig
    from contextual_retrieval_core.index.milvus_index import MilvusContextualIndex, MilvusIndexRecord, uses_milvus

    _quiet_pymilvus()
    index_dir = Path(args.index_dir)
    for flag, given in (("--check", args.check), ("--chroma-url", args.chroma_url), ("--windows/--no-windows", args.windows is not None)):
        if given:
            raise InputError(f"{flag} is for an index of its own files; an index on Milvus keeps one row a chunk on the server "
                             "(--fit-chunks cuts chunks that fit the embedder's window)")
    if not args.paths:
        raise InputError("pass the files or folders to index: contextual-retrieval index PATH... --milvus-uri URI")
    if not args.max_file_size > 0:
        raise InputError(f"--max-file-size must be a positive number of megabytes, got {args.max_file_size}")
    old = MilvusIndexRecord.read(index_dir) if uses_milvus(index_dir) and not args.rebuild else None
    embedder_kind, contexts, model = args.embedder, args.contexts, args.model
    if old is not None:
        embedder_kind = old.embedder["kind"] if embedder_kind == "auto" else embedder_kind
        if contexts == "auto":
            contexts, model = old.generator["name"], model or old.generator["model"] or None
    embedder = choose_embedder(embedder_kind, old.embedder["model"] if old and embedder_kind == old.embedder["kind"] else None)
    generator = choose_generator(contexts, model)
    milvus = MilvusConfig(uri=args.milvus_uri, collection=args.collection, token=os.environ.get("MILVUS_TOKEN") or None)
    index = MilvusContextualIndex(
        index_dir, embedder=embedder, milvus=milvus, generator=generator,
        chunk_chars=args.chunk_chars or (old.chunk_chars if old else None) or DEFAULT_CHUNK_CHARS,
        weights=weights_for(embedder), concurrency=args.concurrency, fit_chunks=args.fit_chunks,
    )
    for note in unused_keys():
        print(f"note: {note}", file=sys.stderr)
    print(f"indexing {', '.join(args.paths)} into {index_dir} on Milvus ({index.uri}) — contexts: "
          f"{label_of(generator)}{' / ' + generator.model if generator.model else ''}; embedder: {embedder.model_name}",
          file=sys.stderr)
    report = index.update(args.paths, show_progress=not args.no_progress, max_file_bytes=int(args.max_file_size * 1e6),
                          prune_missing=args.prune_missing, lock_wait=args.lock_wait,
                          shared_contexts=True if args.store is None else (False if args.store.lower() == "none" else args.store),
                          rebuild=args.rebuild)
    print(report.format())
    print(f"collection: {index.collection.name} at {index.uri}")
    print(f'search it: contextual-retrieval query {index_dir} "your question"')
    if args.json:
        _write_json(args.json, report.to_dict())
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        with gathered_warnings(), sigterm_as_interrupt():  # SIGTERM ends a command as Ctrl-C does
            code = args.func(args)
            sys.stdout.flush()
        return code
    except BrokenPipeError:
        return quiet_broken_pipe()
    except Terminated as exc:
        print(f"contextual-retrieval {args.command}: {exc}", file=sys.stderr)
        return TERMINATED_EXIT_CODE
    except KeyboardInterrupt as exc:
        print(str(exc) if str(exc).startswith("interrupted") else "interrupted", file=sys.stderr)
        return 130
    except error_classes() as exc:
        where = getattr(args, "index_dir", None) if args.command in ("index", "remove") else getattr(args, "index", None)
        print(f"contextual-retrieval {args.command}: error: {describe(exc, index_dir=where)}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
