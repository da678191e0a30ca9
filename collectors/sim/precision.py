"""Numeric precision and batch size of the simulated jobs, and what they do to inference throughput.

Every job gets a precision and a batch size from its own random stream (the GPU, node and other
job columns are the same as without them). Training and evaluation run bf16 or fp16 at their drawn
work rates and state no batch size (the simulation does not model it for them). Inference serving's tokens and requests per second follow
them, with shapes taken from published measurements (the factors are this simulation's reading
of those papers' figures, rounded, not their exact numbers):
- batch: throughput grows with the batch and saturates, b / (1 + (b - 1) / 24) relative to batch 1,
  the shape of LLaMA inference energy per token against batch size in Samsi et al., "From Words to
  Watts: Benchmarking the Energy Costs of Large Language Model Inference" (IEEE HPEC 2023); the
  simulated power follows the offered load, not the batch, so a larger batch is fewer joules per token;
- precision, relative to fp16/bf16: fp32 0.35 and tf32 0.6 (the tensor-core rate ratios of the
  NVIDIA A100/H100 datasheets, damped because decoding is partly memory-bound); fp8 1.45 on Hopper
  (NVIDIA's MLPerf Inference v3.1 H100 FP8 against FP16 results, about 1.4-1.6x) and 1.0 on
  Ampere, which has no FP8 units and runs it as fp16; int8 1.3 (SmoothQuant W8A8, Xiao et al.,
  ICML 2023: up to 1.56x); int4 1.6 (AWQ weight-only 4-bit, Lin et al., MLSys 2024: decode
  about 3x faster than fp16 at batch 1, less as the batch grows).
The drawn work rate of a serving job is its rate at batch 8 in fp16 (factor 1 there).

A job's FLOPs are counted in its own precision: the tensor work the GPU did (at its BF16 rate) times
the datasheet ratio of that precision's dense peak to BF16's (`FLOP_RATE_VS_BF16`), as a profiler
counting operations would report them.
"""

from __future__ import annotations

import numpy as np

from joulehouse.collectors.sim.constants import GpuModelSpec
from joulehouse.collectors.sim.fleet import rng_for, stable_key
from joulehouse.collectors.sim.workload import Job

STREAM_PRECISION = 9
REFERENCE_BATCH = 8
BATCH_SATURATION = 24.0
PRECISION_SPEEDUP = {"fp32": 0.35, "tf32": 0.6, "bf16": 1.0, "fp16": 1.0, "fp8": 1.45, "int8": 1.3, "int4": 1.6}
# Architectures without FP8 tensor cores run fp8 as fp16.
NO_FP8 = frozenset({"a100"})
INFERENCE_CHOICES = (("fp16", 0.3), ("bf16", 0.2), ("fp8", 0.2), ("int8", 0.2), ("int4", 0.1))
# Training and evaluation run mixed precision at the BF16/FP16 rate (what most of today's training
# uses), so their FLOP counts are the tensor work itself: the recommender's calibration against the
# simulator's energy per FLOP stays what it was without precision.
TRAINING_CHOICES = (("bf16", 0.85), ("fp16", 0.15))
INFERENCE_BATCHES = (1, 4, 8, 16, 32, 64)


# Dense peak at each precision over the BF16 peak (NVIDIA A100 and H100/H200 datasheets).
FLOP_RATE_VS_BF16 = {
    "a100": {"fp32": 19.5 / 312, "tf32": 0.5, "bf16": 1.0, "fp16": 1.0, "fp8": 1.0, "int8": 2.0, "int4": 4.0},
    "hopper": {"fp32": 67 / 989.5, "tf32": 0.5, "bf16": 1.0, "fp16": 1.0, "fp8": 2.0, "int8": 2.0, "int4": 2.0},
}


def flop_rate_vs_bf16(spec: GpuModelSpec, precision: str) -> float:
    """Operations per second at `precision` over BF16's, on this GPU model."""
    return FLOP_RATE_VS_BF16["a100" if spec.short_name == "a100" else "hopper"][precision]


def _relative_batch_throughput(batch: int) -> float:
    return batch / (1.0 + (batch - 1) / BATCH_SATURATION)


def speedup(job: Job, spec: GpuModelSpec, precision: str, batch: int) -> float:
    """Work rate of `job` at (precision, batch) over its drawn rate (1 for training and evaluation)."""
    if job.kind != "inference":
        return 1.0
    effective = "fp16" if precision == "fp8" and spec.short_name in NO_FP8 else precision
    return (PRECISION_SPEEDUP[effective] * _relative_batch_throughput(batch)
            / _relative_batch_throughput(REFERENCE_BATCH))


def precision_and_batch(seed: int, job: Job) -> tuple[str, int | None]:
    """The job's precision and batch size (None for training and evaluation, whose batch the
    simulation does not model; the cross-model reference job runs bf16)."""
    if job.profile:
        return "bf16", None
    rng = rng_for(seed, job.trace_key, STREAM_PRECISION)
    if job.kind != "inference":
        # the batch is not modelled for training, so the jobs do not state one (NULL in the lake)
        names, weights = zip(*TRAINING_CHOICES)
        return str(rng.choice(names, p=np.array(weights) / sum(weights))), None
    # A host's serving deployment keeps its precision from day to day (a quantised model is a build
    # choice); each serving job picks its batch.
    names, weights = zip(*INFERENCE_CHOICES)
    host_rng = rng_for(seed, stable_key(job.host), STREAM_PRECISION)
    return str(host_rng.choice(names, p=np.array(weights) / sum(weights))), int(rng.choice(INFERENCE_BATCHES))
