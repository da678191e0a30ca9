"""Review of the carbon account (LCA): each test is one defect a user hit, with its numbers worked
out by hand in the docstring."""

from __future__ import annotations

import datetime as dt

import polars as pl
import pytest

from joulehouse.settings import CarbonSettings
from joulehouse.reports.accounts.carbon import carbon_per_gpu_hour

DAY = dt.date(2026, 3, 2)
# an H100 (150 kgCO2e) and 1/8 of a 2,750 kgCO2e server over 5 years of 8,760 h:
# (150 + 2750 / 8) x 1000 / (5 x 8760) = 493.75 x 1000 / 43800 = 11.2728... gCO2e per GPU-hour
H100_GCO2E_PER_HOUR = 493.75 * 1000 / 43800


def gpu_hours(n_hours: int, *, purchased_on: dt.date | None = DAY, lifetime_years: float = 5.0,
              energy_kwh: float = 1.0, site: str = "site-a", gpu_uuid: str = "GPU-1") -> pl.DataFrame:
    """n_hours metered hours of one H100 from DAY 00:00 UTC: energy_kwh each, PUE 1.5, 100 gCO2e/kWh."""
    start = dt.datetime(DAY.year, DAY.month, DAY.day, tzinfo=dt.timezone.utc)
    at = [start + dt.timedelta(hours=h) for h in range(n_hours)]
    return pl.DataFrame({
        "hour_at": at, "day": [a.date() for a in at], "gpu_uuid": gpu_uuid, "gpu_model": "NVIDIA H100 80GB HBM3",
        "host": "node-1", "site": site, "region": "FR", "energy_kwh": energy_kwh, "it_energy_basis": "gpu_only",
        "gpu_energy_kwh": energy_kwh, "pue": 1.5, "intensity_gco2e_per_kwh": 100.0, "embodied_kgco2e": None,
        "lifetime_years": lifetime_years, "purchased_on": purchased_on,
    }, schema_overrides={"hour_at": pl.Datetime("us", "UTC"), "embodied_kgco2e": pl.Float64,
                         "purchased_on": pl.Date})


def settings(**kw) -> CarbonSettings:
    return CarbonSettings(residual_mix_from="setting", residual_mix_gco2e_per_kwh=500.0, **kw)


def test_no_embodied_carbon_is_charged_before_the_gpu_was_purchased():
    """A GPU the inventory says was bought on 3 March but that was read on 2 March (burn-in before
    the invoice date): its amortisation runs from 3 March 00:00 UTC for 43,800 h, each at 11.27 g,
    which is the whole 493.75 kg. Charged 11.27 g for each of 2 March's 24 hours too, the GPU paid
    270.5 g more than its footprint over its life. Before: 24 x 11.27 = 270.5 g; expected 0 g,
    while the hour's energy and operational carbon (1 kWh x 1.5 x 100 g = 150 g) stay."""
    rows = carbon_per_gpu_hour(gpu_hours(24, purchased_on=DAY + dt.timedelta(days=1)), settings())
    assert rows["embodied_gco2e"].sum() == pytest.approx(0.0, abs=1e-9)
    assert rows["location_gco2e"].sum() == pytest.approx(24 * 150.0)


def test_embodied_carbon_from_the_purchase_day_is_the_amortised_rate():
    """The purchase day itself carries the full rate: 24 x 11.2728 = 270.55 g."""
    rows = carbon_per_gpu_hour(gpu_hours(24, purchased_on=DAY), settings())
    assert rows["embodied_gco2e"].sum() == pytest.approx(24 * H100_GCO2E_PER_HOUR)


def test_a_users_grid_file_of_wall_clock_times_without_an_offset_is_refused_naming_the_line(tmp_path):
    """The documented format asks for `at` with Z or an offset. A Paris export written in local
    time without one ("2026-07-01T12:00", 12:00 CEST = 10:00 UTC) was read as 12:00 UTC: every
    hour's intensity landed two hours late (one hour in winter), with nothing said. It is refused,
    naming the line, instead of being guessed."""
    from joulehouse.reports.accounts.grid import GridFileError, load_intensity_file
    local = tmp_path / "paris-local.csv"
    local.write_text("at,region,gco2e_per_kwh\n2026-07-01T11:00Z,FR,40\n2026-07-01T12:00,FR,50\n")
    with pytest.raises(GridFileError, match=r"line 3: at = '2026-07-01T12:00' has no UTC offset"):
        load_intensity_file(local)


def test_a_users_grid_file_with_offsets_lands_on_the_utc_hours(tmp_path):
    """12:00+02:00 is 10:00 UTC: the value 50 is 10:00 UTC's, not 12:00's."""
    from joulehouse.reports.accounts.grid import load_intensity_file
    own = tmp_path / "paris.csv"
    own.write_text("at,region,gco2e_per_kwh\n2026-07-01T12:00+02:00,FR,50\n")
    frame = load_intensity_file(own)
    assert frame.select("hour_at", "intensity_gco2e_per_kwh").rows() == [
        (dt.datetime(2026, 7, 1, 10, tzinfo=dt.timezone.utc), 50.0)]


def test_a_contract_for_a_site_the_fleet_is_not_at_is_said_not_dropped(shared_data):
    """The world's GPUs are at "site-a". A REC bought for "site-A" (a typo) covered nothing: the
    market-based figure stayed at the residual mix (facility kWh x 500 g) and nothing said why.
    The contract still covers nothing (it is not this site's), but the day's notes name it and
    the fleet's sites; the one for "site-a" is applied (1e6 kWh / 31 days covers the day: 0 g)."""
    from accounting_world import DAY as WORLD_DAY, build_world
    from joulehouse.reports.accounts.carbon import carbon_day
    typo = carbon_day(build_world(), WORLD_DAY, settings(market_contracts=("site-A|2026-03|1e6|0",)), shared_data)
    assert typo.market_gco2e == pytest.approx(typo.facility_energy_kwh * 500.0)
    assert any("'site-A'" in note and "site-a" in note and "covered nothing" in note for note in typo.notes)
    right = carbon_day(build_world(), WORLD_DAY, settings(market_contracts=("site-a|2026-03|1e6|0",)), shared_data)
    assert right.market_gco2e == pytest.approx(0.0, abs=1e-9)
    assert not any("covered nothing" in note for note in right.notes)
