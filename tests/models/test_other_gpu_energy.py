"""A job's energy on another GPU model, before it runs there: the catalogue, the predictor, the
`jobs predict-energy` command, and the check against real pairs (the Zeus NSDI'23 power traces)."""

from __future__ import annotations

import csv
import itertools
import json
import statistics

import pytest
import typer
from typer.testing import CliRunner

from joulehouse.models.gpu_catalogue import CatalogueError, catalogue, lookup
from joulehouse.models.other_gpu_energy import predict_energy_on, refine_with_pairs

# The Zeus NSDI'23 sweeps' GPUs (the highest limit in each file is its default: 250 W V100 and P100,
# 300 W A40, 260 W RTX 6000), and the precision they trained in: the Zeus examples use no autocast
# (ml-energy/zeus examples/ZeusDataLoader/cifar100/train.py), so FP32.
ZEUS_GPUS = {"v100": "Tesla V100-PCIE-16GB", "a40": "NVIDIA A40", "p100": "Tesla P100-PCIE-16GB",
             "rtx6000": "Quadro RTX 6000"}
# Measured on the 540 ordered (GPU pair, workload) cases at the default limit, this predictor:
# median absolute error 28.1% (bottleneck unknown; 49.1% if taken as compute-bound, 36.0% as
# memory-bound); the baseline "same energy as on A": 36.8%.
MAX_MEDIAN_ERROR = 0.31


def _zeus_default_limit_runs(shared_data) -> dict[str, dict[tuple, tuple[float, float]]]:
    """GPU -> (dataset, network, batch size, optimizer) -> (time per epoch s, average power W) at
    the file's highest power limit."""
    runs = {}
    for gpu in ZEUS_GPUS:
        rows = list(csv.DictReader(open(shared_data / f"sweeps/zeus_nsdi23_summary_power_{gpu}.csv")))
        top = max(float(r["power_limit"]) for r in rows)
        runs[gpu] = {(r["dataset"], r["network"], r["batch_size"], r["optimizer"]):
                     (float(r["time_per_epoch"]), float(r["average_power"])) for r in rows if float(r["power_limit"]) == top}
    return runs


def test_predicting_each_zeus_gpu_from_every_other_beats_assuming_the_same_energy(shared_data):
    runs = _zeus_default_limit_runs(shared_data)
    errors, baseline = [], []
    for a, b in itertools.permutations(ZEUS_GPUS, 2):
        for workload in runs[a].keys() & runs[b].keys():
            (time_a, power_a), (time_b, power_b) = runs[a][workload], runs[b][workload]
            predicted = predict_energy_on(ZEUS_GPUS[a], ZEUS_GPUS[b], time_a * power_a, time_a, precision="fp32")
            errors.append(abs(predicted.predicted_energy_j / (time_b * power_b) - 1))
            baseline.append(abs(time_a * power_a / (time_b * power_b) - 1))
    assert len(errors) == 540
    assert statistics.median(errors) <= MAX_MEDIAN_ERROR
    assert statistics.median(errors) < statistics.median(baseline) - 0.05


def test_the_prediction_follows_the_roofline_and_the_busy_ratio():
    h100, a100 = "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"
    compute = predict_energy_on(a100, h100, energy_j=3.6e6, time_s=3600, avg_power_w=1000.0 / 1, bottleneck="compute-bound")
    assert compute.busy_ratio == 1.0, "a job at or above A's TDP kept A fully busy"
    assert compute.time_ratio == pytest.approx(312 / 989.5)
    assert compute.predicted_avg_power_w == pytest.approx(700.0)
    memory = predict_energy_on(a100, h100, energy_j=3600 * 229.5, time_s=3600, bottleneck="memory-bound")
    assert memory.time_ratio == pytest.approx(2039 / 3350)
    assert memory.busy_ratio == pytest.approx((229.5 - 59) / (400 - 59))
    assert memory.predicted_avg_power_w == pytest.approx(87 + memory.busy_ratio * (700 - 87))
    unknown = predict_energy_on(a100, h100, energy_j=3600 * 229.5, time_s=3600)
    assert memory.time_ratio > unknown.time_ratio > compute.time_ratio
    eight = predict_energy_on(a100, h100, energy_j=8 * 3600 * 229.5, time_s=3600, gpus=8)
    assert eight.predicted_energy_j == pytest.approx(8 * unknown.predicted_energy_j)
    fitted = predict_energy_on(a100, h100, energy_j=3600 * 229.5, time_s=3600, to_power_w=lambda u: 100 + 500 * u)
    assert fitted.predicted_avg_power_w == pytest.approx(100 + 500 * unknown.busy_ratio)


def test_fleet_pairs_scale_the_prediction_by_their_median_ratio():
    base = predict_energy_on("NVIDIA A100-SXM4-80GB", "NVIDIA H200", energy_j=1e6, time_s=3600)
    refined = refine_with_pairs(base, [(100.0, 80.0), (100.0, 90.0), (100.0, 200.0)])
    assert refined.predicted_energy_j == pytest.approx(0.9 * base.predicted_energy_j)
    assert "3 fleet jobs" in refined.method
    assert refine_with_pairs(base, []) == base


@pytest.mark.parametrize("kwargs, message", [
    ({"energy_j": 0, "time_s": 10}, "energy_j = 0"),
    ({"energy_j": 10, "time_s": float("nan")}, "time_s = nan"),
    ({"energy_j": 10, "time_s": 10, "gpus": -1}, "gpus = -1"),
    ({"energy_j": 10, "time_s": 10, "bottleneck": "io"}, "bottleneck 'io'"),
    ({"energy_j": 10, "time_s": 10, "precision": "fp64"}, "precision 'fp64'"),
])
def test_bad_inputs_are_refused_naming_them(kwargs, message):
    with pytest.raises(ValueError, match=message):
        predict_energy_on("NVIDIA A40", "NVIDIA L40S", **kwargs)


def test_the_catalogue_matches_nvml_names_as_whole_words_and_knows_its_sources():
    assert lookup("A100-SXM4-80GB").gpu_model == "NVIDIA A100-SXM4-80GB"
    assert lookup("NVIDIA L40S").gpu_model == "NVIDIA L40S" and lookup("NVIDIA L4").gpu_model == "NVIDIA L4"
    assert lookup("NVIDIA H800").gpu_model == "NVIDIA H100 80GB HBM3"
    with pytest.raises(CatalogueError, match="not in the catalogue"):
        lookup("NVIDIA A100-SXM4-64GB")  # 'A10' is a different GPU, not a prefix
    for spec in catalogue():
        assert spec.source and spec.tdp_w > 0 and spec.fp32_tflops > 0 and spec.memory_bandwidth_gb_s > 0
        assert spec.min_limit_w is None or spec.min_limit_w < spec.tdp_w <= (spec.max_limit_w or spec.tdp_w)
        assert spec.idle_w is None or 0 < spec.idle_w < 0.25 * spec.tdp_w
    assert lookup("Tesla V100-PCIE-16GB").peak_tflops("bf16") == (112.0, "fp16"), "no BF16 before Ampere"


def _run(*args):
    from joulehouse.cli.jobs import register

    app = typer.Typer()
    register(app)
    return CliRunner().invoke(app, ["jobs", "predict-energy", *args])


def test_the_command_prints_the_prediction_and_refuses_an_unknown_model():
    result = _run("--from-gpu-model", "NVIDIA A100-SXM4-80GB", "--to-gpu-model", "NVIDIA H100 80GB HBM3",
                  "--energy-j", "2.5e6", "--time-s", "3600", "--gpus", "8", "--format", "json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    direct = predict_energy_on("NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3", 2.5e6, 3600, gpus=8)
    assert out["predicted_energy_j"] == pytest.approx(direct.predicted_energy_j, rel=1e-5)
    assert out["predicted_time_s"] == pytest.approx(direct.predicted_time_s, rel=1e-5) and out["method"]
    bad = _run("--from-gpu-model", "NVIDIA B300", "--to-gpu-model", "NVIDIA H200", "--energy-j", "1", "--time-s", "1")
    assert bad.exit_code == 2 and bad.output.startswith("error: GPU model 'NVIDIA B300' is not in the catalogue")


@pytest.mark.parametrize("args, power", [
    (["--energy-j", "1e15", "--time-s", "1", "--gpus", "1"], "1e+15 W"),  # was clamped to busy 1.0: 306.7 J
    (["--energy-j", "1", "--time-s", "3600", "--gpus", "8"], "3.472e-05 W"),  # was a million times the energy
    (["--energy-j", "2.5e6", "--time-s", "3600", "--gpus", "8", "--avg-power-w", "5000"], "5000 W"),
])
def test_figures_no_gpu_could_have_run_are_refused_as_a_unit_slip(args, power):
    result = _run("--from-gpu-model", "NVIDIA A100-SXM4-80GB", "--to-gpu-model", "NVIDIA H100 80GB HBM3", *args)
    assert result.exit_code == 2 and result.stdout == ""
    assert f"average power {power} per GPU on NVIDIA A100-SXM4-80GB is outside" in result.stderr
    assert "check the units" in result.stderr and result.stderr.count("\n") == 1
