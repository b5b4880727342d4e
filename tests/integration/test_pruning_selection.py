"""The pruned text is the one the defaults gave before unit vectors were kept between queries.

tests/data/pruning_selection.json was written by benchmarks/pruning_golden.py in the tree before
`UnitCache` (per query: the ids of the default contextual-hybrid top 10 and a sha256 of the pruned
output). Here the same inputs are pruned by today's code, cold (nothing kept, the query embedded)
and prepared (`ContextPruner.prepare` ahead of the queries, the query vector passed in).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contextual_retrieval_core.pruning import ContextPruner
from tests.scripts import load_script

REPO = Path(__file__).resolve().parents[2]
GOLDEN = json.loads((REPO / "tests" / "data" / "pruning_selection.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def golden_script():
    return load_script("benchmarks/pruning_golden.py")


def _check(golden_script, rows, by_id, embedder) -> None:
    cold = ContextPruner(embedder)
    warm = ContextPruner(embedder)
    warm.prepare(list({i: by_id[i] for row in rows for i in row["chunks"]}.values()))
    for row in rows:
        chunks = [by_id[i] for i in row["chunks"]]
        assert golden_script.digest(cold.prune(row["query"], chunks)) == row["pruned"], row["query"]
        query_vector = embedder.embed_queries([row["query"]])[0]
        assert golden_script.digest(warm.prune(row["query"], chunks, query_vector=query_vector)) == row["pruned"], row["query"]


def test_demo_corpus_prunes_to_the_same_text(golden_script, offline_embedder):
    corpus, _ = golden_script.demo_inputs(offline_embedder)
    assert len(GOLDEN["demo"]) >= 6
    _check(golden_script, GOLDEN["demo"], {c.id: c for c in corpus}, offline_embedder)


def test_cookbook_set_prunes_to_the_same_text(golden_script, cookbook_dir, cookbook_embedder):
    _, by_id = golden_script.cookbook_chunks(str(cookbook_dir))
    assert len(GOLDEN["cookbook"]) == 40
    _check(golden_script, GOLDEN["cookbook"], by_id, cookbook_embedder)
