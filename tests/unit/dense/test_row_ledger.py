"""`RowLedger` (core, framework-free): which rows each chunk has in a store keyed by row id, under
its store id. A store simulated as a dict (upserts, deletes) is driven by random batches: adds
with and without other store ids, chunks repeated in a batch, store ids moving between chunks,
long and short versions, deletes; after every step the store holds exactly the ledger's rows.
`WindowedVectorStore` (LangChain) is the adapter over it (tests/integration/test_framework_windows.py)."""

from __future__ import annotations

import random

from contextual_retrieval_core.dense._window_rows import RowLedger, WindowRow, row_id


def rows_for(key: str, n: int) -> list[WindowRow]:
    return [WindowRow(row_id(key, i), key, i, f"{key} window {i}") for i in range(n)]


def apply(ledger: RowLedger, store: dict[str, str], entries) -> None:
    change = ledger.stage(entries)
    for r in change.before:
        store.pop(r, None)
    for row, payload, _ in change.write:
        store[row.id] = payload
    ledger.commit(change)
    for r in change.after:
        store.pop(r, None)


def check(ledger: RowLedger, store: dict[str, str]) -> None:
    held, ids = ledger.held(), ledger.store_ids()
    assert set(store) == {r for rows in held.values() for r in rows}  # no orphan, nothing missing
    assert {rows[0]: c for c, rows in held.items()} == ids  # a chunk's own row is its store id
    assert ledger.extra == sum(len(rows) - 1 for rows in held.values())
    for c, rows in held.items():
        assert all(store[r] == ledger.payload(c) for r in rows)  # every row is the current version's


def test_random_batches_keep_the_store_and_the_ledger_in_step() -> None:
    chunks, keys = ["a", "b", "c", "d"], ["a", "b", "c", "d", "h1", "h2", "h3"]
    for seed in range(300):
        rnd = random.Random(seed)
        ledger, store, version = RowLedger(), {}, 0
        for _ in range(8):
            if rnd.random() < 0.2 and ledger.store_ids():
                for r in ledger.remove(rnd.sample(sorted(ledger.store_ids()), 1) + ["unknown"]):
                    store.pop(r, None)
            else:
                entries = []
                for _ in range(rnd.randint(1, 4)):
                    version += 1
                    cid = rnd.choice(chunks)
                    key = cid if rnd.random() < 0.5 else rnd.choice(keys)
                    entries.append((cid, key, rows_for(key, rnd.choice([1, 1, 2, 4])), f"{cid} v{version}", True))
                apply(ledger, store, entries)
            check(ledger, store)


def test_stage_changes_nothing_until_commit_and_the_last_version_wins() -> None:
    ledger, store = RowLedger(), {}
    apply(ledger, store, [("c", "h1", rows_for("h1", 3), "v1", True)])
    before = (ledger.held(), ledger.store_ids(), ledger.extra)
    change = ledger.stage([("c", "h2", rows_for("h2", 1), "v2", True), ("c", "h2", rows_for("h2", 2), "v3", True)])
    assert (ledger.held(), ledger.store_ids(), ledger.extra) == before  # a write that fails leaves it so
    assert [(r.id, p) for r, p, _ in change.write] == [("h2", "v3"), (row_id("h2", 1), "v3")]
    assert sorted(change.after) == sorted(r.id for r in rows_for("h1", 3)) and change.before == ["h2"]
    ledger.commit(change)
    assert ledger.held() == {"c": ["h2", row_id("h2", 1)]} and ledger.payload("c") == "v3"


def test_a_store_id_given_to_another_chunk_replaces_it_and_skip_fitting_rewrites_a_windowed_row() -> None:
    ledger, store = RowLedger(), {}
    apply(ledger, store, [("a", "x", rows_for("x", 3), "a1", True)])
    change = ledger.stage([("b", "x", rows_for("x", 1), "b1", False)])
    assert [r.id for r, _, _ in change.write] == ["x"]  # its row held a window of a: written though "fitting" is off
    ledger.commit(change)
    assert ledger.held() == {"b": ["x"]} and ledger.payload("a") is None
    assert ledger.stage([("b", "x", rows_for("x", 1), "b2", False)]).write == []  # fits, and the store holds it
