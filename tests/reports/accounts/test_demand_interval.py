"""A utility bills demand on 15- or 30-minute averages ([tco] demand_interval_minutes): the month's
peak is the highest such average of the facility meter, not the highest hourly one, which a
spike shorter than the hour is averaged away in. The meter's readings here are written by hand
and integrated by the warehouse's own fct_pue_hourly, as a build would."""

from __future__ import annotations

import datetime as dt

import pytest

from accounting_world import DAY, at, build_world
from demand_meter import GAP_S, IT_W, WAREHOUSE_SQL, add_meter, copy_gpu_hours, spike
from joulehouse.reports.accounts.tco import tco_day
from joulehouse.settings import TcoSettings

RATE = 15.0  # USD/kW-month


def peak_row(con, day: dt.date = DAY) -> tuple:
    return con.execute("SELECT peak_hour_at, peak_kw, peak_basis, charged_kw, demand_charge_usd FROM rpt_demand_peak_daily "
                       "WHERE day = ?", [day]).fetchone()


def demand_usd(con, day: dt.date = DAY) -> float:
    return con.execute("SELECT sum(demand_charge_usd) FROM rpt_tco_daily WHERE day = ?", [day]).fetchone()[0]


# 3 kW all day but 9 kW from 09:15 to 09:30. Hour 9 by the trapezoid: 14 min at 3, a 1-min ramp
# (6), 15 min at 9, a 1-min ramp (6), 29 min at 3 = 276 kW-min over 60 min.
SPIKE_HOUR_KW = 276 / 60


def test_a_15_minute_spike_in_a_flat_hour_is_billed_at_its_own_average():
    con = build_world()
    add_meter(con, spike(3000.0, 9000.0, 9.25, 9.5))
    summary = tco_day(con, DAY, TcoSettings(demand_charge_usd_per_kw_month=RATE), None)
    # hourly, the bill's 9 kW read 4.6 kW: 69 USD of a 135 USD demand charge
    assert summary.peak_site_kw == pytest.approx(9.0)
    assert peak_row(con) == (at(9), pytest.approx(9.0), "facility_meter", pytest.approx(9.0), pytest.approx(RATE * 9.0))
    assert demand_usd(con) == pytest.approx(RATE * 9.0), "the GPU-hours of 09:00, the hour that holds it, pay it all"
    assert con.execute("SELECT sum(demand_charge_usd) FROM rpt_tco_daily WHERE job_id = 'unallocated'").fetchone()[0] \
        == pytest.approx(RATE * 9.0), "no job ran at 09:00: the idle line pays"


def test_a_30_minute_interval_averages_the_spike_over_its_half_hour():
    con = build_world()
    add_meter(con, spike(3000.0, 9000.0, 9.25, 9.5))
    tco_day(con, DAY, TcoSettings(demand_charge_usd_per_kw_month=RATE, demand_interval_minutes=30), None)
    # 09:00-09:30: 14 min at 3, the 1-min ramp (6), 15 min at 9
    assert peak_row(con)[:2] == (at(9), pytest.approx((14 * 3 + 6 + 15 * 9) / 30))


def test_60_minutes_bills_the_hourly_average_as_before():
    con = build_world()
    add_meter(con, spike(3000.0, 9000.0, 9.25, 9.5))
    summary = tco_day(con, DAY, TcoSettings(demand_charge_usd_per_kw_month=RATE, demand_interval_minutes=60), None)
    assert summary.peak_site_kw == pytest.approx(SPIKE_HOUR_KW)
    hourly = con.execute("SELECT facility_energy_kwh / coverage_ratio FROM fct_pue_hourly WHERE hour_at = ?",
                         [at(9)]).fetchone()[0]
    assert peak_row(con)[1] == hourly, "exactly fct_pue_hourly's hour, as the hourly accounts took it"
    assert demand_usd(con) == pytest.approx(RATE * SPIKE_HOUR_KW)


def test_a_meter_gap_inside_the_peak_interval_takes_the_hours_average():
    """9 kW from 09:15 to 09:30 but no reading at 09:21 and 09:22 (09:20 to 09:23 is past
    max_meter_gap_s): the interval is covered 12/15 = 0.8 < 0.9, so its 9 kW over 12 minutes is
    not its demand (nor 7.2 kW, the gap read as 0): it takes its hour's average, which the meter
    covered 57/60 (4.37 kW). The day's peak is then 14:00-14:15's 6 kW (its hour: 3.8 kW)."""
    con = build_world()
    gap = [at(9) + dt.timedelta(minutes=m) for m in (21, 22)]
    nine, six = spike(3000.0, 9000.0, 9.25, 9.5), spike(3000.0, 6000.0, 14.0, 14.25)
    add_meter(con, lambda t: max(nine(t), six(t)), missing=gap)
    tco_day(con, DAY, TcoSettings(demand_charge_usd_per_kw_month=RATE), None)
    assert peak_row(con)[:3] == (at(14), pytest.approx(6.0), "facility_meter")
    gapped_hour = con.execute("SELECT facility_energy_kwh / coverage_ratio, coverage_ratio FROM fct_pue_hourly "
                              "WHERE hour_at = ?", [at(9)]).fetchone()
    assert gapped_hour == (pytest.approx((276 - 3 * 9) / 57), pytest.approx(57 / 60))
    assert con.execute("SELECT sum(demand_charge_usd) FROM rpt_tco_daily WHERE day = ?", [DAY]).fetchone()[0] == (
        pytest.approx(RATE * 6.0))


def test_a_quarter_hour_the_meter_read_is_billed_though_it_went_silent_after():
    """9 kW from 09:00 to 09:15, then no reading until 10:00: the hour is covered 0.25 and falls
    back to its GPU-hours' IT x PUE (0.7 kW), but 09:00-09:15 was read whole and is the bill's peak
    (hourly, the day's 3 kW)."""
    con = build_world()
    silent = [at(9) + dt.timedelta(minutes=m) for m in range(16, 60)]
    add_meter(con, spike(3000.0, 9000.0, 9.0, 9.25), missing=silent)
    tco_day(con, DAY, TcoSettings(demand_charge_usd_per_kw_month=RATE), None)
    assert peak_row(con)[:3] == (at(9), pytest.approx(9.0), "facility_meter")
    assert demand_usd(con) == pytest.approx(RATE * 9.0)


def test_the_months_days_add_up_to_rate_times_its_highest_interval():
    """Day 1 is a flat 5 kW; day 2 a flat 3 kW but 9 kW for a quarter hour (4.6 kW hourly). By the
    hour day 2 added nothing to the month's 5 kW; the utility's bill is 9 kW."""
    con = build_world()
    later = DAY + dt.timedelta(days=1)
    copy_gpu_hours(con, later)
    add_meter(con, lambda t: 5000.0)
    add_meter(con, spike(3000.0, 9000.0, 9.25, 9.5, later), day=later)
    settings = TcoSettings(demand_charge_usd_per_kw_month=RATE)
    for day in (DAY, later):
        tco_day(con, day, settings, None)
    assert [demand_usd(con, d) for d in (DAY, later)] == pytest.approx([RATE * 5.0, RATE * 4.0])
    assert demand_usd(con, DAY) + demand_usd(con, later) == pytest.approx(RATE * 9.0)


def test_the_quarter_hours_hold_the_energy_of_their_hour():
    """The bill's intervals and the hour's energy are one integration of the meter (fct_pue_hourly's
    SQL per interval): with duplicate readings, a bad one, a gap and the day's edges, each hour's
    facility energy is the sum of its quarter-hours', and its coverage their mean."""
    import polars as pl

    from joulehouse.reports.accounts.demand import read_meter_intervals

    con = build_world()
    ramp = lambda t: 1000.0 + 3.0 * (t - at(0)).total_seconds() / 60  # noqa: E731
    gap = [at(13) + dt.timedelta(minutes=m) for m in range(5)]
    add_meter(con, ramp, missing=gap)
    con.execute("INSERT INTO raw_facility_samples VALUES (?, 'site-a', 50.0, ?, NULL, 'a-copy', ?), "
                "(?, 'site-a', -5.0, ?, NULL, 'meter', ?)", [at(4), IT_W, DAY, at(6.5), IT_W, DAY])
    con.execute("DELETE FROM fct_pue_hourly")
    con.execute("INSERT INTO fct_pue_hourly SELECT hour_at, site, pue, it_energy_kwh, facility_energy_kwh, coverage_ratio "
                f"FROM ({WAREHOUSE_SQL.body('fct_pue_hourly')})",
                {"day": DAY, "margin_s": GAP_S, "max_meter_gap_s": GAP_S, "meter_bucket_s": 3600})
    hourly = con.execute("SELECT hour_at, facility_energy_kwh, coverage_ratio FROM fct_pue_hourly ORDER BY 1").fetchall()
    meter = pl.DataFrame({"site": ["site-a"], "hour_at": [at(0)], "facility_kw": [1.0], "coverage_ratio": [1.0]})
    quarters = read_meter_intervals(con, DAY, meter, 15, GAP_S, [])
    summed = (quarters.with_columns(kwh=pl.col("facility_kw") * pl.col("coverage_ratio") / 4)
              .group_by("hour_at").agg(pl.col("kwh").sum(), pl.col("coverage_ratio").mean(), pl.len()).sort("hour_at"))
    assert quarters.height == 96 and summed["len"].to_list() == [4] * 24
    assert [h[0] for h in hourly] == summed["hour_at"].to_list()
    assert summed["kwh"].to_list() == pytest.approx([h[1] for h in hourly], rel=1e-12)
    assert summed["coverage_ratio"].to_list() == pytest.approx([h[2] for h in hourly], rel=1e-12)
    assert hourly[13][2] == pytest.approx(55 / 60), "12:59 to 13:05 is not bridged"


@pytest.mark.parametrize("minutes", [7, 45, 0, 90])
def test_an_interval_that_does_not_divide_the_hour_is_refused(minutes):
    with pytest.raises(ValueError, match="divisor of 60"):
        TcoSettings(demand_interval_minutes=minutes)


def test_an_hour_whose_demand_nothing_measured_stays_unknown():
    """Its GPU-hours' energy unknown, the meter covered half of one of its intervals: the hour's
    demand is NULL (no peak of the day comes from it), not 0 and not the half interval's kW."""
    import polars as pl

    from joulehouse.reports.accounts.demand import site_hour_kw

    hour = pl.Datetime("us", "UTC")
    gpu_hours = pl.DataFrame({"day": [DAY], "site": ["site-a"], "hour_at": [at(9)], "facility_energy_kwh": [None]},
                             schema_overrides={"hour_at": hour, "facility_energy_kwh": pl.Float64})
    meter = pl.DataFrame({"site": ["site-a"], "hour_at": [at(9)], "facility_kw": [2.0], "coverage_ratio": [0.2]},
                         schema_overrides={"hour_at": hour})
    intervals = pl.DataFrame({"site": ["site-a"], "interval_at": [at(9.25)], "hour_at": [at(9)], "facility_kw": [8.0],
                              "coverage_ratio": [0.5]}, schema_overrides={"interval_at": hour, "hour_at": hour})
    rows = site_hour_kw(gpu_hours, meter, 0.9, meter_intervals=intervals)
    assert rows.select("hour_at", "site_kw", "peak_basis").rows() == [(at(9), None, "gpu_it_x_pue")]
