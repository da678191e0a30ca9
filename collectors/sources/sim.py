"""A live stand-in source for hosts without GPUs: the simulator's fleet (same UUIDs and models),
load that follows the wall clock, and an energy counter that behaves like NVML's: mJ since the
simulated driver loaded, the exact integral of that power (collectors/sim/energy_counter.py). A
collector restart therefore continues the counter instead of resetting it, and a seed and a clock
give the same readings in any process.

Units as the lake: power_w W, energy_mj_total mJ, util_gpu_pct %, power_limit_w W.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable

import numpy as np
import pyarrow as pa

from joulehouse.collectors.sim.energy_counter import COUNTER_EPOCH, COUNTER_EPOCH_S, LiveGpuLoad
from joulehouse.collectors.sim.fleet import build_fleet
from joulehouse.collectors.sources.base import SourceError
from joulehouse.collectors.sources.host_names import canonical_host


class SimSource:
    """`gpus` simulated GPUs on `host`; `clock` gives seconds since the epoch (UTC)."""

    dataset = "gpu_samples"

    def __init__(self, host: str, *, gpus: int = 8, seed: int = 0, clock: Callable[[], float] = time.time):
        self.host = canonical_host(host)  # as every source names this server (host_names)
        self._fleet = build_fleet(gpus, seed, hosts=[self.host])
        self._load = LiveGpuLoad(self._fleet, seed)
        self._clock = clock
        self._counter_mj: np.ndarray | None = None

    def read(self) -> pa.Table:
        now = self._clock()
        since_epoch_s = now - COUNTER_EPOCH_S
        if since_epoch_s < 0:
            at = dt.datetime.fromtimestamp(now, dt.timezone.utc).isoformat()
            raise SourceError(f"sim: the clock reads {at}, before the simulated driver loaded "
                              f"({COUNTER_EPOCH} 00:00 UTC, where its energy counters start)")
        n = len(self._fleet)
        util = self._load.utilisation(since_epoch_s)
        power_w = self._load.power_w(since_epoch_s)
        counter_mj = self._load.energy_mj_total(since_epoch_s)
        # A wall clock stepped back (NTP) must not take the counter with it: a driver's never falls.
        self._counter_mj = counter_mj if self._counter_mj is None else np.maximum(self._counter_mj, counter_mj)
        return pa.table({
            "sampled_at": pa.array([int(now * 1e6)] * n, pa.timestamp("us", tz="UTC")),
            "host": [self.host] * n,
            "gpu_index": pa.array([g.index for g in self._fleet], pa.int16()),
            "gpu_uuid": [g.uuid for g in self._fleet],
            "gpu_model": [g.model for g in self._fleet],
            "power_w": pa.array(power_w, pa.float32()),
            "energy_mj_total": pa.array(self._counter_mj),
            "util_gpu_pct": pa.array(util * 100.0, pa.float32()),
            "power_limit_w": pa.array(self._load.limit_w, pa.float32()),
            "source": ["sim"] * n,
        })

    def close(self) -> None:
        pass
