"""reports.export.selection: the settings the export applies and what each saves, on small frames."""

from __future__ import annotations

import datetime as dt

import polars as pl

from joulehouse.reports.export.selection import held_back_models, settings_to_apply

DAY = dt.date(2026, 6, 11)
RECS = pl.DataFrame({
    "gpu_uuid": ["GPU-cap", "GPU-clock", "GPU-default", "GPU-none", "GPU-h100"],
    "gpu_model": ["A100", "A100", "A100", "A100", "H100"],
    "power_limit_w": [300.0, 400.0, 400.0, None, 500.0],
    "default_limit_w": [400.0, 400.0, 400.0, None, 700.0],
    "locked_sm_clock_max_mhz": [None, 1200, None, None, None],
    "expected_saving_pct": [10.0, 5.0, 0.0, None, 20.0],
    "expected_energy_saving_kwh_per_day": [None, 0.7, 0.0, None, 3.0],
})
ENERGY = pl.DataFrame({"gpu_uuid": ["GPU-cap", "GPU-cap", "GPU-clock"], "energy_kwh": [2.0, 3.0, 9.0]})
MODELS = pl.DataFrame({"gpu_model": ["A100", "H100", "H100"], "passed_gate": [True, False, False],
                       "gate_reason": [None, "held-out MAPE 14% > 10%", "held-out MAPE 14% > 10%"]})


def test_only_settings_that_change_something_of_models_that_passed_the_gate_are_applied():
    held = held_back_models(RECS, MODELS, None, DAY)
    assert held == {"H100": "held-out MAPE 14% > 10%"}
    applied = settings_to_apply(RECS, held, ENERGY)
    assert applied["gpu_uuid"].to_list() == ["GPU-cap", "GPU-clock"]


def test_the_saving_is_the_warehouse_figure_else_the_percentage_of_the_gpus_measured_day():
    applied = {r["gpu_uuid"]: r["saving_kwh_per_day"] for r in settings_to_apply(RECS, {}, ENERGY).iter_rows(named=True)}
    assert applied["GPU-clock"] == 0.7  # fct_recommendation's own figure wins over 5% of 9 kWh
    assert applied["GPU-cap"] == 0.10 * (2.0 + 3.0)  # no figure: 10% of the GPU's 5 kWh
    assert applied["GPU-h100"] == 3.0


def test_without_power_models_every_model_is_held_back_with_the_reason():
    held = held_back_models(RECS, None, "relation fct_power_model does not exist", DAY)
    assert held == dict.fromkeys(["A100", "H100"], "no power-model quality gate to check "
                                                   "(relation fct_power_model does not exist)")
    fitted_one = held_back_models(RECS, MODELS.filter(pl.col("gpu_model") == "A100"), None, DAY)
    assert fitted_one == {"H100": f"no power model was fitted for H100 on {DAY}"}
