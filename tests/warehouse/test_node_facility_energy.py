"""Node (IPMI) energy, PUE and the node-vs-GPU reconciliation."""

from __future__ import annotations

import pytest
from warehouse_lakes import at, gpu_rows, write


def test_node_energy_pue_and_residual(lake, warehouse):
    seconds = range(0, 3601, 5)
    write(lake, gpu_rows(seconds, 100.0, uuid="GPU-0") + gpu_rows(seconds, 300.0, uuid="GPU-1"))
    write(lake, [dict(sampled_at=at(t), host="node-01", power_w=1000.0, source="ipmi") for t in seconds], "node_samples")
    write(
        lake,
        [dict(sampled_at=at(t), site="site-a", facility_power_w=13000.0, it_power_w=10000.0, source="meter") for t in range(0, 3601, 60)],
        "facility_samples",
    )
    con = warehouse()
    node = con.execute("SELECT energy_kwh, coverage_ratio FROM fct_node_energy_hourly WHERE hour(hour_at) = 0").fetchone()
    assert node == pytest.approx((1.0, 1.0))
    rec = con.execute(
        "SELECT node_energy_kwh, gpu_energy_kwh, residual_kwh, residual_share, n_gpus "
        "FROM fct_node_reconciliation_hourly WHERE hour(hour_at) = 0"
    ).fetchone()
    assert rec == pytest.approx((1.0, 0.4, 0.6, 0.6, 2))
    pue = con.execute("SELECT pue, it_energy_kwh, facility_energy_kwh FROM fct_pue_hourly WHERE hour(hour_at) = 0").fetchone()
    assert pue == pytest.approx((1.3, 10.0, 13.0))


def test_sites_without_bmc_or_meters_still_get_gpu_energy(lake, warehouse):
    write(lake, gpu_rows(range(0, 61), 100.0))
    con = warehouse()
    assert con.execute("SELECT count(*) FROM fct_node_energy_hourly").fetchone()[0] == 0
    assert con.execute("SELECT count(*) FROM fct_pue_hourly").fetchone()[0] == 0
    assert con.execute("SELECT node_energy_kwh, n_gpus FROM fct_node_reconciliation_hourly").fetchall() == [(None, 1)]
