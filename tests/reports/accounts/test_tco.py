"""tco_day on a small hand-built warehouse: components add up, prices (negative, TOU), demand
charge, surcharges, static vs dynamic."""

from __future__ import annotations

import dataclasses
import json

import pytest

from accounting_world import DAY, build_world
from joulehouse.settings import CarbonSettings, TcoSettings
from joulehouse.reports.accounts.carbon import carbon_day
from joulehouse.reports.accounts.tco import COST_COMPONENTS, density_surcharge_ratio, tco_day


def report_sum(con, col: str, where: str = "TRUE") -> float:
    return con.execute(f"SELECT coalesce(sum({col}), 0) FROM rpt_tco_daily WHERE {where}").fetchall()[0][0]


def price_file(tmp_path, prices_usd_per_mwh: list[float]):
    """A PJM-format day-ahead file, the same day's prices every day of 24 Feb - 9 Mar 2025 (mapped
    onto 2026 by the year rule: Monday 2 March 2026 takes Monday 3 March 2025)."""
    lines = ["datetime_beginning_utc,pnode_name,total_lmp_da"]
    for day in range(24, 24 + 14):
        date = f"2/{day}/2025" if day <= 28 else f"3/{day - 28}/2025"
        for h, p in enumerate(prices_usd_per_mwh):
            hh = h % 12 or 12
            lines.append(f"{date} {hh}:00:00 {'AM' if h < 12 else 'PM'},PJM-RTO,{p}")
    path = tmp_path / "da.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture()
def world():
    return build_world()


def test_components_add_up_and_energy_is_conserved(world, shared_data):
    summary = tco_day(world, DAY, TcoSettings(), shared_data)
    metered = world.execute("SELECT sum(energy_kwh) FROM fct_gpu_energy_hourly").fetchall()[0][0]
    assert report_sum(world, "energy_kwh") == pytest.approx(metered, rel=1e-12)
    assert summary.total_cost_usd == pytest.approx(sum(summary.components_usd.values()))
    assert report_sum(world, "total_cost_usd") == pytest.approx(summary.total_cost_usd)
    assert summary.cost_per_gpu_hour_usd == pytest.approx(summary.total_cost_usd / 48)
    # Only the job with FLOPs gets a cost per TFLOP-hour.
    flops_rows = world.execute("SELECT job_id FROM rpt_tco_daily WHERE cost_per_tflop_hour_usd IS NOT NULL").fetchall()
    assert flops_rows == [("train-1",)]


def test_energy_is_priced_hour_by_hour_and_negative_prices_are_credits(world, tmp_path, shared_data):
    settings = TcoSettings(price_file=str(price_file(tmp_path, [-50.0] * 24)), rack_kw=10.0)
    summary = tco_day(world, DAY, settings, shared_data)
    assert summary.components_usd["energy_cost_usd"] == pytest.approx(summary.facility_energy_kwh * -0.05)
    assert summary.components_usd["green_premium_usd"] == 0.0  # a premium is never a credit
    assert summary.price_rule_counts["year_mapped"] == 24


def test_static_vs_dynamic_prices_differ_when_load_follows_expensive_hours(world, tmp_path, shared_data):
    prices = [20.0] * 24
    for h in range(1, 6):  # the busy hours are the expensive ones
        prices[h] = 200.0
    summary = tco_day(world, DAY, TcoSettings(price_file=str(price_file(tmp_path, prices))), shared_data)
    assert summary.dynamic_energy_cost_usd > summary.static_energy_cost_usd
    flat_price = sum(prices) / 24 / 1000
    assert summary.static_energy_cost_usd == pytest.approx(summary.facility_energy_kwh * flat_price)
    # One GPU unseen in the expensive hours: the flat price is still the plain mean of the 24 hours.
    world.execute("DELETE FROM fct_gpu_energy_hourly WHERE gpu_uuid = 'GPU-h100' AND hour(hour_at) BETWEEN 1 AND 5")
    fewer = tco_day(world, DAY, TcoSettings(price_file=str(price_file(tmp_path, prices))), shared_data)
    assert fewer.static_energy_cost_usd == pytest.approx(fewer.facility_energy_kwh * flat_price)


def test_demand_charge_of_a_months_first_day_is_its_peak_and_lands_on_the_peak_hour(world, shared_data):
    settings = TcoSettings(demand_charge_usd_per_kw_month=15.0)
    summary = tco_day(world, DAY, settings, shared_data)
    # Peak hour 05:00: A100 0.35 kWh + H100 0.56 kWh at PUE 1.25 = 1.1375 kW; the first day of the
    # month accounted sets the month's peak so far, billed once: 15 $/kW.
    assert summary.peak_site_kw == pytest.approx((0.35 + 0.56) * 1.25)
    assert summary.components_usd["demand_charge_usd"] == pytest.approx(summary.peak_site_kw * 15.0)
    payers = {r[0] for r in world.execute("SELECT job_id FROM rpt_tco_daily WHERE demand_charge_usd > 0").fetchall()}
    assert payers == {"eval-1", "prep-1"}  # the jobs running at 05:00


def test_density_surcharge_bands():
    s = TcoSettings()
    assert [density_surcharge_ratio(kw, s) for kw in (20, 25, 35, 35.1)] == [0.0, 0.12, 0.12, 0.28]


def test_density_surcharge_and_green_premium_apply(world, tmp_path, shared_data):
    flat = str(price_file(tmp_path, [100.0] * 24))
    base = tco_day(world, DAY, TcoSettings(price_file=flat, rack_kw=20.0), shared_data)
    dense = tco_day(world, DAY, TcoSettings(price_file=flat, rack_kw=40.0), shared_data)
    bill = base.components_usd["energy_cost_usd"] + base.components_usd["demand_charge_usd"]
    assert dense.components_usd["density_surcharge_usd"] == pytest.approx(0.28 * bill)
    # FR on 2 March 2022 (the mapped day) had under 30% renewables at some hours, not all.
    premium = base.components_usd["green_premium_usd"]
    assert 0 < premium <= 0.18 * base.components_usd["energy_cost_usd"] + 1e-12
    never = tco_day(world, DAY, TcoSettings(price_file=flat, green_premium_below_renewable_pct=0.0), shared_data)
    assert never.components_usd["green_premium_usd"] == 0.0


def test_time_of_use_tariff_is_looked_up_in_local_time_weekday_and_weekend(world, tmp_path, shared_data):
    item = json.loads((shared_data / "prices/openei_urdb_tou_rate_virginia.json").read_text())["items"][0]
    item["energyweekdayschedule"] = [[0] * 24 for _ in range(12)]
    item["energyweekendschedule"] = [[2] * 24 for _ in range(12)]
    path = tmp_path / "tou.json"
    path.write_text(json.dumps({"items": [item]}))
    summary = tco_day(world, DAY, TcoSettings(tariff_file=str(path), tariff_timezone="America/New_York"), shared_data)
    rate = [p[0]["rate"] + p[0]["adj"] for p in item["energyratestructure"]]
    # Monday 2 March 00:00-04:59 UTC is still Sunday evening in New York (UTC-5): weekend rate.
    meter_kwh = world.execute(
        "SELECT hour(e.hour_at) AS h, sum(e.energy_kwh * coalesce(p.pue, 1.3)) FROM fct_gpu_energy_hourly e "
        "LEFT JOIN fct_pue_hourly p USING (hour_at) GROUP BY h").fetchall()
    expected = sum(kwh * (rate[2] if h < 5 else rate[0]) for h, kwh in meter_kwh)
    assert summary.components_usd["energy_cost_usd"] == pytest.approx(expected)
    assert summary.price_rule_counts == {"tariff": 24}


def test_capital_and_operations_follow_inventory_prices(world, shared_data):
    s = TcoSettings()
    summary = tco_day(world, DAY, s, shared_data)
    a100_base = 15000 + s.server_capex_usd / 8  # inventory price, 4-year life
    h100_base = s.gpu_capex_usd + s.server_capex_usd / 8
    assert summary.components_usd["capital_usd"] == pytest.approx(24 * (a100_base / (4 * 8760) + h100_base / (5 * 8760)))
    assert summary.components_usd["operations_usd"] == pytest.approx(24 * 0.1 * (a100_base + h100_base) / 8760)


def test_proportional_policy_keeps_the_total(world, shared_data):
    base = tco_day(world, DAY, TcoSettings(), shared_data)
    spread = tco_day(world, DAY, dataclasses.replace(TcoSettings(), idle_policy="proportional"), shared_data)
    assert spread.total_cost_usd == pytest.approx(base.total_cost_usd)
    assert spread.unallocated_cost_usd == 0.0
    monthly = world.execute("SELECT sum(total_cost_usd) FROM rpt_tco_monthly").fetchall()[0][0]
    assert monthly == pytest.approx(spread.total_cost_usd)
    assert set(COST_COMPONENTS) == set(spread.components_usd)


def test_capital_and_embodied_carbon_stop_when_the_lifetime_is_over(shared_data):
    """Amortised over lifetime_years x 8760 hours from purchased_on, then paid off: the A100
    (bought 2022-03-03, a lifetime of 4 years + 10.5 h) pays whole hours to 09:00, half of 10:00,
    nothing after; the H100 (bought 2025, 5 years) pays every hour."""
    s = TcoSettings()
    world = build_world()
    world.execute("UPDATE dim_gpu SET purchased_on = DATE '2022-03-03', lifetime_years = 4 + 10.5 / 8760 "
                  "WHERE gpu_uuid = 'GPU-a100'")
    tco_day(world, DAY, s, shared_data)
    carbon_day(world, DAY, CarbonSettings(), shared_data)
    a100_hour = (15000 + s.server_capex_usd / 8) / ((4 + 10.5 / 8760) * 8760)
    h100_hour = (s.gpu_capex_usd + s.server_capex_usd / 8) / (5 * 8760)
    capital = report_sum(world, "capital_usd")
    assert capital == pytest.approx(10.5 * a100_hour + 24 * h100_hour)
    c = CarbonSettings()
    a100_g = (143 + c.embodied_kgco2e_per_server / 8) * 1000 / ((4 + 10.5 / 8760) * 8760)
    h100_g = (150 + c.embodied_kgco2e_per_server / 8) * 1000 / (c.lifetime_years * 8760)
    embodied = world.execute("SELECT sum(embodied_gco2e) FROM rpt_carbon_daily").fetchone()[0]
    assert embodied == pytest.approx(10.5 * a100_g + 24 * h100_g)
