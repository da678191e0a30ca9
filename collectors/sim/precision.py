"""Numeric precision and batch size of the simulated jobs, and what they do to throughput.

Every job gets a precision and a batch size from its own random stream (the GPU, node and other
job columns are the same as without them). Training and evaluation run bf16 or fp16; their samples
per second follow the batch, and inference serving's tokens and requests per second follow batch
and precision, with shapes taken from published measurements (the factors are this simulation's
reading of those papers' figures, rounded, not their exact numbers):
- training batch (per GPU): a step costs the work of b + 5.6 samples (the forward/backward of its b
  samples plus a per-step part: optimizer, all-reduce, launches), so samples per second grow as
  b / (b + 5.6) and saturate. That is the throughput against batch size of ResNet-50 at the top
  power limit in You, Chung and Chowdhury, "Zeus: Understanding and Optimizing GPU Energy
  Consumption of DNN Training" (NSDI 2023; the V100 sweep in ../shared/data/sweeps: 1.28x, 1.45x,
  1.57x, 1.64x, 1.68x batch 8's at 16 ... 256), where average power stays within 3% across batches.
  So the GPU's activity, power and FLOPs (the recommender's calibration truth) do not depend on the
  batch: only the samples they buy do, and a larger batch is fewer joules per sample. A training or
  evaluation job's drawn samples per second is its rate at batch 32. Data preparation states none;
- serving batch: throughput grows with the batch and saturates, b / (1 + (b - 1) / 24) relative to batch 1,
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
# Training: per-step work in samples (fitted to Zeus's ResNet-50 / V100 sweep, see the module doc).
TRAINING_STEP_OVERHEAD_SAMPLES = 5.6
TRAINING_REFERENCE_BATCH = 32
TRAINING_BATCHES = (8, 16, 32, 64, 128, 256)
BATCHED_KINDS = frozenset({"train-compute", "train-memory", "eval"})
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


def training_batch_factor(batch: int | None) -> float:
    """Samples per second of a training or evaluation job at `batch` over its rate at batch 32
    (1 where no batch is stated)."""
    if batch is None:
        return 1.0
    k = TRAINING_STEP_OVERHEAD_SAMPLES
    return (batch / (batch + k)) / (TRAINING_REFERENCE_BATCH / (TRAINING_REFERENCE_BATCH + k))


def precision_and_batch(seed: int, job: Job) -> tuple[str, int | None]:
    """The job's precision and batch size (None for data preparation; the cross-model reference
    job runs bf16 at the reference batch, so the models compare on the same work)."""
    if job.profile:
        return "bf16", TRAINING_REFERENCE_BATCH
    rng = rng_for(seed, job.trace_key, STREAM_PRECISION)
    if job.kind != "inference":
        # drawn after the precision, so a job's precision is what it was before batches were drawn
        names, weights = zip(*TRAINING_CHOICES)
        precision = str(rng.choice(names, p=np.array(weights) / sum(weights)))
        return precision, int(rng.choice(TRAINING_BATCHES)) if job.kind in BATCHED_KINDS else None
    # A host's serving deployment keeps its precision from day to day (a quantised model is a build
    # choice); each serving job picks its batch.
    names, weights = zip(*INFERENCE_CHOICES)
    host_rng = rng_for(seed, stable_key(job.host), STREAM_PRECISION)
    return str(host_rng.choice(names, p=np.array(weights) / sum(weights))), int(rng.choice(INFERENCE_BATCHES))
