"""Power-limit choices from the measured Zeus sweeps, and the `caps from-sweep` command."""

from __future__ import annotations

import json

import numpy as np
import pytest
import typer
from hypothesis import given, strategies as st
from typer.testing import CliRunner

from joulehouse.cli.caps import register
from joulehouse.models.sweeps import Sweep, SweepError, choose_setting, load_sweep, load_sweeps

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
    assert choose_setting(a40_resnet, "energy").power_limit_w == 175
    assert choose_setting(a40_resnet, "cost", eta=0.5).power_limit_w == 200
    assert choose_setting(a40_resnet, "energy", max_slowdown_pct=10).power_limit_w == 200
    assert choose_setting(a40_resnet, "time").power_limit_w == 300


def test_cost_objective_moves_from_time_to_energy_with_eta(a40_resnet):
    assert choose_setting(a40_resnet, "cost", eta=1.0).power_limit_w == choose_setting(a40_resnet, "energy").power_limit_w
    assert choose_setting(a40_resnet, "cost", eta=0.0).power_limit_w == choose_setting(a40_resnet, "time").power_limit_w


def test_repeated_windows_per_limit_are_averaged(tmp_path):
    path = tmp_path / "profile.csv"
    path.write_text("start_time,window_name,elapsed_time,gpu0_energy\n"
                    "0,__GlobalPowerLimitOptimizer_200,10,2000\n1,__GlobalPowerLimitOptimizer_200,12,2200\n"
                    "2,__GlobalPowerLimitOptimizer_100,20,1900\n3,user_window,5,50\n"
                    "4,epoch_200,30,9000\n5,warmup_3,1,20\n")  # a user's windows, ending in digits
    sweep = load_sweep(path)
    assert list(sweep.values) == [100, 200]
    assert sweep.time_s[1] == 11 and sweep.energy_j[1] == 2100


def test_a_stage_profile_whose_clocks_time_other_stages_is_refused(tmp_path, shared_data):
    """One backward row of one clock missing: that clock summed less work and won (1200 MHz read
    26% saved and 1.6% slower, against 18% and 9.9% for the full file's choice)."""
    rows = (shared_data / "sweeps" / "perseus_sosp24_stage_profile_gpt3-175b_a100sxm_bf16.csv").read_text().splitlines()
    dropped = next(i for i, line in enumerate(rows) if line.startswith("7,backward,1200,"))
    path = tmp_path / "profile.csv"
    path.write_text("\n".join(rows[:dropped] + rows[dropped + 1:]) + "\n")
    with pytest.raises(SweepError, match="1 clock.s. lack rows the others have .first 1200 MHz, 1 row.s. missing"):
        load_sweep(path)


def test_a_grid_with_a_point_at_the_default_limit_gives_its_choice_and_no_interval(tmp_path):
    """An empty power_limit_w is the default: the interval's model fit stopped on it with a
    traceback (scipy: residuals are not finite)."""
    path = tmp_path / "grid.csv"
    path.write_text("workload,sm_clock_mhz,power_limit_w,time_s,energy_j\nw,,,10.0,3000\nw,,250,10.2,2800\n"
                    "w,,200,10.9,2500\nw,,150,12.5,2400\n")
    result = _run(str(path), "--max-slowdown-pct", "10", "--format", "json")
    assert result.exit_code == 0, result.output
    [row] = json.loads(result.output)
    assert row["power_limit_w"] == 200.0 and row["interval_best_w"] is None


def test_summary_files_hold_one_sweep_per_workload(shared_data):
    sweeps = load_sweeps(shared_data / "sweeps/zeus_nsdi23_summary_power_a40.csv")
    assert len(sweeps) > 10
    for sweep in sweeps.values():
        assert np.all(sweep.energy_j > 0) and sweep.values.max() >= 250


def test_clock_sweeps_load_and_need_max_power_for_cost(shared_data):
    sweep = load_sweep(shared_data / "sweeps/perseus_sosp24_stage_profile_gpt3-175b_a100sxm_bf16.csv")
    assert sweep.setting == "sm_clock_mhz" and sweep.values.max() == 1410
    choice = choose_setting(sweep, "energy")
    assert choice.sm_clock_mhz < 1410 and choice.power_limit_w is None  # lower clocks save energy per iteration
    with pytest.raises(SweepError, match="max_power_w"):
        choose_setting(sweep, "cost")


def test_unknown_format_is_refused_with_the_columns(tmp_path):
    path = tmp_path / "x.csv"
    path.write_text("a,b\n1,2\n")
    with pytest.raises(SweepError, match=r"\['a', 'b'\]"):
        load_sweeps(path)


def test_a_file_that_is_no_csv_is_refused_without_repeating_its_first_line(tmp_path):
    """`caps from-sweep /etc/shadow` printed root's entry: the header's 'column' was shown as is."""
    path = tmp_path / "shadow"
    path.write_text("root:$y$j9T$s3cr3tHash:19000:0:99999:7:::\ndaemon:*:19000:0:99999:7:::\n")
    with pytest.raises(SweepError, match="its first line holds no column names") as caught:
        load_sweeps(path)
    assert "s3cr3t" not in str(caught.value) and "19000" not in str(caught.value)
    result = _run(str(path))
    assert result.exit_code == 2 and "s3cr3t" not in result.output


def test_a_folder_a_device_and_an_oversized_file_are_refused_by_what_they_are(tmp_path):
    with pytest.raises(SweepError, match="is a folder"):
        load_sweeps(tmp_path)
    with pytest.raises(SweepError, match="is not a regular file"):
        load_sweeps("/dev/null")
    big = tmp_path / "big.csv"
    with big.open("wb") as fh:  # sparse: no 65 MB written
        fh.truncate(65 * 1024 * 1024)
    with pytest.raises(SweepError, match="is 65 MiB; expected at most 64 MiB"):
        load_sweeps(big)


@pytest.mark.parametrize("row, message", [
    ("w,,100000,10.5,10", r"line 2: power limit 100000 W is outside 0-3000 W"),
    ("w,1e12,,10.5,1000", r"line 2: SM clock 1e\+12 MHz is outside 0-5000 MHz"),
    ("w,,300,1e300,1000", r"line 2: 1000 J in 1e\+300 s is 1e-297 W on average"),
    ("w,,300,10,9000", r"line 2: 9000 J in 10 s is 900 W on average; one GPU draws 1-450 W"),
])
def test_a_measurement_no_gpu_can_make_is_refused_naming_the_line(tmp_path, row, message):
    """Before, a 100 kW limit using 10 J in 10.5 s was chosen with a '99.67%' saving, exit 0."""
    path = tmp_path / "grid.csv"
    path.write_text("workload,sm_clock_mhz,power_limit_w,time_s,energy_j\n" + row + "\nw,,250,12,2400\n")
    with pytest.raises(SweepError, match=message):
        load_sweeps(path)
    assert _run(str(path)).exit_code == 2


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
    sweep = Sweep.of_power_limits("x", limits, [p[0] for p in points], [p[1] for p in points])
    choice = choose_setting(sweep, "energy", max_slowdown_pct=bound)
    assert choice.slowdown_pct <= bound + 1e-6
    assert choice.time_s <= sweep.time_s.min() * (1 + bound / 100) + 1e-6, "within the bound of the fastest setting"
    unconstrained = choose_setting(sweep, "energy")
    assert choice.energy_j >= unconstrained.energy_j - 1e-9


def _run(*args, env=None):
    app = typer.Typer()
    register(app)
    return CliRunner().invoke(app, ["caps", "from-sweep", *args], env=env)


def test_cli_prints_the_choice_as_json(shared_data):
    path = str(shared_data / A40_RESNET)
    [unbounded] = json.loads(_run(path, "--objective", "energy", "--max-slowdown-pct", "1000").output)
    assert unbounded["power_limit_w"] == 175 and unbounded["sm_clock_mhz"] is None
    [cost] = json.loads(_run(path, "--objective", "cost", "--eta", "0.5").output)
    assert cost["power_limit_w"] == 200 and cost["bound_from"] == "none" and cost["eta"] == 0.5
    result = _run(path, "--objective", "energy", "--max-slowdown-pct", "10")
    assert result.exit_code == 0 and json.loads(result.output)[0]["power_limit_w"] == 200


def test_cli_bad_input_exits_non_zero_with_a_message(tmp_path):
    result = _run(str(tmp_path / "missing.csv"))
    assert result.exit_code == 2 and "does not exist" in result.output
    result = _run(str(tmp_path / "missing.csv"), "--objective", "speed")
    assert result.exit_code == 2


@pytest.mark.parametrize("value", ["-1", "0", "nan"])
def test_a_max_power_that_is_no_power_is_refused(shared_data, value):
    """Negative, the cost made time a reward and the slowest setting won, exit 0."""
    result = _run(str(shared_data / A40_RESNET), "--objective", "cost", "--max-power-w", value)
    assert result.exit_code == 2 and f"max_power_w {float(value)} is not a finite power > 0 W" in result.output


GRID_HEADER = "workload,sm_clock_mhz,power_limit_w,time_s,energy_j,avg_power_w\n"


def _grid(tmp_path, lines: list[str]):
    path = tmp_path / "grid.csv"
    path.write_text(GRID_HEADER + "\n".join(lines) + "\n")
    return path


def _memory_and_compute_bound_grid(tmp_path):
    """Written by hand. memory-bound: time is set by DRAM, so it does not follow the SM clock, while
    power does (static 80 W + dynamic ~ f^2). compute-bound: time ~ 1/f, dynamic power ~ f^3, and a
    300 W limit clips the top clock's power (and stretches its time). An empty clock: not locked."""
    lines = []
    for clock in ("", 1410, 1200, 1005, 810):
        f = 1410 if clock == "" else clock
        for limit in (400, 300):
            mem_power = 80 + 220 * (f / 1410) ** 2
            lines.append(f"memory-bound,{clock},{limit},10.0,,{min(mem_power, limit)}")
            power = 80 + 280 * (f / 1410) ** 3
            stretch = max(1.0, (power - 80) / (limit - 80)) ** (1 / 3) if power > limit else 1.0
            t = 10.0 * (1410 / f) * stretch
            lines.append(f"compute-bound,{clock},{limit},{t},{t * min(power, limit)},")
    return _grid(tmp_path, lines)


def test_a_memory_bound_grid_locks_the_lowest_clock_at_no_slowdown(tmp_path):
    sweeps = load_sweeps(_memory_and_compute_bound_grid(tmp_path))
    memory = sweeps["memory-bound"]
    assert memory.setting == "sm_clock_mhz+power_limit_w" and len(memory.time_s) == 10
    choice = choose_setting(memory, "energy", max_slowdown_pct=0)
    assert choice.sm_clock_mhz == 810 and choice.slowdown_pct == 0
    # the energy follows the power: 80 + 220 (810/1410)^2 W against the fastest's 300 W (limit-clipped)
    assert choice.energy_j == pytest.approx(10 * (80 + 220 * (810 / 1410) ** 2))
    assert choice.energy_saving_pct == pytest.approx(100 * (1 - choice.energy_j / choice.fastest_energy_j))


def test_a_compute_bound_grid_trades_clock_for_time_within_the_bound(tmp_path):
    compute = load_sweeps(_memory_and_compute_bound_grid(tmp_path))["compute-bound"]
    fastest = choose_setting(compute, "time")
    assert fastest.sm_clock_mhz in (None, 1410) and fastest.power_limit_w == 400
    tight, loose = (choose_setting(compute, "energy", max_slowdown_pct=b) for b in (2, 50))
    assert tight.slowdown_pct <= 2 and tight.sm_clock_mhz in (None, 1410)
    assert loose.sm_clock_mhz == 1005 and loose.slowdown_pct == pytest.approx(100 * (1410 / 1005 - 1))
    assert loose.energy_j < tight.energy_j


def test_the_cli_reads_the_grid_and_says_which_bound_it_used(tmp_path):
    path = str(_memory_and_compute_bound_grid(tmp_path))
    result = _run(path, "--workload", "memory-bound")
    assert result.exit_code == 0, result.output
    choice = json.loads(result.output)  # one object for one named workload
    assert (choice["sm_clock_mhz"], choice["slowdown_pct"]) == (810, 0)
    assert choice["max_slowdown_pct"] == 10 and choice["bound_from"].startswith("throughput class")
    background = json.loads(_run(path, "--workload", "compute-bound", "--workload-class", "background").output)
    assert background["max_slowdown_pct"] == 25 and background["slowdown_pct"] <= 25
    assert background["sm_clock_mhz"] == 1200
    both = json.loads(_run(path).output)
    assert [c["workload"] for c in both] == ["memory-bound", "compute-bound"]
    table = _run(path, "--format", "table", env={"COLUMNS": "200"})
    assert table.exit_code == 0 and "memory-bound" in table.output and "810" in table.output
    assert "([recommend] max_slowdown_throughput_pct)" in table.output


def test_a_grid_row_without_energy_or_power_is_refused_naming_the_line(tmp_path):
    path = _grid(tmp_path, ["w,1410,300,10,,", "w,1200,300,11,,200"])
    with pytest.raises(SweepError, match=r"line 2: avg_power_w = ''"):
        load_sweeps(path)
    path = _grid(tmp_path, ["w,1410,-5,10,100,"])
    with pytest.raises(SweepError, match=r"line 2: power_limit_w = '-5' is not positive"):
        load_sweeps(path)


def test_the_cli_chooses_a_clock_from_the_perseus_sweeps(shared_data):
    """A100 SXM, GPT-3 175B stages: the throughput bound (10%) picks a lock below 1410 MHz."""
    path = str(shared_data / "sweeps/perseus_sosp24_stage_profile_gpt3-175b_a100sxm_bf16.csv")
    [choice] = json.loads(_run(path).output)
    assert choice["power_limit_w"] is None and 855 <= choice["sm_clock_mhz"] < 1410
    assert 0 < choice["slowdown_pct"] <= 10 and choice["energy_saving_pct"] > 10
    assert choice["interval_best_w"] is None  # a clock sweep has no power interval


def test_the_cli_gives_the_best_power_interval_beside_the_measured_choice(shared_data):
    """RTX 6000 BERT batch 8 at the throughput bound: the measured optimum 125 W, and the interval
    (measurements at the measured limits, the fitted model between) around it, not the model
    alone's 175 W (tests/models/test_power_interval_sweeps.py)."""
    path = str(shared_data / "sweeps/zeus_nsdi23_summary_power_rtx6000.csv")
    choice = json.loads(_run(path, "--workload", "sentiment140/bert_base_uncased/8/adamw").output)
    assert choice["power_limit_w"] == 125 and choice["max_slowdown_pct"] == 10
    assert choice["interval_low_w"] <= choice["interval_best_w"] <= choice["interval_high_w"]
    assert 100 < choice["interval_low_w"] and choice["interval_high_w"] <= 150
    cost = json.loads(_run(path, "--workload", "sentiment140/bert_base_uncased/8/adamw", "--objective", "cost").output)
    assert "interval_best_w" not in cost  # the interval is the energy objective's


def test_from_sweep_prints_a_table_of_choices_on_request(shared_data):
    from typer.testing import CliRunner

    from joulehouse.cli.main import app

    path = shared_data / "sweeps" / "zeus_nsdi23_summary_power_v100.csv"
    as_json = CliRunner().invoke(app, ["caps", "from-sweep", str(path), "--format", "json"])
    choices = json.loads(as_json.stdout)
    table = CliRunner().invoke(app, ["caps", "from-sweep", str(path), "--format", "table"], env={"COLUMNS": "200"})
    assert table.exit_code == 0, table.output
    assert "power limit (W)" in table.stdout and "energy saving (%)" in table.stdout
    rows = [line for line in table.stdout.splitlines() if line.startswith("│")]
    assert len(rows) == len(choices) > 60  # one line per workload, not 750 lines of JSON
    assert all(c["workload"][:20] in table.stdout for c in choices)
