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


def test_bad_meter_readings_are_quarantined_with_a_reason_not_just_skipped(lake, warehouse):
    """The hourly node energy and PUE leave out negative, NaN and duplicate readings; each of them
    is in quarantine_meter_samples with its rule, and a reading with no power is missing, not bad."""
    seconds = list(range(0, 3601, 5))
    write(lake, gpu_rows(seconds, 100.0))
    node = [dict(sampled_at=at(t), host="node-01", power_w=1000.0, source="ipmi") for t in seconds]
    node += [dict(sampled_at=at(7), host="node-01", power_w=-5.0, source="ipmi"),
             dict(sampled_at=at(8), host="node-01", power_w=float("nan"), source="ipmi"),
             dict(sampled_at=at(10), host="node-01", power_w=1000.0, source="redfish"),  # "ipmi" < "redfish" wins
             dict(sampled_at=at(15), host="node-01", power_w=-1.0, source="aaa"),  # bad, so "ipmi" is not a duplicate
             dict(sampled_at=at(20), host="node-01", power_w=None, source="aaa")]  # missing: not bad
    write(lake, node, "node_samples")
    facility = [dict(sampled_at=at(t), site="site-a", facility_power_w=13000.0, it_power_w=10000.0, source="meter")
                for t in range(0, 3601, 60)]
    facility.append(dict(sampled_at=at(30), site="site-a", facility_power_w=13000.0, it_power_w=-10.0, source="meter"))
    write(lake, facility, "facility_samples")
    con = warehouse()
    rows = con.execute("SELECT dataset, host, epoch(sampled_at)::INT % 3600, source, reason FROM quarantine_meter_samples "
                       "ORDER BY ALL").fetchall()
    assert rows == [
        ("facility_samples", "site-a", 30, "meter", "power_negative"),
        ("node_samples", "node-01", 7, "ipmi", "power_negative"),
        ("node_samples", "node-01", 8, "ipmi", "power_not_finite"),
        ("node_samples", "node-01", 10, "redfish", "duplicate_key"),
        ("node_samples", "node-01", 15, "aaa", "power_negative"),
    ]
    kwh = con.execute("SELECT energy_kwh FROM fct_node_energy_hourly WHERE hour(hour_at) = 0").fetchone()[0]
    assert kwh == pytest.approx(1.0), "the quarantined readings are not in the energy"
