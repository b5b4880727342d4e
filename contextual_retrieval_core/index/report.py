"""What `ContextualIndex.update` reports (`IndexReport`) and what its `search` returns (`IndexHit`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from contextual_retrieval_core.generators.usage import UsageReport

__all__ = ["IndexReport", "IndexHit"]


@dataclass
class IndexReport:
    """What one `ContextualIndex.update` did.

    Attributes:
        files_new, files_changed, files_unchanged, files_removed: files by what happened to them.
        skipped: (path, reason) for every file left out: too large, binary, undecodable,
            unreadable.
        decoded: (doc id, encoding) for every file read in another encoding than UTF-8.
        payloads_omitted: base64 payloads (notebook images and attachments, ``data:`` URIs)
            replaced by a short placeholder before chunking (`chunking.payloads`).
        empty: doc ids of the files read that hold no text (empty or whitespace only): indexed
            with 0 chunks, so that a rerun skips them until they change.
        chunks_added, chunks_removed, chunks_total: chunks new to the index, chunks gone from it,
            and the chunks in it afterwards (the total before, plus added, less removed; a changed
            file's chunks that keep their text and place are neither).
        embedded: texts sent to the embedder; embedding_cache_hits: texts served by its cache.
        plain_text_code: code files read without a parser (line-rule chunks, contexts that name
            the file only), counted by reason, e.g. ``{"no grammar for lua": 2}``.
        contexts: the contextualizer's `UsageReport` (None when there was nothing to situate).
        note: why every file was re-situated, when the generator or chunk size changed.
        elapsed_s: wall time.
    """

    files_new: int = 0
    files_changed: int = 0
    files_unchanged: int = 0
    files_removed: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)
    decoded: list[tuple[str, str]] = field(default_factory=list)
    payloads_omitted: int = 0
    empty: list[str] = field(default_factory=list)
    chunks_added: int = 0
    chunks_removed: int = 0
    chunks_total: int = 0
    embedded: int = 0
    embedding_cache_hits: int = 0
    plain_text_code: dict[str, int] = field(default_factory=dict)
    contexts: UsageReport | None = None
    note: str | None = None
    elapsed_s: float = 0.0

    @property
    def files_skipped(self) -> int:
        """Files left out (see `skipped` for which and why)."""
        return len(self.skipped)

    @property
    def generated(self) -> int:
        """Contexts generated in this run (0 when nothing was situated)."""
        return self.contexts.generated if self.contexts else 0

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data."""
        data = {k: v for k, v in self.__dict__.items() if k != "contexts"}
        data["contexts"] = self.contexts.to_dict() if self.contexts else None
        data["files_skipped"] = self.files_skipped
        data["skipped"] = [{"path": p, "reason": r} for p, r in self.skipped]
        data["decoded"] = [{"path": p, "encoding": e} for p, e in self.decoded]
        if not self.payloads_omitted:
            del data["payloads_omitted"]
        return data

    def format(self) -> str:
        """A human-readable summary, as the CLI prints it."""
        lines = []
        if self.note:
            lines.append(self.note)
        lines.append(
            f"files: {self.files_new} new, {self.files_changed} changed, {self.files_unchanged} unchanged, "
            f"{self.files_removed} removed" + (f", {self.files_skipped} skipped" if self.files_skipped else "")
        )
        for path, reason in self.skipped:
            lines.append(f"  skipped {path}: {reason}")
        for path, encoding in self.decoded:
            lines.append(f"  {path}: not UTF-8, read as {encoding}")
        if self.payloads_omitted:
            lines.append(f"  {self.payloads_omitted} base64 payloads (notebook images and attachments, data: URIs) "
                         "replaced by a placeholder, not chunked")
        for path in self.empty:
            lines.append(f"  {path}: no text (empty or whitespace only), 0 chunks")
        lines.append(
            f"chunks: {self.chunks_added} added, {self.chunks_removed} removed, {self.chunks_total} in the index; "
            f"embeddings: {self.embedded} computed, {self.embedding_cache_hits} from the cache"
        )
        if self.plain_text_code:
            lines.append("code read as plain text: " + ", ".join(f"{n} ({why})" for why, n in sorted(self.plain_text_code.items())))
        if self.contexts is not None:
            lines.append(self.contexts.format())
        else:
            lines.append("contexts: nothing to situate (no generation requests)")
        lines.append(f"({self.elapsed_s:.2f} s)")
        return "\n".join(lines)


@dataclass(frozen=True)
class IndexHit:
    """One query result.

    Attributes:
        id: the chunk id; path: the file's doc id; score: the final score (the reranker's when
        reranked, else the fused score); context: the situating context; text: the chunk's text;
        ranks: 1-based rank per source ("dense", "bm25"), None where it missed; start_line,
        end_line: where the chunk is in the file (1-based); fused_score, rerank_score;
        rerank_error: why the reranker failed ("Type: message", secrets masked) when
        ``on_rerank_error="fused"`` kept the fused order, else None (as the framework hits'
        ``rerank_error`` metadata).
    """

    id: str
    path: str
    score: float
    context: str
    text: str
    ranks: dict[str, int | None] = field(default_factory=dict)
    start_line: int = 0
    end_line: int = 0
    fused_score: float = 0.0
    rerank_score: float | None = None
    rerank_error: str | None = None
