"""The clock exponent alpha from measured SM-clock sweeps (models.clock_exponent)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from joulehouse.models.clock_exponent import exponent_grid, fit_sweep_exponent, parse_sweep_file_entry, sweep_exponent_for
from joulehouse.models.sweeps import Sweep, SweepError, load_sweep

SWEEPS = Path(__file__).resolve().parents[3] / "shared" / "data" / "sweeps"
FINE = exponent_grid(1.0, 0.05, 101)  # 1.0 .. 6.0


def test_a_hand_made_clock_sweep_gives_back_its_exponent_and_power_split():
    clocks = np.arange(900.0, 1411.0, 30.0)
    power = 120.0 + 280.0 * (clocks / 1410.0) ** 2.0  # a memory-heavy kernel: f^2 over 120 W unclocked
    sweep = Sweep.of_clocks("hand", clocks, np.ones_like(clocks), power)
    found = fit_sweep_exponent(sweep, FINE)
    assert found.alpha == pytest.approx(2.0, abs=1e-9)
    assert found.unclocked_power_w == pytest.approx(120.0, rel=1e-6)
    assert found.dyn_w == pytest.approx(280.0, rel=1e-6)


def test_a_clock_by_limit_grid_reads_alpha_from_its_uncapped_points():
    """Each clock measured at the default limit and under a 250 W cap: the capped points fitted
    with the others gave alpha 1.30 for a true 3.0."""
    clocks = np.arange(900.0, 1411.0, 30.0)
    free = 100.0 + 300.0 * (clocks / 1410.0) ** 3.0
    sweep = Sweep("grid", np.concatenate([clocks, clocks]), np.concatenate([np.full_like(clocks, 400.0),
                                                                              np.full_like(clocks, 250.0)]),
                  np.ones(2 * len(clocks)), np.concatenate([free, np.minimum(free, 250.0)]))
    assert sweep.varied == ("sm_clock_mhz", "power_limit_w")
    found = fit_sweep_exponent(sweep, FINE)
    assert found.alpha == pytest.approx(3.0, abs=1e-9) and found.n_clocks == len(clocks)


def test_a_sweep_whose_power_does_not_follow_the_clock_gives_no_exponent():
    """A memory-bound workload at a flat 300 W: every alpha fitted alike and the grid's first,
    1.0, was stored as measured (the tie the fleet's own fit already refuses)."""
    clocks = np.arange(900.0, 1411.0, 30.0)
    flat = Sweep.of_clocks("flat", clocks, np.ones_like(clocks), np.full_like(clocks, 300.0))
    with pytest.raises(SweepError, match="does not follow the SM clock"):
        fit_sweep_exponent(flat, FINE)


def test_a_power_limit_sweep_has_no_clock_exponent():
    sweep = load_sweep(SWEEPS / "zeus_testprofile_A40+resnet50+gpu0.csv")
    with pytest.raises(SweepError, match="not the SM clock"):
        fit_sweep_exponent(sweep, FINE)


@pytest.mark.parametrize("workload", ["gpt3-175b", "bloom"])
def test_the_measured_a100_sweeps_are_steeper_than_f_cubed(workload):
    """Perseus A100 stage profiles, 855-1410 MHz: the fit's form puts ~200 W in the unclocked part
    and alpha well above 3 (measured: GPT-3 4.40, BLOOM 4.85), fitting better than alpha = 3."""
    sweep = load_sweep(SWEEPS / f"perseus_sosp24_stage_profile_{workload}_a100sxm_bf16.csv")
    found = fit_sweep_exponent(sweep, FINE)
    at_three = fit_sweep_exponent(sweep, np.array([3.0]))
    assert 4.0 <= found.alpha <= 5.5
    assert found.rmse_w < 0.8 * at_three.rmse_w
    assert 150.0 < found.unclocked_power_w < found.dyn_w
    assert (found.f_min_mhz, found.f_max_mhz) == (855.0, 1410.0)


def test_only_the_named_models_take_a_sweep_and_a_bad_entry_is_named():
    entries = (f"A100|{SWEEPS / 'perseus_sosp24_stage_profile_bloom_a100sxm_bf16.csv'}",)
    grid = exponent_grid(1.0, 0.25, 19)
    assert sweep_exponent_for("NVIDIA A100-SXM4-80GB", entries, grid).source.endswith("bloom_a100sxm_bf16.csv")
    assert sweep_exponent_for("NVIDIA A1000", entries, grid) is None
    assert sweep_exponent_for("NVIDIA H100 80GB HBM3", entries, grid) is None
    assert sweep_exponent_for("NVIDIA A100-SXM4-80GB", ("A100|/no/such/file.csv",), grid) is None
    with pytest.raises(ValueError, match=r"expected 'GPU-model pattern\|path"):
        parse_sweep_file_entry("A100 /a/file.csv")


def test_a_clock_that_varied_only_where_nothing_ran_measures_no_alpha_and_the_sweep_gives_it():
    """Busy readings all at f_max, idle ones at the idle clock: every alpha fits the same (0 x r^a = 0,
    1^a = 1). The first of the tie was stored as a measured alpha of 1.0 ('fleet'), a cap's
    slowdown came out ~4x too large, and the configured sweeps were never read."""
    import datetime as dt
    import sys

    import duckdb
    import pyarrow as pa

    sys.path.insert(0, str(Path(__file__).parent))
    from power_synthetic import TruePower, load_samples, synthetic_samples

    from joulehouse.models.power import fit_day
    from joulehouse.settings import ModelSettings

    truth = TruePower(alpha=4.4)
    table = synthetic_samples(truth=truth, capped_limit_w=None, seed=1, noise_ratio=0.01)
    activity = table.column("sm_active_ratio").to_numpy().astype(float)
    temp_c = table.column("temp_c").to_numpy().astype(float)
    pcie_gbps = (table.column("pcie_tx_bytes_per_s").to_numpy() + table.column("pcie_rx_bytes_per_s").to_numpy()) / 1e9
    clock = np.where(activity > 0, 1410, 210).astype(np.int32)
    power = (truth.static_w + truth.temp_w_per_c * (temp_c - 25) + truth.dyn_w * activity
             + truth.mem_w * table.column("dram_active_ratio").to_numpy().astype(float) + truth.pcie_w_per_gbps * pcie_gbps)
    table = table.set_column(table.schema.get_field_index("sm_clock_mhz"), "sm_clock_mhz", pa.array(clock, pa.int32()))
    table = table.set_column(table.schema.get_field_index("power_w"), "power_w", pa.array(power.astype(np.float32)))
    sweeps = tuple(f"A100|{f}" for f in sorted(SWEEPS.glob("perseus_*_a100sxm_*.csv")))
    found = {}
    for settings in (ModelSettings(), ModelSettings(clock_sweep_files=sweeps)):
        con = duckdb.connect()
        load_samples(con, table)
        coefficients = fit_day(con, dt.date(2026, 3, 2), settings)[0].coefficients
        found[bool(settings.clock_sweep_files)] = (coefficients.dyn_freq_exponent, coefficients.dyn_freq_exponent_source)
    assert found[False] == (None, None)
    alpha, source = found[True]
    assert source.startswith("sweep:") and alpha > 4.0
