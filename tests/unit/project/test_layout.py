"""The suite's layout by cost: every test file sits in tests/unit, tests/integration or tests/e2e,
its tests carry that folder's marker (so `-m unit` selects them), the markers are registered and
unknown ones are refused (--strict-markers), and the README's test command is .ci/run's last line
with the slowest tests listed (--durations)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import TIERS, tier_of

TESTS = Path(__file__).resolve().parents[2]
REPO = TESTS.parent


def test_every_test_file_is_in_a_cost_folder() -> None:
    stray = [str(p.relative_to(TESTS)) for p in TESTS.rglob("test_*.py") if p.relative_to(TESTS).parts[0] not in TIERS]
    assert stray == []


def test_the_tier_is_the_folder_and_a_test_file_elsewhere_is_refused() -> None:
    assert [tier_of(TESTS / tier / "test_x.py") for tier in TIERS] == list(TIERS)
    assert tier_of(REPO / "contextual_retrieval_core" / "types.py") == "unit"  # doctests run in process
    assert tier_of(TESTS / "fakes" / "anthropic_server.py") == "unit"  # a shared helper's doctests
    with pytest.raises(pytest.UsageError, match="tests/unit, tests/integration or tests/e2e"):
        tier_of(TESTS / "test_somewhere_else.py")


def test_this_test_carries_the_unit_marker_only(request: pytest.FixtureRequest) -> None:
    assert request.node.get_closest_marker("unit") is not None
    assert request.node.get_closest_marker("integration") is None and request.node.get_closest_marker("e2e") is None


def test_markers_are_registered_and_unknown_ones_refused(pytestconfig: pytest.Config) -> None:
    registered = {line.split(":", 1)[0] for line in pytestconfig.getini("markers")}
    assert {*TIERS, "slow"} <= registered
    assert "--strict-markers" in pytestconfig.getini("addopts")


def test_the_readme_test_command_is_ci_s_last_line_and_lists_the_slowest_tests() -> None:
    last = (REPO / ".ci" / "run").read_text(encoding="utf-8").strip().splitlines()[-1]
    assert "python -m pytest -q --ci --durations=15" in last
    assert last in (REPO / "README.md").read_text(encoding="utf-8").splitlines()
