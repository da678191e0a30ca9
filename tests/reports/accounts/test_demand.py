"""The demand charge is billed on the month's peak: a month's days, accounted in order, add up to
rate x the month's highest site demand, whoever set it; the facility meter's demand is used where
it covered the hour."""

from __future__ import annotations

import datetime as dt

import pytest

from accounting_world import DAY, at, build_world
from joulehouse.settings import TcoSettings
from joulehouse.reports.accounts.tco import tco_day

RATE = 15.0  # $/kW-month


def add_day(con, day: dt.date, scale: float) -> None:
    """Copy DAY's GPU-hours and PUE onto `day`, the GPU energy times `scale`."""
    shift = day - DAY
    con.execute("INSERT INTO fct_gpu_energy_hourly SELECT hour_at + ?, day + ?, host, gpu_uuid, gpu_model, "
                "energy_kwh * ?, avg_power_w * ?, coverage_ratio, energy_source FROM fct_gpu_energy_hourly "
                "WHERE day = ?", [shift, shift.days, scale, scale, DAY])
    con.execute("INSERT INTO fct_pue_hourly SELECT hour_at + ?, site, pue, it_energy_kwh, facility_energy_kwh, "
                "coverage_ratio FROM fct_pue_hourly WHERE hour_at >= ? AND hour_at < ?", [shift, at(0), at(24)])


def demand(con, day: dt.date) -> float:
    return con.execute("SELECT sum(demand_charge_usd) FROM rpt_tco_daily WHERE day = ?", [day]).fetchone()[0]


def test_a_months_days_add_up_to_rate_times_the_months_peak():
    con = build_world()
    days = [DAY + dt.timedelta(days=k) for k in range(4)]
    for day, scale in zip(days[1:], (0.5, 2.0, 1.5)):
        add_day(con, day, scale)
    settings = TcoSettings(demand_charge_usd_per_kw_month=RATE)
    peaks = [tco_day(con, day, settings, None).peak_site_kw for day in days]
    first = (0.35 + 0.56) * 1.25  # 05:00 on DAY, IT x PUE (the meter has no energy in this world)
    assert peaks == pytest.approx([first, first * 0.5, first * 2.0, first * 1.5])
    charges = [demand(con, day) for day in days]
    # DAY sets the peak, the half day adds nothing, the double day raises it, the 1.5x day is under it.
    assert charges == pytest.approx([RATE * first, 0.0, RATE * first, 0.0])
    assert sum(charges) == pytest.approx(RATE * max(peaks)), "what the utility bills for the month"
    monthly = con.execute("SELECT sum(demand_charge_usd) FROM rpt_tco_monthly").fetchone()[0]
    assert monthly == pytest.approx(RATE * max(peaks))
    stored = con.execute("SELECT day, month_peak_before_kw, charged_kw, peak_basis FROM rpt_demand_peak_daily "
                         "ORDER BY day").fetchall()
    assert stored[0][1] is None and [r[1] for r in stored[1:]] == pytest.approx([first, first, 2 * first])
    assert [r[2] for r in stored] == pytest.approx([first, 0.0, first, 0.0])
    assert [r[3] for r in stored] == ["gpu_it_x_pue"] * 4


def test_a_new_month_starts_from_zero_and_a_rerun_replaces_its_day():
    con = build_world()
    april = dt.date(2026, 4, 1)
    add_day(con, april, 0.5)
    settings = TcoSettings(demand_charge_usd_per_kw_month=RATE)
    tco_day(con, DAY, settings, None)
    tco_day(con, april, settings, None)
    assert demand(con, april) == pytest.approx(RATE * 0.5 * (0.35 + 0.56) * 1.25), "March's peak is not April's"
    again = tco_day(con, DAY, settings, None)
    assert demand(con, DAY) == pytest.approx(RATE * again.peak_site_kw)
    assert con.execute("SELECT count(*) FROM rpt_demand_peak_daily").fetchone()[0] == 2


def test_accounting_a_day_after_later_days_of_its_month_says_so():
    con = build_world()
    later = DAY + dt.timedelta(days=3)
    add_day(con, later, 1.0)
    settings = TcoSettings(demand_charge_usd_per_kw_month=RATE)
    tco_day(con, later, settings, None)
    summary = tco_day(con, DAY, settings, None)
    assert any("later day(s) of this month were accounted before this one" in n and str(later) in n
               for n in summary.notes)


def test_the_facility_meter_sets_the_peak_where_it_covered_the_hour():
    con = build_world()
    # The meter read 3.0 kW on average over 95% of 09:00 and 9.0 kW over half of 10:00 (too little).
    con.execute("UPDATE fct_pue_hourly SET facility_energy_kwh = 3.0 * 0.95, coverage_ratio = 0.95 WHERE hour_at = ?",
                [at(9)])
    con.execute("UPDATE fct_pue_hourly SET facility_energy_kwh = 9.0 * 0.5, coverage_ratio = 0.5 WHERE hour_at = ?",
                [at(10)])
    summary = tco_day(con, DAY, TcoSettings(demand_charge_usd_per_kw_month=RATE), None)
    assert summary.peak_site_kw == pytest.approx(3.0)
    assert summary.components_usd["demand_charge_usd"] == pytest.approx(RATE * 3.0)
    row = con.execute("SELECT peak_hour_at, peak_basis FROM rpt_demand_peak_daily").fetchone()
    assert row == (at(9), "facility_meter")
    payers = con.execute("SELECT sum(demand_charge_usd) FROM rpt_tco_daily WHERE job_id = 'unallocated'").fetchone()[0]
    assert payers == pytest.approx(RATE * 3.0), "no job ran at 09:00: the idle line pays"
