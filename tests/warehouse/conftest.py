"""Fixtures for the warehouse tests (helpers live in warehouse_lakes.py)."""

from warehouse_lakes import warehouse  # noqa: F401  (fixture)
