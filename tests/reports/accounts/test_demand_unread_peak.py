"""A peak the facility meter saw in an hour whose GPU readings were lost is still on the bill: the
day's demand charge is rate x that peak, and the fleet's unread GPU-hours of that hour pay it."""

from __future__ import annotations

import pytest

from accounting_world import DAY, at, build_world
from joulehouse.settings import TcoSettings
from joulehouse.reports.accounts.tco import tco_day

RATE = 15.0  # $/kW-month


def test_a_meter_peak_in_an_hour_without_gpu_readings_is_charged_to_that_hours_gpus():
    con = build_world()
    # The meter read 4.0 kW over all of 14:00 (far above the GPUs' ~1.1 kW peak), and the
    # collectors lost every GPU reading of that hour.
    con.execute("UPDATE fct_pue_hourly SET facility_energy_kwh = 4.0, coverage_ratio = 1.0 WHERE hour_at = ?", [at(14)])
    con.execute("DELETE FROM fct_gpu_energy_hourly WHERE hour_at = ?", [at(14)])
    summary = tco_day(con, DAY, TcoSettings(demand_charge_usd_per_kw_month=RATE), None)
    assert summary.peak_site_kw == pytest.approx(4.0)
    assert con.execute("SELECT peak_hour_at, peak_basis, demand_charge_usd FROM rpt_demand_peak_daily").fetchone() \
        == (at(14), "facility_meter", pytest.approx(RATE * 4.0))
    # the accounts carry what the peak table bills, no more, no less
    assert summary.components_usd["demand_charge_usd"] == pytest.approx(RATE * 4.0)
    assert con.execute("SELECT sum(demand_charge_usd) FROM rpt_tco_daily").fetchone()[0] == pytest.approx(RATE * 4.0)
