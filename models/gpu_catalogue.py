"""What the public record says about each GPU model: power limits, idle power, peak throughput per
precision, memory bandwidth, links (models/gpu_catalogue.csv, one row per model, its source named).

The fleet's own fits come first wherever they exist; the catalogue answers for a model before the
fleet has run it (predicting a job's energy there) and for device facts no reading carries (the
default and minimum limits). Throughputs are dense peaks (tensor cores without sparsity; packed
FP16 on Pascal), TFLOP/s or TOPS; a precision a model lacks runs at the next one it has
(`peak_tflops`). Idle power is a measurement where the row gives one; elsewhere `idle_power_w`
assumes the median idle share of TDP of the rows that measured it, and says so.
"""

from __future__ import annotations

import csv
import re
import statistics
from dataclasses import dataclass, fields
from functools import cache
from importlib import resources

PRECISIONS = ("fp32", "tf32", "fp16", "bf16", "fp8", "int8")
# A precision the GPU has no units for runs at the one it falls back to (TF32 is FP32 math on
# Volta; BF16 is unsupported before Ampere and runs as FP16 in mixed precision there; FP8 before
# Hopper/Ada and INT8 without integer tensor cores run at FP16).
FALLBACK = {"tf32": "fp32", "bf16": "fp16", "fp8": "fp16", "int8": "fp16", "fp16": "fp32"}


class CatalogueError(LookupError):
    """A GPU model the catalogue does not know; the message lists what it knows."""


@dataclass(frozen=True)
class GpuSpec:
    """One catalogue row. Units in the names; None where the source gives nothing."""

    gpu_model: str
    match: str
    architecture: str
    tdp_w: float
    min_limit_w: float | None
    max_limit_w: float | None
    idle_w: float | None
    fp32_tflops: float
    tf32_tflops: float | None
    fp16_tflops: float | None
    bf16_tflops: float | None
    fp8_tflops: float | None
    int8_tops: float | None
    memory_gb: float | None
    memory_bandwidth_gb_s: float
    max_sm_clock_mhz: float | None
    nvlink_generation: float | None
    nvlink_links: float | None
    nvlink_gb_s: float | None
    pcie_generation: float | None
    pcie_lanes: float | None
    source: str

    def peak_tflops(self, precision: str) -> tuple[float, str]:
        """(dense peak TFLOP/s or TOPS, the precision it is for) at `precision`, or at the one the
        GPU falls back to when it has no units for it."""
        if precision not in PRECISIONS:
            raise ValueError(f"precision {precision!r} is not one of {PRECISIONS}")
        current = precision
        while True:
            value = getattr(self, "int8_tops" if current == "int8" else f"{current}_tflops")
            if value is not None:
                return float(value), current
            current = FALLBACK[current]

    def idle_power_w(self) -> tuple[float, bool]:
        """(idle power W, measured?): the row's measurement, else the catalogue's median idle
        share of TDP times this TDP."""
        if self.idle_w is not None:
            return self.idle_w, True
        return measured_idle_share() * self.tdp_w, False


def _value(field: str, text: str):
    if field in ("gpu_model", "match", "architecture", "source"):
        return text.strip()
    return float(text) if text.strip() else None


@cache
def catalogue() -> tuple[GpuSpec, ...]:
    names = [f.name for f in fields(GpuSpec)]
    path = resources.files("joulehouse.models") / "gpu_catalogue.csv"
    with path.open(encoding="utf-8", newline="") as fh:
        return tuple(GpuSpec(**{n: _value(n, row[n]) for n in names}) for row in csv.DictReader(fh))


@cache
def measured_idle_share() -> float:
    """Median idle power over TDP of the catalogue rows with a measured idle power."""
    return statistics.median(s.idle_w / s.tdp_w for s in catalogue() if s.idle_w is not None)


def lookup(gpu_model: str) -> GpuSpec:
    """The row for an NVML name: exact (case-insensitive), else the longest `match` pattern the
    name contains as a whole word (`A100-SXM4-80GB` finds `NVIDIA A100-SXM4-80GB`; `A10` does not
    match inside `A100`). CatalogueError otherwise."""
    wanted = " ".join(gpu_model.split()).casefold()
    for spec in catalogue():
        if spec.gpu_model.casefold() == wanted:
            return spec
    hits = [(len(pattern), spec) for spec in catalogue() for pattern in spec.match.split(";")
            if pattern and re.search(rf"(?<![a-z0-9]){re.escape(pattern.casefold())}(?![a-z0-9])", wanted)]
    if not hits:
        known = ", ".join(s.gpu_model for s in catalogue())
        raise CatalogueError(f"GPU model {gpu_model!r} is not in the catalogue (models/gpu_catalogue.csv); known: {known}")
    return max(hits, key=lambda hit: hit[0])[1]


def find(gpu_model: str | None) -> GpuSpec | None:
    """`lookup`, or None for a model the catalogue does not know (or no model at all)."""
    try:
        return lookup(gpu_model) if gpu_model else None
    except CatalogueError:
        return None
