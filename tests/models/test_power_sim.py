"""The power fit on the fleet simulator: recovers its ground truth, per GPU model and feature set."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import duckdb
import numpy as np
import pytest

from joulehouse.settings import ModelSettings
from joulehouse.collectors.sim import simulate_fleet
from joulehouse.models.power import fit_day

DAY = dt.date(2026, 3, 2)


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    lake = tmp_path_factory.mktemp("sim") / "lake"
    lake.mkdir()
    summary = simulate_fleet(lake, gpus=16, days=1, start=DAY, seed=3, interval_s=30)
    return lake, summary


def _connect(lake, nvml_only: bool = False):
    con = duckdb.connect()
    drop = "EXCLUDE (sm_active_ratio, dram_active_ratio, tensor_active_ratio, pcie_tx_bytes_per_s, pcie_rx_bytes_per_s), " \
        "NULL::FLOAT AS sm_active_ratio, NULL::FLOAT AS dram_active_ratio, NULL::BIGINT AS pcie_tx_bytes_per_s, " \
        "NULL::BIGINT AS pcie_rx_bytes_per_s" if nvml_only else ""
    con.execute(f"CREATE TABLE stg_gpu_samples AS SELECT * {drop}, CAST(sampled_at AS DATE) AS day "
                "FROM read_parquet(? || '/gpu_samples/**/*.parquet', hive_partitioning = true)", [str(lake)])
    con.execute("CREATE TABLE stg_jobs AS SELECT * FROM read_parquet(? || '/jobs/**/*.parquet', hive_partitioning = true)",
                [str(lake)])
    return con


@pytest.mark.slow
def test_dcgm_fit_recovers_simulator_truth(sim):
    lake, summary = sim
    con = _connect(lake)
    fits = {f.gpu_model: f for f in fit_day(con, DAY, ModelSettings())}
    assert set(fits) == set(summary.truth)
    for model, truth in summary.truth.items():
        fit, c = fits[model], fits[model].coefficients
        temps = np.array([r[0] for r in con.execute(
            "SELECT temp_c FROM stg_gpu_samples WHERE gpu_model = ? AND temp_c IS NOT NULL", [model]).fetchall()])
        static_at_25, slope = truth.linear_static_fit(temps)  # leakage is exponential; the fit is its line
        assert fit.feature_set == "dcgm"
        assert c.dyn_w == pytest.approx(truth.dyn_w, rel=0.05), model
        # The simulator's alpha comes from the measured A100 clock sweeps (4.4-4.85), not the
        # textbook 3, so recovering it tests the fit on more than its own assumption.
        # Measured (seeds 3 and 5): A100 4.4 -> 4.5, H100 4.85 -> 5.0 and 4.75 on the 0.25 grid.
        assert truth.dyn_freq_exponent != 3.0
        assert abs(c.dyn_freq_exponent - truth.dyn_freq_exponent) <= 0.25, model
        assert c.dyn_freq_exponent_source == "fleet", model
        assert c.static_w == pytest.approx(static_at_25, rel=0.10), model
        assert c.temp_w_per_c == pytest.approx(slope, rel=0.25), model
        assert c.mem_w == pytest.approx(truth.mem_w, rel=0.10), model
        assert fit.mape_pct < 5.0 and fit.r2 > 0.99, model
        assert fit.job_energy_error_pct < 5.0, model
        assert fit.passed_gate, model


def test_nvml_only_fit_still_predicts_held_out_time(sim):
    """util_gpu says a kernel ran, not how much of the chip it used, so NVML-only fits are coarser.
    Measured (seeds 3 and 5): MAPE 9.2-11.1% (A100), 13.2-14.0% (H100); job energy 5.1-7.4%."""
    lake, summary = sim
    fits = {f.gpu_model: f for f in fit_day(_connect(lake, nvml_only=True), DAY, ModelSettings())}
    for model in summary.truth:
        assert fits[model].feature_set == "nvml"
        assert fits[model].mape_pct < 16.0, model
        assert fits[model].job_energy_error_pct < 9.0, model


@pytest.mark.slow
def test_nvml_only_fit_without_clocks(sim):
    """No clocks either (an nvidia-smi log of util and power only): alpha is not identifiable, so
    the fit picks gamma of utilisation instead. Coarser again, and more so since the simulator's
    dynamic power follows the sweeps' f^4.4-4.85: measured MAPE 15.7-22.1% (A100), 13.3-17.6%
    (H100); job energy 13.3-14.9% (A100), 6.3-9.0% (H100) (seeds 3 and 5). Bounds: seed 3 plus a margin."""
    lake, summary = sim
    con = _connect(lake, nvml_only=True)
    con.execute("UPDATE stg_gpu_samples SET sm_clock_mhz = NULL")
    fits = {f.gpu_model: f for f in fit_day(con, DAY, ModelSettings())}
    for model in summary.truth:
        assert fits[model].coefficients.dyn_freq_exponent is None
        assert fits[model].mape_pct < 19.0, model
        assert fits[model].job_energy_error_pct < 15.0, model


PERSEUS = Path(__file__).resolve().parents[3] / "shared" / "data" / "sweeps"


@pytest.mark.slow
def test_without_clocks_alpha_comes_from_the_models_measured_sweep(sim):
    """No clock readings: the A100 takes alpha from the Perseus A100 clock sweeps configured for it
    (the median of one fit per file: GPT-3 4.5, BLOOM 4.75 on the 0.25 grid), and the row says
    which files; the H100, with no sweep configured, keeps none."""
    lake, summary = sim
    con = _connect(lake, nvml_only=True)
    con.execute("UPDATE stg_gpu_samples SET sm_clock_mhz = NULL")
    files = sorted(PERSEUS.glob("perseus_*_a100sxm_*.csv"))
    assert len(files) == 2
    settings = ModelSettings(clock_sweep_files=tuple(f"A100|{f}" for f in files))
    fits = {f.gpu_model: f for f in fit_day(con, DAY, settings)}
    a100 = next(m for m in fits if "A100" in m)
    h100 = next(m for m in fits if "H100" in m)
    c = fits[a100].coefficients
    assert 4.25 <= c.dyn_freq_exponent <= 5.0 and c.dyn_freq_exponent != 3.0
    assert c.dyn_freq_exponent_source.startswith("sweep:") and all(f.name in c.dyn_freq_exponent_source for f in files)
    assert abs(c.dyn_freq_exponent - summary.truth[a100].dyn_freq_exponent) <= 0.25
    assert fits[h100].coefficients.dyn_freq_exponent is None
    assert fits[h100].coefficients.dyn_freq_exponent_source is None
    stored = con.execute("SELECT dyn_freq_exponent_source FROM fct_power_model WHERE gpu_model = ?", [a100]).fetchone()[0]
    assert stored == c.dyn_freq_exponent_source
