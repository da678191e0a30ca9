"""Turn simulated arrays into lake rows (Arrow tables in the schemas of collectors.schema).

Readings are shaped the way the real sources give them: NVML power in whole mW, temperatures in
whole C, clocks in whole MHz, utilisation in whole %, PCIe throughput in whole KiB/s, DCGM
activity as 0..1 ratios. Every column
the simulation knows is filled; nothing is left NULL and no 0 stands in for a missing value.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from joulehouse.collectors.schema import FACILITY_SAMPLES, GPU_SAMPLES, JOBS, NODE_SAMPLES, TS
from joulehouse.collectors.sim.constants import (
    CLOCK_EVENT_APPLICATIONS_CLOCKS_SETTING,
    CLOCK_EVENT_GPU_IDLE,
    CLOCK_EVENT_SW_POWER_CAP,
    PSTATE_BUSY,
    PSTATE_IDLE,
)
from joulehouse.collectors.sim.fleet import STREAM_NOISE, SimGpu, rng_for, stable_key
from joulehouse.collectors.sim.physics import PowerState, relative_speed
from joulehouse.collectors.sim.precision import flop_rate_vs_bf16, precision_and_batch, speedup, training_batch_factor
from joulehouse.collectors.sim.site import FacilityTrace, NodeTrace
from joulehouse.collectors.sim.workload import Job, Traces

SOURCE = "sim"


def _midnight_us(day: dt.date) -> int:
    return int(dt.datetime(day.year, day.month, day.day, tzinfo=dt.timezone.utc).timestamp()) * 1_000_000


def _times(day: dt.date, index: np.ndarray, interval_s: float) -> pa.Array:
    us = _midnight_us(day) + np.round(index * interval_s * 1e6).astype(np.int64)
    return pa.array(us, type=pa.int64()).cast(TS)


def _whole_kib(bytes_per_s: np.ndarray) -> np.ndarray:
    """bytes/s as NVML gives PCIe throughput: whole KiB/s (times 1024, as collectors.sources.nvml)."""
    return np.round(bytes_per_s / 1024.0).astype(np.int64) * 1024


def gpu_day_table(seed: int, day: dt.date, gpus: Sequence[SimGpu], traces: Sequence[Traces], state: PowerState,
                  counters_mj: np.ndarray, limits_w: Sequence[float], interval_s: float) -> pa.Table:
    """gpu_samples rows of one host's GPUs for one day."""
    n = state.power_w.shape[1]
    times = _times(day, np.arange(n), interval_s)
    tables = []
    for k, (g, tr) in enumerate(zip(gpus, traces)):
        rng = rng_for(seed, stable_key(g.uuid), day.toordinal(), STREAM_NOISE)
        busy = tr.job_slot >= 0
        act, dram = tr.sm_active, tr.dram_active
        power = np.maximum(np.round(state.power_w[k] + rng.normal(0.0, 0.5, n), 3), 1.0)
        reasons = (np.where(busy, 0, CLOCK_EVENT_GPU_IDLE)
                   | np.where(busy & tr.app_clock_locked, CLOCK_EVENT_APPLICATIONS_CLOCKS_SETTING, 0)
                   | np.where(busy & state.power_capped[k], CLOCK_EVENT_SW_POWER_CAP, 0))
        util_gpu = np.where(busy, np.clip(np.round(100.0 * np.minimum(1.0, 1.6 * act + 0.08)), 1.0, 100.0), 0.0)
        columns = {
            "sampled_at": times,
            "host": pa.repeat(g.host, n),
            "gpu_index": pa.repeat(pa.scalar(g.index, pa.int16()), n),
            "gpu_uuid": pa.repeat(g.uuid, n),
            "gpu_model": pa.repeat(g.model, n),
            "power_w": pa.array(power.astype(np.float32)),
            "energy_mj_total": pa.array(counters_mj[k]),
            "temp_c": pa.array(np.round(state.temp_c[k]).astype(np.float32)),
            "mem_temp_c": pa.array(np.round(state.temp_c[k] + 3.0 + 8.0 * dram).astype(np.float32)),
            "sm_clock_mhz": pa.array(state.sm_clock_mhz[k].astype(np.int32)),
            "mem_clock_mhz": pa.repeat(pa.scalar(g.spec.mem_clock_mhz, pa.int32()), n),
            "util_gpu_pct": pa.array(util_gpu.astype(np.float32)),
            "util_mem_pct": pa.array(np.round(100.0 * np.clip(0.95 * dram, 0.0, 1.0)).astype(np.float32)),
            "sm_active_ratio": pa.array(act.astype(np.float32)),
            "sm_occupancy_ratio": pa.array((0.45 * act).astype(np.float32)),
            "tensor_active_ratio": pa.array(tr.tensor_active.astype(np.float32)),
            "dram_active_ratio": pa.array(dram.astype(np.float32)),
            "pcie_tx_bytes_per_s": pa.array(_whole_kib(tr.pcie_tx_bytes_per_s)),
            "pcie_rx_bytes_per_s": pa.array(_whole_kib(tr.pcie_rx_bytes_per_s)),
            "power_limit_w": pa.repeat(pa.scalar(float(limits_w[k]), pa.float32()), n),
            "mem_used_mib": pa.array(np.round(tr.mem_used_mib).astype(np.int32)),
            "pstate": pa.array(np.where(busy, PSTATE_BUSY, PSTATE_IDLE).astype(np.int8)),
            "clock_event_reasons": pa.array(reasons.astype(np.int64)),
            "source": pa.repeat(SOURCE, n),
            # what NVML reports of the device, whatever limit the day's cap holds
            "power_limit_min_w": pa.repeat(pa.scalar(g.spec.min_limit_w, pa.float32()), n),
            "power_limit_max_w": pa.repeat(pa.scalar(g.spec.max_limit_w, pa.float32()), n),
            "power_limit_default_w": pa.repeat(pa.scalar(g.spec.default_limit_w, pa.float32()), n),
        }
        tables.append(pa.table(columns, schema=GPU_SAMPLES))
    return pa.concat_tables(tables)


def jobs_table(day: dt.date, gpus: Sequence[SimGpu], jobs: Sequence[Job], traces: Sequence[Traces],
               state: PowerState, interval_s: float, seed: int) -> pa.Table:
    """jobs rows: one per (job, GPU), with work counters from what the GPU really ran (caps and
    clock locks slow compute-bound work, barely memory-bound work), its precision and batch size
    (collectors.sim.precision: they set a serving job's throughput)."""
    rows = []
    midnight = dt.datetime(day.year, day.month, day.day, tzinfo=dt.timezone.utc)
    for k, (g, tr) in enumerate(zip(gpus, traces)):
        ratio = state.sm_clock_mhz[k] / g.spec.f_max_mhz
        for slot, job in enumerate(jobs):
            if g.index not in job.gpu_indices:
                continue
            sl = slice(job.start_i, job.end_i)
            speed = relative_speed(ratio[sl], tr.compute_bound[sl])
            # FLOPs count work done: the FLOP rate at f_max slowed by the run's real speed (a
            # memory-bound job at a lower clock does nearly the same FLOPs per second).
            flops = float(np.sum(g.spec.peak_flops_per_s * tr.tensor_active[sl] * speed) * interval_s)
            row = {
                "job_id": job.job_id, "host": g.host, "gpu_uuid": g.uuid,
                "started_at": midnight + dt.timedelta(seconds=job.start_i * interval_s),
                "ended_at": midnight + dt.timedelta(seconds=job.end_i * interval_s),
                "user": job.user, "team": job.team, "stage": job.stage, "workload_class": job.workload_class,
                "deferrable": job.deferrable, "requests_total": None, "tokens_total": None, "samples_total": None,
                "flops_total": flops,
            }
            precision, batch = precision_and_batch(seed, job)
            row.update(precision=precision, batch_size=batch, flops_total=flops * flop_rate_vs_bf16(g.spec, precision))
            if job.kind == "inference":
                rate = job.requests_per_s * speedup(job, g.spec, precision, batch)
                requests = float(np.sum(rate * tr.load[sl] * speed) * interval_s)
                row["requests_total"] = int(round(requests))
                row["tokens_total"] = int(round(requests * job.tokens_per_request))
            else:
                rate = job.samples_per_s * training_batch_factor(batch)
                row["samples_total"] = int(round(float(np.sum(rate * speed) * interval_s)))
            rows.append(row)
    return pa.Table.from_pylist(rows, schema=JOBS)


def node_table(day: dt.date, host: str, node: NodeTrace, interval_s: float) -> pa.Table:
    """node_samples rows (BMC readings every 5 s) of one host for one day."""
    m = node.sample_index.size
    return pa.table({
        "sampled_at": _times(day, node.sample_index, interval_s),
        "host": pa.repeat(host, m),
        "power_w": pa.array(node.power_w.astype(np.float32)),
        "sdr_power_w": pa.array(node.sdr_power_w.astype(np.float32)),
        "inlet_temp_c": pa.array(node.inlet_temp_c.astype(np.float32)),
        "exhaust_temp_c": pa.array(node.exhaust_temp_c.astype(np.float32)),
        "fan_rpm_avg": pa.array(node.fan_rpm_avg.astype(np.float32)),
        "source": pa.repeat(SOURCE, m),
        "power_w_null_reason": pa.nulls(m, pa.string()),  # the simulated BMC always reads
    }, schema=NODE_SAMPLES)


def facility_table(day: dt.date, site: str, fac: FacilityTrace, interval_s: float) -> pa.Table:
    """facility_samples rows (per minute) of one site for one day."""
    m = fac.sample_index.size
    return pa.table({
        "sampled_at": _times(day, fac.sample_index, interval_s),
        "site": pa.repeat(site, m),
        "facility_power_w": pa.array(fac.facility_power_w),
        "it_power_w": pa.array(fac.it_power_w),
        "outdoor_temp_c": pa.array(fac.outdoor_temp_c.astype(np.float32)),
        "source": pa.repeat(SOURCE, m),
    }, schema=FACILITY_SAMPLES)
