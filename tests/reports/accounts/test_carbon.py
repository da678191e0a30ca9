"""carbon_day on a small hand-built warehouse: conservation, both scope 2 methods, embodied,
optional relations, re-runs, uncertainty."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest

from accounting_world import DAY, build_world
from joulehouse.settings import CarbonSettings
from joulehouse.reports.accounts.residual_mix import residual_mix_for
from joulehouse.reports.accounts.carbon import carbon_day
from joulehouse.reports.accounts.settings import parse_contracts
from joulehouse.reports.accounts.embodied import default_gpu_embodied_kgco2e, embodied_gco2e_per_gpu_hour


def metered_kwh(con) -> float:
    return con.execute("SELECT sum(energy_kwh) FROM fct_gpu_energy_hourly").fetchall()[0][0]


def report_sum(con, col: str, where: str = "TRUE") -> float:
    return con.execute(f"SELECT coalesce(sum({col}), 0) FROM rpt_carbon_daily WHERE {where}").fetchall()[0][0]


@pytest.fixture()
def world():
    return build_world()


def test_attributed_energy_and_gpu_hours_equal_metered(world, shared_data):
    summary = carbon_day(world, DAY, CarbonSettings(), shared_data)
    assert report_sum(world, "energy_kwh") == pytest.approx(metered_kwh(world), rel=1e-12)
    assert report_sum(world, "gpu_hours") == pytest.approx(48.0)
    assert summary.unallocated_energy_kwh == pytest.approx(report_sum(world, "energy_kwh", "job_id = 'unallocated'"))
    assert summary.quarantined_jobs == 1 and any("not after" in n for n in summary.notes)
    # Two PUE hours are missing for two GPUs: counted, default used.
    assert summary.pue_default_gpu_hours == 4
    assert summary.intensity_rule_counts["year_mapped"] == 24


def test_job_from_the_previous_day_is_charged_for_its_hours_today(world, shared_data):
    carbon_day(world, DAY, CarbonSettings(), shared_data)
    assert report_sum(world, "gpu_hours", "job_id = 'serve-1'") == pytest.approx(3.0)
    assert report_sum(world, "gpu_hours", "job_id = 'other-day'") == 0


def test_location_based_is_energy_times_pue_times_hourly_intensity(world, shared_data):
    flat = dataclasses.replace(CarbonSettings(), region="NOWHERE", default_grid_gco2e_per_kwh=100.0)
    world.execute("UPDATE dim_gpu SET region = 'NOWHERE'")
    summary = carbon_day(world, DAY, flat, shared_data)
    assert summary.location_gco2e == pytest.approx(summary.facility_energy_kwh * 100.0)
    assert summary.intensity_rule_counts["default"] == 24


def test_market_based_applies_contracts_first_then_residual_mix(world, shared_data):
    none = carbon_day(world, DAY, CarbonSettings(residual_mix_from="setting", residual_mix_gco2e_per_kwh=500.0), shared_data)
    assert none.market_gco2e == pytest.approx(none.facility_energy_kwh * 500.0)
    half_kwh = none.facility_energy_kwh / 2
    half = carbon_day(world, DAY, CarbonSettings(
        residual_mix_from="setting", residual_mix_gco2e_per_kwh=500.0, market_contracts=(f"site-a|2026-03-02|{half_kwh}|20",)), shared_data)
    assert half.market_gco2e == pytest.approx(half_kwh * 20 + half_kwh * 500.0)
    # A monthly volume is spread over the month's 31 days; more than enough covers everything.
    full = carbon_day(world, DAY, CarbonSettings(market_contracts=("site-a|2026-03|1e6|0",)), shared_data)
    assert full.market_gco2e == pytest.approx(0.0, abs=1e-9)
    # Another site's contract does not count here.
    other = carbon_day(world, DAY, CarbonSettings(
        residual_mix_from="setting", residual_mix_gco2e_per_kwh=500.0, market_contracts=("site-b|2026-03|1e6|0",)), shared_data)
    assert other.market_gco2e == pytest.approx(none.market_gco2e)
    # The location-based figure does not depend on contracts.
    assert full.location_gco2e == pytest.approx(none.location_gco2e)


def test_market_based_uses_the_regions_published_residual_mix_or_says_there_is_none(world, shared_data):
    """The default: the region's residual mix from AIB's table (FR: 17.11 gCO2/kWh, European
    Residual Mixes 2025, the latest edition at or before 2026), named in market_basis; a region
    without one has no market-based figure (NULL), not a generic 450 g."""
    fr = carbon_day(world, DAY, CarbonSettings(), shared_data)
    assert fr.market_gco2e == pytest.approx(fr.facility_energy_kwh * 17.11)
    basis = world.execute("SELECT DISTINCT market_basis FROM rpt_carbon_daily WHERE day = ?", [DAY]).fetchall()
    assert len(basis) == 1 and "no energy contracts" in basis[0][0]
    assert "17.11 gCO2/kWh" in basis[0][0] and "AIB European Residual Mixes 2025" in basis[0][0]
    assert "data year 2025" in basis[0][0]
    world.execute("UPDATE dim_gpu SET region = 'US-MIDA-PJM'")
    us = carbon_day(world, DAY, dataclasses.replace(CarbonSettings(), region="US-MIDA-PJM"), shared_data)
    assert us.market_gco2e is None and us.location_gco2e > 0
    row = world.execute("SELECT count(market_gco2e), count(total_market_gco2e), any_value(market_basis) "
                        "FROM rpt_carbon_daily WHERE day = ?", [DAY]).fetchone()
    assert row[:2] == (0, 0) and "not available" in row[2]
    # A contract that covers all the energy needs no residual mix.
    covered = carbon_day(world, DAY, dataclasses.replace(CarbonSettings(), region="US-MIDA-PJM",
                                                         market_contracts=("site-a|2026-03|1e6|0",)), shared_data)
    assert covered.market_gco2e == pytest.approx(0.0, abs=1e-9)


def test_an_unmeasured_gpu_hour_leaves_the_days_market_based_figure(world, shared_data):
    """An audit: one GPU-hour with clean readings but no bridged interval (energy_kwh NULL) made
    the whole day's market-based carbon NULL, as if its energy had neither contract nor mix."""
    measured = carbon_day(world, DAY, CarbonSettings(), shared_data)
    hour = world.execute("SELECT hour_at, gpu_uuid, energy_kwh FROM fct_gpu_energy_hourly "
                         "ORDER BY energy_kwh DESC LIMIT 1").fetchone()
    world.execute("UPDATE fct_gpu_energy_hourly SET energy_kwh = NULL, avg_power_w = NULL, coverage_ratio = 0 "
                  "WHERE hour_at = ? AND gpu_uuid = ?", hour[:2])
    one_missing = carbon_day(world, DAY, CarbonSettings(), shared_data)
    assert one_missing.market_gco2e == pytest.approx(one_missing.facility_energy_kwh * 17.11)
    assert one_missing.energy_kwh == pytest.approx(measured.energy_kwh - hour[2])
    assert one_missing.market_gco2e < measured.market_gco2e


def test_the_residual_mix_table_picks_the_edition_of_the_year():
    assert residual_mix_for("FR", 2024).gco2e_per_kwh == 40.74 and residual_mix_for("FR", 2024).data_year == 2023
    assert residual_mix_for("DE", 2025).gco2e_per_kwh == 701.47
    assert residual_mix_for("DK-DK1", 2025).region == "DK-DK1" and residual_mix_for("DK-DK1", 2025).gco2e_per_kwh == 448.9
    early = residual_mix_for("FR", 2022)  # before any edition in the table: the earliest, said so
    assert early.data_year == 2023 and "earliest edition" in early.source
    assert residual_mix_for("NL", 2025).gco2e_per_kwh is None  # full disclosure: AIB prints none
    assert "not available" in residual_mix_for("US-CAL-CISO", 2025).sentence


def test_bad_contract_entry_names_itself():
    with pytest.raises(ValueError, match="site-a|March"):
        parse_contracts(("site-a|March|10|0",))


def test_embodied_uses_inventory_then_model_defaults(world, shared_data):
    summary = carbon_day(world, DAY, CarbonSettings(), shared_data)
    a100 = embodied_gco2e_per_gpu_hour(143, 2750, 8, 4)  # inventory values
    h100 = embodied_gco2e_per_gpu_hour(default_gpu_embodied_kgco2e("NVIDIA H100 80GB HBM3", 999.0), 2750, 8, 5)
    assert summary.embodied_gco2e == pytest.approx(24 * (a100 + h100))
    assert default_gpu_embodied_kgco2e("NVIDIA H200", 1.0) > default_gpu_embodied_kgco2e("NVIDIA H100 80GB HBM3", 1.0)
    assert default_gpu_embodied_kgco2e("Unknown GPU", 123.0) == 123.0


def test_a_gpu_whose_readings_name_no_model_takes_the_inventorys_for_every_hour(world, shared_data):
    """Readings without a model (an imported log) of an H200 the inventory names: its read hours
    took the fallback embodied rate and its unread ones the H200's (two rates in one day), and its
    carbon was filed under no model."""
    world.execute("UPDATE dim_gpu SET gpu_model = 'NVIDIA H200' WHERE gpu_uuid = 'GPU-h100'")
    world.execute("UPDATE fct_gpu_energy_hourly SET gpu_model = NULL WHERE gpu_uuid = 'GPU-h100'")
    world.execute("DELETE FROM fct_gpu_energy_hourly WHERE gpu_uuid = 'GPU-h100' AND hour(hour_at) >= 12")
    summary = carbon_day(world, DAY, CarbonSettings(), shared_data)
    a100 = embodied_gco2e_per_gpu_hour(143, 2750, 8, 4)
    h200 = embodied_gco2e_per_gpu_hour(default_gpu_embodied_kgco2e("NVIDIA H200", 999.0), 2750, 8, 5)
    assert summary.embodied_gco2e == pytest.approx(24 * (a100 + h200))
    models = world.execute("SELECT DISTINCT gpu_model FROM rpt_carbon_by_gpu_daily WHERE day = ?", [DAY]).fetchall()
    assert None not in {m for (m,) in models} and ("NVIDIA H200",) in models


def test_range_brackets_central_and_widens_with_uncertainty(world, shared_data):
    narrow = carbon_day(world, DAY, CarbonSettings(), shared_data)
    assert narrow.total_low_gco2e < narrow.total_gco2e < narrow.total_high_gco2e
    wide = carbon_day(world, DAY, CarbonSettings(grid_uncertainty_pct=40.0), shared_data)
    assert wide.total_high_gco2e - wide.total_low_gco2e > narrow.total_high_gco2e - narrow.total_low_gco2e
    assert wide.total_gco2e == pytest.approx(narrow.total_gco2e)


def test_the_range_never_goes_below_zero_at_the_largest_uncertainties_allowed(world, shared_data):
    """Grid and PUE at 100% each combine to 141% (hypot): the low end read -283 gCO2e (review, helper-84)."""
    widest = carbon_day(world, DAY, CarbonSettings(grid_uncertainty_pct=100.0, pue_uncertainty_pct=100.0,
                                                   embodied_uncertainty_pct=100.0), shared_data)
    assert widest.total_low_gco2e == 0.0 < widest.total_gco2e
    assert world.execute("SELECT count(*) FROM rpt_carbon_daily WHERE total_low_gco2e < 0").fetchone()[0] == 0


def test_proportional_policy_moves_idle_carbon_onto_jobs_without_losing_any(world, shared_data):
    unalloc = carbon_day(world, DAY, CarbonSettings(), shared_data)
    spread = carbon_day(world, DAY, CarbonSettings(idle_policy="proportional"), shared_data)
    assert spread.total_gco2e == pytest.approx(unalloc.total_gco2e)
    assert spread.unallocated_energy_kwh == 0.0
    assert report_sum(world, "gpu_hours", "job_id = 'unallocated'") > 0  # idle time stays visible
    with pytest.raises(ValueError, match="idle_policy"):
        carbon_day(world, DAY, CarbonSettings(idle_policy="drop"), shared_data)


def test_rerun_replaces_the_day_and_monthly_rollup_adds_up(world, shared_data):
    first = carbon_day(world, DAY, CarbonSettings(), shared_data)
    carbon_day(world, DAY, CarbonSettings(), shared_data)
    assert world.execute("SELECT count(*) FROM rpt_carbon_daily").fetchall()[0][0] == first.rows_written
    monthly = world.execute("SELECT sum(total_gco2e) FROM rpt_carbon_monthly").fetchall()[0][0]
    assert monthly == pytest.approx(first.total_gco2e)


def test_without_optional_relations_everything_is_unallocated_at_defaults(shared_data):
    con = build_world(with_pue=False, with_dim=False, with_jobs=False)
    summary = carbon_day(con, DAY, CarbonSettings(default_pue=1.5), shared_data)
    assert summary.facility_energy_kwh == pytest.approx(1.5 * metered_kwh(con))
    assert summary.unallocated_energy_kwh == pytest.approx(metered_kwh(con))
    # BMC energy, PUE, dim_gpu, jobs absent + the defaulted PUE hours + a fleet that knows no site
    # (no inventory, no meter: taken as one, "unknown")
    assert len(summary.notes) == 6 and any("gpu_only" in n for n in summary.notes)
    assert any("no GPU of the day's fleet has a site" in n for n in summary.notes)
    assert report_sum(con, "node_ipmi_energy_kwh") == 0.0
    assert con.execute("SELECT DISTINCT it_energy_basis FROM rpt_carbon_daily").fetchall() == [("gpu_only",)]


def test_carbon_rises_with_energy(world, shared_data):
    before = carbon_day(world, DAY, CarbonSettings(), shared_data)
    world.execute("UPDATE fct_gpu_energy_hourly SET energy_kwh = energy_kwh * 2")
    after = carbon_day(world, DAY, CarbonSettings(), shared_data)
    assert after.location_gco2e == pytest.approx(2 * before.location_gco2e)
    assert after.embodied_gco2e == pytest.approx(before.embodied_gco2e)


def test_a_day_without_metered_gpu_hours_is_accounted_as_empty(world, shared_data):
    """A day the build holds no GPU-hours of (every reading quarantined, say) has no energy and a
    note; it stopped the carbon step on a missing market_basis column. Its fleet still existed:
    the idle line carries the inventory GPUs' embodied carbon of the 48 unread GPU-hours."""
    full = carbon_day(world, DAY, CarbonSettings(), shared_data)
    empty_day = DAY + dt.timedelta(days=5)
    summary = carbon_day(world, empty_day, CarbonSettings(), shared_data)
    # nothing was measured: the energy and its carbon are unknown, not 0 (every reading quarantined)
    assert summary.energy_kwh is None and summary.location_gco2e is None
    assert summary.unmetered_gpu_hours == 48 and summary.total_gco2e == pytest.approx(summary.embodied_gco2e)
    assert summary.embodied_gco2e == pytest.approx(full.embodied_gco2e)
    assert any(f"no metered GPU-hours on {empty_day}" in note for note in summary.notes)
    # the empty day replaced only itself: the full day's rows stay
    assert full.rows_written > 0
    assert world.execute("SELECT count(*) FROM rpt_carbon_daily WHERE day = ?", [DAY]).fetchone()[0] == full.rows_written


def test_a_month_holding_a_day_without_a_market_figure_has_none(world, shared_data):
    """rpt_carbon_monthly sums the days: a day the accounts left without a market-based figure
    (NULL) leaves its month's NULL too, as it leaves the day's; summed, it counted as 0 g."""
    day = carbon_day(world, DAY, CarbonSettings(), shared_data)
    # a second day of the month like the first, whose energy had no residual mix (the accounts' NULL)
    world.execute("INSERT INTO rpt_carbon_daily SELECT * REPLACE (day + 1 AS day, NULL AS market_gco2e, "
                  "NULL AS total_market_gco2e) FROM rpt_carbon_daily WHERE day = ?", [DAY])
    month = world.execute("SELECT sum(location_gco2e), count(market_gco2e), count(total_market_gco2e), count(*) "
                          "FROM rpt_carbon_monthly").fetchone()
    assert month[0] == pytest.approx(2 * day.location_gco2e)
    assert month[1:3] == (0, 0) and month[3] > 0
