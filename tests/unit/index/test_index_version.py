"""A `ContextualIndex` kept open while another one updates the folder: its next query answers
from the new version (the manifest switched, the old BM25 folder and rows gone), and a query that
runs into an update's clean-up runs again on the new version (`index._version`), whether the
version's dense rows are read from its query snapshot or from Chroma (indexes over the snapshot
limit). Real Chroma, real BM25, the small deterministic embedder of tests/notes_corpus.py; tests/integration/
test_reads_during_writes.py runs the same with separate processes racing."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from contextual_retrieval_core.index import contextual_index as contextual_index_module
from contextual_retrieval_core.index._version import READ_TRIES, manifest_stamp, read_retrying
from contextual_retrieval_core.index.contextual_index import ContextualIndex, IndexDamagedError
from contextual_retrieval_core.index.manifest import MANIFEST_NAME
from tests.notes_corpus import CountingEmbedder, change_corpus, make_corpus

QUERY = "how many days until refunds are issued"


def answer(index: ContextualIndex) -> list[tuple[str, str]]:
    return [(h.id, h.text) for h in index.search(QUERY, top_k=10)]


@pytest.mark.parametrize("rows", ["snapshot", "chroma"])
def test_an_open_index_answers_from_the_new_version_after_another_updates_the_folder(tmp_path: Path, rows: str,
                                                                                      monkeypatch) -> None:
    if rows == "chroma":  # embedded Chroma, no snapshot: the version's rows come from Chroma (client_for_version)
        monkeypatch.setattr(contextual_index_module, "SNAPSHOT_MAX_CHUNKS", 0)
    src, index_dir = make_corpus(tmp_path), tmp_path / "index"
    writer = ContextualIndex(index_dir, embedder=CountingEmbedder(), chroma_url="embedded" if rows == "chroma" else None)
    writer.update([src], show_progress=False)
    reader = ContextualIndex(index_dir, embedder=CountingEmbedder())
    before = answer(reader)
    assert "14 days" in before[0][1] and (reader._snapshot is None) == (rows == "chroma")

    change_corpus(src)  # billing changed, readme removed: its rows and the old BM25 folder go
    writer.update([src], show_progress=False)
    after = answer(reader)
    assert after == answer(ContextualIndex(index_dir, embedder=CountingEmbedder()))
    assert "30 days" in after[0][1] and after != before


def test_a_query_that_meets_the_clean_up_of_its_version_runs_again_on_the_new_one(tmp_path: Path) -> None:
    folder = tmp_path
    (folder / MANIFEST_NAME).write_text("{}", encoding="utf-8")
    tries = []

    def attempt() -> str:
        tries.append(manifest_stamp(folder))
        if len(tries) == 1:  # an update switches the manifest, then removes this version's parts
            tmp = folder / (MANIFEST_NAME + ".tmp")
            tmp.write_text('{"next": 1}', encoding="utf-8")
            os.replace(tmp, folder / MANIFEST_NAME)
            raise IndexDamagedError("bm25-old/bm25.json is missing")
        return "answered"

    assert read_retrying(folder, attempt) == "answered"
    assert len(tries) == 2 and tries[0] != tries[1]


def test_a_slow_reader_beside_a_busy_writer_keeps_trying_while_the_versions_switch(tmp_path: Path) -> None:
    """Each try runs into the clean-up of its version because another update switched the manifest
    during it: more such tries than READ_TRIES are made (none of them counts), and the first try
    that meets a complete version answers."""
    folder = tmp_path
    (folder / MANIFEST_NAME).write_text("{}", encoding="utf-8")
    tries = []

    def attempt() -> str:
        tries.append(manifest_stamp(folder))
        if len(tries) <= 2 * READ_TRIES:
            tmp = folder / (MANIFEST_NAME + ".tmp")
            tmp.write_text(json.dumps({"next": len(tries)}), encoding="utf-8")
            os.replace(tmp, folder / MANIFEST_NAME)
            raise IndexDamagedError("bm25-old/bm25.json is missing")
        return "answered"

    assert read_retrying(folder, attempt, pause=0.001) == "answered"
    assert len(tries) == 2 * READ_TRIES + 1 and len(set(tries)) == len(tries)


@pytest.mark.parametrize("error, tries_made", [(IndexDamagedError("bm25/bm25.json is missing"), READ_TRIES),
                                               (ValueError("the question is empty"), 1)],
                         ids=["damaged-retried-then-raised", "other-not-retried"])
def test_an_error_that_stays_is_raised_as_it_is(tmp_path: Path, error: Exception, tries_made: int) -> None:
    (tmp_path / MANIFEST_NAME).write_text("{}", encoding="utf-8")
    tries = []

    def attempt() -> str:
        tries.append(1)
        raise error

    with pytest.raises(type(error), match=str(error)):
        read_retrying(tmp_path, attempt, pause=0.001)
    assert len(tries) == tries_made
