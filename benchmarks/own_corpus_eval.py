"""`eval --generate-questions` on the cookbook corpus through the loopback Anthropic server.

The fake answers a question prompt with the cookbook's own golden question for that chunk (where
the chunk has one; otherwise with a question naming the chunk's first identifier and its file) and
a context prompt with the chunk's Claude 3 Haiku context from ``contexts_claude-3-haiku.jsonl``,
so the figures can be checked against the cookbook set. Then it scores the written set again with
plain ``contextual-retrieval eval --dataset OUT --contexts OUT/contexts.jsonl`` and records whether
the two tables are the same, the estimate, the paid usage and the wall time.

    python benchmarks/own_corpus_eval.py [--questions 100] [--json benchmarks/own_corpus_eval.json]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from contextual_retrieval_core.app.cli import main  # noqa: E402
from tests.fakes.anthropic_server import FakeAnthropicServer  # noqa: E402

DATA = Path(os.environ.get("CONTEXTUAL_RETRIEVAL_DATASET", REPO.parent / "shared" / "data" / "cookbook-codebase"))


def answerer(data: Path):
    """(document, chunk, prompt) -> the golden question or the stored context of that chunk."""
    raw = json.loads((data / "codebase_chunks.json").read_text(encoding="utf-8"))
    # chunks are matched by their text without surrounding whitespace (the prompt's <chunk> block)
    by_key = {(d["original_uuid"], c["original_index"]): c["content"].strip() for d in raw for c in d["chunks"]}
    doc_of = {(d["doc_id"], c["original_index"]): c["content"].strip() for d in raw for c in d["chunks"]}
    path_of = {c["content"].strip(): d["doc_id"] for d in raw for c in d["chunks"]}
    questions: dict[str, str] = {}
    for line in (data / "evaluation_set.jsonl").read_text(encoding="utf-8").splitlines():
        item = json.loads(line)
        for uuid, index in item["golden_chunk_uuids"]:
            questions.setdefault(by_key[(uuid, int(index))], item["query"])
    contexts = {}
    for line in (data / "contexts_claude-3-haiku.jsonl").read_text(encoding="utf-8").splitlines():
        item = json.loads(line)
        contexts[doc_of[(item["doc_id"], int(item["original_index"]))]] = item["context"]
    seen = {"golden": 0, "fallback": 0, "contexts_from_file": 0}

    def answer(document: str, chunk: str, prompt: str) -> str | None:
        text = chunk.strip()
        if "realistic question" in prompt:
            if text in questions:
                seen["golden"] += 1
                return questions[text]
            seen["fallback"] += 1
            name = next(iter(re.findall(r"[A-Za-z_][A-Za-z0-9_]{5,}", text)), "this code")
            return f"What is {name} for in {path_of.get(text, 'this file')}?"
        seen["contexts_from_file"] += text in contexts
        return contexts.get(text)

    return answer, seen


def run(n: int, seed: int, embedding_cache: str | os.PathLike[str] | None = None) -> dict:
    """The two commands on the cookbook corpus; `embedding_cache`: the eval embedding cache both use
    (default: a new one in a temporary folder, so every text is embedded)."""
    answer, seen = answerer(DATA)
    saved = {k: os.environ.get(k) for k in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL")}
    try:
        return _run(n, seed, answer, seen, embedding_cache)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _run(n: int, seed: int, answer, seen: dict, embedding_cache) -> dict:
    with FakeAnthropicServer(answerer=answer) as server, tempfile.TemporaryDirectory() as tmp:
        os.environ["ANTHROPIC_API_KEY"], os.environ["ANTHROPIC_BASE_URL"] = server.api_key, server.url
        out, store = Path(tmp) / "set", Path(tmp) / "store.sqlite3"
        cache = Path(embedding_cache) if embedding_cache is not None else Path(tmp) / "emb.sqlite3"
        common = ["--no-progress", "--embedding-cache", str(cache)]
        started = time.perf_counter()
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            code = main(["eval", "--generate-questions", str(n), str(DATA), "--seed", str(seed), "--out", str(out),
                         "--store", str(store), "--yes", "--json", str(Path(tmp) / "own.json"), *common])
        wall = time.perf_counter() - started
        assert code == 0, printed.getvalue()
        own = json.loads((Path(tmp) / "own.json").read_text())
        with contextlib.redirect_stdout(io.StringIO()):
            code = main(["eval", "--dataset", str(out), "--contexts", str(out / "contexts.jsonl"),
                         "--configs", "hybrid,contextual-hybrid", "--json", str(Path(tmp) / "eval.json"), *common])
        assert code == 0
        plain = json.loads((Path(tmp) / "eval.json").read_text())
        requests = len(server.requests_to("/v1/messages"))
    paid, estimate = own["paid_usage"], own["estimate"]
    paid_tokens = sum(paid[k] for k in ("input_tokens", "cache_write_tokens", "cache_write_1h_tokens",
                                        "cache_read_tokens", "output_tokens"))
    return {
        "corpus": DATA.name, "questions_asked": n, "seed": seed,
        "questions_kept": own["questions"], "rejected": own["rejected"], "dropped": own["dropped"],
        "golden_questions_served": seen["golden"], "fallback_questions_served": seen["fallback"],
        "contexts_served_from_the_haiku_file": seen["contexts_from_file"],
        "estimate": estimate, "paid_usage": paid, "paid_tokens": paid_tokens, "paid_cost_usd": own["paid_cost_usd"],
        "estimate_over_paid_cost": round(estimate["total_cost_usd"] / own["paid_cost_usd"], 4),
        "estimate_over_paid_tokens": round(estimate["total_tokens"] / paid_tokens, 4),
        "requests_to_fake": requests, "wall_s": round(wall, 1),
        "table": own["configs"], "eval_table_on_written_set": plain["configs"],
        "tables_equal": own["configs"] == plain["configs"],
        "note": "loopback fake (4 characters a token, the real cache minimums); the cost is at claude-haiku-4-5 prices",
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=str(Path(__file__).with_suffix(".json")))
    args = parser.parse_args()
    result = run(args.questions, args.seed)
    Path(args.json).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps({k: v for k, v in result.items() if k not in ("table", "eval_table_on_written_set")}, indent=2))
