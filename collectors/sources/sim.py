"""A live stand-in source for hosts without GPUs: the simulator's fleet (same UUIDs and models),
idle-to-busy power with noise and an energy counter that is the integral of that power.

Units as the lake: power_w W, energy_mj_total mJ, temp_c C, sm_clock_mhz MHz.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import pyarrow as pa

from joulehouse.collectors.sim.fleet import build_fleet
from joulehouse.collectors.sources.host_names import canonical_host


class SimSource:
    """`gpus` simulated GPUs on `host`; `clock` gives seconds since the epoch (UTC)."""

    dataset = "gpu_samples"

    def __init__(self, host: str, *, gpus: int = 8, seed: int = 0, clock: Callable[[], float] = time.time):
        self.host = canonical_host(host)  # as every source names this server (host_names)
        self._fleet = [g for g in build_fleet(gpus, seed, hosts=[self.host])]
        self._clock = clock
        self._rng = np.random.default_rng(seed)
        self._energy_mj = np.zeros(len(self._fleet))
        self._last_s: float | None = None

    def read(self) -> pa.Table:
        now = self._clock()
        n = len(self._fleet)
        limit_w = np.array([g.spec.default_limit_w for g in self._fleet], dtype=float)
        idle_w = np.array([g.spec.idle_w for g in self._fleet], dtype=float)
        util = np.clip(self._rng.normal(0.5, 0.3, n), 0.0, 1.0)
        power_w = idle_w + util * (limit_w - idle_w) * 0.9
        if self._last_s is not None:
            self._energy_mj += power_w * max(now - self._last_s, 0.0) * 1000.0
        self._last_s = now
        return pa.table({
            "sampled_at": pa.array([int(now * 1e6)] * n, pa.timestamp("us", tz="UTC")),
            "host": [self.host] * n,
            "gpu_index": pa.array([g.index for g in self._fleet], pa.int16()),
            "gpu_uuid": [g.uuid for g in self._fleet],
            "gpu_model": [g.model for g in self._fleet],
            "power_w": pa.array(power_w, pa.float32()),
            "energy_mj_total": pa.array(self._energy_mj.astype(np.int64)),
            "util_gpu_pct": pa.array(util * 100.0, pa.float32()),
            "power_limit_w": pa.array(limit_w, pa.float32()),
            "source": ["sim"] * n,
        })

    def close(self) -> None:
        pass
