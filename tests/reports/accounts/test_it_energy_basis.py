"""IT energy basis: the server's BMC energy split among its GPUs where usable, GPU board energy
elsewhere; attributed totals equal metered totals at the chosen basis."""

from __future__ import annotations

import datetime as dt

import polars as pl
import pytest
from hypothesis import given, settings as hsettings, strategies as st

from accounting_world import DAY, add_node_energy, build_world
from joulehouse.settings import CarbonSettings, TcoSettings
from joulehouse.reports.accounts.carbon import carbon_day
from joulehouse.reports.accounts.it_energy_basis import apply_it_energy_basis
from joulehouse.reports.accounts.tco import tco_day

H0 = dt.datetime(2026, 3, 2, tzinfo=dt.timezone.utc)


def gpu_frame(rows):
    return pl.DataFrame(rows, schema={"hour_at": pl.Datetime("us", "UTC"), "host": pl.String, "gpu_uuid": pl.String,
                                      "energy_kwh": pl.Float64}, orient="row")


def node_frame(rows):
    return pl.DataFrame(rows, schema={"hour_at": pl.Datetime("us", "UTC"), "host": pl.String, "energy_kwh": pl.Float64,
                                      "coverage_ratio": pl.Float64}, orient="row")


def test_node_energy_is_split_by_gpu_share_and_each_fallback_says_why():
    h1, h2, h3, h4 = (H0 + dt.timedelta(hours=k) for k in (1, 2, 3, 4))
    gpus = gpu_frame([(H0, "n1", "a", 0.3), (H0, "n1", "b", 0.1), (h1, "n1", "a", 0.3), (h1, "n1", "b", 0.1),
                      (h2, "n1", "a", 0.3), (h2, "n1", "b", 0.1), (h3, "n1", "a", None), (h3, "n1", "b", None),
                      (h4, "n1", "a", 1.0), (h4, "n1", "b", None), (H0, "n2", "c", 0.2)])
    node = node_frame([(H0, "n1", 0.8, 1.0), (h1, "n1", 0.8, 0.5), (h2, "n1", 0.3, 1.0), (h3, "n1", 0.2, 1.0),
                       (h4, "n1", 3.0, 1.0)])
    out, counts = apply_it_energy_basis(gpus, node, 0.9)
    got = {(r["hour_at"], r["gpu_uuid"]): (r["energy_kwh"], r["gpu_energy_kwh"], r["it_energy_basis"])
           for r in out.iter_rows(named=True)}
    assert got[(H0, "a")] == pytest.approx((0.6, 0.3, "node_ipmi")) and got[(H0, "b")][0] == pytest.approx(0.2)
    assert got[(h1, "a")] == (0.3, 0.3, "gpu_only")  # BMC covered only half the hour
    assert got[(h2, "a")] == (0.3, 0.3, "gpu_only")  # BMC reads less than its own GPUs
    assert got[(h3, "a")][0] == pytest.approx(0.1) and got[(h3, "b")][0] == pytest.approx(0.1)  # no GPU share: equal
    # one GPU measured, one not: no share says what b drew. Split by board energy, a's job was
    # charged all 3 kWh and b's hour read as a measured 0 kWh; now a keeps its board energy and b
    # stays unmetered (NULL)
    assert got[(h4, "a")] == (1.0, 1.0, "gpu_only") and got[(h4, "b")] == (None, None, "gpu_only")
    assert got[(H0, "c")] == (0.2, 0.2, "gpu_only")  # host without a BMC
    assert counts == {"node_ipmi": 2, "gpu_only_no_node": 1, "gpu_only_low_coverage": 1, "gpu_only_node_below_gpus": 1,
                      "gpu_only_gpu_unmeasured": 1}
    with pytest.raises(ValueError, match="min_node_coverage_ratio"):
        apply_it_energy_basis(gpus, node, 1.5)


def test_a_gpu_of_the_fleet_with_no_row_keeps_its_host_hour_on_the_gpu_basis():
    """Split among the GPUs that were read, an absent GPU's draw went to their jobs (5 kWh of BMC
    charged to a GPU that drew 2)."""
    gpus = gpu_frame([(H0, "n1", "a", 2.0), (H0 + dt.timedelta(hours=1), "n1", "a", 2.0)])
    node = node_frame([(H0, "n1", 5.0, 1.0), (H0 + dt.timedelta(hours=1), "n1", 5.0, 1.0)])
    unread = pl.DataFrame({"hour_at": [H0], "host": ["n1"]}, schema={"hour_at": pl.Datetime("us", "UTC"), "host": pl.String})
    out, counts = apply_it_energy_basis(gpus, node, 0.9, unread=unread)
    assert out.sort("hour_at").select("energy_kwh", "it_energy_basis").rows() == [(2.0, "gpu_only"), (5.0, "node_ipmi")]
    assert counts["gpu_only_gpu_unmeasured"] == 1 and counts["node_ipmi"] == 1


def test_the_accounts_charge_no_bmc_energy_where_a_gpu_of_the_server_lost_its_hour(shared_data):
    def train_1_kwh(lose_h100_hour_2: bool) -> tuple[float, str]:
        con = build_world()
        add_node_energy(con)
        if lose_h100_hour_2:
            con.execute("DELETE FROM fct_gpu_energy_hourly WHERE gpu_uuid = 'GPU-h100' AND hour(hour_at) = 2")
        carbon_day(con, DAY, CarbonSettings(), shared_data)
        return con.execute("SELECT energy_kwh, it_energy_basis FROM rpt_carbon_daily WHERE job_id = 'train-1'").fetchone()

    con = build_world()
    add_node_energy(con)
    (node_kwh,) = con.execute("SELECT energy_kwh FROM fct_node_energy_hourly WHERE hour(hour_at) = 2").fetchone()
    a100_kwh, gpus_kwh = con.execute("SELECT sum(energy_kwh) FILTER (WHERE gpu_uuid = 'GPU-a100'), sum(energy_kwh) "
                                     "FROM fct_gpu_energy_hourly WHERE hour(hour_at) = 2").fetchone()
    (whole, whole_basis), (lost, lost_basis) = train_1_kwh(False), train_1_kwh(True)
    # train-1 held the A100 alone in hour 2: with the H100's hour lost, it is charged the A100's
    # board energy there, not the BMC's whole 1.11 kWh (both GPUs' draw) given to the one GPU read
    assert (whole_basis, lost_basis) == ("node_ipmi", "mixed")
    assert whole - lost == pytest.approx(node_kwh * a100_kwh / gpus_kwh - a100_kwh, rel=1e-9)


def test_a_bmc_that_covered_most_of_the_hour_charges_the_whole_hour():
    """1.0 kW all hour, the BMC read 54 of its 60 minutes (0.9 kWh at coverage 0.9): the hour drew
    1.0 kWh, not the 0.9 measured; 8 GPUs of 0.1 kWh each share it by their energy."""
    gpus = gpu_frame([(H0, "n1", f"g{i}", 0.1) for i in range(8)])
    out, counts = apply_it_energy_basis(gpus, node_frame([(H0, "n1", 0.9, 0.9)]), 0.9)
    assert counts["node_ipmi"] == 1
    assert out["energy_kwh"].sum() == pytest.approx(1.0) and out["energy_kwh"].to_list() == pytest.approx([0.125] * 8)


@hsettings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 3), st.floats(0, 1)), min_size=1, max_size=20),
       st.lists(st.tuples(st.integers(0, 2), st.floats(0, 3), st.floats(0, 1)), max_size=3))
def test_node_basis_host_hours_add_up_to_the_bmc_and_the_rest_to_the_gpus(gpu_rows, node_rows):
    gpus = gpu_frame([(H0, f"n{host}", f"g{host}-{i}", e) for host, i, e in gpu_rows]).unique(["hour_at", "gpu_uuid"])
    node = node_frame([(H0, f"n{host}", e, c) for host, e, c in node_rows]).unique(["hour_at", "host"])
    out, _ = apply_it_energy_basis(gpus, node, 0.9)
    assert out.height == gpus.height
    per_host = out.group_by("host").agg(pl.col("energy_kwh").sum(), pl.col("gpu_energy_kwh").sum(),
                                        pl.col("it_energy_basis").unique())
    meters = {r[1]: (r[2], r[3]) for r in node.iter_rows()}
    for host, it_kwh, gpu_kwh, bases in per_host.iter_rows():
        assert len(bases) == 1
        if bases[0] == "node_ipmi":
            node_kwh, coverage = meters[host]
            assert it_kwh == pytest.approx(node_kwh / coverage) and coverage >= 0.9
            assert node_kwh / coverage >= gpu_kwh - 1e-9
        else:
            assert it_kwh == pytest.approx(gpu_kwh)


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["unallocated", "proportional"])
def test_carbon_and_cost_attribute_exactly_the_energy_metered_at_the_chosen_basis(shared_data, policy):
    con = build_world()
    expected = add_node_energy(con)
    node = dict(con.execute("SELECT hour(hour_at), energy_kwh FROM fct_node_energy_hourly").fetchall())
    gpu = dict(con.execute("SELECT hour(hour_at), sum(energy_kwh) FROM fct_gpu_energy_hourly GROUP BY 1").fetchall())
    metered = sum(node[h] if basis == "node_ipmi" else gpu[h] for h, basis in expected.items())
    carbon = carbon_day(con, DAY, CarbonSettings(idle_policy=policy), shared_data)
    cost = tco_day(con, DAY, TcoSettings(idle_policy=policy), shared_data)
    for table, summary in (("rpt_carbon_daily", carbon), ("rpt_tco_daily", cost)):
        energy, board, at_node = con.execute(
            f"SELECT sum(energy_kwh), sum(gpu_energy_kwh), sum(node_ipmi_energy_kwh) FROM {table}").fetchone()
        assert energy == pytest.approx(metered, rel=1e-12) and summary.energy_kwh == pytest.approx(metered)
        assert board == pytest.approx(sum(gpu.values()), rel=1e-12)
        assert at_node == pytest.approx(sum(node[h] for h in range(20)), rel=1e-12)
    assert carbon.facility_energy_kwh > carbon.gpu_energy_kwh  # CPUs, fans and PSU now count
    # train-1 ran in hours 1-5, all at the node basis; the idle line spans every hour: mixed
    # (and spreading it over the jobs makes theirs mixed too).
    bases = dict(con.execute("SELECT job_id, it_energy_basis FROM rpt_carbon_daily").fetchall())
    assert bases["train-1"] == ("node_ipmi" if policy == "unallocated" else "mixed")
    if policy == "unallocated":
        assert bases["unallocated"] == "mixed"
    assert any("host-hours at the server's BMC energy" in n for n in carbon.notes)
