"""GPU power, clocks and temperature, vectorised over (GPUs x samples).

Power follows the exact form in constants.py. A power limit binds when the workload's power at
the requested clock exceeds it: the SM clock drops to the highest whole MHz whose dynamic (f^alpha)
term keeps P at or under the limit (never below the idle clock: at very low limits P can stay
above the limit, as on real GPUs). Temperature is a first-order lag toward
inlet + theta * P (time constant tau); static power uses that temperature, solved with one
fixed-point pass (temperature from a first power estimate, power from that temperature,
temperature again, final power from the final temperature), so the reported power is exactly
the model evaluated at the reported (unrounded) temperature.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from joulehouse.collectors.sim.constants import CLOCK_EVENT_SW_POWER_CAP, PowerTruth

# exp(-dt/tau * L) must stay representable: chunks of L samples with L*dt/tau <= this.
_MAX_DECAY_EXPONENT = 20.0


def first_order_lag(target: np.ndarray, tau_s: np.ndarray, interval_s: float, initial: np.ndarray) -> np.ndarray:
    """Exact discrete first-order response y[i] = a*y[i-1] + (1-a)*target[i], a = exp(-dt/tau),
    along the last axis of `target` (rows: GPUs; `tau_s` and `initial` one value per row).

    Vectorised in chunks: inside a chunk y[j] = a^(j+1) * (y_prev + (1-a) * cumsum(target*a^-(m+1))),
    which is exact; chunks are short enough that a^-L never overflows."""
    target = np.atleast_2d(target)
    tau = np.asarray(tau_s, dtype=float).reshape(-1, 1)
    a = np.exp(-interval_s / tau)
    n = target.shape[1]
    chunk = int(max(1, min(n, _MAX_DECAY_EXPONENT * tau.min() / interval_s)))
    j = np.arange(1, chunk + 1)
    grow = np.exp(j * interval_s / tau)  # a^-(j)
    decay = np.exp(-j * interval_s / tau)  # a^(j)
    out = np.empty_like(target, dtype=float)
    prev = np.asarray(initial, dtype=float).reshape(-1)
    for start in range(0, n, chunk):
        stop = min(n, start + chunk)
        m = stop - start
        acc = np.cumsum(target[:, start:stop] * grow[:, :m], axis=1)
        block = decay[:, :m] * (prev[:, None] + (1.0 - a) * acc)
        out[:, start:stop] = block
        prev = block[:, -1]
    return out


@dataclass
class PowerState:
    """Result of the physics for a block of GPUs x samples (float64 W, C, MHz)."""

    power_w: np.ndarray
    temp_c: np.ndarray
    sm_clock_mhz: np.ndarray  # int32
    power_capped: np.ndarray  # bool: the SW power cap pulled the clock down


def power_at(truth: PowerTruth, temp_c, act, dram, pcie_gbps, clock_ratio_target, limit_w, f_max_mhz: int,
             f_min_mhz: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(power W, SM clock MHz, capped) at temperature `temp_c`, under `limit_w`."""
    other = truth.static_power_w(temp_c) + truth.mem_w * dram + truth.pcie_w_per_gbps * pcie_gbps
    dyn_full = truth.dyn_w * act
    wanted = other + dyn_full * clock_ratio_target**truth.dyn_freq_exponent
    capped = wanted > limit_w
    budget = np.maximum(limit_w - other, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio_cap = np.power(np.where(dyn_full > 0, budget / np.where(dyn_full > 0, dyn_full, 1.0), 1.0),
                             1.0 / truth.dyn_freq_exponent)
    ratio = np.where(capped, np.minimum(ratio_cap, clock_ratio_target), clock_ratio_target)
    clock = np.maximum(np.floor(ratio * f_max_mhz + 1e-9), f_min_mhz).astype(np.int32)
    power = other + dyn_full * (clock / f_max_mhz) ** truth.dyn_freq_exponent
    return power, clock, capped


def simulate_block(truth: PowerTruth, *, act, dram, pcie_gbps, clock_ratio_target, limit_w, inlet_c, theta_c_per_w,
                   tau_s, interval_s: float, f_max_mhz: int, f_min_mhz: int) -> PowerState:
    """Power, temperature and clocks of GPUs (rows) over samples (columns). `limit_w`,
    `theta_c_per_w` and `tau_s` are one value per GPU; the rest are GPUs x samples."""
    limit = np.asarray(limit_w, dtype=float).reshape(-1, 1)
    theta = np.asarray(theta_c_per_w, dtype=float).reshape(-1, 1)
    args = (act, dram, pcie_gbps, clock_ratio_target, limit, f_max_mhz, f_min_mhz)
    # Start in thermal equilibrium with the first sample (a few fixed-point steps).
    first = tuple(x[:, :1] if np.ndim(x) == 2 else x for x in args)
    t0 = inlet_c[:, :1] + 30.0
    for _ in range(4):
        p0, _, _ = power_at(truth, t0, *first)
        t0 = inlet_c[:, :1] + theta * p0
    rough, _, _ = power_at(truth, inlet_c + theta * truth.static_w * 2.0 + 20.0, *args)
    temp = first_order_lag(inlet_c + theta * rough, tau_s, interval_s, t0[:, 0])
    power, _, _ = power_at(truth, temp, *args)
    temp = first_order_lag(inlet_c + theta * power, tau_s, interval_s, t0[:, 0])
    power, clock, capped = power_at(truth, temp, *args)
    return PowerState(power_w=power, temp_c=temp, sm_clock_mhz=clock, power_capped=capped)


def energy_counter_mj(power_w: np.ndarray, interval_s: float, start_mj: np.ndarray) -> np.ndarray:
    """NVML-style total-energy counter (int64 mJ): `start_mj` (the value before the first sample,
    one per GPU) plus the integral of power, each sample adding its power x interval."""
    cum = np.cumsum(power_w * (interval_s * 1000.0), axis=1) + np.asarray(start_mj, dtype=float).reshape(-1, 1)
    return np.floor(cum).astype(np.int64)


def relative_speed(clock_ratio: np.ndarray, compute_bound: np.ndarray) -> np.ndarray:
    """Work rate at clock ratio f/f_max relative to f_max (1.0): the compute-bound share of run
    time stretches as 1/ratio, the rest (memory, I/O) does not."""
    return 1.0 / (compute_bound / np.maximum(clock_ratio, 1e-3) + (1.0 - compute_bound))


__all__ = ["CLOCK_EVENT_SW_POWER_CAP", "PowerState", "energy_counter_mj", "first_order_lag", "power_at",
           "relative_speed", "simulate_block"]
