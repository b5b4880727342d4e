"""Code chunks cut by the line rules and by tree-sitter definition boundaries, on this repository's
own files (the corpus of index_rerun.py: `contextual_retrieval_core/` and `README.md`).

    python benchmarks/code_chunking.py [--json benchmarks/code_chunking.json]

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

from contextual_retrieval_core.chunking import DEFAULT_CHUNK_CHARS, split_text  # noqa: E402
from contextual_retrieval_core.code_outline import chunk_boundaries, definitions  # noqa: E402
from contextual_retrieval_core.languages import GRAMMARS, language_for_path  # noqa: E402

_BODIES = {"def", "fn", "func", "function", "method", "fun"}


def measure() -> dict:
    files = sorted((REPO / "contextual_retrieval_core").rglob("*.py"))
    rows: dict[str, dict] = {}
    for name in ("line rules", "tree-sitter boundaries"):
        chunks = mid_body = chars = 0
        for path in files:
            text = path.read_text("utf-8")
            language = language_for_path(path)
            assert language in GRAMMARS
            cuts = chunk_boundaries(text, path) if name != "line rules" else None
            defs = [d for d in definitions(text, language) if d.kind in _BODIES]
            for offset, piece in split_text(text, max_chars=DEFAULT_CHUNK_CHARS, code=True, boundaries=cuts):
                chunks += 1
                chars += len(piece)
                line_start = text.rfind("\n", 0, offset) + 1
                if any(d.start < line_start and offset < d.end for d in defs):
                    mid_body += 1
        rows[name] = {"files": len(files), "chunks": chunks, "mean_chars": round(chars / chunks, 1),
                      "chunks_starting_inside_a_function": mid_body}
    return {"max_chars": DEFAULT_CHUNK_CHARS, "corpus": "contextual_retrieval_core/**/*.py", "runs": rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", default=str(HERE / "code_chunking.json"))
    args = parser.parse_args(argv)
    out = measure()
    Path(args.json).write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
