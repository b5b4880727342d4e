"""Windowed contextual embeddings in the on-disk `ContextualIndex` and the `index` CLI: window
rows in real Chroma pointing at their chunk, one hit per chunk, the setting kept in the manifest,
incremental updates replacing and removing windows, and the unchanged rerun embedding nothing."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from contextual_retrieval_core.dense._window_rows import WINDOW_OF_KEY, row_owner, stale_rows, windowable
from contextual_retrieval_core.dense.windows import WINDOW_MARK, WindowConfig
from contextual_retrieval_core.index.contextual_index import ContextualIndex
from contextual_retrieval_core.search.config import FusionConfig
from tests.notes_corpus import CountingEmbedder, CountingGenerator

WINDOW = 24  # tokens the toy embedder reads


class TruncatingEmbedder(CountingEmbedder):
    """The counting bag-of-words embedder reading only the first `WINDOW` tokens (words, plus a
    start and an end token), as a real model truncates; it reports its window and counts tokens.
    The indexes here keep their long chunks (``fit_chunks=False``, a user's own chunking) so that
    windows have something to cover."""

    max_tokens = WINDOW

    def _vec(self, texts):
        return super()._vec([" ".join(re.findall(r"\w+", t)[: WINDOW - 2]) for t in texts])

    def count_tokens(self, texts):
        return [len(re.findall(r"\w+", t)) + 2 for t in texts]


FILLER = " ".join(f"Step {i} stirs the soup and tastes the broth." for i in range(12))
TAIL = "Finally the deployment signing key rotates every Tuesday."


def make_folder(root: Path) -> Path:
    folder = root / "docs"
    folder.mkdir()
    (folder / "kitchen.md").write_text(f"# Kitchen\n\n{FILLER} {TAIL}\n", encoding="utf-8")
    (folder / "short.md").write_text("# Cats\n\nCats sleep most of the day.\n", encoding="utf-8")
    (folder / "office.md").write_text("# Office\n\nKeys for the office are at the front desk.\n", encoding="utf-8")
    return folder


def rows(index: ContextualIndex) -> dict[str, dict]:
    """Row id -> metadata of the index's stored rows: its version's rows (files; no metadata of their
    own), or its Chroma collection's."""
    if index.manifest is not None and index.manifest.dense == "files":
        from contextual_retrieval_core.dense.vectors import VectorIndex

        return {r: {} for r in VectorIndex.load(index.path / index.manifest.bm25).ids}
    got = index._chroma().get(include=["metadatas"])
    return dict(zip(got["ids"], got["metadatas"]))


@pytest.mark.parametrize("layout", [None, "embedded"], ids=["files", "embedded-chroma"])
def test_long_chunks_become_window_rows_pointing_at_their_chunk_and_hits_are_chunks(tmp_path, layout):
    folder = make_folder(tmp_path)
    (folder / "bus.md").write_text("# Bus\n\nWhen does the bus come? When the driver wakes.\n", encoding="utf-8")
    index = ContextualIndex(tmp_path / "ix", fit_chunks=False, embedder=TruncatingEmbedder(), generator=CountingGenerator(),
                            windows=WindowConfig(), chroma_url=layout)
    report = index.update([folder], show_progress=False)
    chunk_ids = set(index.manifest.chunk_ids())
    stored = rows(index)
    extra = {r: m for r, m in stored.items() if r not in chunk_ids}
    assert chunk_ids <= set(stored) and extra  # every chunk's own row, plus window rows
    assert all(WINDOW_MARK in r for r in extra)
    assert layout is None or all(m[WINDOW_OF_KEY] == row_owner(r) for r, m in extra.items())  # Chroma rows say whose
    (long_id,) = index.manifest.files["docs/kitchen.md"].chunks
    assert {row_owner(r) for r in extra} == {long_id}
    assert report.embedded == len(stored) and report.chunks_total == len(chunk_ids)
    assert index.manifest.windows == {"size": None, "overlap": None, "pooling": "max"}

    query = "when does the deployment signing key rotate"
    hits = index.search(query, top_k=10)
    assert [h.id for h in hits][0] == long_id and hits[0].ranks["dense"] == 1
    assert len({h.id for h in hits}) == len(hits) == len(chunk_ids)  # one hit per chunk, never a window
    assert TAIL in hits[0].text and hits[0].path == "docs/kitchen.md"
    assert not any(WINDOW_MARK in h.id for h in hits)
    # the same folder without windows: the truncated vector never saw the tail
    plain = ContextualIndex(tmp_path / "plain", fit_chunks=False, embedder=TruncatingEmbedder(), generator=CountingGenerator(), windows=False)
    plain.update([folder], show_progress=False)
    assert len(rows(plain)) == len(chunk_ids)
    assert next(h for h in plain.search(query, top_k=10) if h.id == long_id).ranks["dense"] > 1


def test_depth_counts_chunks_not_window_rows(tmp_path):
    folder = make_folder(tmp_path)
    index = ContextualIndex(tmp_path / "ix", fit_chunks=False, embedder=TruncatingEmbedder(), generator=CountingGenerator(),
                            windows=WindowConfig())
    index.update([folder], show_progress=False)
    hits = index.search("stirs the soup", top_k=10, config=FusionConfig(depth=2))
    assert len([h for h in hits if h.ranks["dense"] is not None]) == 2


def test_the_setting_is_kept_and_the_unchanged_rerun_embeds_nothing(tmp_path):
    folder = make_folder(tmp_path)
    ContextualIndex(tmp_path / "ix", fit_chunks=False, embedder=TruncatingEmbedder(), generator=CountingGenerator(),
                    windows=WindowConfig()).update([folder], show_progress=False)
    embedder, generator = TruncatingEmbedder(), CountingGenerator()
    index = ContextualIndex(tmp_path / "ix", fit_chunks=False, embedder=embedder, generator=generator)  # windows=None: as recorded
    before = rows(index)
    report = index.update([folder], show_progress=False)
    assert (report.files_unchanged, report.embedded, report.generated) == (3, 0, 0)
    assert embedder.documents == [] and generator.calls == []
    assert index.manifest.windows is not None and rows(index) == before


def test_changed_deleted_and_removed_files_take_their_windows_along(tmp_path):
    folder = make_folder(tmp_path)
    (folder / "second.md").write_text(f"# Second\n\n{FILLER} The pantry door sticks.\n", encoding="utf-8")
    index = ContextualIndex(tmp_path / "ix", fit_chunks=False, embedder=TruncatingEmbedder(), generator=CountingGenerator(),
                            windows=WindowConfig())
    index.update([folder], show_progress=False)
    (old_kitchen,) = index.manifest.files["docs/kitchen.md"].chunks
    (second,) = index.manifest.files["docs/second.md"].chunks
    assert any(row_owner(r) == old_kitchen and r != old_kitchen for r in rows(index))

    (folder / "kitchen.md").write_text(f"# Kitchen\n\n{FILLER} The oven is cleaned on Fridays.\n", encoding="utf-8")
    (folder / "short.md").unlink()
    report = index.update([folder], show_progress=False)
    assert (report.files_changed, report.files_removed) == (1, 1)
    owners = {row_owner(r) for r in rows(index)}
    assert owners == set(index.manifest.chunk_ids())  # no row of a replaced or deleted chunk is left
    assert old_kitchen not in owners
    (new_kitchen,) = index.manifest.files["docs/kitchen.md"].chunks
    assert index.search("when is the oven cleaned", top_k=1)[0].id == new_kitchen

    index.remove([folder / "second.md"])
    owners = {row_owner(r) for r in rows(index)}
    assert second not in owners and owners == set(index.manifest.chunk_ids())


def test_changing_the_setting_re_embeds_and_drops_or_adds_the_windows(tmp_path):
    folder = make_folder(tmp_path)
    index = ContextualIndex(tmp_path / "ix", fit_chunks=False, embedder=TruncatingEmbedder(), generator=CountingGenerator(),
                            windows=WindowConfig())
    index.update([folder], show_progress=False)
    windowed = len(rows(index))
    off = ContextualIndex(tmp_path / "ix", fit_chunks=False, embedder=TruncatingEmbedder(), generator=CountingGenerator(), windows=False)
    report = off.update([folder], show_progress=False)
    assert "windows changed" in (report.note or "") and report.files_changed == 3
    assert set(rows(off)) == set(off.manifest.chunk_ids()) and off.manifest.windows is None
    on = ContextualIndex(tmp_path / "ix", fit_chunks=False, embedder=TruncatingEmbedder(), generator=CountingGenerator(),
                         windows=WindowConfig(size=32, overlap=4))
    on.update([folder], show_progress=False)
    assert on.manifest.windows == {"size": 32, "overlap": 4, "pooling": "max"}
    assert {row_owner(r) for r in rows(on)} == set(on.manifest.chunk_ids()) and len(rows(on)) != windowed


def test_mean_pooling_keeps_one_row_per_chunk(tmp_path):
    folder = make_folder(tmp_path)
    index = ContextualIndex(tmp_path / "ix", fit_chunks=False, embedder=TruncatingEmbedder(), generator=CountingGenerator(),
                            windows=WindowConfig(pooling="mean"))
    index.update([folder], show_progress=False)
    assert set(rows(index)) == set(index.manifest.chunk_ids())
    assert index.search("deployment signing key rotates", top_k=1)[0].path == "docs/kitchen.md"


def test_bad_windows_setting_is_a_clear_error(tmp_path):
    with pytest.raises(TypeError, match="windows must be a WindowConfig"):
        ContextualIndex(tmp_path / "ix", fit_chunks=False, embedder=TruncatingEmbedder(), windows="yes")  # type: ignore[arg-type]


def test_cli_index_windows_flag_is_recorded_and_kept(tmp_path, capsys):
    from contextual_retrieval_core.app.cli import main

    folder = make_folder(tmp_path)
    out = tmp_path / "ix"
    assert main(["index", str(folder), "--index-dir", str(out), "--embedder", "local", "--contexts", "structural",
                 "--windows", "--no-progress"]) == 0
    assert json.loads((out / "manifest.json").read_text())["windows"]["pooling"] == "max"
    report = tmp_path / "rerun.json"
    assert main(["index", str(folder), "--index-dir", str(out), "--no-progress", "--json", str(report)]) == 0  # no flag: kept
    assert json.loads((out / "manifest.json").read_text())["windows"] is not None
    rerun = json.loads(report.read_text())
    assert (rerun["files_unchanged"], rerun["embedded"], rerun["contexts"]) == (3, 0, None)  # nothing embedded or situated
    capsys.readouterr()
    assert main(["query", str(out), "deployment signing key rotates", "--json", "-k", "3", "--rerank", "none"]) == 0
    hits = json.loads(capsys.readouterr().out)
    assert hits[0]["path"] == "docs/kitchen.md" and len({h["id"] for h in hits}) == len(hits) == 3
    assert main(["index", str(folder), "--index-dir", str(out), "--no-windows", "--no-progress"]) == 0
    assert json.loads((out / "manifest.json").read_text())["windows"] is None
    assert "windows changed" in capsys.readouterr().out


def test_windowable_splits_off_the_context_on_either_side():
    before = windowable("c", "Ctx line.\n\nBody text here.", "Body text here.")
    assert (before.context, before.text, before.indexed_text) == ("Ctx line.\n\n", "Body text here.", "Ctx line.\n\nBody text here.")
    after = windowable("c", "Body text.\n\nCtx.", "Body text.")
    assert (after.position, after.context, after.indexed_text) == ("after", "\n\nCtx.", "Body text.\n\nCtx.")
    odd = windowable("c", "Something else entirely", "Body")
    assert (odd.context, odd.text) == ("", "Something else entirely")


@pytest.mark.parametrize("position", ["before", "after"])
def test_windowable_gives_the_cores_windows_for_an_indented_body(position):
    """A framework's Document or node holds the context and the chunk as one text; the chunk's own
    indentation (code) stays with the chunk, so every window is the core's for the same chunk,
    context and separator (a window after the first used to start with the first line's indent)."""
    from contextual_retrieval_core.dense.windows import window_texts
    from contextual_retrieval_core.types import Chunk, ContextualChunk

    body = "    " + " ".join(f"step_{i}(soup)" for i in range(40)) + "\n"
    core = ContextualChunk(Chunk("c", "d", body), "The soup recipe's steps.", position)
    rebuilt = windowable("c", core.indexed_text, body)
    assert rebuilt.indexed_text == core.indexed_text
    embedder = TruncatingEmbedder()
    (ours,), (theirs,) = window_texts(embedder, [core], WindowConfig()), window_texts(embedder, [rebuilt], WindowConfig())
    assert len(ours) > 2 and ours == theirs
    # a body whose whitespace is the separator itself (stripped before it was joined): the
    # separator stays between the context and every window
    stripped = windowable("c", "ctx\n\nfoo bar", "\n\nfoo bar")
    assert (stripped.context, stripped.text) == ("ctx\n\n", "foo bar")
    after = windowable("c", "foo bar\n\nctx", "foo bar\n\n")
    assert (after.context, after.text) == ("\n\nctx", "foo bar")


def test_stale_rows_keep_only_what_this_run_wrote_for_re_embedded_chunks():
    have = ["a", f"a{WINDOW_MARK}1", f"a{WINDOW_MARK}2", "b", f"b{WINDOW_MARK}1", "gone", f"gone{WINDOW_MARK}1"]
    fresh = {"a", f"a{WINDOW_MARK}1"}
    assert stale_rows(have, {"a", "b"}, {"a"}, fresh) == sorted([f"a{WINDOW_MARK}2", "gone", f"gone{WINDOW_MARK}1"])
    assert np.array_equal(np.sort(np.array(stale_rows(have, set(), set(), set()))), np.sort(np.array(have)))
