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
             dict(sampled_at=at(10), host="node-01", power_w=1200.0, source="ipmi"),  # a copy: the lower power is kept
             dict(sampled_at=at(10), host="node-01", power_w=1000.0, source="redfish"),  # another source: its own stream
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
        ("node_samples", "node-01", 10, "ipmi", "duplicate_key"),
        ("node_samples", "node-01", 15, "aaa", "power_negative"),
    ]
    kwh = con.execute("SELECT energy_kwh FROM fct_node_energy_hourly WHERE hour(hour_at) = 0").fetchone()[0]
    assert kwh == pytest.approx(1.0), "the quarantined readings are not in the energy"


def _node(seconds, power_w, source="ipmi", host="node-01", **extra):
    return [dict(sampled_at=at(t), host=host, power_w=power_w, source=source, **extra) for t in seconds]


def test_copies_of_a_meter_reading_give_the_same_energy_on_every_build_and_the_quarantine_names_the_copy_left_out(
        lake, warehouse):
    """Every reading shipped twice with other values (1000 and 3000 W, one source): the energy was
    one copy or the other from build to build (24.0 or 72.0 kWh), and the quarantine could list
    the copy the energy used. The lower is kept, as on the GPU side; the same for a site's meters."""
    seconds = range(0, 3601, 5)
    write(lake, gpu_rows(range(0, 61), 100.0))
    write(lake, _node(seconds, 1000.0) + _node(seconds, 3000.0), "node_samples")
    write(lake, [dict(sampled_at=at(t), site="site-a", facility_power_w=f, it_power_w=10000.0, source="meter")
                 for t in range(0, 3601, 60) for f in (13000.0, 15000.0)], "facility_samples")
    for _ in range(3):  # the day rebuilt: the same pick each time
        con = warehouse()
        assert con.execute("SELECT energy_kwh FROM fct_node_energy_hourly WHERE hour(hour_at) = 0").fetchone()[0] == \
            pytest.approx(1.0)
        assert con.execute("SELECT pue FROM fct_pue_hourly WHERE hour(hour_at) = 0").fetchone()[0] == pytest.approx(1.3)
        left_out = con.execute("SELECT dataset, min(power_w), max(power_w), count(*) FROM quarantine_meter_samples "
                               "WHERE reason = 'duplicate_key' GROUP BY ALL ORDER BY ALL").fetchall()
        assert left_out == [("facility_samples", 15000.0, 15000.0, 61), ("node_samples", 3000.0, 3000.0, 721)]


def test_two_sources_of_one_server_are_never_blended(lake, warehouse):
    """IPMI at 1000 W every 5 s from :00, Redfish at 1100 W every 5 s from :02: interleaved in one
    stream they made 1.05 kWh, a figure neither read. The hour is one source's: IPMI covers more."""
    write(lake, gpu_rows(range(0, 61), 100.0))
    write(lake, _node(range(0, 3601, 5), 1000.0) + _node(range(2, 3600, 5), 1100.0, source="redfish"), "node_samples")
    con = warehouse()
    assert con.execute("SELECT energy_kwh, coverage_ratio, n_samples FROM fct_node_energy_hourly "
                       "WHERE hour(hour_at) = 0").fetchone() == (pytest.approx(1.0), pytest.approx(1.0), 720)
    assert con.execute("SELECT count(*) FROM quarantine_meter_samples").fetchone()[0] == 0


def test_a_bmc_without_dcmi_gets_its_energy_from_the_sdr_power_sensor(lake, warehouse):
    write(lake, gpu_rows(range(0, 61), 100.0))
    write(lake, _node(range(0, 3601, 5), None, host="node-02", sdr_power_w=800.0)
          + _node(range(0, 3601, 5), 1000.0, sdr_power_w=990.0), "node_samples")
    con = warehouse()
    rows = con.execute("SELECT host, energy_kwh FROM fct_node_energy_hourly WHERE hour(hour_at) = 0 ORDER BY host").fetchall()
    assert rows == [("node-01", pytest.approx(1.0)), ("node-02", pytest.approx(0.8))]  # DCMI first where it reads


def test_a_gpu_unread_for_an_hour_leaves_the_hours_reconciliation_uncovered(lake, warehouse):
    """GPU-1 is read until 00:30 only, the BMC all day: from 01:00 the hour's GPU coverage is 0,
    not the 1.0 of the one GPU still read, so nobody compares a residual that holds GPU-1's draw."""
    write(lake, gpu_rows(range(0, 10801, 5), 100.0, uuid="GPU-0") + gpu_rows(range(0, 1801, 5), 300.0, uuid="GPU-1"))
    write(lake, _node(range(0, 10801, 5), 1000.0), "node_samples")
    con = warehouse()
    rows = con.execute("SELECT hour(hour_at), gpu_coverage_ratio, n_gpus FROM fct_node_reconciliation_hourly "
                       "ORDER BY 1").fetchall()
    assert rows == [(0, pytest.approx(0.5), 2), (1, 0.0, 1), (2, 0.0, 1), (3, 0.0, 0)]  # 03:00: one reading each


def test_a_server_whose_meter_source_changes_inside_an_hour_keeps_the_whole_hour(lake, warehouse):
    """IPMI until 00:30, Redfish after: one source per hour kept half the hour (0.5 kWh)."""
    write(lake, gpu_rows(range(0, 61), 100.0))
    write(lake, _node(range(0, 1801, 5), 1000.0) + _node(range(1805, 3601, 5), 1000.0, source="redfish"),
          "node_samples")
    con = warehouse()
    energy, coverage = con.execute("SELECT energy_kwh, coverage_ratio FROM fct_node_energy_hourly "
                                   "WHERE hour(hour_at) = 0").fetchone()
    assert coverage == pytest.approx(1 - 5 / 3600) and energy == pytest.approx(1.0 * coverage)


def test_a_missed_dcmi_reading_is_not_filled_with_the_sdr_sensors_value(lake, warehouse):
    """DCMI at 1000 W, NULL every 4th poll while the SDR sensor (800 W) is still read: filled row
    by row, the hour blended two meters (0.95 kWh). The SDR readings are a stream of their own."""
    write(lake, gpu_rows(range(0, 61), 100.0))
    rows = [dict(sampled_at=at(t), host="node-01", power_w=None if k % 4 == 3 else 1000.0, sdr_power_w=800.0,
                 source="ipmi") for k, t in enumerate(range(0, 3601, 5))]
    write(lake, rows, "node_samples")
    con = warehouse()
    assert con.execute("SELECT energy_kwh FROM fct_node_energy_hourly WHERE hour(hour_at) = 0").fetchone()[0] == \
        pytest.approx(1.0)


def test_a_gpu_moved_to_another_host_is_not_unread_on_either(lake, warehouse):
    """GPU-1 on node-01 until 01:00, on node-02 after, every GPU read all the while: counting
    every GPU seen on a host that day, both hosts read 0 coverage in the other's hours."""
    write(lake, gpu_rows(range(0, 7201, 5), 100.0, uuid="GPU-0")
          + gpu_rows(range(0, 3600, 5), 300.0, uuid="GPU-1")
          + gpu_rows(range(3600, 7201, 5), 300.0, uuid="GPU-1", host="node-02")
          + gpu_rows(range(0, 7201, 5), 200.0, uuid="GPU-2", host="node-02"))
    con = warehouse()
    rows = con.execute("SELECT host, hour(hour_at), gpu_coverage_ratio FROM fct_node_reconciliation_hourly "
                       "WHERE hour(hour_at) < 2 ORDER BY ALL").fetchall()
    whole = pytest.approx(1.0, abs=5 / 3600)  # the 5 s of the move belong to neither host's stream
    assert rows == [("node-01", 0, whole), ("node-01", 1, whole), ("node-02", 0, whole), ("node-02", 1, whole)]
