"""Link bandwidth occupancy per hour (fct_link_bandwidth_hourly): bytes per second over the link's rate.

A link's rate per direction comes from the reading where the source reads it (an InfiniBand port's
rate, NVML's NVLink links x speed), else from the GPU model (models/gpu_catalogue.csv):
- NVLink: the catalogue's total (both directions) NVLink bandwidth, halved; that is the
  generation's per-link rate x the link count (A100: 12 x 25 GB/s = 300 GB/s each way; H100/H200:
  18 x 25 GB/s = 450 GB/s each way);
- PCIe: the generation's rate per lane and direction after line coding x the lanes
  (Gen4 x16 = 31.5 GB/s, Gen5 x16 = 63.0 GB/s each way). PCIe Gen6 is FLIT-coded (about 7.56 GB/s a lane).
A GPU model the catalogue does not know keeps a NULL capacity and a NULL occupancy, never a guess.
"""

from __future__ import annotations

import datetime as dt

import duckdb

from joulehouse.models.activity import create_activity_view
from joulehouse.models.caps import PCIE_LINK_GBPS
from joulehouse.models.gpu_catalogue import GpuSpec, find
from joulehouse.models.sql import load_sql
from joulehouse.warehouse.sqlio import relation_exists, replace_day

CAPACITY_TABLE = "link_capacity_by_model"
# PCIe bytes per second per lane and direction, after line coding (8b/10b to Gen2, 128b/130b Gen3-5).
PCIE_LANE_BYTES_PER_S = {1: 0.25e9, 2: 0.5e9, 3: 0.985e9, 4: 1.969e9, 5: 3.938e9, 6: 7.563e9}
GB = 1e9


def nvlink_capacity_bytes_per_s(spec: GpuSpec | None) -> float | None:
    """NVLink bytes/s per direction of a GPU model (all its links), or None without NVLink."""
    if spec is None or not spec.nvlink_gb_s or not spec.nvlink_links:
        return None
    return spec.nvlink_gb_s * GB / 2


def pcie_capacity_bytes_per_s(spec: GpuSpec | None) -> float | None:
    """PCIe bytes/s per direction of a GPU model's link (generation x lanes), or None when unknown."""
    if spec is None or spec.pcie_generation is None or spec.pcie_lanes is None:
        return None
    per_lane = PCIE_LANE_BYTES_PER_S.get(int(spec.pcie_generation))
    return per_lane * spec.pcie_lanes if per_lane else None


def pcie_link_gbps(gpu_model: str | None) -> float:
    """A GPU model's PCIe link in GB/s, both directions (tx + rx, as the readings' pcie_gbps adds
    them); models.caps' Gen4 x16 for a model the catalogue does not know. One link for every model
    read an H100 moving 60 GB/s as a saturated Gen4 link, and a cap as free (14% slower, in truth)."""
    capacity = pcie_capacity_bytes_per_s(find(gpu_model)) if gpu_model else None
    return 2 * capacity / GB if capacity else PCIE_LINK_GBPS


def create_capacity_table(con: duckdb.DuckDBPyConnection, gpu_models: list[str]) -> str:
    """Temp table link_capacity_by_model (gpu_model, nvlink_/pcie_capacity_bytes_per_s) for the
    models the catalogue knows among `gpu_models`; returns its name."""
    con.execute(f"CREATE OR REPLACE TEMP TABLE {CAPACITY_TABLE} (gpu_model VARCHAR, "
                "nvlink_capacity_bytes_per_s DOUBLE, pcie_capacity_bytes_per_s DOUBLE)")
    rows = [(m, nvlink_capacity_bytes_per_s(find(m)), pcie_capacity_bytes_per_s(find(m)))
            for m in sorted(set(gpu_models)) if find(m) is not None]
    if rows:
        con.executemany(f"INSERT INTO {CAPACITY_TABLE} VALUES (?, ?, ?)", rows)
    return CAPACITY_TABLE


def link_bandwidth_day(con: duckdb.DuckDBPyConnection, day: dt.date) -> int:
    """Replace `day`'s rows of fct_link_bandwidth_hourly; returns how many link-hours it holds.
    A lake without link_samples (raw_link_samples is then an empty stand-in) gets PCIe only."""
    for name in ("stg_gpu_samples", "raw_link_samples"):
        if not relation_exists(con, name):
            raise ValueError(f"relation {name!r} is missing: build the warehouse day {day} first")
    create_activity_view(con, day)
    models = [r[0] for r in con.execute(
        "SELECT DISTINCT gpu_model FROM stg_gpu_samples WHERE day = ? AND gpu_model IS NOT NULL", [day]).fetchall()]
    models += [r[0] for r in con.execute(
        "SELECT DISTINCT gpu_model FROM raw_link_samples WHERE date = ? AND gpu_model IS NOT NULL", [day]).fetchall()]
    create_capacity_table(con, models)
    return replace_day(con, "fct_link_bandwidth_hourly", day, load_sql("fct_link_bandwidth_hourly"), {"day": day})
