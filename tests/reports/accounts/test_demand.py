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
    # 1 April 00:00-04:00 UTC is still March in New York (the tariff's zone): that UTC day holds two
    # billing months, and its March hours add nothing to March's higher peak
    assert con.execute("SELECT day, billing_month, charged_kw FROM rpt_demand_peak_daily ORDER BY ALL").fetchall() == [
        (DAY, dt.date(2026, 3, 1), pytest.approx(again.peak_site_kw)), (april, dt.date(2026, 3, 1), 0.0),
        (april, april, pytest.approx(0.5 * (0.35 + 0.56) * 1.25))]


def test_the_monthly_view_bills_the_demand_charge_in_the_tariffs_month():
    """1 April 00:00-04:00 UTC is March in New York: what those hours add to March's peak is March's
    charge. By the UTC month, rpt_tco_monthly showed it all under April and nothing for March."""
    con = build_world()
    april = dt.date(2026, 4, 1)
    add_day(con, april, 2.0)  # twice the load: its March hours raise March's peak
    settings = TcoSettings(demand_charge_usd_per_kw_month=RATE)
    for day in (DAY, april):
        tco_day(con, day, settings, None)
    billed = dict(con.execute("SELECT billing_month, sum(demand_charge_usd) FROM rpt_demand_peak_daily "
                              "GROUP BY ALL").fetchall())
    assert billed[dt.date(2026, 3, 1)] > demand(con, DAY)  # the turn's March hours add to March
    monthly = con.execute("SELECT month_start, sum(demand_charge_usd), sum(total_cost_usd), sum(gpu_hours), "
                          "sum(jobs_n) FROM rpt_tco_monthly GROUP BY ALL ORDER BY ALL").fetchall()
    assert {m: d for m, d, *_ in monthly} == pytest.approx(billed)
    daily = con.execute("SELECT date_trunc('month', day)::DATE, sum(total_cost_usd), sum(gpu_hours), "
                        "count(DISTINCT job_id) FROM rpt_tco_daily GROUP BY ALL ORDER BY ALL").fetchall()
    # nothing but the demand charge moves: hours and jobs stay in their UTC month, the totals add up
    assert [(m, h, n) for m, _, _, h, n in monthly] == [(m, pytest.approx(h), n) for m, _, h, n in daily]
    assert sum(t for _, _, t, _, _ in monthly) == pytest.approx(sum(t for _, t, _, _ in daily))


def test_a_peak_in_the_first_utc_hours_of_a_month_raises_the_month_it_is_where_the_site_is():
    """New York: 02:00 UTC on 1 April is 22:00 on 31 March. By the UTC month, a peak there raised
    April's bill, and a higher one later in April was charged only what it added to it (a review's
    19.50 + 195 USD for a bill of 195 + 195)."""
    from joulehouse.reports.accounts.demand import allocated_demand_charge, NO_METER
    import polars as pl
    hours = [dt.datetime(2026, 3, 31, 12, tzinfo=dt.timezone.utc), dt.datetime(2026, 4, 1, 2, tzinfo=dt.timezone.utc),
             dt.datetime(2026, 4, 1, 12, tzinfo=dt.timezone.utc)]
    gpu_hours = pl.DataFrame({"day": [h.date() for h in hours], "site": ["s"] * 3, "hour_at": hours,
                              "facility_energy_kwh": [10.0, 13.0, 13.0]},
                             schema_overrides={"hour_at": pl.Datetime("us", "UTC")})
    charged, peaks = allocated_demand_charge(gpu_hours, NO_METER, 1.0, {}, RATE, "America/New_York")
    assert peaks.select("billing_month", "charged_kw").rows() == [
        (dt.date(2026, 3, 1), 10.0), (dt.date(2026, 3, 1), 3.0), (dt.date(2026, 4, 1), 13.0)]
    assert charged["demand_charge_usd"].to_list() == [RATE * 10.0, RATE * 3.0, RATE * 13.0]
    by_utc, _ = allocated_demand_charge(gpu_hours, NO_METER, 1.0, {}, RATE)  # a tariff in UTC bills UTC months
    assert by_utc["demand_charge_usd"].to_list() == [RATE * 10.0, RATE * 13.0, 0.0]


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


def test_rows_written_before_the_billing_month_was_kept_count_in_their_utc_month():
    """A warehouse whose rpt_demand_peak_daily predates the column: its rows are read as their UTC
    day's month, and the table takes the column instead of the next day's account failing."""
    con = build_world()
    later = DAY + dt.timedelta(days=1)
    add_day(con, later, 1.0)
    con.execute("CREATE TABLE rpt_demand_peak_daily (day DATE NOT NULL, site VARCHAR NOT NULL, peak_hour_at TIMESTAMPTZ "
                "NOT NULL, peak_kw DOUBLE, peak_basis VARCHAR, month_peak_before_kw DOUBLE, charged_kw DOUBLE, "
                "demand_charge_usd DOUBLE)")
    site = con.execute("SELECT DISTINCT site FROM fct_pue_hourly").fetchone()[0]
    con.execute("INSERT INTO rpt_demand_peak_daily VALUES (?, ?, ?, 100.0, 'facility_meter', NULL, 100.0, 1500.0)",
                [DAY, site, at(5)])
    tco_day(con, later, TcoSettings(demand_charge_usd_per_kw_month=RATE), None)
    assert demand(con, later) == 0.0, "the old row's 100 kW is March's peak"
    assert con.execute("SELECT billing_month FROM rpt_demand_peak_daily WHERE day = ?", [later]).fetchone()[0] == (
        dt.date(2026, 3, 1))
