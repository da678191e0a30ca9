"""The faults of a real fleet, added to the bench's simulated fleet-day so that the paths that cost
most are timed (issue 20, "The record"). Per host (GPU index within the host):

- every reading is NVML's (`source = 'nvml'`); GPU 0 is also seen by DCGM: a second stream of the
  same device, half a second later, its power 1% apart, the same energy counter held over two
  readings (Prometheus scraping dcgm-exporter twice per collection: every other reading repeats);
- GPU 1: the energy counter resets at 12:00 (a driver reload) and counts again from 0;
- GPU 2: no readings from 03:00 to 03:20, far longer than `warehouse.max_gap_s` (not bridged);
- GPU 3: 1% of its readings arrive twice; half of the copies are invalid (negative power), so a
  valid reading must win over its invalid duplicate;
- every GPU: 0.1% of readings broken in the ways quarantine knows (power NaN, temperature 300 C,
  utilisation 250%).
The partition is rewritten with the lake's own writer (collectors.writer.replace_partition).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from joulehouse.collectors.writer import replace_partition

DCGM_LAG_S = 0.5
RESET_AT_H, GAP_FROM_H, GAP_MINUTES = 12, 3, 20
DUPLICATE_SHARE, BROKEN_SHARE = 0.01, 0.001


def _set(table: pa.Table, name: str, values) -> pa.Table:
    i = table.schema.get_field_index(name)
    return table.set_column(i, table.schema.field(i), pa.array(values, table.schema.field(i).type))


def _faulted_host(table: pa.Table, day: dt.date, rng: np.random.Generator) -> tuple[pa.Table, dict[str, int]]:
    midnight = dt.datetime.combine(day, dt.time(), dt.timezone.utc)
    table = _set(table, "source", np.full(table.num_rows, "nvml", dtype=object))
    index = table.column("gpu_index").to_numpy()
    at = pc.cast(table.column("sampled_at"), pa.int64()).to_numpy()  # microseconds
    from_midnight_s = (at - int(midnight.timestamp() * 1_000_000)) / 1e6
    counts = {}

    counter = table.column("energy_mj_total").to_numpy(zero_copy_only=False).astype(float)
    reset = (index == 1) & (from_midnight_s >= RESET_AT_H * 3600)
    if reset.any():
        counter[reset] -= counter[reset].min()
        table = _set(table, "energy_mj_total", np.round(counter).astype(np.int64))
        counts["counter_resets"] = 1

    gap = (index == 2) & (from_midnight_s >= GAP_FROM_H * 3600) & (from_midnight_s < GAP_FROM_H * 3600 + GAP_MINUTES * 60)
    counts["gap_rows_removed"] = int(gap.sum())
    table = table.filter(pa.array(~gap))
    index = table.column("gpu_index").to_numpy()

    power = table.column("power_w").to_numpy(zero_copy_only=False).astype(np.float32)
    temp = table.column("temp_c").to_numpy(zero_copy_only=False).astype(np.float32)
    util = table.column("util_gpu_pct").to_numpy(zero_copy_only=False).astype(np.float32)
    broken = rng.choice(table.num_rows, int(table.num_rows * BROKEN_SHARE), replace=False)
    kinds = np.arange(len(broken)) % 3
    power[broken[kinds == 0]] = np.nan
    temp[broken[kinds == 1]] = 300.0
    util[broken[kinds == 2]] = 250.0
    table = _set(_set(_set(table, "power_w", power), "temp_c", temp), "util_gpu_pct", util)
    counts["broken_rows"] = len(broken)

    dcgm = table.filter(pa.array(index == 0))
    dcgm = _set(dcgm, "source", np.full(dcgm.num_rows, "dcgm", dtype=object))
    later = pc.add(dcgm.column("sampled_at"), pa.scalar(dt.timedelta(seconds=DCGM_LAG_S), pa.duration("us")))
    dcgm = dcgm.set_column(dcgm.schema.get_field_index("sampled_at"), dcgm.schema.field("sampled_at"),
                           pc.cast(later, dcgm.schema.field("sampled_at").type))
    dcgm = _set(dcgm, "power_w", dcgm.column("power_w").to_numpy(zero_copy_only=False) * np.float32(1.01))
    dcgm = dcgm.take(pc.sort_indices(dcgm, [("sampled_at", "ascending")]))
    held = dcgm.column("energy_mj_total").to_numpy(zero_copy_only=False)
    held = held[np.arange(len(held)) // 2 * 2]
    dcgm = _set(dcgm, "energy_mj_total", held)
    counts["dcgm_repeated_counter_rows"] = dcgm.num_rows // 2
    counts["dcgm_rows"] = dcgm.num_rows

    candidates = np.flatnonzero(index == 3)
    copies = table.take(pa.array(rng.choice(candidates, int(len(candidates) * DUPLICATE_SHARE), replace=False)))
    invalid = np.arange(copies.num_rows) % 2 == 1
    copy_power = copies.column("power_w").to_numpy(zero_copy_only=False).astype(np.float32)
    copy_power[invalid] = -np.abs(copy_power[invalid]) - 1.0
    copies = _set(copies, "power_w", copy_power)
    counts["duplicate_rows"], counts["invalid_duplicate_rows"] = copies.num_rows, int(invalid.sum())
    return pa.concat_tables([table, dcgm, copies]), counts


def add_faults(lake: Path, day: dt.date, seed: int = 0) -> dict[str, int]:
    """Rewrite every host's gpu_samples of `day` with the faults above; totals of what was added."""
    rng = np.random.default_rng(seed)
    totals: dict[str, int] = {}
    part = lake / "gpu_samples" / f"date={day.isoformat()}"
    for host_dir in sorted(part.iterdir()):
        host = host_dir.name.removeprefix("host=")
        faulted, counts = _faulted_host(ds.dataset(host_dir, format="parquet").to_table(), day, rng)
        replace_partition(lake, "gpu_samples", day.isoformat(), host, faulted)
        for key, value in counts.items():
            totals[key] = totals.get(key, 0) + value
    return totals
