"""The library's chunks against the default embedder's window, three ways: characters alone as
before (long texts truncated by the embedder), the default now (the 800-character budget,
definitions and headings first, cut without regard to any context; a text longer than MiniLM's
256 tokens embedded whole: its own vector plus one row per further window, `WindowConfig()`), and
fitted chunks, the option (`contextualize.fit.chunk_to_fit` with the window: each chunk with its
context within MiniLM's 256 tokens).

    python benchmarks/chunk_fit.py [--dataset DIR] [--json benchmarks/chunk_fit.json]

1. Real source trees nobody here wrote: three packages installed with the project's own
   dependencies (click, markdown_it, langchain_core's runnables), every .py / .md / .rst / .txt
   file, chunked as ``contextual-retrieval index`` chunks them, each chunk with its structural
   context as the index embeds it. Per way of cutting: chunks, texts over the window (MiniLM's own
   tokenizer, uncapped), texts the embedder truncates, mean chunk length, and with an LLM's context
   (the structural header then `LLM_CONTEXT_RESERVE`-sized room) how many chunks, that is LLM
   requests, each way makes, against the characters-alone count.
2. The cookbook set's 90 documents re-chunked both ways (the set's own 737 chunks are what
   `quality.py` scores, so its rows cannot move with the chunker). A query's golden chunks are
   spans of their documents; a golden chunk counts as found at k when the top k chunks' spans
   cover at least half of it. Structural contexts, the library's hybrid defaults (MiniLM + BM25,
   weighted RRF, dense PRF), each row as its way embeds long texts. Also the
   characters the top k hold: smaller chunks show less text, so each row is scored a second time
   on the same reading budget as the characters-alone row (per query, the hits that fit in the
   characters its top k held), and the metric's ceiling for each chunking is given: the share of
   golden chunks that one chunk of it covers at least half of.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from tokenizers import Tokenizer  # noqa: E402

from contextual_retrieval_core import Chunk, Document  # noqa: E402
from contextual_retrieval_core.chunking._languages import EXTENSIONS  # noqa: E402
from contextual_retrieval_core.chunking.budget import LLM_CONTEXT_RESERVE, window_of  # noqa: E402
from contextual_retrieval_core.chunking.code_outline import chunk_boundaries  # noqa: E402
from contextual_retrieval_core.chunking.split import CODE_EXTENSIONS, DEFAULT_CHUNK_CHARS, split_text  # noqa: E402
from contextual_retrieval_core.contextualize.fit import chunk_to_fit  # noqa: E402
from contextual_retrieval_core.dense.windows import WindowConfig, window_texts  # noqa: E402
from contextual_retrieval_core.embeddings.minilm import TOKENIZER_PATH, LocalMiniLMEmbedder  # noqa: E402
from contextual_retrieval_core.generators._structure_detect import guess_language, looks_like_code  # noqa: E402
from contextual_retrieval_core.generators.structural import StructuralContextGenerator  # noqa: E402
from contextual_retrieval_core.types import ContextualChunk  # noqa: E402

sys.path.insert(0, str(HERE))
from _paths import DEFAULT_DATASET  # noqa: E402

TREES = [("click", ""), ("markdown_it", ""), ("langchain_core", "runnables")]
BEFORE, DEFAULT, FITTED = "characters (before)", "default (now)", "fitted (option)"
SUFFIXES = (".py", ".md", ".rst", ".txt")
KS = (5, 10, 20)


def _tokenizer() -> Tokenizer:
    tok = Tokenizer.from_file(str(TOKENIZER_PATH))
    tok.no_truncation()
    tok.no_padding()
    return tok


def old_cut(doc: Document, path: str) -> list[tuple[int, str]]:
    """The chunker before: characters alone, definitions first (what index did)."""
    return split_text(doc.text, max_chars=DEFAULT_CHUNK_CHARS, code=Path(path).suffix.lower() in CODE_EXTENSIONS,
                      boundaries=chunk_boundaries(doc.text, path))


def cut(way: str, doc: Document, path: str, window, generator=None) -> list[tuple[int, str]]:
    """The chunks of `doc` cut `way`."""
    if way == BEFORE:
        return old_cut(doc, path)
    return chunk_to_fit(doc, window if way == FITTED else None, path=path, generator=generator)


def tree_rows(window, tok: Tokenizer) -> list[dict]:
    gen = StructuralContextGenerator()
    embedder = LocalMiniLMEmbedder()
    rows = []
    for package, sub in TREES:
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            continue
        root = Path(list(spec.submodule_search_locations)[0]) / sub
        files = [p for p in sorted(root.rglob("*")) if p.suffix in SUFFIXES and p.is_file()]
        for way in (BEFORE, DEFAULT, FITTED):
            texts, llm_texts, lengths, situated = [], [], [], []
            for p in files:
                rel = str(p.relative_to(root.parent))
                doc = Document(rel, p.read_text(encoding="utf-8", errors="replace"))
                pieces = cut(way, doc, rel, window)
                for i, (offset, piece) in enumerate(pieces):
                    context = gen.generate(doc, Chunk(f"{rel}#{i}", rel, piece, i, {"start_index": offset})).context
                    texts.append(f"{context}\n\n{piece}")
                    situated.append(ContextualChunk(Chunk(f"{rel}#{i}", rel, piece, i), context))
                    lengths.append(len(piece))
                llm = cut(way, doc, rel, window, generator=_LLMShaped())
                for i, (offset, piece) in enumerate(llm):
                    header = gen.generate(doc, Chunk(f"{rel}#{i}", rel, piece, i, {"start_index": offset})).context
                    llm_texts.append((header, piece))
            counts = [len(e.ids) for e in tok.encode_batch(texts)]
            llm_counts = [len(e.ids) + LLM_CONTEXT_RESERVE for e in tok.encode_batch([f"{h}\n\n{p}" for h, p in llm_texts])]
            # what the embedder is handed: each text, or with windows (the default) each row of it
            embedded = [t for per in window_texts(embedder, situated, WindowConfig() if way == DEFAULT else None) for t in per]
            rows.append({
                "tree": f"{package}/{sub}".rstrip("/"), "way": way, "files": len(files), "chunks": len(texts),
                "over_window": sum(n > window.size for n in counts), "embedded_rows": len(embedded),
                "truncated": sum(len(e.ids) > window.size for e in tok.encode_batch(embedded)), "max_tokens": max(counts),
                "mean_chunk_chars": round(sum(lengths) / len(lengths), 1),
                "llm_chunks": len(llm_texts), "llm_over_window_at_reserve": sum(n > window.size for n in llm_counts),
            })
            before = next(r for r in rows if r["tree"] == rows[-1]["tree"] and r["way"] == BEFORE)
            rows[-1]["llm_chunks_vs_before"] = round(len(llm_texts) / before["llm_chunks"], 3)
    return rows


class _LLMShaped:
    """Stands for any LLM generator: chunk_to_fit keeps LLM_CONTEXT_RESERVE for its context."""

    name, model, prompt_identity, is_llm = "llm", "m", "p", True


def _path_for(doc: dict) -> str:
    text = doc["content"]
    if looks_like_code(text):
        language = guess_language(text)
        ext = next((e for e, lang in EXTENSIONS.items() if lang == language), "")
        return f"{doc['doc_id']}{ext}"
    return f"{doc['doc_id']}.md"


def cookbook_rows(dataset: Path, window, tok: Tokenizer) -> dict:
    from contextual_retrieval_core.search.hybrid import HybridSearcher

    docs = json.loads((dataset / "codebase_chunks.json").read_text())
    queries = [json.loads(line) for line in (dataset / "evaluation_set.jsonl").read_text().splitlines() if line.strip()]
    spans = {}
    for d in docs:
        pos = 0
        for c in d["chunks"]:
            start = d["content"].find(c["content"], pos)
            spans[(d["original_uuid"], c["original_index"])] = (start, start + len(c["content"]))
            pos = max(pos, start)
    gen = StructuralContextGenerator()
    embedder = LocalMiniLMEmbedder()
    llm_shaped = _LLMShaped()
    out = {}
    baseline: dict[int, list[int]] | None = None  # characters the characters-alone top k shows, per query
    for way in (BEFORE, FITTED, DEFAULT):
        chunks, where, llm_chunks = [], {}, 0
        for d in docs:
            path = _path_for(d)
            doc = Document(path, d["content"])
            pieces = cut(way, doc, path, window)
            llm_chunks += len(cut(way, doc, path, window, generator=llm_shaped))
            for i, (offset, piece) in enumerate(pieces):
                chunk = Chunk(f"{d['original_uuid']}:{i}", path, piece, i, {"start_index": offset})
                chunks.append(ContextualChunk(chunk, gen.generate(doc, chunk).context))
                where[chunk.id] = (d["original_uuid"], offset, offset + len(piece))
        # the metric's ceiling for this chunking: golden spans that one chunk half covers
        one_chunk = sum(any(_covered(gs, ge, [(s, e)]) >= 0.5 * (ge - gs) for u, s, e in where.values() if u == guuid)
                        for (guuid, _), (gs, ge) in spans.items())
        started = time.perf_counter()
        with warnings.catch_warnings():  # the characters-alone chunks' truncation: what the row measures
            warnings.simplefilter("ignore")
            cut_before = embedder.truncated_count
            searcher = HybridSearcher(chunks, embedder, windows=WindowConfig() if way == DEFAULT else False)
        hits = searcher.search_many([q["query"] for q in queries], 2 * max(KS))
        found = {k: [] for k in KS}
        at_chars = {k: [] for k in KS}
        shown = {k: [] for k in KS}
        for n, (q, ranked) in enumerate(zip(queries, hits)):
            golden = [spans[(u, i)] + (u,) for u, i in q["golden_chunk_uuids"] if (u, i) in spans]
            for k in KS:
                top = [where[h.id] for h in ranked[:k]]
                shown[k].append(sum(e - s for _, s, e in top))
                found[k].append(_found(golden, top))
                # the same reading budget as the characters-alone chunks' top k for this query
                budget, read, used = (baseline[k][n] if baseline else shown[k][-1]), [], 0
                for hit in (where[h.id] for h in ranked):
                    if used + hit[2] - hit[1] > budget:
                        break
                    read.append(hit)
                    used += hit[2] - hit[1]
                at_chars[k].append(_found(golden, read))
        if baseline is None:
            baseline = shown
        over = sum(len(e.ids) > window.size for e in tok.encode_batch([c.indexed_text for c in chunks]))
        out[way] = {"chunks": len(chunks), "llm_chunks": llm_chunks, "golden_half_covered_by_one_chunk": round(100 * one_chunk / len(spans), 2),
                    "over_window": over, "truncated": embedder.truncated_count - cut_before,
                    **{f"span_pass@{k}": round(100 * sum(found[k]) / len(found[k]), 2) for k in KS},
                    **{f"span_pass_at_before_chars@{k}": round(100 * sum(at_chars[k]) / len(at_chars[k]), 2) for k in KS},
                    **{f"chars_shown@{k}": round(sum(shown[k]) / len(shown[k])) for k in KS},
                    "elapsed_s": round(time.perf_counter() - started, 1)}
    return out


def _found(golden: list[tuple[int, int, str]], top: list[tuple[str, int, int]]) -> float:
    """The share of `golden` (start, end, document) spans that `top` (document, start, end) covers
    at least half of."""
    if not golden:
        return 0.0
    got = sum(_covered(gs, ge, [(s, e) for u, s, e in top if u == guuid]) >= 0.5 * (ge - gs) for gs, ge, guuid in golden)
    return got / len(golden)


def _covered(start: int, end: int, spans: list[tuple[int, int]]) -> int:
    """Characters of [start, end) inside the union of `spans`."""
    marks = sorted((max(s, start), min(e, end)) for s, e in spans if s < end and e > start)
    total, reach = 0, start
    for s, e in marks:
        s = max(s, reach)
        if e > s:
            total += e - s
            reach = e
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default=DEFAULT_DATASET)
    parser.add_argument("--json", default=str(HERE / "chunk_fit.json"))
    args = parser.parse_args()
    window = window_of(LocalMiniLMEmbedder())
    tok = _tokenizer()
    trees = tree_rows(window, tok)
    print(f"{'tree':<26} {'way':<20} {'files':>5} {'chunks':>6} {'over':>5} {'cut':>5} {'max tok':>7} {'chars':>6} "
          f"{'llm chunks':>10} {'vs before':>9} {'llm over':>8}")
    for r in trees:
        print(f"{r['tree']:<26} {r['way']:<20} {r['files']:>5} {r['chunks']:>6} {r['over_window']:>5} {r['truncated']:>5} "
              f"{r['max_tokens']:>7} {r['mean_chunk_chars']:>6} {r['llm_chunks']:>10} {r['llm_chunks_vs_before']:>9} "
              f"{r['llm_over_window_at_reserve']:>8}")
    cookbook = cookbook_rows(Path(args.dataset), window, tok)
    print("\ncookbook documents re-chunked, structural hybrid, golden spans half covered (Pass@5 / 10 / 20; chars in the top k)")
    for way, r in cookbook.items():
        print(f"{way:<20} {r['chunks']:>5} chunks ({r['llm_chunks']} with an LLM), {r['over_window']:>3} over, {r['truncated']:>3} cut  " + " ".join(f"{r[f'span_pass@{k}']:6.2f}" for k in KS)
              + "   " + " / ".join(str(r[f"chars_shown@{k}"]) for k in KS)
              + "   at the before-row's characters: " + " ".join(f"{r[f'span_pass_at_before_chars@{k}']:6.2f}" for k in KS)
              + f"   one-chunk ceiling {r['golden_half_covered_by_one_chunk']:.2f}")
    Path(args.json).write_text(json.dumps({"window": window.size, "llm_context_reserve": LLM_CONTEXT_RESERVE,
                                           "trees": trees, "cookbook_rechunked": cookbook}, indent=1) + "\n")


if __name__ == "__main__":
    main()
