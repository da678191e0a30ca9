"""Where the site's time zone is off the hour by 30 or 45 minutes (Asia/Kolkata +05:30, Nepal
+05:45, Adelaide +09:30), its local month turns inside a UTC hour: each demand interval belongs to
the month it starts in there, not to the month of its hour's start. In Kolkata, 18:30 UTC on
31 March is 00:00 on 1 April: a peak in the quarter-hour after it is April's."""

from __future__ import annotations

import datetime as dt

import pytest

from accounting_world import at, build_world
from demand_meter import add_meter, copy_gpu_hours, spike
from joulehouse.reports.accounts.tco import tco_day
from joulehouse.settings import TcoSettings

RATE = 15.0  # USD/kW-month
TURN_DAY = dt.date(2026, 3, 31)  # UTC; its 18:30-24:00 is 1 April in Kolkata
MARCH, APRIL = dt.date(2026, 3, 1), dt.date(2026, 4, 1)


def test_a_peak_in_the_half_hour_after_kolkatas_month_turn_is_billed_in_the_new_month():
    """3 kW all day but 9 kW from 18:30 to 18:45 UTC (00:00-00:15 on 1 April in Kolkata). March's
    last quarter-hours (until 18:30) peak at 18:15-18:30: 14 min at 3 kW and the 1-min ramp to 9,
    (14 x 3 + 6) / 15 = 3.2 kW; April's peak is the 9 kW quarter-hour. Billed by its hour's start
    (23:30 on 31 March there), the 9 kW had been March's and April had 3 kW."""
    con = build_world()
    copy_gpu_hours(con, TURN_DAY)
    add_meter(con, spike(3000.0, 9000.0, 18.5, 18.75, TURN_DAY), day=TURN_DAY)
    tco_day(con, TURN_DAY, TcoSettings(demand_charge_usd_per_kw_month=RATE, tariff_timezone="Asia/Kolkata"), None)
    bills = con.execute("SELECT billing_month, peak_hour_at, peak_kw, demand_charge_usd FROM rpt_demand_peak_daily "
                        "WHERE day = ? ORDER BY billing_month", [TURN_DAY]).fetchall()
    assert bills == [(MARCH, at(18, TURN_DAY), pytest.approx(3.2), pytest.approx(RATE * 3.2)),
                     (APRIL, at(18, TURN_DAY), pytest.approx(9.0), pytest.approx(RATE * 9.0))]
    # both peaks lie in 18:00-19:00 UTC: its GPU-hours pay both, April's part in April's account
    monthly = dict(con.execute("SELECT month_start, sum(demand_charge_usd) FROM rpt_tco_monthly GROUP BY ALL").fetchall())
    assert monthly == {MARCH: pytest.approx(RATE * 3.2), APRIL: pytest.approx(RATE * 9.0)}


def test_an_hour_that_straddles_the_turn_keeps_each_months_own_quarter_hours():
    """9 kW from 18:00 to 18:15 UTC (still March in Kolkata), 3 kW after: April's part of the hour
    peaks at 3 kW, not at the hour's 4.6 kW average nor at March's quarter-hour."""
    con = build_world()
    copy_gpu_hours(con, TURN_DAY)
    add_meter(con, spike(3000.0, 9000.0, 18.0, 18.25, TURN_DAY), day=TURN_DAY)
    tco_day(con, TURN_DAY, TcoSettings(demand_charge_usd_per_kw_month=RATE, tariff_timezone="Asia/Kolkata"), None)
    peaks = dict(con.execute("SELECT billing_month, peak_kw FROM rpt_demand_peak_daily WHERE day = ?",
                             [TURN_DAY]).fetchall())
    assert peaks == {MARCH: pytest.approx(9.0), APRIL: pytest.approx(3.0)}
