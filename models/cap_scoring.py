"""A GPU's day as a mix of activity bins, and every candidate setting scored on that mix at once.

The recommender (models.recommend) scores each power limit and each locked SM clock on the day's
mix of activity (the tenths of the busy samples), not on the mean, because a cap bites only in the
heavy phases. Scoring one (setting, bin) pair at a time through models.caps cost ~50 model
evaluations each (the clock under a limit is found by bisection) and made the recommender the
slowest step of the day; here the same arithmetic runs on (settings x bins) arrays: the same
formulas (terms summed in another order), and the clock under a limit found by safeguarded Newton
steps (a handful, not 50 bisections) to the same root, so the results are those of models.caps to
~1e-12 (tests/models/test_cap_scoring.py checks them against it).

Units: power W, clock as a ratio of f_max, time as a ratio of the uncapped run time, slowdown %.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

from joulehouse.models.caps import MIN_CLOCK_RATIO, WorkloadProfile
from joulehouse.models.coefficients import PowerCoefficients

# The clock under a limit: Newton steps until they move the clock by less than this (a ratio of
# f_max; models.caps' 50 bisections end within 1e-15 of the same root), at most NEWTON_MAX_STEPS.
CLOCK_TOLERANCE = 1e-14
NEWTON_MAX_STEPS = 100

Bins = list[tuple[WorkloadProfile, float]]


def activity_bins(row: dict, profile: WorkloadProfile, f_max_mhz: float | None) -> Bins:
    """(profile, share of busy time) for each tenth of the day's busy samples by activity, so a
    cap, which bites only in heavy phases, is scored on the mix the GPU really ran; the mean alone
    without tenths. Memory, PCIe and temperature are each tenth's own (row["memory_deciles"],
    ["pcie_gbps_deciles"], ["temp_c_deciles"]), the profile's busy mean where a tenth read none.
    Where an application locked the SM clocks (clock event reason 0x2) a tenth splits into its
    locked part, at the locked clock (a cap above that clock's power does nothing there), and the
    rest at f_max."""
    deciles = row.get("activity_deciles")
    if not deciles or profile.activity_ratio <= 0:
        return [(profile, 1.0)]
    # Rescaled so the bins' mean is the measured mean activity.
    scale = profile.activity_ratio / float(np.mean(deciles))
    shares = row.get("locked_share_deciles") or [0.0] * len(deciles)
    clocks = row.get("locked_clock_mhz_deciles") or [None] * len(deciles)
    # A tenth's own memory activity, not the day's: what a cap costs follows each phase's bottleneck,
    # and at the busy mean (0.45) an H200's memory-bound tenths (SM 0.6, DRAM 0.75) read as
    # compute-bound, slowed as 1/clock: 350 W was promised 7.8% for 2.9% slower where the GPU's
    # samples, scored one by one, give 13.0% for 1.7% (the simulator's truth: 12.6% for 2.1%).
    sides = [[profile_value if v is None else float(v)
              for v in (row.get(column) or [None] * len(deciles))]
             for column, profile_value in (("memory_deciles", profile.memory_ratio),
                                           ("pcie_gbps_deciles", profile.pcie_gbps),
                                           ("temp_c_deciles", profile.temp_c))]
    out = []
    for q, share, clock_mhz, memory, pcie_gbps, temp_c in zip(deciles, shares, clocks, *sides):
        b = replace(profile, activity_ratio=min(1.0, max(1e-3, float(q) * scale)), memory_ratio=memory,
                    pcie_gbps=pcie_gbps, temp_c=temp_c)
        share = float(share or 0.0) if clock_mhz is not None and f_max_mhz else 0.0
        if share > 0:
            out.append((replace(b, clock_ratio=min(1.0, float(clock_mhz) / f_max_mhz)), share / len(deciles)))
        if share < 1:
            out.append((b, (1 - share) / len(deciles)))
    return out


@dataclass(frozen=True)
class MixSetting:
    """One setting scored on the activity mix: mean power W over the stretched run, slowdown %
    of the whole mix and of its heavier half (the bound applies there), whether a cap binds, and
    the power of its heaviest bin W (what the GPU adds to the site's peak demand)."""

    power_w: float
    slowdown_pct: float
    heavy_slowdown_pct: float
    binds: bool
    peak_power_w: float = float("nan")


def heavier_half(bins: Bins, *, free_only: bool = True) -> np.ndarray:
    """Indices of the bins that make the heavier half of the busy time: bins in activity order,
    from the middle of the weight on. Bins an application locked slow less under a cap, but the
    bound must hold for the jobs that run free (a lock may be gone tomorrow): with `free_only`
    they alone decide it where there are any. The bin that straddles the middle belongs to the
    heavier half, so the heaviest bin always does (a lone free bin with most of the free weight
    would otherwise leave the half empty)."""
    weights = np.array([w for _, w in bins])
    free = [i for i, (b, _) in enumerate(bins) if b.clock_ratio >= 1.0 or not free_only] or list(range(len(bins)))
    order = np.array(sorted(free, key=lambda i: bins[i][0].activity_ratio))
    return order[np.cumsum(weights[order]) > 0.5 * weights[order].sum() + 1e-9]


def score_matrix(bins: Bins, power_w: np.ndarray, time_ratio: np.ndarray, binds: np.ndarray) -> list[MixSetting]:
    """MixSetting per row of (settings x bins) arrays: power W, time ratio and whether a cap binds
    for each bin under each setting; energy and time are weighted by the bins' shares."""
    weights = np.array([w for _, w in bins])
    energy = (power_w * time_ratio * weights).sum(axis=1) / weights.sum()
    mean_time = (time_ratio * weights).sum(axis=1) / weights.sum()
    # The bound holds for the free jobs' heavier half, and for the heavier half of all the work: a
    # clock lock below the clock an application already locked the heavy tenths at slows them most
    # (0.9 -> 0.6 of f_max: 50%), and judged on the light free tenths alone a throughput GPU got a
    # setting 28.6% slower than its run for a 10% bound
    heavy_time = np.maximum(*((time_ratio[:, heavy] * weights[heavy]).sum(axis=1) / weights[heavy].sum()
                              for heavy in (heavier_half(bins), heavier_half(bins, free_only=False))))
    any_binds = binds.any(axis=1)
    peak = np.where(weights > 0, power_w, -np.inf).max(axis=1)
    return [MixSetting(power_w=float(e / t), slowdown_pct=float(100 * (t - 1)), heavy_slowdown_pct=float(100 * (h - 1)),
                       binds=bool(b), peak_power_w=float(p)) for e, t, h, b, p in zip(energy, mean_time, heavy_time, any_binds, peak)]


def relative_to(setting: MixSetting, base: MixSetting) -> MixSetting:
    """`setting` as a change from `base`, the run without it: power and peak as they are, the
    slowdowns (whole mix and heavier half) as its run time over base's. Both are weighted sums over
    the same bins, so the ratio is the stretch of the same work."""
    def stretch_pct(pct: float, base_pct: float) -> float:
        return 100.0 * ((1 + pct / 100) / (1 + base_pct / 100) - 1)
    return replace(setting, slowdown_pct=stretch_pct(setting.slowdown_pct, base.slowdown_pct),
                   heavy_slowdown_pct=stretch_pct(setting.heavy_slowdown_pct, base.heavy_slowdown_pct))


def score(bins: Bins, power_and_time: Callable[[WorkloadProfile], tuple[float, float, bool]]) -> MixSetting:
    """One setting, given as a function of a bin returning (power W, time ratio, cap binds)."""
    points = [power_and_time(b) for b, _ in bins]
    return score_matrix(bins, np.array([[p for p, _, _ in points]]), np.array([[t for _, t, _ in points]]),
                        np.array([[b for _, _, b in points]]))[0]


class _MixArrays:
    """The bins' features as arrays (one entry per bin), and models.caps' formulas over them, with
    the parts that do not depend on the clock computed once."""

    def __init__(self, coef: PowerCoefficients, bins: Bins):
        activity = np.array([b.activity_ratio for b, _ in bins])
        memory = np.array([b.memory_ratio for b, _ in bins])
        pcie_gbps = np.array([b.pcie_gbps for b, _ in bins])
        pcie_ratio = np.minimum(pcie_gbps / np.array([b.pcie_link_gbps for b, _ in bins]), 1.0)
        self.clock = np.array([b.clock_ratio for b, _ in bins])
        self.sm_work = activity * self.clock  # models.caps.sm_work_at_f_max
        self.memory_or_pcie = np.maximum(memory, pcie_ratio)
        busiest = np.maximum(self.sm_work, self.memory_or_pcie)
        self.idle = busiest <= 0  # time_ratio is 1 where nothing is busy
        self.busiest = np.where(self.idle, 1.0, busiest)
        self.alpha = 1.0 if coef.dyn_freq_exponent is None else coef.dyn_freq_exponent
        # coef.predict_power_w split into its constant part and the clock-dependent ones.
        temp_c = np.array([b.temp_c for b, _ in bins])
        self.static_w = coef.predict_power_w(temp_c=temp_c, activity_ratio=0.0)
        self.dyn_w = coef.dyn_w * np.power(activity, coef.activity_exponent)
        # DRAM and PCIe power as measured at the bin's own clock, times the stretch from f_max to
        # there: divided by the stretch at s it thins from the measured clock, as models.caps does.
        self.thinning_w = (coef.mem_w * memory + coef.pcie_w_per_gbps * pcie_gbps) * self.time_ratio(self.clock)

    def time_ratio(self, clock_ratio: np.ndarray) -> np.ndarray:
        """models.caps.time_ratio: run time at clock ratio s over run time at f_max (roofline)."""
        slowest = np.maximum(self.sm_work / clock_ratio, self.memory_or_pcie)
        return np.where(self.idle, 1.0, slowest / self.busiest)

    def power_w(self, clock_ratio: np.ndarray) -> np.ndarray:
        """models.caps.power_at_clock_w: model power W; DRAM and PCIe thin out as the run stretches
        from the bin's own clock."""
        return self.static_w + self.dyn_w * np.power(clock_ratio, self.alpha) + self.thinning_w / self.time_ratio(clock_ratio)

    def power_slope_w(self, clock_ratio: np.ndarray) -> np.ndarray:
        """d power_w / d clock ratio (W per unit of f_max): the dynamic term, plus the DRAM/PCIe term
        while SM time sets the run time (it thins out as 1/stretch, and stretch goes as 1/s)."""
        slope = self.dyn_w * self.alpha * np.power(clock_ratio, self.alpha - 1.0)
        sm_bound = ~self.idle & (self.sm_work / clock_ratio > self.memory_or_pcie)
        return slope + np.where(sm_bound, self.thinning_w * self.busiest / np.where(self.sm_work > 0, self.sm_work, 1.0), 0.0)

    def clock_under_limit(self, limits_w: np.ndarray) -> np.ndarray:
        """models.caps.clock_under_limit for each limit (rows) and bin (columns): 1 where the power
        at f_max fits, the floor where even the floor's does not, else the root of power = limit.
        Power rises with the clock, so Newton steps from f_max converge; a step that would leave
        the bracket known to hold the root bisects it instead (at the kink where DRAM or PCIe
        take over the run time the slope jumps)."""
        shape = (len(limits_w), len(self.sm_work))
        limit = np.broadcast_to(np.asarray(limits_w, dtype=float)[:, None], shape)
        fits_at_f_max = self.power_w(np.ones(shape)) <= limit
        at_floor = self.power_w(np.full(shape, MIN_CLOCK_RATIO)) >= limit
        lo, hi, s = np.full(shape, MIN_CLOCK_RATIO), np.ones(shape), np.ones(shape)
        done = fits_at_f_max | at_floor
        for _ in range(NEWTON_MAX_STEPS):
            excess_w = self.power_w(s) - limit
            lo, hi = np.where(excess_w <= 0, s, lo), np.where(excess_w > 0, s, hi)
            slope = self.power_slope_w(s)
            with np.errstate(divide="ignore", invalid="ignore"):
                newton = s - excess_w / slope
            step = np.where((slope > 0) & (newton >= lo) & (newton <= hi), newton, 0.5 * (lo + hi))
            done |= np.abs(step - s) < CLOCK_TOLERANCE
            s = np.where(done, s, step)
            if done.all():
                break
        return np.where(fits_at_f_max, 1.0, np.where(at_floor, MIN_CLOCK_RATIO, s))


def score_limits(coef: PowerCoefficients, bins: Bins, limits_w: np.ndarray) -> list[MixSetting]:
    """Each power limit W scored on the mix, as models.caps.outcome_under_limit scores a bin: a bin
    an application locked starts from its locked clock, and its slowdown is relative to that run."""
    mix = _MixArrays(coef, bins)
    base = np.minimum(1.0, np.maximum(mix.clock, MIN_CLOCK_RATIO))
    clock = np.minimum(mix.clock_under_limit(limits_w), base)
    ratio = mix.time_ratio(clock) / mix.time_ratio(base)
    # Through the slowdown in % and back, as the scalar path does, so both give the same bits.
    time = 1 + (100.0 * (ratio - 1.0)) / 100
    return score_matrix(bins, mix.power_w(clock), time, clock < base)


def score_clocks(coef: PowerCoefficients, bins: Bins, clock_ratios: np.ndarray,
                 limit_w: float | None = None) -> list[MixSetting]:
    """Each locked SM clock ceiling (ratio of f_max) scored on the mix; a bin an application already
    locked lower stays as it was. With `limit_w` (the power limit in force beside the lock, W), a bin
    whose power at the locked clock exceeds it runs at the clock under that limit, as the device does;
    slowdowns stay relative to the unlimited run (ratio 1, no limit)."""
    mix = _MixArrays(coef, bins)
    clock = np.minimum(np.asarray(clock_ratios, dtype=float)[:, None], mix.clock)
    if limit_w is not None:
        clock = np.minimum(clock, mix.clock_under_limit(np.array([float(limit_w)])))
    time = mix.time_ratio(clock) / mix.time_ratio(np.broadcast_to(mix.clock, clock.shape))
    return score_matrix(bins, mix.power_w(clock), time, np.zeros(clock.shape, dtype=bool))
