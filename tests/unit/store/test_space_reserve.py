"""`SpaceReserve` with runs sharing one store: each run holds a reserve file of its own, a run that
ends frees only its own, and the files killed runs left are deleted by the next run."""

from __future__ import annotations

import os

from contextual_retrieval_core.store._space import SpaceReserve
from contextual_retrieval_core.store.context_store import ContextStore


def _reserves(folder):
    return sorted(p.name for p in folder.iterdir() if ".reserv" in p.name)


def test_runs_sharing_a_store_each_hold_and_free_their_own_reserve(tmp_path):
    store = ContextStore(tmp_path / "c.sqlite3")
    first, second = (SpaceReserve(store, contexts=10, in_flight=2) for _ in range(2))
    first.check_and_hold()
    second.check_and_hold()
    held = _reserves(tmp_path)
    assert len(held) == 2 and all(name.startswith("c.sqlite3.reserve-") for name in held)
    assert all((tmp_path / name).stat().st_size == first.reserve_bytes for name in held)

    first.close()  # the first run ends while the second still runs
    (left,) = _reserves(tmp_path)
    assert left in held
    third = SpaceReserve(store, contexts=10, in_flight=2)
    third.check_and_hold()  # a run starting now leaves the second run's reserve alone
    assert left in _reserves(tmp_path) and len(_reserves(tmp_path)) == 2

    assert second.release() is True and second.release() is False
    third.close()
    assert _reserves(tmp_path) == []


def test_the_reserves_killed_runs_left_are_deleted_by_the_next_run(tmp_path):
    store = ContextStore(tmp_path / "c.sqlite3")
    live = SpaceReserve(store, contexts=10, in_flight=2)
    live.check_and_hold()
    (live_name,) = _reserves(tmp_path)
    # what killed runs leave: unlocked files, under this version's names and the older single name
    for name in ("c.sqlite3.reserve-4242-deadbeef", "c.sqlite3.reserve"):
        with open(tmp_path / name, "wb") as f:
            os.posix_fallocate(f.fileno(), 0, 64 * 1024)
    (tmp_path / "other.sqlite3.reserve-1-aa").write_bytes(b"x")  # another store's: not ours to delete

    run = SpaceReserve(store, contexts=10, in_flight=2)
    run.check_and_hold()
    names = _reserves(tmp_path)
    assert "c.sqlite3.reserve-4242-deadbeef" not in names and "c.sqlite3.reserve" not in names
    assert live_name in names and "other.sqlite3.reserve-1-aa" in names
    assert len(names) == 3  # the live run's, the new run's, the other store's
    run.close()
    live.close()
    assert _reserves(tmp_path) == ["other.sqlite3.reserve-1-aa"]


def test_a_store_name_with_glob_characters_has_its_abandoned_reserves_found(tmp_path):
    store = ContextStore(tmp_path / "contexts[1].sqlite3")
    (tmp_path / "contexts[1].sqlite3.reserve-4242-deadbeef").write_bytes(b"\0" * 1024)
    run = SpaceReserve(store, contexts=10, in_flight=2)
    run.check_and_hold()
    (held,) = _reserves(tmp_path)
    assert held.startswith("contexts[1].sqlite3.reserve-") and "4242-deadbeef" not in held
    run.close()
    assert _reserves(tmp_path) == []
