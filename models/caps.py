"""Performance under a power cap: the clock a GPU reaches, the slowdown, the energy-vs-limit curve.

The cap model (ARCHITECTURE.md, "The models the numbers rest on"): P_actual = min(P_workload, P_limit). Under a cap the GPU lowers
its SM clock until the fitted model's power fits the limit:
    P(s) = static + aT*(T-25) + dyn*act*s^alpha + mem*dram + pcie*GBps,  s = f/f_max,
solved for s in [s_min, 1]. The slowdown follows the job's bottleneck, a roofline view: runtime
is set by the busiest resource, SM work stretches by 1/s while DRAM and PCIe work do not, so
    time ratio = max(sm/s, dram, pcie_util) / max(sm, dram, pcie_util),
with sm the SM busy share the work would have at f_max (a profile read at clock c: activity x c).
A compute-bound job slows as 1/s; a memory- or communication-bound one not until SM time catches
up. Energy per unit of work = P(s) x time ratio. A profile's DRAM and PCIe activity were measured
at its own clock c (f_max, or an application's lock): the same traffic spread over the run as it
stretches from there, mem(s) = mem x T(c) / T(s), so P(c) is the fitted model's power of what was
measured, and DRAM and PCIe energy per unit of work is the same at every clock.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from joulehouse.models.coefficients import PowerCoefficients

# Full-duplex PCIe Gen4 x16 is ~64 GB/s (tx + rx): the link of a GPU model the catalogue does not
# know. A known model's is its own (models.bandwidth.pcie_link_gbps: an H100's Gen5 x16 is 126 GB/s).
PCIE_LINK_GBPS = 64.0
# Lowest SM clock as a share of f_max that caps drive GPUs to (A100: 210/1410 MHz is the floor;
# under power capping drivers rarely go below ~30%).
MIN_CLOCK_RATIO = 0.3


@dataclass(frozen=True)
class WorkloadProfile:
    """What a job does at the clock it runs at without a cap: activity ratios 0..1, PCIe GB/s, chip
    temperature C, that clock as a share of f_max (1, or below where an application locked it), and
    the GPU's PCIe link GB/s (tx + rx), against which its traffic is a utilisation."""

    activity_ratio: float
    memory_ratio: float = 0.0
    pcie_gbps: float = 0.0
    temp_c: float = 60.0
    clock_ratio: float = 1.0
    pcie_link_gbps: float = PCIE_LINK_GBPS

    @property
    def pcie_ratio(self) -> float:
        return min(self.pcie_gbps / self.pcie_link_gbps, 1.0)

    @property
    def bottleneck(self) -> str:
        """compute-bound | memory-bound | communication-bound (the busiest resource)."""
        shares = {"compute-bound": self.activity_ratio, "memory-bound": self.memory_ratio,
                  "communication-bound": self.pcie_ratio}
        return max(shares, key=shares.get)


@dataclass(frozen=True)
class CapOutcome:
    """One power limit's effect: clock ratio s, power W, slowdown %, energy per work vs uncapped %."""

    power_limit_w: float
    clock_ratio: float
    power_w: float
    slowdown_pct: float
    energy_ratio: float  # energy per unit of work / uncapped energy per unit of work
    cap_binds: bool


def sm_work_at_f_max(profile: WorkloadProfile) -> float:
    """The SM busy time the profile's work would take at f_max, as a share of its run at its own
    clock c: activity x c. Read as if measured at f_max, a memory-bound job locked at 0.7 (SM 0.6,
    DRAM 0.75) counted as compute-bound, and 0.7 -> 0.5 read as 40% slower for the roofline's 12%."""
    return profile.activity_ratio * profile.clock_ratio


def time_ratio(profile: WorkloadProfile, clock_ratio: float) -> float:
    """Runtime at clock ratio s over runtime at f_max (>= 1), from the roofline bottleneck."""
    sm = sm_work_at_f_max(profile)
    busiest = max(sm, profile.memory_ratio, profile.pcie_ratio)
    if busiest <= 0:
        return 1.0
    return max(sm / clock_ratio, profile.memory_ratio, profile.pcie_ratio) / busiest


def power_at_clock_w(coef: PowerCoefficients, profile: WorkloadProfile, clock_ratio: float) -> float:
    """Model power (W) at clock ratio s; DRAM and PCIe activity thin out as the run stretches from
    the clock they were measured at (the profile's)."""
    # Stretched from the measured clock, not from f_max: thinned from f_max, a compute-bound job
    # locked at 0.6 of f_max kept only 0.6 of its measured DRAM and PCIe power at its own clock
    # (an A100 at activity 0.9, DRAM 0.5, 10 GB/s: 159.6 W for the 177.6 W its readings give).
    stretch = time_ratio(profile, clock_ratio) / time_ratio(profile, profile.clock_ratio)
    return float(coef.predict_power_w(temp_c=profile.temp_c, activity_ratio=profile.activity_ratio,
                                      clock_ratio=clock_ratio, memory_ratio=profile.memory_ratio / stretch,
                                      pcie_gbps=profile.pcie_gbps / stretch))


def clock_under_limit(coef: PowerCoefficients, profile: WorkloadProfile, power_limit_w: float,
                      min_clock_ratio: float = MIN_CLOCK_RATIO) -> float:
    """Highest clock ratio s in [min_clock_ratio, 1] whose model power fits under the limit."""
    if power_at_clock_w(coef, profile, 1.0) <= power_limit_w:
        return 1.0
    lo, hi = min_clock_ratio, 1.0
    if power_at_clock_w(coef, profile, lo) >= power_limit_w:
        return lo  # the floor: power stays above the limit (as measured sweeps show at low limits)
    for _ in range(50):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if power_at_clock_w(coef, profile, mid) <= power_limit_w else (lo, mid)
    return lo


def outcome_under_limit(coef: PowerCoefficients, profile: WorkloadProfile, power_limit_w: float,
                        min_clock_ratio: float = MIN_CLOCK_RATIO) -> CapOutcome:
    # A job whose clocks an application already locked starts from that clock: the cap bites only
    # if its power there exceeds the limit, and the slowdown is relative to the locked run.
    base = min(1.0, max(profile.clock_ratio, min_clock_ratio))
    s = min(clock_under_limit(coef, profile, power_limit_w, min_clock_ratio), base)
    uncapped = power_at_clock_w(coef, profile, base)
    power = power_at_clock_w(coef, profile, s)
    ratio = time_ratio(profile, s) / time_ratio(profile, base)
    return CapOutcome(power_limit_w=power_limit_w, clock_ratio=s, power_w=power,
                      slowdown_pct=100.0 * (ratio - 1.0), energy_ratio=power * ratio / uncapped,
                      cap_binds=s < base)


def energy_vs_limit(coef: PowerCoefficients, profile: WorkloadProfile, limits_w: np.ndarray,
                    min_clock_ratio: float = MIN_CLOCK_RATIO) -> list[CapOutcome]:
    """The predicted energy-vs-limit curve over `limits_w` (W)."""
    return [outcome_under_limit(coef, profile, float(lim), min_clock_ratio) for lim in limits_w]


def best_limit_w(curve: list[CapOutcome], max_slowdown_pct: float | None = None) -> CapOutcome:
    """The lowest-energy point of a curve, within a slowdown bound (the highest limit always qualifies)."""
    top = max(curve, key=lambda o: o.power_limit_w)
    allowed = [o for o in curve if max_slowdown_pct is None or o.slowdown_pct <= max_slowdown_pct + 1e-9] or [top]
    return min(allowed, key=lambda o: (round(o.energy_ratio, 9), -o.power_limit_w))
