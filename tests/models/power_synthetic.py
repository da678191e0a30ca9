"""Synthetic gpu_samples with KNOWN power-model coefficients, for recovery tests.

Power (W) = static + temp_slope*(T-25) + dyn*act*(f/f_max)^alpha + mem*dram + pcie*GBps, times
(1 + noise); rows whose model power exceeds the limit are clipped to it with the SW power cap
bit (0x4) set, as a real cap does: a fit that kept them would bias dyn_w low.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from joulehouse.collectors.schema import conform


@dataclass(frozen=True)
class TruePower:
    static_w: float = 60.0
    temp_w_per_c: float = 0.6
    dyn_w: float = 250.0
    alpha: float = 3.0
    mem_w: float = 60.0
    pcie_w_per_gbps: float = 1.5
    f_max_mhz: int = 1410
    limit_w: float = 400.0


def synthetic_samples(*, gpu_model: str = "NVIDIA A100-SXM4-80GB", truth: TruePower = TruePower(),
                      n_gpus: int = 4, hours: float = 6.0, interval_s: float = 10.0,
                      start: dt.datetime = dt.datetime(2026, 3, 2, tzinfo=dt.timezone.utc),
                      dcgm: bool = True, noise_ratio: float = 0.02, capped_limit_w: float | None = 330.0,
                      seed: int = 0, host: str = "node-01") -> pa.Table:
    """gpu_samples rows plus `day`; `capped_limit_w` is the limit set on GPU 0 (None: no cap)."""
    rng = np.random.default_rng(seed)
    n = int(hours * 3600 / interval_s)
    tables = []
    for g in range(n_gpus):
        # Phases of ~10 minutes with their own activity, clock lock and memory intensity.
        phase = np.repeat(np.arange(n // 60 + 1), 60)[:n]
        n_phases = phase.max() + 1
        act = np.clip(rng.uniform(0.0, 1.0, n_phases)[phase] + rng.normal(0, 0.05, n), 0, 1)
        act[rng.random(n_phases)[phase] < 0.15] = 0.0  # idle phases
        clock_ratio = rng.choice([0.45, 0.6, 0.75, 0.85, 1.0], n_phases)[phase]
        dram = np.clip(act * rng.uniform(0.2, 0.9, n_phases)[phase] + rng.normal(0, 0.03, n), 0, 1)
        pcie = np.clip(rng.uniform(0, 8, n_phases)[phase] * (act > 0) + rng.normal(0, 0.2, n), 0, None)
        temp = 30 + rng.uniform(0, 45, n_phases)[phase] * (0.3 + 0.7 * act) + rng.normal(0, 1.5, n)
        power = (truth.static_w + truth.temp_w_per_c * (temp - 25)
                 + truth.dyn_w * act * clock_ratio**truth.alpha + truth.mem_w * dram
                 + truth.pcie_w_per_gbps * pcie) * (1 + rng.normal(0, noise_ratio, n))
        limit = np.full(n, truth.limit_w)
        if g == 0 and capped_limit_w is not None:
            limit[:] = capped_limit_w
        capped = power > limit
        power = np.where(capped, limit * (1 - rng.uniform(0, 0.004, n)), power)
        reasons = np.where(capped, 0x4, 0).astype(np.int64)
        t = [start + dt.timedelta(seconds=i * interval_s) for i in range(n)]
        columns = {
            "sampled_at": pa.array(t, pa.timestamp("us", tz="UTC")),
            "host": [host] * n, "gpu_index": np.full(n, g, np.int16),
            "gpu_uuid": [f"GPU-{host}-{g}-{seed}"] * n, "gpu_model": [gpu_model] * n,
            "power_w": power.astype(np.float32), "temp_c": temp.astype(np.float32),
            "sm_clock_mhz": np.round(clock_ratio * truth.f_max_mhz).astype(np.int32),
            "util_gpu_pct": (100 * np.minimum(1, act * 1.3)).astype(np.float32),
            "util_mem_pct": (100 * dram).astype(np.float32),
            "power_limit_w": limit.astype(np.float32), "clock_event_reasons": reasons,
            "source": ["synthetic"] * n,
        }
        if dcgm:
            columns |= {"sm_active_ratio": act.astype(np.float32), "dram_active_ratio": dram.astype(np.float32),
                        "pcie_tx_bytes_per_s": (pcie * 0.5e9).astype(np.int64),
                        "pcie_rx_bytes_per_s": (pcie * 0.5e9).astype(np.int64)}
        table = conform("gpu_samples", pa.table(columns))
        tables.append(table)
    table = pa.concat_tables(tables)
    days = pa.array([ts.date() for ts in table.column("sampled_at").to_pylist()], pa.date32())
    return table.append_column("day", days)


def load_samples(con, table: pa.Table, name: str = "stg_gpu_samples") -> None:
    """Create (or append to) the table `name` in DuckDB from an Arrow table."""
    con.register("_synthetic_in", table)
    exists = con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = ?", [name]).fetchone()[0]
    if exists:
        con.execute(f'INSERT INTO "{name}" BY NAME SELECT * FROM _synthetic_in')
    else:
        con.execute(f'CREATE TABLE "{name}" AS SELECT * FROM _synthetic_in')
    con.unregister("_synthetic_in")

