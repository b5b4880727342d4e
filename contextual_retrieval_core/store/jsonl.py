"""JSON-lines export and import of a `ContextStore` (the cookbook's contexts format)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from contextual_retrieval_core.errors import InputError
from contextual_retrieval_core.store._batch_ledger import now_iso

__all__ = ["ImportResult", "export_jsonl", "import_jsonl"]


class ImportResult(NamedTuple):
    """What `ContextStore.import_jsonl` did: lines imported, lines skipped (no key resolved)."""

    imported: int
    skipped: int


class RowStore(Protocol):
    """What export and import need of a context store (SQLite and PostgreSQL both have it)."""

    def _rows(self, sql: str) -> list[tuple]: ...

    def _write(self, rows: list[tuple]) -> None: ...

_COLUMNS = ("doc_id", "chunk_id", "original_index", "context", "key", "generator", "model")


def export_jsonl(store: RowStore, path: str | os.PathLike[str]) -> int:
    """`ContextStore.export_jsonl`: every context as a JSON line; returns the line count."""
    rows = store._rows(f"SELECT {', '.join(_COLUMNS)} FROM contexts ORDER BY rowid")
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(dict(zip(_COLUMNS, row)), ensure_ascii=False) + "\n")
    return len(rows)


def import_jsonl(
    store: RowStore,
    path: str | os.PathLike[str],
    resolve: Callable[[dict[str, Any]], str | None],
    *,
    generator: str,
    model: str,
) -> ImportResult:
    """`ContextStore.import_jsonl`: validate the whole file, then write it in one transaction."""
    rows: list[tuple] = []
    skipped = 0
    created = now_iso()
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(f"{path}, line {lineno}: malformed JSON: {exc}") from exc
            if not isinstance(item, dict) or not isinstance(item.get("context"), str):
                raise InputError(f"{path}, line {lineno}: expected a JSON object with a string 'context'")
            key = resolve(item)
            if key is None:
                skipped += 1
                continue
            if not isinstance(key, str) or not key:
                raise InputError(f"{path}, line {lineno}: resolve returned {key!r}, not a key or None")
            index = item.get("original_index")
            rows.append((
                key, item["context"], item.get("generator") or generator, item.get("model") or model,
                item.get("doc_id"), item.get("chunk_id"), index if isinstance(index, int) else None, None, created,
            ))  # fmt: skip
    if rows:
        store._write(rows)
    return ImportResult(len(rows), skipped)
