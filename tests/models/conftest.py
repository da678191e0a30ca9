"""A simulated fleet-day built through the real warehouse, shared by the models' tests."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import pytest

from joulehouse.models.power import fit_day
from joulehouse.settings import ModelSettings, WarehouseSettings
from joulehouse.collectors.sim import SimulationSummary, simulate_fleet
from joulehouse.warehouse.build import build_day
from joulehouse.warehouse.db import connect

SIM_DAY = dt.date(2026, 7, 14)  # a summer day: outdoor temperature above free cooling most hours
SIM_NOW = dt.datetime(2026, 7, 20, tzinfo=dt.timezone.utc)


@dataclass
class SimWarehouse:
    con: object
    summary: SimulationSummary
    day: dt.date


@pytest.fixture(scope="session")
def sim_warehouse(tmp_path_factory) -> SimWarehouse:
    """16 GPUs (A100 and H100 hosts, so the cross-model job runs) x 1 day at 10 s, warehouse built."""
    root = tmp_path_factory.mktemp("sim_warehouse")
    summary = simulate_fleet(root / "lake", gpus=16, days=1, start=SIM_DAY, seed=11, interval_s=10)
    con = connect(root / "w.duckdb", root / "lake")
    build_day(con, SIM_DAY, WarehouseSettings(inventory_path=str(summary.inventory_path), max_gap_s=30.0), now=SIM_NOW)
    yield SimWarehouse(con, summary, SIM_DAY)
    con.close()


@pytest.fixture(scope="session")
def fitted(sim_warehouse) -> SimWarehouse:
    """The simulated warehouse with its day's power models fitted (default ModelSettings)."""
    fit_day(sim_warehouse.con, sim_warehouse.day, ModelSettings())
    return sim_warehouse
