"""Pruned evidence for search hits with file line spans: what `contextual-retrieval query --prune` prints.

Works on any hits with ``id``, ``path``, ``context``, ``text`` and ``start_line`` (the index's
`IndexHit`): each kept piece is shown with the file lines it comes from.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from contextual_retrieval_core.embeddings.base import Embedder
from contextual_retrieval_core.pruning.config import PruningConfig
from contextual_retrieval_core.pruning.pruner import ContextPruner
from contextual_retrieval_core.pruning.result import PruningResult
from contextual_retrieval_core.types import Chunk, ContextualChunk, labelled

__all__ = ["prune_hits", "evidence_records", "format_evidence"]


def prune_hits(question: str, hits: Sequence[Any], embedder: Embedder, budget: int | None = None) -> PruningResult:
    """`ContextPruner` (defaults, or a `budget` in tokens) over the hits, in their order."""
    chunks = [ContextualChunk(Chunk(str(h.id), str(h.path) or str(h.id), h.text), h.context or "") for h in hits]
    return ContextPruner(embedder, config=PruningConfig(budget=budget)).prune(question, chunks)


def _file_lines(hit: Any, start_line: int, end_line: int) -> tuple[int, int]:
    base = int(getattr(hit, "start_line", 0) or 0)
    return (base + start_line - 1, base + end_line - 1) if base > 0 else (start_line, end_line)


def evidence_records(hits: Sequence[Any], result: PruningResult) -> list[dict[str, Any]]:
    """One JSON-ready record per kept chunk: path, chunk id, context, and pieces with file lines."""
    by_id = {str(h.id): h for h in hits}
    out = []
    for c in result.chunks:
        hit = by_id[c.id]
        pieces = []
        for p in c.pieces:
            first, last = _file_lines(hit, p.start_line, p.end_line)
            pieces.append({"start_line": first, "end_line": last, "start": p.start, "end": p.end, "text": p.text})
        out.append({"id": c.id, "path": c.document_id, "context": c.context, "pieces": pieces})
    return out


def _valve(fallback: str, hits: Sequence[Any]) -> str:
    """A safety valve the pruner took, in words: which chunk a standout unit was kept from."""
    if fallback.startswith("standout:"):
        cid = fallback.split(":", 1)[1]
        path = next((getattr(h, "path", None) or getattr(h, "document_id", None) for h in hits if getattr(h, "id", None) == cid), None)
        return f"kept the best unit of {path or 'a chunk'}, which stands out of the ranking"
    if fallback == "min_tokens":
        return "too little was left within the budget: the top two chunks kept whole"
    return fallback


def format_evidence(question: str, hits: Sequence[Any], result: PruningResult) -> str:
    """The pruned evidence as text: per chunk its file, context and kept lines with their numbers."""
    r = result.report
    lines = [f'pruned evidence for "{question}": {r.tokens_after} of {r.tokens_before} tokens kept '
             f"({r.tokenizer}), {len(result.chunks)} of {len(hits)} chunks"]
    if r.unchanged_reason:
        lines.append(f"(unchanged: {r.unchanged_reason})")
    if r.fallbacks:
        lines.append("(" + "; ".join(_valve(f, hits) for f in r.fallbacks) + ")")
    for rank, record in enumerate(evidence_records(hits, result), 1):
        lines.append("")
        spans = ", ".join(f"{p['start_line']}-{p['end_line']}" for p in record["pieces"])
        lines.append(f"{rank}. {record['path']} lines {spans}")
        if record["context"]:
            lines.append(labelled("   context: ", record["context"]))
        for i, piece in enumerate(record["pieces"]):
            if i:
                lines.append("   | […]")
            for n, text in enumerate(piece["text"].splitlines(), piece["start_line"]):
                lines.append(f"   {n:>5} | {text}")
    return "\n".join(lines)
