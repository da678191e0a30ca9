"""Per-GPU-model figures of the simulated fleet, and the ground truth of its power model.

Figures from public sources (../shared/data/README.md, "Figures from public sources"): NVML power
limits (default/min/max W), idle draw and maximum SM clock. The rest (memory clock, thermal
resistance and time constant, power coefficients) are plausible values chosen so the simulated
GPUs idle and peak where the real ones do.

The exact power model every simulated GPU follows (W):

    P = static_w * exp(leakage_per_c * (T - 25))            leakage, rises with temperature T (C)
      + dyn_w * sm_active_ratio * (sm_clock_mhz / f_max_mhz) ** alpha    dynamic, V scales with f
      + mem_w * dram_active_ratio                           memory
      + pcie_w_per_gbps * (pcie_tx + pcie_rx bytes/s) / 1e9 PCIe

capped as P_actual = min(P, power_limit_w) by lowering the SM clock (see physics.py). In the
terms of models/ (P = static_w + temp_w_per_c*(T-25) + dyn_w*act*(f/fmax)^alpha + mem_w*dram
+ pcie_w_per_gbps*pcie) the truth is: static_w, temp_w_per_c = static_w * leakage_per_c (the
slope at 25 C), alpha (dyn_freq_exponent, per model), dyn_w, mem_w, pcie_w_per_gbps; static power
rises 100*(exp(10*leakage_per_c) - 1) % per 10 C.

alpha is not the textbook 3 (what the fit assumed before it was fitted): it is what the measured
A100 clock sweeps of ../shared/data/sweeps give the power fit's own form (P = c + k (f/f_max)^alpha,
models/clock_exponent.py, alpha on a 0.05 grid over 855-1410 MHz): 4.40 for the GPT-3 175B
Perseus stage profile, 4.85 for BLOOM. Voltage rises with the clock only above ~1.1 GHz, so the
top of the range is steeper than f^3. No H100 or H200 sweep is in shared/: the H100 borrows
BLOOM's 4.85 and the H200 the two files' mean, 4.6, so each model differs and none is 3.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

# NVML nvmlClocksEventReason* bits (nvml.h).
CLOCK_EVENT_GPU_IDLE = 0x1
CLOCK_EVENT_APPLICATIONS_CLOCKS_SETTING = 0x2
CLOCK_EVENT_SW_POWER_CAP = 0x4

# The A100 GPT-3 175B clock sweep's alpha (see the module docstring); the default of PowerTruth.
DYN_FREQ_EXPONENT = 4.4
PSTATE_BUSY = 0
PSTATE_IDLE = 8
# Temperature the static term is referenced to, C.
REFERENCE_TEMP_C = 25.0


@dataclass(frozen=True)
class PowerTruth:
    """The true power coefficients of one GPU model (W; see the module docstring for the form)."""

    static_w: float
    leakage_per_c: float
    dyn_w: float
    mem_w: float
    pcie_w_per_gbps: float
    dyn_freq_exponent: float = DYN_FREQ_EXPONENT

    @property
    def temp_w_per_c(self) -> float:
        """Slope of static power at 25 C, W/C (what a linear fit near 25 C recovers)."""
        return self.static_w * self.leakage_per_c

    @property
    def static_pct_per_10c(self) -> float:
        """Rise of static power per 10 C, % of static power (exact, the same at any temperature)."""
        return 100.0 * (math.exp(10.0 * self.leakage_per_c) - 1.0)

    def static_power_w(self, temp_c: np.ndarray | float) -> np.ndarray | float:
        """Leakage power at chip temperature `temp_c` (C), W."""
        return self.static_w * np.exp(self.leakage_per_c * (np.asarray(temp_c) - REFERENCE_TEMP_C))

    def linear_static_fit(self, temps_c: np.ndarray) -> tuple[float, float]:
        """(intercept W, slope W/C) of the least-squares line through the exact static term over
        the temperatures `temps_c`: what a linear-in-T fit of these samples should find."""
        t = np.asarray(temps_c, dtype=float) - REFERENCE_TEMP_C
        slope, intercept = np.polyfit(t, self.static_power_w(t + REFERENCE_TEMP_C), 1)
        return float(intercept), float(slope)

    def as_dict(self) -> dict[str, float]:
        return {
            "static_w": self.static_w,
            "leakage_per_c": self.leakage_per_c,
            "temp_w_per_c": self.temp_w_per_c,
            "static_pct_per_10c": self.static_pct_per_10c,
            "dyn_w": self.dyn_w,
            "dyn_freq_exponent": self.dyn_freq_exponent,
            "mem_w": self.mem_w,
            "pcie_w_per_gbps": self.pcie_w_per_gbps,
        }


@dataclass(frozen=True)
class GpuModelSpec:
    """One GPU model: NVML name, limits (W), clocks (MHz), thermal figures, power truth."""

    nvml_name: str
    short_name: str
    default_limit_w: float
    min_limit_w: float
    max_limit_w: float
    tdp_w: float
    idle_w: float
    f_max_mhz: int
    f_idle_mhz: int
    mem_clock_mhz: int
    memory_mib: int
    # Chip temperature rise per watt above inlet air (C/W) and first-order time constant (s).
    theta_c_per_w: float
    thermal_tau_s: float
    # Dense BF16 tensor throughput at f_max, FLOP/s (for jobs' flops_total).
    peak_flops_per_s: float
    # Training samples per second of the reference job at f_max, relative to the A100.
    relative_speed: float
    power: PowerTruth
    purchase_price_usd: float
    embodied_kgco2e: float
    purchased_on: str


def _leakage(pct_per_10c: float) -> float:
    return math.log(1.0 + pct_per_10c / 100.0) / 10.0


A100 = GpuModelSpec(
    nvml_name="NVIDIA A100-SXM4-80GB", short_name="a100", default_limit_w=400.0, min_limit_w=100.0,
    max_limit_w=400.0, tdp_w=400.0, idle_w=52.0, f_max_mhz=1410, f_idle_mhz=210, mem_clock_mhz=1593,
    memory_mib=81920, theta_c_per_w=0.105, thermal_tau_s=45.0, peak_flops_per_s=312e12, relative_speed=1.0,
    # static 48 W at 25 C -> ~52 W at an idle 33 C; +10 %/10 C.
    power=PowerTruth(static_w=48.0, leakage_per_c=_leakage(10.0), dyn_w=310.0, mem_w=60.0, pcie_w_per_gbps=0.8),
    purchase_price_usd=15000.0, embodied_kgco2e=150.0, purchased_on="2022-03-15",
)
H100 = GpuModelSpec(
    nvml_name="NVIDIA H100 80GB HBM3", short_name="h100", default_limit_w=700.0, min_limit_w=200.0,
    max_limit_w=700.0, tdp_w=700.0, idle_w=80.0, f_max_mhz=1980, f_idle_mhz=345, mem_clock_mhz=2619,
    memory_mib=81559, theta_c_per_w=0.075, thermal_tau_s=60.0, peak_flops_per_s=989e12, relative_speed=2.6,
    # static 72 W at 25 C -> ~80 W at an idle 34 C; +11 %/10 C.
    power=PowerTruth(static_w=72.0, leakage_per_c=_leakage(11.0), dyn_w=520.0, mem_w=110.0, pcie_w_per_gbps=0.9,
                     dyn_freq_exponent=4.85),
    purchase_price_usd=30000.0, embodied_kgco2e=170.0, purchased_on="2023-09-01",
)
H200 = GpuModelSpec(
    nvml_name="NVIDIA H200", short_name="h200", default_limit_w=700.0, min_limit_w=200.0,
    max_limit_w=700.0, tdp_w=700.0, idle_w=75.0, f_max_mhz=1980, f_idle_mhz=345, mem_clock_mhz=3201,
    memory_mib=143771, theta_c_per_w=0.07, thermal_tau_s=70.0, peak_flops_per_s=989e12, relative_speed=2.9,
    # static 69 W at 25 C -> ~75 W at an idle 34 C; +9 %/10 C.
    power=PowerTruth(static_w=69.0, leakage_per_c=_leakage(9.0), dyn_w=500.0, mem_w=140.0, pcie_w_per_gbps=0.9,
                     dyn_freq_exponent=4.6),
    purchase_price_usd=35000.0, embodied_kgco2e=190.0, purchased_on="2024-11-01",
)

SPECS: dict[str, GpuModelSpec] = {s.nvml_name: s for s in (A100, H100, H200)}
# Which model each host of the demo fleet carries, in host order (repeats past four hosts).
HOST_MODEL_CYCLE: tuple[GpuModelSpec, ...] = (A100, H100, H100, H200)

TEAMS_USERS: dict[str, tuple[str, ...]] = {
    "nlp": ("alice", "bob", "chen"),
    "vision": ("dana", "emeka"),
    "search": ("farah", "goran"),
    "platform": ("svc-inference", "hiro"),
}

SITE = "site-a"
REGION = "FR"
GPU_LIFETIME_YEARS = 5.0
