"""Link occupancy on the simulated fleet, whose traffic is known in shape (collectors.sim.links):
NVLink capacity from the GPU model (DCGM gives none), the ports' from their readings, and
multi-GPU training fills NVLink far more than serving or idle GPUs do."""

from __future__ import annotations

import pytest

from joulehouse.models.bandwidth import link_bandwidth_day, nvlink_capacity_bytes_per_s, pcie_capacity_bytes_per_s
from joulehouse.models.gpu_catalogue import lookup


def test_capacities_come_from_generation_and_links():
    assert nvlink_capacity_bytes_per_s(lookup("NVIDIA A100-SXM4-80GB")) == 300e9  # 12 links x 25 GB/s each way
    assert nvlink_capacity_bytes_per_s(lookup("NVIDIA H100 80GB HBM3")) == 450e9  # 18 links x 25 GB/s
    assert nvlink_capacity_bytes_per_s(lookup("NVIDIA L4")) is None  # PCIe-only board
    assert pcie_capacity_bytes_per_s(lookup("NVIDIA H100 80GB HBM3")) == pytest.approx(63.0e9, rel=1e-3)  # Gen5 x16
    assert pcie_capacity_bytes_per_s(lookup("NVIDIA A100-SXM4-80GB")) == pytest.approx(31.5e9, rel=1e-3)  # Gen4 x16


def test_each_link_hour_has_its_occupancy(sim_warehouse):
    con, day = sim_warehouse.con, sim_warehouse.day
    rows = link_bandwidth_day(con, day)
    gpus, hosts = len(sim_warehouse.summary.gpus), len({g.host for g in sim_warehouse.summary.gpus})
    # NVLink and PCIe per GPU, two ports per host, 24 hours each
    assert rows == 24 * (2 * gpus + 2 * hosts)
    basis = dict(con.execute("SELECT link_kind, any_value(capacity_basis) FROM fct_link_bandwidth_hourly "
                             "WHERE day = ? GROUP BY ALL", [day]).fetchall())
    assert basis == {"nvlink": "catalogue", "pcie": "catalogue", "infiniband": "device"}
    (bad,) = con.execute("SELECT count(*) FROM fct_link_bandwidth_hourly WHERE day = ? AND NOT "
                         "(occupancy_ratio BETWEEN 0 AND 1)", [day]).fetchone()
    assert bad == 0
    assert link_bandwidth_day(con, day) == rows, "a re-run replaces the day"


def test_group_training_fills_nvlink_more_than_other_hours(sim_warehouse):
    con, day = sim_warehouse.con, sim_warehouse.day
    link_bandwidth_day(con, day)
    # The hours a GPU spent wholly in a multi-GPU training job against the hours it sat idle.
    by_kind = dict(con.execute("""
        WITH job_gpus AS (
            SELECT gpu_uuid, started_at, ended_at, stage, count(*) OVER (PARTITION BY job_id) AS n_gpus
            FROM raw_jobs WHERE date = $day
        ),
        hours AS (
            SELECT b.occupancy_ratio,
                   CASE WHEN j.stage = 'training' AND j.n_gpus > 1 THEN 'group-training'
                        WHEN j.gpu_uuid IS NULL THEN 'idle' END AS kind
            FROM fct_link_bandwidth_hourly AS b
            LEFT JOIN job_gpus AS j ON j.gpu_uuid = b.gpu_uuid
                 AND j.started_at < b.hour_at + INTERVAL 1 HOUR AND j.ended_at > b.hour_at
            WHERE b.day = $day AND b.link_kind = 'nvlink'
        )
        SELECT kind, avg(occupancy_ratio) FROM hours WHERE kind IS NOT NULL GROUP BY kind""", {"day": day}).fetchall())
    assert by_kind["group-training"] > 0.15 and by_kind["idle"] < 0.001
