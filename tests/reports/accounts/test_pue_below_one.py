"""A measured PUE below 1 is a facility meter that missed part of the site: the accounts never
charge less facility energy than the GPUs drew; such an hour takes default_pue, counted."""

from __future__ import annotations

import pytest

from accounting_world import DAY, build_world
from joulehouse.reports.accounts.carbon import carbon_day
from joulehouse.settings import CarbonSettings


@pytest.mark.parametrize("measured_pue", [0.6, 1300.0], ids=["below one", "an IT meter read in kW"])
def test_an_hour_whose_pue_is_no_pue_is_charged_the_default_pue(shared_data, measured_pue):
    """Below 1, or above MAX_PUE (10: the IT meter in kW read 1300, and the hour 1300x its carbon)."""
    world = build_world()
    settings = CarbonSettings(default_pue=1.3)
    before = carbon_day(world, DAY, settings, shared_data)
    world.execute("UPDATE fct_pue_hourly SET pue = ? WHERE hour(hour_at) = 5", [measured_pue])
    gpus_in_hour_5 = world.execute("SELECT count(DISTINCT gpu_uuid) FROM fct_gpu_energy_hourly "
                                   "WHERE hour(hour_at) = 5 AND energy_kwh IS NOT NULL").fetchone()[0]
    (it_kwh_hour_5,) = world.execute("SELECT sum(energy_kwh) FROM fct_gpu_energy_hourly WHERE hour(hour_at) = 5").fetchone()
    old_pue = 1.2 + 0.01 * 5  # the world's PUE of hour 5
    after = carbon_day(world, DAY, settings, shared_data)
    assert after.pue_default_gpu_hours == before.pue_default_gpu_hours + gpus_in_hour_5
    assert after.facility_energy_kwh == pytest.approx(before.facility_energy_kwh + it_kwh_hour_5 * (1.3 - old_pue))
    facility, it = world.execute("SELECT sum(facility_energy_kwh), sum(energy_kwh) FROM rpt_carbon_daily").fetchone()
    assert facility >= it
