"""simulate_fleet: a fleet's GPU, node, facility and job records written into the lake.

Each UTC day is simulated on its own from (seed, GPU, day), so calling day by day (say with
different power limits per day) gives the same rows as one multi-day call for the GPUs whose
limits did not change. The one thing carried over midnight is the energy counter: a day starts
from the previous day's last counter value (kept in memory, or read back from the lake when the
previous day was written by an earlier call), else from a random offset since "driver load".
"""

from __future__ import annotations

import datetime as dt
import posixpath
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from joulehouse.collectors import lakefs
from joulehouse.collectors.sim.constants import SITE, PowerTruth
from joulehouse.collectors.sim.energy_counter import COUNTER_EPOCH, driver_load_offset_mj
from joulehouse.collectors.sim.fleet import SimGpu, build_fleet, write_inventory_csv
from joulehouse.collectors.sim.links import link_day_table
from joulehouse.collectors.sim.records import gpu_day_table, jobs_table, node_table, facility_table
from joulehouse.collectors.sim.site import host_inlet_c, outdoor_temp_c, simulate_facility, simulate_node
from joulehouse.collectors.sim.physics import energy_counter_mj, simulate_block
from joulehouse.collectors.sim.workload import CROSS_MODEL_SPECS, DAY_S, Job, plan_host_day, render_traces
from joulehouse.collectors.writer import WrittenFile, partition_files, replace_partition

# A host's day is simulated whole in memory (every GPU's traces, thermal state and tables at once):
# about 0.7 KB per GPU reading, 8 GPUs a host. At 250 ms a host-day peaks at 2.2 GB; 1 ms would
# take about 500 GB, so a shorter interval is refused rather than simulated in pieces (the physics
# carries state through the day).
MIN_INTERVAL_S = 0.25
MAX_INTERVAL_S = 60.0


def interval_problem(interval_s: float) -> str | None:
    """What is wrong with a sampling interval (seconds), as 'expected ...', or None when it can be simulated."""
    if not MIN_INTERVAL_S <= interval_s <= MAX_INTERVAL_S or abs(DAY_S / interval_s - round(DAY_S / interval_s)) > 1e-9:
        return (f"expected {MIN_INTERVAL_S * 1000:g} ms to {MAX_INTERVAL_S:g} s, dividing 86400 s evenly (a host's day "
                f"is simulated in memory: below {MIN_INTERVAL_S * 1000:g} ms it takes more than 2 GB)")
    return None


@dataclass(frozen=True)
class GpuInfo:
    """One simulated GPU: where it sits, what it is, how well its slot is cooled."""

    host: str
    index: int
    uuid: str
    model: str
    rack: str
    theta_c_per_w: float
    thermal_tau_s: float
    badly_cooled: bool


@dataclass(frozen=True)
class CrossModelRun:
    """One run of the job profile that the simulation repeats on two GPU models each day."""

    profile: str
    job_id: str
    host: str
    gpu_uuid: str
    gpu_model: str
    day: dt.date


@dataclass(frozen=True)
class SimulationSummary:
    """What simulate_fleet wrote and the ground truth the models should recover."""

    start: dt.date
    days: int
    seed: int
    interval_s: float
    rows: dict[str, int]
    files: tuple[Path, ...]
    inventory_path: Path | str  # a URL when the lake is on object storage
    gpus: tuple[GpuInfo, ...]
    # Per GPU model (NVML name): the true power coefficients (see collectors.sim.constants).
    truth: dict[str, PowerTruth]
    cross_model_runs: tuple[CrossModelRun, ...]
    power_limits_w: dict[str, float] = field(default_factory=dict)

    @property
    def files_written(self) -> int:
        return len(self.files)


def _validate(days: int, interval_s: float, start, fleet: Sequence[SimGpu],
              power_limits_w: Mapping[str, float]) -> None:
    if days < 1:
        raise ValueError(f"days={days}: expected at least 1")
    if not isinstance(start, dt.date) or isinstance(start, dt.datetime):
        raise ValueError(f"start={start!r}: expected a datetime.date")
    problem = interval_problem(interval_s)
    if problem:
        raise ValueError(f"interval_s={interval_s}: {problem}")
    by_uuid = {g.uuid: g for g in fleet}
    for uid, limit in power_limits_w.items():
        if uid not in by_uuid:
            raise ValueError(f"power_limits_w: unknown gpu_uuid {uid!r}; the simulated fleet has {len(by_uuid)} GPUs")
        spec = by_uuid[uid].spec
        if not spec.min_limit_w <= float(limit) <= spec.max_limit_w:
            raise ValueError(f"power_limits_w[{uid!r}]={limit} W: expected {spec.min_limit_w:g}..{spec.max_limit_w:g} W "
                             f"for {spec.nvml_name}")


def _validate_locks(fleet: Sequence[SimGpu], locks: Mapping[str, tuple[int, int]]) -> None:
    by_uuid = {g.uuid: g for g in fleet}
    for uid, lock in locks.items():
        if uid not in by_uuid:
            raise ValueError(f"locked_sm_clocks_by_day: unknown gpu_uuid {uid!r}; the simulated fleet has "
                             f"{len(by_uuid)} GPUs")
        spec = by_uuid[uid].spec
        low, high = lock
        if not 0 < int(low) <= int(high) <= spec.f_max_mhz:
            raise ValueError(f"locked_sm_clocks_by_day[{uid!r}]=({low}, {high}) MHz: expected 0 < min <= max <= "
                             f"{spec.f_max_mhz} MHz for {spec.nvml_name}")


def _apply_clock_locks(traces, host_gpus: Sequence[SimGpu], locks: Mapping[str, tuple[int, int]]) -> None:
    """Honour SM clocks locked from outside (nvmlDeviceSetGpuLockedClocks) as the driver does: a busy
    GPU runs at most at the lock's max; where that is below what the job asked for, the clock
    event reason carries the applications-clocks bit (0x2, as NVML reports for locked clocks).
    Idle samples keep the idle clock (no activity, so no dynamic power either way)."""
    for g, tr in zip(host_gpus, traces):
        lock = locks.get(g.uuid)
        if lock is None:
            continue
        ratio = int(lock[1]) / g.spec.f_max_mhz
        binds = tr.busy & (tr.target_clock_ratio > ratio)
        tr.target_clock_ratio = np.where(binds, ratio, tr.target_clock_ratio)
        tr.app_clock_locked = tr.app_clock_locked | binds


def _read_counters(f: Path | str):
    columns = ["gpu_uuid", "energy_mj_total"]
    if isinstance(f, Path):
        return pq.read_table(f, columns=columns)
    with lakefs.filesystem(f).open(f, "rb") as fh:
        return pq.read_table(fh, columns=columns)


def _write_inventory(fleet: Sequence[SimGpu], lake: Path | str) -> Path | str:
    """`<lake>/../inventory.csv`; on object storage written locally, then uploaded in one PUT."""
    if isinstance(lake, Path):
        return write_inventory_csv(fleet, lake.parent / "inventory.csv")
    if "/" not in lake.split("://", 1)[1]:
        raise ValueError(f"lake {lake}: expected a prefix inside the bucket (s3://bucket/lake), "
                         "the inventory is written beside it")
    url = posixpath.join(posixpath.dirname(lake), "inventory.csv")
    with tempfile.TemporaryDirectory(prefix="jh-inventory-") as scratch:
        local = write_inventory_csv(fleet, Path(scratch) / "inventory.csv")
        lakefs.filesystem(url).put_file(str(local), url)
    return url


def _lake_counter_end(lake: Path | str, day: dt.date, host: str) -> dict[str, int]:
    """Last energy counter (mJ) per GPU that the lake holds for `host` on `day`."""
    last: dict[str, int] = {}
    for f in partition_files(lake, "gpu_samples", day.isoformat(), host):
        t = _read_counters(f)
        for uid, value in zip(t.column("gpu_uuid").to_pylist(), t.column("energy_mj_total").to_pylist()):
            if value is not None and value > last.get(uid, -1):
                last[uid] = value
    return last


def _counter_start(seed: int, gpu: SimGpu, day: dt.date, carried: dict[str, int], lake_end: dict[str, int]) -> int:
    if gpu.uuid in carried:
        return carried[gpu.uuid]
    if gpu.uuid in lake_end:
        return lake_end[gpu.uuid]
    # Nothing before: a driver loaded long ago, idling since COUNTER_EPOCH.
    idle_since_epoch_mj = max(0, (day - COUNTER_EPOCH).days) * int(gpu.spec.idle_w * DAY_S * 1000)
    return driver_load_offset_mj(seed, gpu.uuid) + idle_since_epoch_mj


def _cross_model_hosts(fleet: Sequence[SimGpu]) -> list[str]:
    hosts = []
    for spec in CROSS_MODEL_SPECS:
        host = next((g.host for g in fleet if g.spec is spec), None)
        if host is None:
            return []
        hosts.append(host)
    return hosts


def _simulate_host_day(seed, day, host, host_gpus, jobs: list[Job], limits, n, interval_s, outdoor, counter_start,
                      locks: Mapping[str, tuple[int, int]]):
    """Physics of one host for one day; returns (gpu table, node trace, jobs table, end counters, link table)."""
    spec = host_gpus[0].spec
    traces = [render_traces(jobs, g, n, interval_s, seed, day.toordinal()) for g in host_gpus]
    _apply_clock_locks(traces, host_gpus, locks)
    stack = lambda name: np.stack([getattr(t, name) for t in traces])  # noqa: E731
    busy = stack("job_slot") >= 0
    act, dram = stack("sm_active"), stack("dram_active")
    rx, tx = stack("pcie_rx_bytes_per_s"), stack("pcie_tx_bytes_per_s")
    target = np.where(busy, stack("target_clock_ratio"), spec.f_idle_mhz / spec.f_max_mhz)
    inlet_host = host_inlet_c(seed, host, day, outdoor, interval_s)
    inlet = inlet_host[None, :] + np.array([g.inlet_offset_c for g in host_gpus])[:, None]
    state = simulate_block(spec.power, act=act, dram=dram, pcie_gbps=(rx + tx) / 1e9, clock_ratio_target=target,
                           limit_w=limits, inlet_c=inlet, theta_c_per_w=[g.theta_c_per_w for g in host_gpus],
                           tau_s=[g.thermal_tau_s for g in host_gpus], interval_s=interval_s,
                           f_max_mhz=spec.f_max_mhz, f_min_mhz=spec.f_idle_mhz)
    counters = energy_counter_mj(state.power_w, interval_s, counter_start)
    gpu_table = gpu_day_table(seed, day, host_gpus, traces, state, counters, limits, interval_s)
    prep = np.stack([np.isin(t.job_slot, [i for i, j in enumerate(jobs) if j.kind == "data-prep"]) for t in traces])
    node = simulate_node(seed, host, day, state.power_w, busy, prep, inlet_host, interval_s)
    job_rows = jobs_table(day, host_gpus, jobs, traces, state, interval_s, seed)
    links = link_day_table(seed, day, host_gpus, jobs, traces, interval_s)
    return gpu_table, node, job_rows, counters[:, -1], links


def simulate_fleet(lake: str | Path, *, gpus: int = 32, days: int = 2, start: dt.date, seed: int = 0,
                   interval_s: float = 1.0, hosts: Sequence[str] | None = None,
                   power_limits_w: Mapping[str, float] | None = None,
                   power_limits_by_day: Mapping[dt.date, Mapping[str, float]] | None = None,
                   locked_sm_clocks_by_day: Mapping[dt.date, Mapping[str, tuple[int, int]]] | None = None,
                   progress: Callable[[int, int], None] | None = None) -> SimulationSummary:
    """Simulate `gpus` GPUs (8 per host, hosts node-01.. unless `hosts` names them) for `days`
    UTC days from `start`, one GPU sample per `interval_s` seconds, and write gpu_samples,
    node_samples (every 5 s), facility_samples (every minute), jobs, link_samples (NVLink and
    InfiniBand every 10 s, collectors.sim.links) and `<lake>/../inventory.csv`.
    `power_limits_w` (gpu_uuid -> W) replaces the default limit of those GPUs for the whole
    range; `power_limits_by_day` (day -> gpu_uuid -> W) overrides it on the days it names, and
    gives the same rows as calling day by day with those limits. `locked_sm_clocks_by_day` (day ->
    gpu_uuid -> (min, max) MHz) locks SM clocks on the days it names, as the node agent does with
    nvmlDeviceSetGpuLockedClocks: busy clocks stay at or below max (clock event reason 0x2 where
    the lock binds), so power falls by the cubic dynamic term and compute-bound work slows. `progress(done, total)` is called after each host-day with GPU-days done/total.
    Existing partitions of the simulated days and hosts are replaced (re-running is idempotent)."""
    lake = lakefs.lake_root(lake)
    fleet = build_fleet(gpus, seed, hosts)
    limits_by_uuid = {str(k): float(v) for k, v in (power_limits_w or {}).items()}
    by_day = {day: {**limits_by_uuid, **{str(k): float(v) for k, v in lim.items()}}
              for day, lim in (power_limits_by_day or {}).items()}
    for limits in [limits_by_uuid, *by_day.values()]:
        _validate(days, interval_s, start, fleet, limits)
    locks_by_day = {day: {str(k): (int(v[0]), int(v[1])) for k, v in locks.items()}
                    for day, locks in (locked_sm_clocks_by_day or {}).items()}
    for locks in locks_by_day.values():
        _validate_locks(fleet, locks)
    n = int(round(DAY_S / interval_s))
    host_names = list(dict.fromkeys(g.host for g in fleet))
    by_host = {h: [g for g in fleet if g.host == h] for h in host_names}
    xmodel_hosts = _cross_model_hosts(fleet)
    inventory = _write_inventory(fleet, lake)
    rows = {"gpu_samples": 0, "node_samples": 0, "facility_samples": 0, "jobs": 0, "link_samples": 0}
    files: list[WrittenFile] = []
    xmodel_runs: list[CrossModelRun] = []
    carried: dict[str, int] = {}
    done, total = 0, len(fleet) * days
    for d in range(days):
        day = start + dt.timedelta(days=d)
        outdoor = outdoor_temp_c(seed, SITE, day, np.arange(n) * interval_s)
        site_wall = np.zeros(n)
        for host in host_names:
            host_gpus = by_host[host]
            jobs = plan_host_day(seed, day.toordinal(), host, host_gpus, xmodel_hosts, interval_s)
            lake_end = {} if carried else _lake_counter_end(lake, day - dt.timedelta(days=1), host)
            start_mj = [_counter_start(seed, g, day, carried, lake_end) for g in host_gpus]
            day_limits = by_day.get(day, limits_by_uuid)
            limits = [day_limits.get(g.uuid, g.spec.default_limit_w) for g in host_gpus]
            gpu_t, node, jobs_t, end_mj, links_t = _simulate_host_day(seed, day, host, host_gpus, jobs, limits, n, interval_s,
                                                             outdoor, start_mj, locks_by_day.get(day, {}))
            carried.update({g.uuid: int(v) for g, v in zip(host_gpus, end_mj)})
            site_wall += node.wall_power_w
            for dataset, table in (("gpu_samples", gpu_t), ("node_samples", node_table(day, host, node, interval_s)),
                                   ("jobs", jobs_t), ("link_samples", links_t)):
                files += replace_partition(lake, dataset, day.isoformat(), host, table)
                rows[dataset] += table.num_rows
            for job in jobs:
                if job.profile:
                    g = next(x for x in host_gpus if x.index == job.gpu_indices[0])
                    xmodel_runs.append(CrossModelRun(job.profile, job.job_id, host, g.uuid, g.model, day))
            done += len(host_gpus)
            if progress is not None:
                progress(done, total)
        fac = facility_table(day, SITE, simulate_facility(seed, SITE, day, site_wall, outdoor, interval_s), interval_s)
        files += replace_partition(lake, "facility_samples", day.isoformat(), SITE, fac)
        rows["facility_samples"] += fac.num_rows
    return SimulationSummary(
        start=start, days=days, seed=seed, interval_s=interval_s, rows=rows, files=tuple(f.path for f in files),
        inventory_path=inventory,
        gpus=tuple(GpuInfo(g.host, g.index, g.uuid, g.model, g.rack, g.theta_c_per_w, g.thermal_tau_s, g.badly_cooled)
                   for g in fleet),
        truth={g.model: g.spec.power for g in fleet}, cross_model_runs=tuple(xmodel_runs),
        power_limits_w=limits_by_uuid,
    )


__all__ = ["CrossModelRun", "GpuInfo", "SimulationSummary", "simulate_fleet"]
