"""A GPU the inventory does not list, on a fleet metered at two sites: the accounts place it at
"unknown", which is no site. No demand charge is billed to it (no utility meters "unknown"; its
GPU-hours' demand charge is unknown, NULL), no site's energy contract covers it, and a note names
it; its energy is still in the day's totals, priced at the fleet's price and carried at the
fleet's fallback grid region, as documented."""

from __future__ import annotations

import pytest

from accounting_world import DAY, at, build_world
from joulehouse.reports.accounts.carbon import carbon_day
from joulehouse.reports.accounts.residual_mix import residual_mix_for
from joulehouse.reports.accounts.tco import tco_day
from joulehouse.settings import CarbonSettings, TcoSettings

UNLISTED = "GPU-x"
RATE = 15.0  # $/kW-month
FLAT_USD_PER_MWH = 80.0


def world_with_an_unlisted_host():
    """accounting_world (site-a: node-01's two listed GPUs) with site-b's meter too, and node-99's
    GPU-x, which the inventory does not list: 0.1 kWh an hour, 0.5 kWh at 12:00, a job ext-1
    holding it 10:00-14:00."""
    con = build_world()
    con.execute("INSERT INTO fct_pue_hourly SELECT hour_at, 'site-b', 1.5, NULL, NULL, NULL FROM fct_pue_hourly")
    con.executemany("INSERT INTO fct_gpu_energy_hourly VALUES (?, ?, 'node-99', ?, 'NVIDIA H100 80GB HBM3', ?, ?, 1.0, "
                    "'counter')", [(at(h), DAY, UNLISTED, kwh, kwh * 1000) for h in range(24)
                                   for kwh in [0.5 if h == 12 else 0.1]])
    con.execute("INSERT INTO raw_jobs VALUES ('ext-1', 'node-99', ?, ?, ?, 'eve', 'lab', 'training', 'throughput', false, "
                "NULL, NULL, NULL, NULL)", [UNLISTED, at(10), at(14)])
    return con


def tco_settings() -> TcoSettings:
    return TcoSettings(demand_charge_usd_per_kw_month=RATE, flat_price_usd_per_mwh=FLAT_USD_PER_MWH)


def read_kwh(con, where: str = "TRUE") -> float:
    return con.execute(f"SELECT sum(energy_kwh) FROM fct_gpu_energy_hourly WHERE {where}").fetchone()[0]


def test_no_demand_charge_is_billed_to_a_site_that_is_not_a_site():
    con = world_with_an_unlisted_host()
    summary = tco_day(con, DAY, tco_settings(), None)
    billed = con.execute("SELECT site, sum(demand_charge_usd) FROM rpt_demand_peak_daily GROUP BY site").fetchall()
    assert [site for site, _ in billed] == ["site-a"], "a demand row only for a site a utility meters"
    assert summary.components_usd["demand_charge_usd"] == pytest.approx(billed[0][1])
    # node-01's peak hour: the month's first day pays rate x its kW
    assert summary.components_usd["demand_charge_usd"] == pytest.approx(summary.peak_site_kw * RATE)
    demand, energy = con.execute("SELECT demand_charge_usd, energy_kwh FROM rpt_tco_daily WHERE job_id = 'ext-1'"
                                 ).fetchone()
    assert demand is None, "the demand charge of a GPU at no site is unknown, not 0"
    assert energy == pytest.approx(read_kwh(con, f"gpu_uuid = '{UNLISTED}' AND hour(hour_at) BETWEEN 10 AND 13"))


def test_the_unlisted_gpus_energy_stays_in_the_totals_at_the_fleets_price_and_a_note_names_it():
    con = world_with_an_unlisted_host()
    summary = tco_day(con, DAY, tco_settings(), None)
    assert summary.energy_kwh == pytest.approx(read_kwh(con))
    assert summary.components_usd["energy_cost_usd"] == pytest.approx(
        summary.facility_energy_kwh * FLAT_USD_PER_MWH / 1000)
    unlisted_kwh = read_kwh(con, f"gpu_uuid = '{UNLISTED}'")
    at_meter_kwh = unlisted_kwh * TcoSettings().default_pue  # no meter at "unknown": the default PUE
    [note] = [n for n in summary.notes if f"{UNLISTED} on node-99" in n]
    assert f"{unlisted_kwh:.3f} kWh IT" in note and f"{at_meter_kwh:.3f} kWh at the meter" in note
    assert "no demand charge" in note


def test_a_day_whose_only_readings_are_of_unlisted_gpus_has_no_peak_not_a_zero_one():
    con = world_with_an_unlisted_host()
    con.execute(f"DELETE FROM fct_gpu_energy_hourly WHERE gpu_uuid <> '{UNLISTED}'")
    summary = tco_day(con, DAY, tco_settings(), None)
    assert summary.peak_site_kw is None
    assert summary.components_usd["demand_charge_usd"] is None
    assert summary.energy_kwh == pytest.approx(read_kwh(con))


def test_no_sites_energy_contract_covers_a_gpu_at_no_site(shared_data):
    con = world_with_an_unlisted_host()
    # a zero-carbon contract each site holds, far more than either site draws
    settings = CarbonSettings(market_contract_kwh_per_day=1000.0, market_contract_gco2e_per_kwh=0.0)
    summary = carbon_day(con, DAY, settings, shared_data)
    market, facility, region_location = con.execute(
        "SELECT market_gco2e, facility_energy_kwh, location_gco2e FROM rpt_carbon_daily WHERE job_id = 'ext-1'"
    ).fetchone()
    residual = residual_mix_for(settings.region, DAY.year).gco2e_per_kwh
    assert market == pytest.approx(facility * residual), "the residual mix of the fallback region, no contract"
    assert region_location > 0
    [note] = [n for n in summary.notes if f"{UNLISTED} on node-99" in n]
    assert f"grid region {settings.region!r}" in note and "no energy contract" in note
    assert summary.energy_kwh == pytest.approx(read_kwh(con))


def test_a_fleet_that_knows_no_site_is_one_site_and_is_told_so():
    """No inventory, no facility meter (a first install): nothing places a GPU elsewhere, so the
    fleet is one site, "unknown", whose demand charge is its IT x PUE peak; a note says so."""
    con = build_world(with_pue=False, with_dim=False)
    summary = tco_day(con, DAY, tco_settings(), None)
    [(site, charge)] = con.execute("SELECT site, demand_charge_usd FROM rpt_demand_peak_daily").fetchall()
    assert site == "unknown" and charge == pytest.approx(summary.peak_site_kw * RATE)
    peak_hour_kwh = con.execute("SELECT max(kwh) FROM (SELECT sum(energy_kwh) AS kwh FROM fct_gpu_energy_hourly "
                                "GROUP BY hour_at)").fetchone()[0]
    assert summary.peak_site_kw == pytest.approx(peak_hour_kwh * TcoSettings().default_pue)
    assert any("no GPU of the day's fleet has a site" in n and "one site" in n for n in summary.notes)
    assert not any("places at no site" in n for n in summary.notes)


def test_an_unlisted_gpu_taken_to_be_at_the_one_metered_site_is_said_to_be_assumed_there():
    """With one metered site, a GPU the inventory does not list is taken to be there, and pays its
    demand charge under its contracts and prices; nothing said it was an assumption."""
    con = build_world()
    con.executemany("INSERT INTO fct_gpu_energy_hourly VALUES (?, ?, 'node-99', ?, 'NVIDIA H100 80GB HBM3', ?, ?, 1.0, "
                    "'counter')", [(at(h), DAY, UNLISTED, 0.1, 100.0) for h in range(24)])
    summary = tco_day(con, DAY, tco_settings(), None)
    [note] = [n for n in summary.notes if "taken to be at site-a" in n]
    assert f"1 GPU(s) the inventory places at no site ({UNLISTED})" in note
    assert not any("taken to be at" in n for n in tco_day(build_world(), DAY, tco_settings(), None).notes)
