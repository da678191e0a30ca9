"""A job's energy on another GPU model, predicted before it runs there.

Known before the job runs on B: what it did on A (its energy and time, so how busy it kept A), its
bottleneck if one is known, and what the catalogue (models/gpu_catalogue.csv) or B's fitted power
model says about B. The prediction, per GPU:

- time on B = time on A x the throughput ratio A/B at the job's bottleneck: peak tensor (or FP32)
  rate at the job's precision for compute-bound work, memory bandwidth for memory-bound work, and
  their geometric mean when the bottleneck is unknown (a roofline whose operating point is not
  known sits between the two roofs);
- busy ratio u = (power on A - idle A) / (TDP A - idle A), clipped to [0, 1]: the share of A's
  dynamic range the job used; power on B = idle B + u x (TDP B - idle B), or B's fitted power
  model at activity u where one is given;
- energy on B = power on B x time on B x GPUs.

Checked against the Zeus NSDI'23 power traces (the same workloads and batch sizes on V100, A40,
P100 and RTX 6000; tests/models/test_other_gpu_energy.py): the median absolute error across all
ordered pairs is stated there beside the baseline "the same energy as on A". The fleet's own jobs
that ran on both models refine the ratio (`refine_with_pairs`): the median of measured over
predicted energy across those jobs multiplies the prediction.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass

from joulehouse.models.gpu_catalogue import GpuSpec, lookup

BOTTLENECKS = ("compute-bound", "memory-bound", "unknown")


@dataclass(frozen=True)
class EnergyPrediction:
    """The job on B: energy (J), time (s) and average power per GPU (W), and how they were found."""

    from_gpu_model: str
    to_gpu_model: str
    predicted_energy_j: float
    predicted_time_s: float
    predicted_avg_power_w: float
    measured_energy_j: float
    measured_time_s: float
    gpus: int
    busy_ratio: float
    time_ratio: float
    bottleneck: str
    precision: str
    method: str
    assumptions: tuple[str, ...]

    def as_dict(self) -> dict:
        return asdict(self) | {"assumptions": list(self.assumptions)}


def _throughput_ratio(a: GpuSpec, b: GpuSpec, bottleneck: str, precision: str) -> tuple[float, str]:
    """(time on B / time on A, what the ratio was taken from)."""
    peak_a, used_a = a.peak_tflops(precision)
    peak_b, used_b = b.peak_tflops(precision)
    compute = peak_a / peak_b
    memory = a.memory_bandwidth_gb_s / b.memory_bandwidth_gb_s
    what_compute = f"peak {used_a} {peak_a:g} vs {used_b} {peak_b:g} TFLOP/s"
    what_memory = f"memory bandwidth {a.memory_bandwidth_gb_s:g} vs {b.memory_bandwidth_gb_s:g} GB/s"
    if bottleneck == "compute-bound":
        return compute, what_compute
    if bottleneck == "memory-bound":
        return memory, what_memory
    return math.sqrt(compute * memory), f"geometric mean of {what_compute} and {what_memory}"


def implausible_power(gpu_model: str, avg_power_w: float) -> str | None:
    """Why a job could not have averaged `avg_power_w` per GPU on `gpu_model`, or None. A GPU held
    by a job draws about its idle power at least and its TDP at most; past half the one or 1.5x the
    other (the warehouse's power_over_limit bound) a figure typed by hand is a unit slip (mJ for J,
    minutes for seconds), which the busy ratio's clamp would hide behind a plausible answer. The
    fleet's own jobs are not judged by it: their energy is measured."""
    spec = lookup(gpu_model)
    low_w, high_w = spec.idle_power_w()[0] / 2, 1.5 * spec.tdp_w
    if low_w <= avg_power_w <= high_w:
        return None
    return (f"average power {avg_power_w:.4g} W per GPU on {spec.gpu_model} is outside what that GPU draws while "
            f"it runs a job ({low_w:.0f}-{high_w:.0f} W)")


def predict_energy_on(from_gpu_model: str, to_gpu_model: str, energy_j: float, time_s: float, *, gpus: int = 1,
                      avg_power_w: float | None = None, bottleneck: str = "unknown", precision: str = "bf16",
                      to_power_w: Callable[[float], float] | None = None) -> EnergyPrediction:
    """Predict the job's energy and time on `to_gpu_model` from its run on `from_gpu_model`.

    `energy_j` is the job's GPU energy over all `gpus`, `time_s` its wall time; `avg_power_w` (per
    GPU) defaults to energy / (time x gpus). `to_power_w(busy_ratio)`: B's fitted power model at that
    activity (W per GPU), used in place of the catalogue's idle-to-TDP line. Raises ValueError on
    non-positive or non-finite inputs, CatalogueError for a model the catalogue does not know."""
    for name, value in (("energy_j", energy_j), ("time_s", time_s), ("gpus", gpus)):
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
            raise ValueError(f"{name} = {value!r}: expected a positive finite number")
    if bottleneck not in BOTTLENECKS:
        raise ValueError(f"bottleneck {bottleneck!r} is not one of {BOTTLENECKS}")
    a, b = lookup(from_gpu_model), lookup(to_gpu_model)
    power_a = energy_j / (time_s * gpus) if avg_power_w is None else avg_power_w
    if not (math.isfinite(power_a) and power_a > 0):
        raise ValueError(f"avg_power_w = {power_a!r}: expected a positive finite number")
    idle_a, measured_a = a.idle_power_w()
    idle_b, measured_b = b.idle_power_w()
    busy = min(1.0, max(0.0, (power_a - idle_a) / (a.tdp_w - idle_a)))
    time_ratio, ratio_from = _throughput_ratio(a, b, bottleneck, precision)
    power_b = to_power_w(busy) if to_power_w is not None else idle_b + busy * (b.tdp_w - idle_b)
    time_b = time_s * time_ratio
    assumptions = [f"time ratio from {ratio_from}"]
    assumptions += [f"idle power of {s.gpu_model} assumed {idle:.0f} W (median idle share of TDP in the catalogue)"
                    for s, idle, measured in ((a, idle_a, measured_a), (b, idle_b, measured_b)) if not measured]
    assumptions.append(f"power on {b.gpu_model} from its fitted power model" if to_power_w is not None
                       else f"power on {b.gpu_model} = idle + busy ratio x (TDP {b.tdp_w:g} W - idle)")
    return EnergyPrediction(
        from_gpu_model=a.gpu_model, to_gpu_model=b.gpu_model, predicted_energy_j=power_b * time_b * gpus,
        predicted_time_s=time_b, predicted_avg_power_w=power_b, measured_energy_j=float(energy_j),
        measured_time_s=float(time_s), gpus=int(gpus), busy_ratio=busy, time_ratio=time_ratio,
        bottleneck=bottleneck, precision=precision,
        method=("catalogue roofline: time x throughput ratio, " + ("power from B's fitted power model" if to_power_w
                is not None else "power at the same busy ratio of B's range")),
        assumptions=tuple(assumptions))


def refine_with_pairs(prediction: EnergyPrediction, pairs: Iterable[tuple[float, float]]) -> EnergyPrediction:
    """Scale a prediction by the median of measured / predicted energy over jobs that ran on both
    models (`pairs`: (predicted J, measured J) per job on B); unchanged without pairs."""
    ratios = [measured / predicted for predicted, measured in pairs if predicted > 0 and measured > 0]
    if not ratios:
        return prediction
    factor = statistics.median(ratios)
    return EnergyPrediction(**{**asdict(prediction), "predicted_energy_j": prediction.predicted_energy_j * factor,
                               "predicted_avg_power_w": prediction.predicted_avg_power_w * factor,
                               "method": prediction.method + f"; x {factor:.3g}, the median measured/predicted of "
                                                             f"{len(ratios)} fleet jobs that ran on both models",
                               "assumptions": prediction.assumptions})
