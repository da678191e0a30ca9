"""Which test lane this run is, so a property test can draw fewer examples in the edit-test loop.

`make test-fast` runs `pytest -m "not slow and not integration"`: the unit and property tests in
about a minute. A property test whose every example builds a warehouse or writes lake files (a
second or more per a few examples) would spend most of that minute on draws, so in that lane it draws a quarter of
its examples (at least 3); `make test` (CI) draws them all. Pinned counterexamples (@example)
run in both. tests/conftest.py sets FAST from the run's -m expression before any test module
is imported.
"""

from __future__ import annotations

FAST = False


def examples(n: int) -> int:
    """The max_examples of a property test that draws `n` in the full lane."""
    return max(3, n // 4) if FAST else n
