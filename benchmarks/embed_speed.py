"""The offline embedder's throughput and memory: tokens/s and peak resident memory, before and after.

    python benchmarks/embed_speed.py [--dataset DIR] [--json PATH] [--before-tree DIR] [--repeats N]
                                     [--cookbook-texts N] [--index [--index-docs N]] [--variants N,...]

Each measurement is a fresh process (so its peak resident memory, `ru_maxrss`, is the embedder's
alone): it loads `LocalMiniLMEmbedder` (not timed), embeds one mix of texts in one `embed` call and
reports tokens/s (the model's tokens, special tokens included, as `count_tokens` counts them) per
second of wall time and per second of the process's CPU time (steadier on a shared machine),
the resident memory after loading and at peak, and a sha256 of the vectors. Mixes:

- full: full batches of 256-token inputs (the longest cookbook chunks, all cut to the window):
  the ceiling of what the model gives on this machine;
- cookbook: the first `--cookbook-texts` cookbook chunks (default 300), as they come;
- demo: the demo corpus's chunks (contextualized, as indexed), ten times over.

"before" runs the same measurement with the code of `--before-tree` (a checkout of the commit
before the change, with its own .venv), "after" with this checkout; the two alternate, `--repeats`
times, in ABBA order, so both see the same machine load and a load trend favours neither. Reported per tree and mix: median tokens/s, peak RSS
(the largest), the after/before ratio of tokens/s, and whether the vectors are identical.
`--index` also runs `contextual-retrieval index` over the cookbook documents (written as files, the
offline structural contexts) once per tree, under /usr/bin/time, and reports its peak RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
from _paths import DEFAULT_DATASET  # noqa: E402

CHILD = r"""
import hashlib, json, resource, sys, time, warnings
warnings.simplefilter("ignore")
from contextual_retrieval_core.embeddings.minilm import LocalMiniLMEmbedder
texts = json.load(open(sys.argv[1], encoding="utf-8"))
embedder = LocalMiniLMEmbedder(**json.loads(sys.argv[2]))
embedder.embed(["load the model"])
loaded = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
tokens = sum(embedder.count_tokens(texts))
started, cpu = time.perf_counter(), time.process_time()
vectors = embedder.embed(texts)
seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
print(json.dumps({"texts": len(texts), "tokens": tokens, "seconds": seconds, "tokens_per_s": tokens / seconds,
                  "tokens_per_cpu_s": tokens / cpu,
                  "rss_loaded_mb": loaded / 1024, "rss_peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "vectors_sha256": hashlib.sha256(vectors.tobytes()).hexdigest()}))
"""


def mixes(dataset: str, cookbook_texts: int) -> dict[str, list[str]]:
    from contextual_retrieval_core.app._demo import demo_chunks
    from contextual_retrieval_core.embeddings.minilm import LocalMiniLMEmbedder
    from contextual_retrieval_core.generators.structural import StructuralContextGenerator
    from contextual_retrieval_core.types import ContextualChunk

    chunks = [c["content"] for doc in json.loads((Path(dataset) / "codebase_chunks.json").read_text(encoding="utf-8")) for c in doc["chunks"]]
    counts = LocalMiniLMEmbedder().count_tokens(chunks)
    full = [t for t, n in sorted(zip(chunks, counts), key=lambda p: -p[1]) if n >= 256][:128]
    documents, demo = demo_chunks()
    docs = {d.id: d for d in documents}
    generator = StructuralContextGenerator()
    demo_texts = [ContextualChunk(c, generator.generate(docs[c.document_id], c).context).indexed_text for c in demo]
    return {"full": full, "cookbook": chunks[:cookbook_texts], "demo": demo_texts * 10}


def measure(python: str, tree: Path, texts_file: Path, options: dict) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run([python, "-c", CHILD, str(texts_file), json.dumps(options)], cwd=tree, env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def index_rss(tree: Path, python: str, dataset: str, work: Path, docs: int | None) -> dict:
    """Peak RSS and wall time of `contextual-retrieval index` over the cookbook documents (the first `docs`)."""
    corpus = work / "cookbook-docs"
    if not corpus.exists():
        corpus.mkdir()
        for doc in json.loads((Path(dataset) / "codebase_chunks.json").read_text(encoding="utf-8"))[:docs]:
            (corpus / f"{doc['doc_id']}.txt").write_text(doc["content"], encoding="utf-8")
    target = work / f"index-{tree.name}"
    cmd = ["/usr/bin/time", "-f", "%M %e", python, "-c", "import sys; from contextual_retrieval_core.cli import main; sys.exit(main())",
           "index", str(corpus), "--index-dir", str(target), "--contexts", "structural", "--embedder", "local", "--no-progress"]
    env = {**os.environ, "PYTHONPATH": str(tree), "XDG_CACHE_HOME": str(work / f"cache-{tree.name}")}
    out = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(out.stderr[-2000:])
    kb, wall = out.stderr.strip().splitlines()[-1].split()
    return {"rss_peak_mb": round(int(kb) / 1024), "seconds": float(wall)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default=DEFAULT_DATASET)
    parser.add_argument("--json", default=str(HERE / "embed_speed.json"))
    parser.add_argument("--before-tree", default=None, help="a checkout of the commit before (with .venv); none: after only")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cookbook-texts", type=int, default=300)
    parser.add_argument("--mixes", default="full,cookbook,demo")
    parser.add_argument("--index", action="store_true", help="also measure `index` on the cookbook documents")
    parser.add_argument("--index-docs", type=int, default=None, help="with --index: only the first N documents")
    parser.add_argument("--variants", default="", metavar="N,...",
                        help="also measure this tree with these max_batch_tokens (how the default was chosen)")
    args = parser.parse_args(argv)
    here = HERE.parent
    trees = {"after": (sys.executable, here, {})}
    for n in filter(None, args.variants.split(",")):
        trees[f"after-max_batch_tokens-{n}"] = (sys.executable, here, {"max_batch_tokens": None if n == "none" else int(n)})
    if args.before_tree:
        before = Path(args.before_tree).resolve()
        trees = {"before": (str(before / ".venv" / "bin" / "python"), before, {}), **trees}
    wanted = args.mixes.split(",")
    runs: dict[str, dict[str, list[dict]]] = {tree: {m: [] for m in wanted} for tree in trees}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        files = {}
        for name, texts in mixes(args.dataset, args.cookbook_texts).items():
            if name in wanted:
                files[name] = work / f"{name}.json"
                files[name].write_text(json.dumps(texts), encoding="utf-8")
        for repeat in range(args.repeats):
            for mix in wanted:
                order = list(trees.items())
                for tree, (python, path, options) in order if repeat % 2 == 0 else order[::-1]:  # ABBA
                    row = measure(python, path, files[mix], options)
                    runs[tree][mix].append(row)
                    print(f"{repeat} {mix:9s} {tree:6s} {row['tokens_per_s']:8.0f} tokens/s  peak {row['rss_peak_mb']:6.0f} MB", flush=True)
        index = {tree: index_rss(path, python, args.dataset, work, args.index_docs) for tree, (python, path, options) in trees.items()
                 if not options} if args.index else None
    summary: dict[str, dict] = {}
    for mix in wanted:
        row: dict = {}
        for tree in trees:
            rs = runs[tree][mix]
            row[tree] = {"texts": rs[0]["texts"], "tokens": rs[0]["tokens"],
                         "tokens_per_s": round(statistics.median(r["tokens_per_s"] for r in rs)),
                         "tokens_per_cpu_s": round(statistics.median(r["tokens_per_cpu_s"] for r in rs)),
                         "rss_loaded_mb": round(max(r["rss_loaded_mb"] for r in rs)),
                         "rss_peak_mb": round(max(r["rss_peak_mb"] for r in rs))}
        if "before" in trees:
            for tree in trees:
                if tree != "before":
                    row[tree]["tokens_per_s_ratio"] = round(row[tree]["tokens_per_s"] / row["before"]["tokens_per_s"], 3)
                    row[tree]["tokens_per_cpu_s_ratio"] = round(row[tree]["tokens_per_cpu_s"] / row["before"]["tokens_per_cpu_s"], 3)
        row["vectors_identical"] = len({r["vectors_sha256"] for t in trees for r in runs[t][mix]}) == 1
        summary[mix] = row
    payload = {"dataset": Path(args.dataset).name, "repeats": args.repeats, "index_docs": args.index_docs,
               "cookbook_texts": args.cookbook_texts, "cpus": os.cpu_count(), "mixes": summary, "index": index,
               "runs": runs}
    Path(args.json).write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    print(json.dumps({"mixes": summary, "index": index}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
