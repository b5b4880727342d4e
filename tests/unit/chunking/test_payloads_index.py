"""`contextual-retrieval index` on a notebook with a base64 image: no chunk of base64, the payloads
counted in the report, every chunk's lines those of the file (issue 43, item 4)."""

from __future__ import annotations

import re
from pathlib import Path

from contextual_retrieval_core.index.contextual_index import ContextualIndex
from tests.notes_corpus import CountingEmbedder
from tests.unit.chunking.test_payloads import notebook_text, png

BASE64_RUN = re.compile(r"[A-Za-z0-9+/]{100,}")


def test_index_replaces_a_notebooks_payloads_and_counts_them(tmp_path: Path) -> None:
    folder = tmp_path / "notebooks"
    folder.mkdir()
    raw = notebook_text(png(75_000))
    (folder / "analysis.ipynb").write_text(raw, encoding="utf-8")
    (folder / "notes.md").write_text("# Notes\n\nNo payload here.\n", encoding="utf-8")
    index = ContextualIndex(tmp_path / "ix", embedder=CountingEmbedder())
    report = index.update([folder], show_progress=False)
    assert report.payloads_omitted == 3
    assert report.to_dict()["payloads_omitted"] == 3
    assert "3 base64 payloads" in report.format()
    assert 2 <= report.chunks_total <= 6  # as read, the notebook alone is 158 chunks of base64
    lines = raw.split("\n")
    hits = index.search("loss falls after the warm-up", top_k=10)
    assert hits and not any(BASE64_RUN.search(h.text) for h in hits)
    nb = next(h for h in hits if h.path.endswith("analysis.ipynb"))
    # the placeholder keeps every line break, so a chunk's lines are the file's
    first = nb.text.split("\n")[0]
    assert first.strip() and first in lines[nb.start_line - 1]
    again = ContextualIndex(tmp_path / "ix", embedder=CountingEmbedder()).update([folder], show_progress=False)
    assert again.files_unchanged == 2 and "payloads_omitted" not in again.to_dict()
