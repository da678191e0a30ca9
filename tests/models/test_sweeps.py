"""Power-limit choices from the measured Zeus sweeps, and the `caps from-sweep` command."""

from __future__ import annotations

import json

import numpy as np
import pytest
import typer
from hypothesis import given, strategies as st
from typer.testing import CliRunner

from joulehouse.cli.caps import register
from joulehouse.models.sweeps import Sweep, SweepError, choose_power_limit, load_sweep, load_sweeps

A40_RESNET = "sweeps/zeus_testprofile_A40+resnet50+gpu0.csv"


@pytest.fixture()
def a40_resnet(shared_data):
    return load_sweep(shared_data / A40_RESNET)


def test_profile_windows_become_one_point_per_limit(a40_resnet):
    assert list(a40_resnet.values) == [100, 125, 150, 175, 200, 225, 250, 275, 300]
    # 300 W window: 24.01 s, 6224.9 J in the file
    assert a40_resnet.time_s[-1] == pytest.approx(24.0116, rel=1e-4)
    assert a40_resnet.energy_j[-1] == pytest.approx(6224.886, rel=1e-6)


def test_zeus_reference_choices_on_a40_resnet50(a40_resnet):
    assert choose_power_limit(a40_resnet, "energy").chosen == 175
    assert choose_power_limit(a40_resnet, "cost", eta=0.5).chosen == 200
    assert choose_power_limit(a40_resnet, "energy", max_slowdown_pct=10).chosen == 200
    assert choose_power_limit(a40_resnet, "time").chosen == 300


def test_cost_objective_moves_from_time_to_energy_with_eta(a40_resnet):
    assert choose_power_limit(a40_resnet, "cost", eta=1.0).chosen == choose_power_limit(a40_resnet, "energy").chosen
    assert choose_power_limit(a40_resnet, "cost", eta=0.0).chosen == choose_power_limit(a40_resnet, "time").chosen


def test_repeated_windows_per_limit_are_averaged(tmp_path):
    path = tmp_path / "profile.csv"
    path.write_text("start_time,window_name,elapsed_time,gpu0_energy\n"
                    "0,__GlobalPowerLimitOptimizer_200,10,2000\n1,__GlobalPowerLimitOptimizer_200,12,2200\n"
                    "2,__GlobalPowerLimitOptimizer_100,20,1900\n3,user_window,5,50\n")
    sweep = load_sweep(path)
    assert list(sweep.values) == [100, 200]
    assert sweep.time_s[1] == 11 and sweep.energy_j[1] == 2100


def test_summary_files_hold_one_sweep_per_workload(shared_data):
    sweeps = load_sweeps(shared_data / "sweeps/zeus_nsdi23_summary_power_a40.csv")
    assert len(sweeps) > 10
    for sweep in sweeps.values():
        assert np.all(sweep.energy_j > 0) and sweep.values.max() >= 250


def test_clock_sweeps_load_and_need_max_power_for_cost(shared_data):
    sweep = load_sweep(shared_data / "sweeps/perseus_sosp24_stage_profile_gpt3-175b_a100sxm_bf16.csv")
    assert sweep.setting == "sm_clock_mhz" and sweep.values.max() == 1410
    assert choose_power_limit(sweep, "energy").chosen < 1410  # lower clocks save energy per iteration
    with pytest.raises(SweepError, match="max_power_w"):
        choose_power_limit(sweep, "cost")


def test_unknown_format_is_refused_with_the_columns(tmp_path):
    path = tmp_path / "x.csv"
    path.write_text("a,b\n1,2\n")
    with pytest.raises(SweepError, match=r"\['a', 'b'\]"):
        load_sweeps(path)


@pytest.mark.parametrize("text, message", [
    ("# a README\nsome, prose, with, commas\n", r"line 2: 1 columns in the header, more fields"),
    ("power_limit,time_per_epoch,average_power\n300,12.5,250\n250,x,200\n", r"line 3: time_per_epoch = 'x'"),
    ("frequency,time,energy\n1410,1.0,nan\n", r"line 2: energy = 'nan' is not a finite number"),
    ("frequency,time,energy\n\n1410,1.0,x\n", r"line 3: energy = 'x'"),  # a blank line is skipped, still counted
])
def test_a_file_that_is_not_a_clean_sweep_is_refused_naming_the_line(tmp_path, text, message):
    path = tmp_path / "x.csv"
    path.write_text(text)
    with pytest.raises(SweepError, match=message):
        load_sweeps(path)
    result = _run(str(path))
    assert result.exit_code == 2 and result.output.startswith("error: sweep file"), result.output


@given(st.lists(st.tuples(st.floats(1, 100), st.floats(1, 1e4)), min_size=2, max_size=12),
       st.floats(0, 50))
def test_slowdown_bound_is_respected(points, bound):
    limits = np.arange(len(points)) * 25.0 + 100
    sweep = Sweep("x", "power_limit_w", limits, np.array([p[0] for p in points]), np.array([p[1] for p in points]))
    choice = choose_power_limit(sweep, "energy", max_slowdown_pct=bound)
    assert choice.slowdown_pct <= bound + 1e-6 or choice.chosen == limits.max()
    unconstrained = choose_power_limit(sweep, "energy")
    assert choice.energy_j >= unconstrained.energy_j - 1e-9


def _run(*args):
    app = typer.Typer()
    register(app)
    return CliRunner().invoke(app, ["caps", "from-sweep", *args])


def test_cli_prints_the_choice_as_json(shared_data):
    path = str(shared_data / A40_RESNET)
    assert json.loads(_run(path, "--objective", "energy").output)["power_limit_w"] == 175
    assert json.loads(_run(path, "--objective", "cost", "--eta", "0.5").output)["power_limit_w"] == 200
    result = _run(path, "--objective", "energy", "--max-slowdown-pct", "10")
    assert result.exit_code == 0 and json.loads(result.output)["power_limit_w"] == 200


def test_cli_bad_input_exits_non_zero_with_a_message(tmp_path):
    result = _run(str(tmp_path / "missing.csv"))
    assert result.exit_code == 2 and "does not exist" in result.output
    result = _run(str(tmp_path / "missing.csv"), "--objective", "speed")
    assert result.exit_code == 2
