"""Code chunks cut by the line rules and by tree-sitter definition boundaries, on two corpora: this
repository's own Python (`contextual_retrieval_core/`, as index_rerun.py indexes it) and the
cookbook codebase set's 90 source files (Rust, C++, Java, Go, ...; language guessed from content).

    python benchmarks/code_chunking.py [--dataset DIR] [--json benchmarks/code_chunking.json]

For each way of cutting (`split_text` at the index's default chunk size, with `boundaries=None`
and with `code_outline.chunk_boundaries`), over the code files: how many chunks, their mean
length, and how many chunks start inside a function or method body (a definition encloses the
chunk's first character and starts before it), as parsed by tree-sitter.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

from contextual_retrieval_core.chunking._languages import GRAMMARS, language_for_path  # noqa: E402
from contextual_retrieval_core.chunking.code_outline import (  # noqa: E402
    definition_boundaries,  # noqa: E402
    definitions,  # noqa: E402
)
from contextual_retrieval_core.chunking.split import DEFAULT_CHUNK_CHARS, split_text  # noqa: E402
from contextual_retrieval_core.generators._structure_detect import guess_language, looks_like_code  # noqa: E402

sys.path.insert(0, str(HERE))
from _paths import DEFAULT_DATASET  # noqa: E402

_BODIES = {"def", "fn", "func", "function", "method", "fun"}


def measure(texts: list[tuple[str, str]]) -> dict:
    """`texts`: (language, text) pairs."""
    rows: dict[str, dict] = {}
    for name in ("line rules", "tree-sitter boundaries"):
        chunks = mid_body = chars = 0
        for language, text in texts:
            cuts = definition_boundaries(text, language) if name != "line rules" else None
            defs = [d for d in definitions(text, language) if d.kind in _BODIES]
            for offset, piece in split_text(text, max_chars=DEFAULT_CHUNK_CHARS, code=True, boundaries=cuts):
                chunks += 1
                chars += len(piece)
                line_start = text.rfind("\n", 0, offset) + 1
                if any(d.start < line_start and offset < d.end for d in defs):
                    mid_body += 1
        rows[name] = {"files": len(texts), "chunks": chunks, "mean_chars": round(chars / chunks, 1),
                      "chunks_starting_inside_a_function": mid_body}
    return rows


def corpora(dataset: str) -> dict[str, list[tuple[str, str]]]:
    from contextual_retrieval_core.app.evaluation import load_cookbook

    own = [(language_for_path(p), p.read_text("utf-8")) for p in sorted((REPO / "contextual_retrieval_core").rglob("*.py"))]
    cookbook = [(guess_language(d.text), d.text) for d in load_cookbook(dataset).documents if looks_like_code(d.text)]
    assert all(lang in GRAMMARS for lang, _ in own + cookbook)
    return {"contextual_retrieval_core/**/*.py": own, "cookbook codebase documents (code)": cookbook}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", default=str(HERE / "code_chunking.json"))
    parser.add_argument("--dataset", default=DEFAULT_DATASET)
    args = parser.parse_args(argv)
    out = {"max_chars": DEFAULT_CHUNK_CHARS,
           "corpora": {name: measure(texts) for name, texts in corpora(args.dataset).items()}}
    Path(args.json).write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
