"""`joulehouse carbon estimate` and `joulehouse tco estimate`: published figures and bad input.

Published figures:
- Patterson et al. 2021, "Carbon Emissions and Large Neural Network Training", Table 4, GPT-3:
  10,000 V100 for 14.8 days at 330 W, PUE 1.1, 0.429 kgCO2e/kWh -> 1,287 MWh and 552 tCO2e.
- Llama 2 model card (Meta, 2023), "CO2 emissions during pretraining": A100-80GB at 400 W
  (peak power per GPU), 7B 184,320 GPU-hours -> 31.22 tCO2e; 13B 368,640 -> 62.44;
  70B 1,720,320 -> 291.42. The card states neither PUE nor grid intensity. Its implied factor,
  tCO2e / (GPU-hours x 0.4 kW), is 0.4234 kgCO2e per kWh of GPU energy for 7B (PUE x intensity
  folded together). We derive that factor from 7B only and check that it predicts 13B and 70B:
  the check is that the card's arithmetic is the same as ours, not an independent intensity.
"""

from __future__ import annotations

import json
import math

import pytest
import typer
from typer.testing import CliRunner

from joulehouse.cli.carbon import register as register_carbon
from joulehouse.cli.tco import register as register_tco


@pytest.fixture(scope="module")
def app() -> typer.Typer:
    app = typer.Typer()
    register_carbon(app)
    register_tco(app)
    return app


def run(app, *args: str) -> dict:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_patterson_gpt3_energy_and_carbon_within_one_percent(app):
    out = run(app, "carbon", "estimate", "--gpus", "10000", "--hours", str(14.8 * 24), "--avg-power-w", "330",
              "--pue", "1.1", "--grid-gco2e-per-kwh", "429")
    assert out["energy_kwh"] / 1000 == pytest.approx(1287, rel=0.01)
    assert out["operational_tco2e"] == pytest.approx(552, rel=0.01)
    assert out["total_tco2e"] == pytest.approx(out["operational_tco2e"] + out["embodied_tco2e"])
    assert "PUE" in out["method"]


def test_llama2_card_factor_from_7b_predicts_13b_and_70b(app):
    implied_g_per_kwh = 31.22e6 / (184_320 * 0.4)  # PUE x intensity, derived from the 7B line
    assert implied_g_per_kwh == pytest.approx(423.4, abs=0.1)
    for gpu_hours, published_t in ((184_320, 31.22), (368_640, 62.44), (1_720_320, 291.42)):
        out = run(app, "carbon", "estimate", "--gpu-hours", str(gpu_hours), "--avg-power-w", "400", "--pue", "1.0",
                  "--grid-gco2e-per-kwh", str(implied_g_per_kwh))
        assert out["operational_tco2e"] == pytest.approx(published_t, rel=0.01)


def test_embodied_scales_with_lifetime_and_utilization(app):
    base = ["carbon", "estimate", "--gpu-hours", "8760", "--avg-power-w", "400", "--grid-gco2e-per-kwh", "0",
            "--embodied-kgco2e-per-gpu", "150", "--embodied-kgco2e-per-server", "2800", "--gpus-per-server", "8"]
    one_year = run(app, *base, "--lifetime-years", "1")
    # One GPU busy for its whole one-year life carries its own 150 kg and 1/8 of the server.
    assert one_year["embodied_tco2e"] == pytest.approx((150 + 2800 / 8) / 1000)
    half_used = run(app, *base, "--lifetime-years", "1", "--utilization", "0.5")
    assert half_used["embodied_tco2e"] == pytest.approx(2 * one_year["embodied_tco2e"])
    assert one_year["operational_tco2e"] == 0


def test_region_and_start_use_the_hourly_file(app, shared_data):
    out = run(app, "carbon", "estimate", "--gpus", "8", "--hours", "24", "--avg-power-w", "500", "--pue", "1.2",
              "--region", "FR", "--start", "2026-03-02T00:00Z", "--data-dir", str(shared_data))
    assert out["intensity_rule_counts"]["year_mapped"] == 24
    assert 0 < out["grid_gco2e_per_kwh"] < 200  # France's grid is mostly nuclear
    assert out["operational_tco2e"] == pytest.approx(out["energy_kwh"] * out["grid_gco2e_per_kwh"] / 1e6)


def test_region_reads_the_basis_the_settings_name(app, shared_data, tmp_path):
    """A site on life-cycle intensities got the direct column from `--region` while its own accounts
    read the life-cycle one: France 75 against 104 g/kWh (review, helper-84)."""
    args = ["carbon", "estimate", "--gpus", "8", "--hours", "24", "--avg-power-w", "500", "--pue", "1.2",
            "--region", "FR", "--start", "2026-03-02T00:00Z", "--data-dir", str(shared_data)]
    lca = tmp_path / "lca.toml"
    lca.write_text('[carbon]\ngrid_intensity_basis = "lca"\n')
    direct, life_cycle = run(app, *args), run(app, *args, "--config", str(lca))
    assert "basis lca" in life_cycle["method"] and "basis direct" in direct["method"]
    assert life_cycle["grid_gco2e_per_kwh"] > 1.2 * direct["grid_gco2e_per_kwh"]


def test_the_sites_grid_file_is_its_own_regions_and_an_unknown_hour_is_no_zero(app, shared_data, tmp_path):
    """The site's [carbon] grid_file (France's) was relabelled for any --region: CAISO_NORTH read
    63 g/kWh for its own 423. And a file that never holds the run's hours of the day gave 0 g/kWh."""
    fr = shared_data / "grid" / "electricitymaps_FR_2022_hourly.csv"
    (tmp_path / "fr.toml").write_text(f'[carbon]\nregion = "FR"\ngrid_file = "{fr}"\n')
    caiso = run(app, "carbon", "estimate", "--gpus", "8", "--days", "1", "--avg-power-w", "500", "--region",
                "CAISO_NORTH", "--start", "2023-11-10T00:00Z", "--config", str(tmp_path / "fr.toml"))
    assert caiso["grid_gco2e_per_kwh"] > 300 and "watttime_moer_CAISO_NORTH" in caiso["method"]
    own = run(app, "carbon", "estimate", "--gpus", "8", "--days", "1", "--avg-power-w", "500", "--region", "FR",
              "--start", "2023-11-10T00:00Z", "--config", str(tmp_path / "fr.toml"))
    assert own["grid_gco2e_per_kwh"] < 100
    (tmp_path / "day.csv").write_text("at,region,gco2e_per_kwh\n" + "".join(
        f"2026-01-15T{h:02d}:00Z,XX,300\n" for h in range(8, 20)))
    night = CliRunner().invoke(app, ["carbon", "estimate", "--gpus", "1", "--hours", "4", "--avg-power-w", "500",
                                     "--region", "XX", "--grid-file", str(tmp_path / "day.csv"),
                                     "--start", "2026-01-15T22:00:00Z"])
    assert night.exit_code == 2 and "4 of the run's 4 hours have no intensity" in night.output


@pytest.mark.parametrize("args, message", [
    (["--avg-power-w", "300", "--grid-gco2e-per-kwh", "100"], "--gpus N and --hours H"),
    (["--gpu-hours", "10"], "--avg-power-w W, or --gpu-model NAME"),
    (["--gpu-model", "H100", "--gpus", "8", "--days", "30"], "could be 'NVIDIA H100 PCIe', 'NVIDIA H100 80GB HBM3'"),
    (["--gpu-model", "B300", "--gpus", "8", "--days", "30"], "not in the catalogue"),
    # the start of a name: refused as unknown, with no word of the two models it could be
    (["--gpu-model", "A100-SXM", "--gpus", "8", "--days", "30"],
     "could be 'NVIDIA A100-SXM4-40GB', 'NVIDIA A100-SXM4-80GB': say which"),
    (["--gpu-model", "H200", "--gpus", "8", "--days", "30", "--hours", "3"], "--hours or --days, not both"),
    (["--gpu-hours", "10", "--avg-power-w", "300", "--pue", "0.9", "--grid-gco2e-per-kwh", "1"], "pue"),
    (["--gpu-hours", "10", "--avg-power-w", "300", "--region", "FR"], "--start"),
    (["--gpus", "2", "--hours", "3", "--gpu-hours", "7", "--avg-power-w", "300", "--grid-gco2e-per-kwh", "1"], "disagrees"),
    # without --region these were dropped without a word, the flat default used
    (["--gpus", "8", "--hours", "10", "--avg-power-w", "500", "--start", "2022-03-01"], "give --region too"),
    (["--gpus", "8", "--hours", "10", "--avg-power-w", "500", "--grid-file", "/nonexistent"], "give --region too"),
    # OverflowError and a traceback
    (["--gpus", "8", "--hours", "10", "--avg-power-w", "500", "--region", "FR", "--start", "9999-12-20"],
     "ends outside the calendar"),
])
def test_carbon_bad_input_exits_2_with_one_line(app, args, message):
    result = CliRunner().invoke(app, ["carbon", "estimate", *args])
    assert result.exit_code == 2
    assert message in result.stderr and result.stderr.count("\n") == 1


@pytest.mark.parametrize("command, option", [("carbon", "--days"), ("carbon", "--hours"), ("carbon", "--pue"),
                                             ("carbon", "--grid-gco2e-per-kwh"), ("carbon", "--lifetime-years"),
                                             ("tco", "--days"), ("tco", "--price-usd-per-mwh"), ("tco", "--gpu-capex-usd"),
                                             ("tco", "--utilization")])
@pytest.mark.parametrize("value", ["nan", "inf"])
def test_nan_or_inf_is_refused_naming_the_option(app, command, option, value):
    """Click reads 'nan' and 'inf' as floats: the estimate printed "gpu_hours": NaN (not JSON) or
    inf in every figure, and exited 0."""
    args = {"--days": ["--gpus", "8"], "--hours": ["--gpus", "8"]}.get(option, ["--gpus", "8", "--days", "2"])
    result = CliRunner().invoke(app, [command, "estimate", "--gpu-model", "H100-SXM", *args, option, value,
                                      "--format", "json"])
    assert result.exit_code == 2, result.output
    assert result.stderr == f"error: {option} {float(value)}: expected a finite number\n"
    assert result.stdout == ""


@pytest.mark.parametrize("command", ["carbon", "tco"])
@pytest.mark.parametrize("given, says", [
    (["--gpus", "8", "--days", "1e308"], "--days 1e+308: expected at most 36,525 (a planning horizon of at most 100 years)"),
    (["--gpus", "8", "--days", "36526"], "--days 36526: expected at most 36,525"),
    (["--gpus", "8", "--hours", "1e308"], "--hours 1e+308: expected at most 876,600 (a planning horizon of at most 100"),
    (["--gpus", "10000001", "--hours", "1"], "--gpus 10000001: expected at most 10,000,000 (a fleet larger than any)"),
    (["--gpu-hours", "1e300"], "--gpu-hours 1e+300: expected at most 8,766,000,000,000"),
    (["--gpus", "1", "--hours", "1", "--avg-power-w", "1e308"], "--avg-power-w 1e+308: expected at most 10,000"),
    (["--gpus", "1", "--hours", "1", "--pue", "1e308"], "--pue 1e+308: expected at most 10"),
])
def test_a_run_past_its_bounds_is_refused_so_every_figure_stays_finite(app, command, given, says):
    """`tco estimate --gpus 8 --days 1e308 --format json` printed "gpu_hours": Infinity and
    "cost_per_gpu_hour_usd": NaN, exit 0 (carbon: inf in its CSV)."""
    result = CliRunner().invoke(app, [command, "estimate", "--gpu-model", "H100-SXM", *given, "--format", "json"])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"error: {says}") and result.stderr.count("\n") == 1, result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize("command", ["carbon", "tco"])
def test_the_largest_run_allowed_gives_finite_figures(app, command):
    result = CliRunner().invoke(app, [command, "estimate", "--gpu-model", "H100-SXM", "--gpus", "10000000",
                                      "--days", "36525", "--avg-power-w", "10000", "--pue", "10", "--format", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout, parse_constant=lambda c: pytest.fail(f"{c} in the document"))
    assert doc["gpu_hours"] == 10_000_000 * 36525 * 24


def test_tco_estimate_components(app):
    out = run(app, "tco", "estimate", "--gpus", "8", "--hours", "730", "--avg-power-w", "500", "--pue", "1.25",
              "--price-usd-per-mwh", "80", "--demand-charge-usd-per-kw-month", "15", "--gpu-capex-usd", "30000",
              "--server-capex-usd", "60000", "--lifetime-years", "5", "--operations-ratio", "0.1")
    assert out["energy_kwh"] == pytest.approx(8 * 730 * 0.5 * 1.25)
    assert out["energy_cost_usd"] == pytest.approx(out["energy_kwh"] * 0.080)  # $/MWh -> $/kWh
    assert out["demand_charge_usd"] == pytest.approx(8 * 0.5 * 1.25 * 15)  # one month at 5 kW
    assert out["capital_usd"] == pytest.approx(8 * 730 * 37500 / (5 * 8760))
    assert out["total_cost_usd"] == pytest.approx(
        out["energy_cost_usd"] + out["demand_charge_usd"] + out["capital_usd"] + out["operations_usd"])


def test_tco_estimate_with_hourly_prices(app, shared_data):
    out = run(app, "tco", "estimate", "--gpus", "8", "--hours", "24", "--avg-power-w", "500",
              "--start", "2026-05-04T00:00Z", "--data-dir", str(shared_data))
    assert out["price_rule_counts"]["year_mapped"] == 24
    assert out["energy_cost_usd"] == pytest.approx(out["energy_kwh"] * out["price_usd_per_mwh"] / 1000)


def test_tco_estimate_prices_by_the_sites_tariff_as_the_accounts_do(app, shared_data, tmp_path):
    """[tco] tariff_file set: the daily accounts price each hour by it, and the estimate of the same
    hours must too (it read the flat 80 USD/MWh, or the PJM file with --start: 13.98 and 9.98 USD
    for the 24.25 the tariff gives 8 H100s over a day). Each hour weighs what the run spends in it."""
    import datetime as dt

    from joulehouse.reports.accounts.estimate import run_hour_overlaps
    from joulehouse.reports.accounts.prices import load_urdb_tariff, tariff_prices

    tariff_path = shared_data / "prices/openei_urdb_tou_rate_virginia.json"
    config = tmp_path / "site.toml"
    config.write_text(f'[tco]\ntariff_file = "{tariff_path}"\n')
    out = run(app, "tco", "estimate", "--gpus", "8", "--hours", "24", "--avg-power-w", "500",
              "--start", "2026-03-02T10:30Z", "--config", str(config))
    overlaps = run_hour_overlaps(dt.datetime(2026, 3, 2, 10, 30, tzinfo=dt.timezone.utc), 24)
    priced = tariff_prices(load_urdb_tariff(tariff_path), overlaps["hour_at"], "America/New_York").join(overlaps, on="hour_at")
    expected_usd_per_kwh = (priced["price_usd_per_kwh"] * priced["overlap_h"]).sum() / 24
    assert priced.height == 25 and priced["price_usd_per_kwh"].n_unique() > 1  # the run spans its periods
    # the document rounds its figures (4 decimals of USD/MWh)
    assert out["price_usd_per_mwh"] == pytest.approx(expected_usd_per_kwh * 1000, abs=1e-4)
    assert out["energy_cost_usd"] == pytest.approx(out["energy_kwh"] * expected_usd_per_kwh, rel=1e-5)
    flag = run(app, "tco", "estimate", "--gpus", "8", "--hours", "24", "--avg-power-w", "500",
               "--price-usd-per-mwh", "80", "--config", str(config))
    assert flag["price_usd_per_mwh"] == 80.0  # a flag still comes first
    ignored = CliRunner().invoke(app, ["tco", "estimate", "--gpus", "8", "--hours", "24", "--avg-power-w", "500",
                                       "--start", "2026-03-02T10:30Z", "--price-node", "DOM", "--config", str(config)])
    assert ignored.exit_code == 2 and "tariff_file prices this run" in ignored.output


@pytest.mark.parametrize("command, option, value, says", [
    ("tco", "--price-usd-per-mwh", "1e300", "expected at most 100,000"),
    ("tco", "--demand-charge-usd-per-kw-month", "1e300", "expected at most 10,000"),
    ("tco", "--gpu-capex-usd", "1e308", "expected at most 1e+09"),
    ("tco", "--server-capex-usd", "1e308", "expected at most 1e+09"),
    ("tco", "--operations-ratio", "1e308", "expected at most 100"),
    ("tco", "--lifetime-years", "1e-300", "expected at least 0.1"),
    ("carbon", "--grid-gco2e-per-kwh", "1e305", "expected at most 5,000"),
    ("carbon", "--grid-gco2e-per-kwh", "-1", "expected at least 0"),
    ("carbon", "--embodied-kgco2e-per-gpu", "1e308", "expected at most 1e+07"),
    ("carbon", "--embodied-kgco2e-per-server", "1e308", "expected at most 1e+07"),
    ("carbon", "--lifetime-years", "101", "expected at most 100"),
])
def test_a_price_intensity_or_capital_past_its_bound_is_refused(app, command, option, value, says):
    """`tco estimate --price-usd-per-mwh 1e300 --format json` printed "total_cost_usd": Infinity,
    and `--gpu-capex-usd 1e308` "operations_usd": Infinity, both with exit 0."""
    result = CliRunner().invoke(app, [command, "estimate", "--gpu-model", "H100-SXM", "--gpus", "8", "--days", "30",
                                      option, value, "--format", "json"])
    assert result.exit_code == 2, result.output
    assert result.stderr == f"error: {option} {float(value):g}: {says}\n" and result.stdout == ""


@pytest.mark.parametrize("command, largest", [
    ("tco", ["--price-usd-per-mwh", "100000", "--demand-charge-usd-per-kw-month", "10000", "--gpu-capex-usd", "1e9",
             "--server-capex-usd", "1e9", "--operations-ratio", "100", "--lifetime-years", "0.1", "--gpus-per-server", "1"]),
    ("carbon", ["--grid-gco2e-per-kwh", "5000", "--embodied-kgco2e-per-gpu", "1e7", "--embodied-kgco2e-per-server", "1e7",
                "--lifetime-years", "0.1", "--gpus-per-server", "1"]),
])
def test_every_bound_at_once_on_the_largest_run_still_gives_finite_figures(app, command, largest):
    result = CliRunner().invoke(app, [command, "estimate", "--gpu-model", "H100-SXM", "--gpus", "10000000",
                                      "--days", "36525", "--avg-power-w", "10000", "--pue", "10", *largest,
                                      "--utilization", "0.01", "--format", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout, parse_constant=lambda c: pytest.fail(f"{c} in the document"))
    assert all(math.isfinite(v) for v in doc.values() if isinstance(v, float))


@pytest.mark.parametrize("command", ["carbon", "tco"])
@pytest.mark.parametrize("value", ["1e-300", "0", "1.5"])
def test_a_utilization_outside_one_percent_to_one_is_refused(app, command, value):
    """Capital and embodied carbon are divided by it: 1e-300 printed Infinity with exit 0."""
    result = CliRunner().invoke(app, [command, "estimate", "--gpu-model", "H100-SXM", "--gpus", "8", "--days", "30",
                                      "--utilization", value, "--format", "json"])
    assert result.exit_code == 2, result.output
    assert result.stderr == f"error: --utilization {float(value):g}: expected 0.01 to 1 (the share of the hardware's life in use)\n"


@pytest.mark.parametrize("key, entry, says", [
    ("embodied_kgco2e_by_gpu_model", "NVIDIA H100 80GB HBM3=1e308", "embodied override"),
    ("embodied_kgco2e_by_gpu_model", "NVIDIA H100 80GB HBM3=nan", "embodied override"),
    ("embodied_kgco2e_by_gpu_model", "NVIDIA H100 80GB HBM3=-5", "embodied override"),
    ("market_contracts", "site-a|2026-03|1e300|0", "market contract"),
    ("market_contracts", "site-a|2026-03-02|10|1e300", "market contract"),
    # no date: accepted before, the contract then matched no day and the market figure lost it unsaid
    ("market_contracts", "site-a|2026/03|1000|0", "market contract"),
    ("market_contracts", "site-a|2026-02-30|1000|0", "market contract"),
    ("market_contracts", "site-a|03-2026|1000|0", "market contract"),
])
def test_a_carbon_setting_entry_past_its_bound_is_refused_when_the_settings_are_read(app, tmp_path, key, entry, says):
    """`embodied_kgco2e_by_gpu_model = ["...=1e308"]` made the estimate's embodied_tco2e Infinity, exit 0."""
    config = tmp_path / "joulehouse.toml"
    config.write_text(f'[carbon]\n{key} = ["{entry}"]\n')
    result = CliRunner().invoke(app, ["carbon", "estimate", "--gpu-model", "H100-SXM", "--gpus", "8", "--days", "30",
                                      "--config", str(config), "--format", "json"])
    assert result.exit_code == 2, result.output
    assert says in result.stderr and key in result.stderr and result.stdout == ""


@pytest.mark.parametrize("section, key, value", [("tco", "flat_price_usd_per_mwh", "1e300"),
                                                 ("carbon", "default_grid_gco2e_per_kwh", "1e300"),
                                                 ("carbon", "default_pue", "50")])
def test_a_settings_file_past_a_bound_is_refused_naming_the_setting(app, tmp_path, section, key, value):
    """A --pue bound used to be applied to [carbon] default_pue from the settings, and the error
    named --pue, which the user had not given."""
    config = tmp_path / "joulehouse.toml"
    config.write_text(f"[{section}]\n{key} = {value}\n")
    result = CliRunner().invoke(app, [section, "estimate", "--gpu-model", "H100-SXM", "--gpus", "8", "--days", "30",
                                      "--config", str(config)])
    assert result.exit_code == 2, result.output
    assert key in result.stderr and "--pue" not in result.stderr


@pytest.mark.parametrize("args", [["--price-file", "/nonexistent"], ["--price-node", "NOPE"]])
def test_price_options_without_a_start_are_refused_not_dropped(app, args):
    result = CliRunner().invoke(app, ["tco", "estimate", "--gpus", "8", "--hours", "10", "--avg-power-w", "500", *args])
    assert result.exit_code == 2 and "give --start too" in result.stderr and result.stderr.count("\n") == 1


def test_tco_bad_input_exits_2(app, tmp_path):
    result = CliRunner().invoke(app, ["tco", "estimate", "--gpu-hours", "5", "--avg-power-w", "300", "--price-usd-per-mwh",
                                      "80", "--start", "2026-01-01"])
    assert result.exit_code == 2 and "--price-usd-per-mwh" in result.stderr
    result = CliRunner().invoke(app, ["tco", "estimate", "--gpus", "1", "--hours", "5", "--avg-power-w", "300",
                                      "--start", "2026-01-01", "--price-file", str(tmp_path / "none.csv")])
    assert result.exit_code == 2 and "does not exist" in result.stderr


def test_planning_eight_gpus_for_thirty_days_needs_only_the_model(app, tmp_path):
    """`--gpu-model --gpus --days`: power from the catalogue (TDP), grid, PUE, embodied, price and
    capital from the settings (a settings file changes them)."""
    from joulehouse.models.gpu_catalogue import lookup
    from joulehouse.reports.accounts.embodied import default_gpu_embodied_kgco2e
    from joulehouse.settings import Settings

    defaults = Settings()
    spec = lookup("NVIDIA H200")
    carbon = run(app, "carbon", "estimate", "--gpu-model", "H200", "--gpus", "8", "--days", "30")
    energy_kwh = 8 * 30 * 24 * spec.tdp_w / 1000 * defaults.carbon.default_pue
    assert carbon["gpu_model"] == "NVIDIA H200" and carbon["avg_power_w"] == spec.tdp_w
    assert carbon["energy_kwh"] == pytest.approx(energy_kwh)
    assert carbon["operational_tco2e"] == pytest.approx(energy_kwh * defaults.carbon.default_grid_gco2e_per_kwh / 1e6)
    gpu_kg = default_gpu_embodied_kgco2e("NVIDIA H200", defaults.carbon.embodied_kgco2e_per_gpu)
    assert carbon["inputs"]["embodied_kgco2e_per_gpu"] == gpu_kg
    # rounded for people: six significant digits, no float noise (2.0966400000000003)
    assert all(len(repr(v).replace(".", "").lstrip("0")) <= 7 for v in carbon.values() if isinstance(v, float))

    settings = tmp_path / "site.toml"
    settings.write_text("[carbon]\ndefault_pue = 1.1\ndefault_grid_gco2e_per_kwh = 50\n[tco]\ndefault_pue = 1.1\n"
                        "flat_price_usd_per_mwh = 120\n")
    site = run(app, "carbon", "estimate", "--gpu-model", "H200", "--gpus", "8", "--days", "30", "--config", str(settings))
    assert site["operational_tco2e"] == pytest.approx(8 * 720 * spec.tdp_w / 1000 * 1.1 * 50 / 1e6)
    cost = run(app, "tco", "estimate", "--gpu-model", "H200", "--gpus", "8", "--days", "30", "--config", str(settings))
    assert cost["price_usd_per_mwh"] == 120 and cost["energy_cost_usd"] == pytest.approx(cost["energy_kwh"] * 0.120)


@pytest.mark.parametrize("command", ["carbon", "tco"])
def test_estimates_print_a_table_or_csv_on_request(app, command):
    table = CliRunner().invoke(app, [command, "estimate", "--gpu-model", "H200", "--gpus", "8", "--days", "30",
                                     "--format", "table"], terminal_width=120)
    assert table.exit_code == 0, table.output
    assert "5,760" in table.stdout and "GPU-hours" in table.stdout and "{" not in table.stdout  # words, not JSON
    lines = CliRunner().invoke(app, [command, "estimate", "--gpu-model", "H200", "--gpus", "8", "--days", "30",
                                     "--format", "csv"]).stdout.splitlines()
    assert len(lines) == 2 and lines[0].startswith("gpu_hours,") and lines[1].startswith("5760.0,")


def test_with_start_the_settings_files_are_the_default_and_a_bad_date_is_named_first(
        app, shared_data, tmp_path, monkeypatch):
    """--start priced from ../shared/data beside the checkout whatever --config said (a clone
    elsewhere failed on a file the site never named), and a bad date was hidden by that failure."""
    config = tmp_path / "site.toml"
    config.write_text(f'[tco]\nprice_file = "{shared_data}/prices/pjm_rto_da_hourly_lmp_2025.csv"\n'
                      f'[carbon]\ngrid_file = "{shared_data}/grid/electricitymaps_FR_2022_hourly.csv"\n')
    for module in ("joulehouse.cli.tco", "joulehouse.cli.carbon"):  # a clone not beside ../shared/data
        monkeypatch.setattr(f"{module}.DEFAULT_DATA_DIR", tmp_path / "nowhere")
    size = ["--gpus", "8", "--hours", "24", "--avg-power-w", "500"]
    tco = run(app, "tco", "estimate", *size, "--start", "2026-05-04T00:00Z", "--config", str(config))
    assert tco["price_rule_counts"]["year_mapped"] == 24
    carbon = run(app, "carbon", "estimate", *size, "--region", "FR", "--start", "2026-03-02T00:00Z",
                 "--config", str(config))
    assert carbon["intensity_rule_counts"]
    bad = CliRunner().invoke(app, ["tco", "estimate", *size, "--start", "2026-02-30"])
    assert bad.exit_code == 2 and "--start '2026-02-30'" in bad.output, bad.output
    missing = CliRunner().invoke(app, ["tco", "estimate", *size, "--start", "2026-05-04T00:00Z"])
    assert missing.exit_code == 2 and "give --price-file, --data-dir, or [tco] price_file" in missing.output


def test_the_start_of_one_models_name_is_that_model(app):
    """'A100-SXM4-80' starts one catalogue name only: taken as it, as 'H100-SXM' is by its pattern."""
    by_start = run(app, "carbon", "estimate", "--gpu-model", "A100-SXM4-80", "--gpus", "8", "--days", "30")
    by_name = run(app, "carbon", "estimate", "--gpu-model", "NVIDIA A100-SXM4-80GB", "--gpus", "8", "--days", "30")
    assert by_start == by_name
