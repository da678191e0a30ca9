"""Shared fixtures: where the real reference data lives, and small temp lakes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

# Property tests draw the same examples on every run (CI must not fail on a draw nobody saw
# locally) and have no per-example deadline (CI machines are slower and busier than ours).
# HYPOTHESIS_PROFILE=explore draws fresh examples, for looking for new counterexamples.
settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
# (A counterexample found that way is then pinned with @example, since `ci` replays no database.)
settings.register_profile("explore", deadline=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_configure(config: pytest.Config) -> None:
    # The fast lane (a -m expression leaving out the slow tests) draws fewer property examples (tests/lanes.py).
    import lanes

    lanes.FAST = "not slow" in (config.getoption("markexpr", default="") or "")


REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """`../shared/data` beside the checkout (real measured traces, grids, prices, sweeps)."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"reference data folder {SHARED_DATA} is not beside this checkout")
    return SHARED_DATA


@pytest.fixture()
def lake(tmp_path: Path) -> Path:
    path = tmp_path / "lake"
    path.mkdir()
    return path
