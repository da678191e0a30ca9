"""The simulated site around the GPUs: outdoor weather, server inlet air, whole-node power as a
BMC reports it (IPMI/DCMI, every 5 s) and the facility meter (per minute, with a PUE that rises
with outdoor temperature).

Node power = (sum of GPU power + CPUs + fans + memory/NICs/NVSwitch) / PSU efficiency; fans spin
up with exhaust temperature and draw power as rpm^3. Facility power = IT power x PUE, PUE =
1.10 + 0.008 per C of outdoor temperature above 5 C (free cooling below), plus meter noise.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass

import numpy as np

from joulehouse.collectors.sim.fleet import STREAM_HOST, STREAM_SITE, rng_for, stable_key

NODE_INTERVAL_S = 5.0
FACILITY_INTERVAL_S = 60.0
CPU_IDLE_W = 180.0
CPU_RANGE_W = 420.0
NODE_BASE_W = 180.0  # DIMMs, NICs, NVSwitch, drives
FANS = 10
FAN_MAX_W = 35.0
FAN_MAX_RPM = 14_000.0
PSU_CAPACITY_W = 12_000.0
PUE_FREE_COOLING = 1.10
PUE_PER_C = 0.008
PUE_FREE_COOLING_BELOW_C = 5.0


def outdoor_temp_c(seed: int, site: str, day: dt.date, t_s: np.ndarray) -> np.ndarray:
    """Outdoor air temperature (C) at seconds `t_s` after `day`'s UTC midnight: a French-like
    seasonal mean, a random anomaly per day, a diurnal cycle (coolest 03:00, warmest 15:00)."""
    rng = rng_for(seed, stable_key(site), day.toordinal(), STREAM_SITE)
    doy = day.timetuple().tm_yday
    mean_c = 12.5 - 7.5 * math.cos(2.0 * math.pi * (doy - 20) / 365.25) + rng.normal(0.0, 2.5)
    amplitude_c = rng.uniform(3.0, 6.5)
    return mean_c + amplitude_c * np.cos(2.0 * math.pi * (np.asarray(t_s) / 3600.0 - 15.0) / 24.0)


def host_inlet_c(seed: int, host: str, day: dt.date, outdoor_c: np.ndarray, interval_s: float) -> np.ndarray:
    """Cold-aisle air at a server's inlet (C): ~23 C, a little warmer on hot afternoons."""
    offset = rng_for(seed, stable_key(host), STREAM_HOST).normal(0.0, 0.8)
    rng = rng_for(seed, stable_key(host), day.toordinal(), STREAM_HOST)
    n = outdoor_c.size
    knots = rng.normal(0.0, 0.3, size=int(n * interval_s // 900) + 2)
    wander = np.interp(np.arange(n) * interval_s / 900.0, np.arange(knots.size), knots)
    return 23.0 + offset + 0.08 * (outdoor_c - 12.0) + wander


@dataclass
class NodeTrace:
    """A server's true wall power per GPU sample (W) and its BMC readings every 5 s."""

    wall_power_w: np.ndarray
    sample_index: np.ndarray  # which GPU samples the BMC rows sit on
    power_w: np.ndarray
    sdr_power_w: np.ndarray
    inlet_temp_c: np.ndarray
    exhaust_temp_c: np.ndarray
    fan_rpm_avg: np.ndarray


def simulate_node(seed: int, host: str, day: dt.date, gpu_power_w: np.ndarray, busy: np.ndarray,
                  data_prep: np.ndarray, inlet_c: np.ndarray, interval_s: float) -> NodeTrace:
    """Whole-server power and BMC readings from its GPUs' true power (GPUs x samples), which GPUs
    are busy and which run data preparation (CPU heavy)."""
    n_gpus = gpu_power_w.shape[0]
    gpu_sum = gpu_power_w.sum(axis=0)
    cpu_util = 0.05 + 0.25 * busy.mean(axis=0) + 0.5 * data_prep.mean(axis=0)
    dc_w = gpu_sum + CPU_IDLE_W + CPU_RANGE_W * cpu_util + NODE_BASE_W + 4.0 * n_gpus
    exhaust = inlet_c + 0.0028 * dc_w
    rpm = 4500.0 + (FAN_MAX_RPM - 4500.0) * np.clip((exhaust - 32.0) / 18.0, 0.0, 1.0)
    dc_w = dc_w + FANS * FAN_MAX_W * (rpm / FAN_MAX_RPM) ** 3
    load = np.minimum(dc_w / PSU_CAPACITY_W, 1.0)
    wall_w = dc_w / (0.955 - 0.07 * (1.0 - load) ** 4)
    step = max(1, int(round(NODE_INTERVAL_S / interval_s)))
    idx = np.arange(0, gpu_sum.size, step)
    # DCMI reports the average over its sampling window (the last `step` samples).
    csum = np.concatenate([[0.0], np.cumsum(wall_w)])
    lo = np.maximum(idx + 1 - step, 0)
    window_mean = (csum[idx + 1] - csum[lo]) / (idx + 1 - lo)
    rng = rng_for(seed, stable_key(host), day.toordinal(), STREAM_SITE)
    power = np.round(window_mean + rng.normal(0.0, 3.0, idx.size))
    # The SDR's 8-bit total-power sensor: 4 W per step.
    sdr = 4.0 * np.round((wall_w[idx] + rng.normal(0.0, 4.0, idx.size)) / 4.0)
    return NodeTrace(wall_power_w=wall_w, sample_index=idx, power_w=power, sdr_power_w=sdr,
                     inlet_temp_c=np.round(inlet_c[idx]), exhaust_temp_c=np.round(exhaust[idx]),
                     fan_rpm_avg=np.round(rpm[idx] / 60.0) * 60.0)


def pue_at(outdoor_c: np.ndarray) -> np.ndarray:
    """True PUE at outdoor temperature `outdoor_c` (C): free cooling below 5 C, chillers above."""
    return PUE_FREE_COOLING + PUE_PER_C * np.maximum(np.asarray(outdoor_c) - PUE_FREE_COOLING_BELOW_C, 0.0)


@dataclass
class FacilityTrace:
    sample_index: np.ndarray
    it_power_w: np.ndarray
    facility_power_w: np.ndarray
    outdoor_temp_c: np.ndarray


def simulate_facility(seed: int, site: str, day: dt.date, it_wall_w: np.ndarray, outdoor_c: np.ndarray,
                      interval_s: float) -> FacilityTrace:
    """Per-minute facility meter readings from the servers' summed wall power (per GPU sample)."""
    step = max(1, int(round(FACILITY_INTERVAL_S / interval_s)))
    idx = np.arange(0, it_wall_w.size, step)
    minute_mean = np.add.reduceat(it_wall_w, idx) / np.diff(np.append(idx, it_wall_w.size))
    # Network and storage racks on the same IT meter.
    it_w = minute_mean * 1.06 + 400.0
    rng = rng_for(seed, stable_key(site), day.toordinal(), STREAM_SITE + 100)
    pue = pue_at(outdoor_c[idx]) + rng.normal(0.0, 0.004, idx.size)
    return FacilityTrace(sample_index=idx, it_power_w=np.round(it_w, 1), facility_power_w=np.round(it_w * pue, 1),
                         outdoor_temp_c=np.round(outdoor_c[idx], 1))
