"""The simulated GPUs' energy counter (NVML's nvmlDeviceGetTotalEnergyConsumption: mJ since the
driver loaded): where it starts, and the live sim source's load with its counter in closed form.

Every simulated driver loaded long before COUNTER_EPOCH; `driver_load_offset_mj` is what a GPU's
counter held then (the batch simulator starts a GPU that has no earlier day from it).

The live source (collectors/sources/sim.py) cannot add up its readings as the batch simulator
does: a real counter does not restart with the process that reads it, and one that restarted at
0 with each collector read as a driver reload in the warehouse (the energy across the restart
counted from the reset's value). So `LiveGpuLoad` makes utilisation a function of wall time,
0.5 plus a few sinusoids (periods from seconds to an hour, phases and periods per GPU and seed),
whose integral has a closed form: the counter at any time is the offset plus the exact integral
of power since COUNTER_EPOCH, the same in every process, never falling while time moves on.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import numpy as np

from joulehouse.collectors.sim.fleet import STREAM_COUNTER, STREAM_LIVE_LOAD, SimGpu, rng_for, stable_key

COUNTER_EPOCH = dt.date(2024, 1, 1)
COUNTER_EPOCH_S = dt.datetime(COUNTER_EPOCH.year, COUNTER_EPOCH.month, COUNTER_EPOCH.day,
                              tzinfo=dt.timezone.utc).timestamp()
# (shortest period s, longest period s, amplitude) of the utilisation's sinusoids. The amplitudes
# add up to 0.5, so utilisation stays within [0, 1] unclipped: clipping has no closed-form integral.
_WAVES = ((2.0, 7.0, 0.12), (10.0, 60.0, 0.12), (120.0, 600.0, 0.13), (900.0, 3600.0, 0.13))
# Share of (limit - idle) a fully utilised GPU draws.
_BUSY_SHARE = 0.9


def driver_load_offset_mj(seed: int, gpu_uuid: str) -> int:
    """The energy (mJ) a simulated GPU's counter held at COUNTER_EPOCH."""
    return int(rng_for(seed, stable_key(gpu_uuid), STREAM_COUNTER).integers(10**9, 2 * 10**11))


class LiveGpuLoad:
    """Utilisation (0..1), power (W) and energy counter (mJ) of `fleet` at `since_epoch_s`
    (seconds since COUNTER_EPOCH, UTC); one value per GPU, in the fleet's order."""

    def __init__(self, fleet: Sequence[SimGpu], seed: int):
        self.idle_w = np.array([g.spec.idle_w for g in fleet], dtype=float)
        self.limit_w = np.array([g.spec.default_limit_w for g in fleet], dtype=float)
        self._busy_w = (self.limit_w - self.idle_w) * _BUSY_SHARE
        self._amplitude = np.array([amplitude for *_, amplitude in _WAVES])
        omega, phase = [], []
        for g in fleet:
            rng = rng_for(seed, stable_key(g.uuid), STREAM_LIVE_LOAD)
            periods_s = [np.exp(rng.uniform(np.log(low), np.log(high))) for low, high, _ in _WAVES]
            omega.append(2.0 * np.pi / np.array(periods_s))
            phase.append(rng.uniform(0.0, 2.0 * np.pi, len(_WAVES)))
        self._omega, self._phase = np.array(omega), np.array(phase)
        self._offset_mj = np.array([driver_load_offset_mj(seed, g.uuid) for g in fleet], dtype=float)

    def utilisation(self, since_epoch_s: float) -> np.ndarray:
        return 0.5 + np.sum(self._amplitude * np.sin(self._omega * since_epoch_s + self._phase), axis=1)

    def power_w(self, since_epoch_s: float) -> np.ndarray:
        return self.idle_w + self.utilisation(since_epoch_s) * self._busy_w

    def energy_mj_total(self, since_epoch_s: float) -> np.ndarray:
        """The counter (int64 mJ): the offset plus the integral of power_w from 0 to `since_epoch_s`."""
        waves_s = np.sum(self._amplitude * (np.cos(self._phase) - np.cos(self._omega * since_epoch_s + self._phase))
                         / self._omega, axis=1)
        energy_j = (self.idle_w + 0.5 * self._busy_w) * since_epoch_s + self._busy_w * waves_s
        return np.floor(self._offset_mj + energy_j * 1000.0).astype(np.int64)
