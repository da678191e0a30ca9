"""What the simulated GPUs run: a day's job schedule per host, and per-sample activity traces.

A schedule depends only on (seed, host, day), so one day can be simulated alone and match a
multi-day run. Jobs start and end inside their UTC day with at least five idle minutes around
midnight (the day's state never depends on yesterday's). Times are sample indices from midnight.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from joulehouse.collectors.sim.constants import A100, H100, TEAMS_USERS
from joulehouse.collectors.sim.fleet import STREAM_SCHEDULE, STREAM_TRACE, SimGpu, rng_for, stable_key

DAY_S = 86_400
MIDNIGHT_MARGIN_S = 300
CROSS_MODEL_PROFILE = "llm-finetune-7b-ref"
CROSS_MODEL_SPECS = (A100, H100)
_STAGE_CLASS = {
    "train-compute": ("training", "throughput"),
    "train-memory": ("training", "throughput"),
    "inference": ("inference", "latency-sensitive"),
    "data-prep": ("data-preparation", "background"),
    "eval": ("evaluation", "background"),
}


@dataclass(frozen=True)
class Job:
    """One job on one or more GPUs of a host, [start_i, end_i) in samples from midnight."""

    job_id: str
    host: str
    gpu_indices: tuple[int, ...]
    start_i: int
    end_i: int
    kind: str
    user: str
    team: str
    deferrable: bool
    # Shape parameters: activity levels 0..1, compute-bound share of run time, clock lock.
    act: float
    dram: float
    tensor: float
    period_s: float
    compute_bound: float
    clock_lock_ratio: float | None
    pcie_rx_gbps: float
    mem_share: float
    samples_per_s: float = 0.0
    requests_per_s: float = 0.0
    tokens_per_request: float = 0.0
    trace_key: int = 0
    profile: str = ""

    @property
    def stage(self) -> str:
        return _STAGE_CLASS[self.kind][0]

    @property
    def workload_class(self) -> str:
        return _STAGE_CLASS[self.kind][1]


@dataclass
class Traces:
    """Per-sample activity of one GPU for one day (arrays of n samples)."""

    job_slot: np.ndarray  # int32, index into the day's job list, -1 idle
    sm_active: np.ndarray
    tensor_active: np.ndarray
    dram_active: np.ndarray
    pcie_rx_bytes_per_s: np.ndarray
    pcie_tx_bytes_per_s: np.ndarray
    mem_used_mib: np.ndarray
    target_clock_ratio: np.ndarray  # requested SM clock / f_max (1 or a lock), busy samples
    app_clock_locked: np.ndarray  # bool
    compute_bound: np.ndarray  # share of run time that scales with clock, busy samples
    load: np.ndarray = field(default_factory=lambda: np.zeros(0))  # inference offered load 0..1

    @property
    def busy(self) -> np.ndarray:
        return self.job_slot >= 0


def _draw_job(rng: np.random.Generator, kind: str, spec_speed: float) -> dict:
    team = str(rng.choice(list(TEAMS_USERS)))
    user = str(rng.choice(TEAMS_USERS[team]))
    lock = float(rng.uniform(0.6, 0.95)) if rng.random() < 0.3 else None
    common = dict(user=user, team=team, period_s=float(rng.uniform(10.0, 20.0)), clock_lock_ratio=lock,
                  mem_share=float(rng.uniform(0.3, 0.95)), pcie_rx_gbps=float(rng.uniform(0.3, 2.0)))
    if kind == "train-compute":
        return common | dict(act=rng.uniform(0.86, 0.96), dram=rng.uniform(0.2, 0.35), tensor=rng.uniform(0.6, 0.8),
                             compute_bound=0.9, deferrable=bool(rng.random() < 0.2),
                             samples_per_s=rng.uniform(400, 2500) * spec_speed)
    if kind == "train-memory":
        return common | dict(act=rng.uniform(0.5, 0.7), dram=rng.uniform(0.65, 0.85), tensor=rng.uniform(0.2, 0.35),
                             compute_bound=0.3, deferrable=bool(rng.random() < 0.2),
                             samples_per_s=rng.uniform(200, 1200) * spec_speed)
    if kind == "data-prep":
        return common | dict(act=rng.uniform(0.08, 0.25), dram=rng.uniform(0.08, 0.2), tensor=rng.uniform(0.0, 0.03),
                             compute_bound=0.2, deferrable=True, pcie_rx_gbps=float(rng.uniform(6.0, 14.0)),
                             samples_per_s=rng.uniform(2000, 9000) * spec_speed, mem_share=float(rng.uniform(0.1, 0.4)))
    if kind == "eval":
        return common | dict(act=rng.uniform(0.5, 0.75), dram=rng.uniform(0.35, 0.5), tensor=rng.uniform(0.4, 0.6),
                             compute_bound=0.7, deferrable=True, samples_per_s=rng.uniform(800, 4000) * spec_speed)
    raise ValueError(f"job kind {kind!r}: expected one of {sorted(_STAGE_CLASS)}")


def _snap(seconds: float, interval_s: float) -> int:
    return int(round(seconds / interval_s))


def _timeline(rng, host, gpus, day_tag, kinds, weights, spec_speed, interval_s, reserved=()) -> list[Job]:
    """Jobs back to back with idle gaps on one GPU group, around `reserved` (start_s, end_s) windows."""
    jobs, t = [], MIDNIGHT_MARGIN_S + rng.exponential(1800.0)
    end_of_day = DAY_S - MIDNIGHT_MARGIN_S
    n = 0
    while t < end_of_day - 1200:
        kind = str(rng.choice(kinds, p=weights))
        hours = {"train-compute": (1.5, 8.0), "train-memory": (1.0, 6.0), "data-prep": (0.3, 3.0), "eval": (0.3, 2.0)}[kind]
        end = min(t + rng.uniform(*hours) * 3600.0, end_of_day)
        for r0, r1 in reserved:
            if t < r1 and end > r0:
                end = r0 if r0 - t >= 600 else t
        params = _draw_job(rng, kind, spec_speed)
        if end > t:
            n += 1
            gpu_tag = "g" + "".join(str(i) for i in gpus)
            jobs.append(Job(job_id=f"{host}-{day_tag}-{gpu_tag}-{n:02d}",
                            host=host, gpu_indices=tuple(gpus), start_i=_snap(t, interval_s), end_i=_snap(end, interval_s),
                            kind=kind, trace_key=int(rng.integers(1 << 31)), **params))
        t = end + rng.exponential(2400.0) + 60.0
        for r0, r1 in reserved:
            if r0 <= t < r1 or (end <= r0 < t):
                t = max(t, r1 + 60.0)
    return [j for j in jobs if j.end_i > j.start_i]


def plan_host_day(seed: int, day_ordinal: int, host: str, gpus: Sequence[SimGpu], cross_model_hosts: Sequence[str],
                  interval_s: float) -> list[Job]:
    """The jobs of one host for one UTC day (`day_ordinal` = date.toordinal())."""
    rng = rng_for(seed, stable_key(host), day_ordinal, STREAM_SCHEDULE)
    spec = gpus[0].spec
    indices = [g.index for g in gpus]
    day_tag = f"d{day_ordinal}"
    jobs: list[Job] = []
    reserved_gpu, reserved = None, ()
    if host in cross_model_hosts:
        reserved_gpu = indices[-1]
        day_rng = rng_for(seed, day_ordinal, STREAM_SCHEDULE)
        start_s = float(day_rng.integers(8, 14)) * 3600.0
        params = _draw_job(day_rng, "train-compute", 1.0)
        params.update(clock_lock_ratio=None, deferrable=False, samples_per_s=params["samples_per_s"] * spec.relative_speed)
        reserved = ((start_s, start_s + 7200.0),)
        jobs.append(Job(job_id=f"{CROSS_MODEL_PROFILE}-{day_tag}-{spec.short_name}", host=host, gpu_indices=(reserved_gpu,),
                        start_i=_snap(start_s, interval_s), end_i=_snap(start_s + 7200.0, interval_s),
                        kind="train-compute", trace_key=stable_key(f"{CROSS_MODEL_PROFILE}/{day_ordinal}"),
                        profile=CROSS_MODEL_PROFILE, **params))
    free = [i for i in indices if i != reserved_gpu]
    free = [int(i) for i in rng.permutation(free)]
    if len(free) >= 4 and rng.random() < 0.8:
        n_inf = int(rng.integers(1, 3))
        for idx in free[:n_inf]:
            team, user = "platform", "svc-inference"
            jobs.append(Job(job_id=f"{host}-{day_tag}-serve-g{idx}", host=host, gpu_indices=(idx,),
                            start_i=_snap(MIDNIGHT_MARGIN_S + 60, interval_s),
                            end_i=_snap(DAY_S - MIDNIGHT_MARGIN_S - 60, interval_s), kind="inference", user=user,
                            team=team, deferrable=False, act=0.0, dram=0.0, tensor=0.0, period_s=0.0,
                            compute_bound=0.35, clock_lock_ratio=None, pcie_rx_gbps=float(rng.uniform(0.2, 1.0)),
                            mem_share=float(rng.uniform(0.7, 0.92)), requests_per_s=float(rng.uniform(20, 80)) * spec.relative_speed,
                            tokens_per_request=float(rng.uniform(150, 450)), trace_key=int(rng.integers(1 << 31))))
        free = free[n_inf:]
    if len(free) >= 4:
        group = sorted(free[:4])
        jobs += _timeline(rng, host, group, day_tag, ["train-compute", "train-memory"], [0.65, 0.35],
                          spec.relative_speed, interval_s)
        free = free[4:]
    for idx in sorted(free) + ([reserved_gpu] if reserved_gpu is not None else []):
        jobs += _timeline(rng, host, [idx], day_tag, ["train-compute", "train-memory", "data-prep", "eval"],
                          [0.3, 0.15, 0.3, 0.25], spec.relative_speed, interval_s,
                          reserved if idx == reserved_gpu else ())
    return jobs


def _diurnal_load(t_s: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Offered load 0..1 of an inference service: low at 03:00 UTC, peak at 15:00, slow wander."""
    base = 0.5 * (1.0 - np.cos(2.0 * math.pi * (t_s / 3600.0 - 3.0) / 24.0))
    knots = rng.normal(0.0, 0.06, size=int(t_s.size // 600) + 2)
    wander = np.interp(np.arange(t_s.size) / 600.0, np.arange(knots.size), knots)
    return np.clip(0.12 + 0.78 * base + wander, 0.03, 1.0)


def render_traces(jobs: Sequence[Job], gpu: SimGpu, n: int, interval_s: float, seed: int, day_ordinal: int) -> Traces:
    """Per-sample activity of `gpu` over one day of `n` samples, from the day's `jobs`."""
    z = np.zeros(n)
    tr = Traces(job_slot=np.full(n, -1, np.int32), sm_active=z.copy(), tensor_active=z.copy(), dram_active=z.copy(),
                pcie_rx_bytes_per_s=z.copy(), pcie_tx_bytes_per_s=z.copy(), mem_used_mib=z.copy(),
                target_clock_ratio=np.ones(n), app_clock_locked=np.zeros(n, bool), compute_bound=z.copy(), load=z.copy())
    gpu_rng = rng_for(seed, stable_key(gpu.uuid), day_ordinal, STREAM_TRACE)
    # Idle PCIe chatter: a few kB/s (a real, non-zero reading).
    tr.pcie_rx_bytes_per_s[:] = gpu_rng.uniform(2e3, 4e4, n)
    tr.pcie_tx_bytes_per_s[:] = gpu_rng.uniform(1e3, 2e4, n)
    tr.mem_used_mib[:] = 1.0
    for slot, job in enumerate(jobs):
        if gpu.index not in job.gpu_indices:
            continue
        sl = slice(job.start_i, min(job.end_i, n))
        m = sl.stop - sl.start
        if m <= 0:
            continue
        rng = rng_for(seed, job.trace_key, STREAM_TRACE)
        t = np.arange(m) * interval_s
        jitter = gpu_rng.normal(0.0, 0.015, m)
        if job.kind == "inference":
            load = _diurnal_load((sl.start + np.arange(m)) * interval_s, rng)
            act = 0.06 + 0.62 * load + 0.04 * rng.standard_normal(m)
            dram = 0.08 + 0.62 * load + 0.03 * rng.standard_normal(m)
            tensor = 0.55 * act
            rx = job.pcie_rx_gbps * 1e9 * load
            tx = 0.6 * rx
            tr.load[sl] = load
        else:
            phase = (t / job.period_s) % 1.0
            # Forward/backward swing, then an optimizer/all-reduce dip at the end of each step.
            swing = 0.93 + 0.07 * np.sin(2.0 * math.pi * phase)
            dip = phase > 1.0 - 2.0 / job.period_s
            act = job.act * swing * np.where(dip, 0.35, 1.0) + 0.02 * rng.standard_normal(m)
            dram = job.dram * (0.95 + 0.05 * np.cos(2.0 * math.pi * phase)) * np.where(dip, 0.6, 1.0)
            tensor = job.tensor * swing * np.where(dip, 0.2, 1.0)
            rx = job.pcie_rx_gbps * 1e9 * (0.8 + 0.4 * rng.random(m))
            tx = np.where(dip, 3e9, 0.2e9) * (0.5 + rng.random(m)) if job.kind.startswith("train") else 0.3 * rx
            if job.kind.startswith("train"):
                # A checkpoint every ~30 min: a minute of near-idle SMs and a write burst.
                ckpt = (t % 1800.0) >= 1740.0
                act = np.where(ckpt, 0.04, act)
                tensor = np.where(ckpt, 0.0, tensor)
                dram = np.where(ckpt, 0.05, dram)
                tx = np.where(ckpt, 6e9, tx)
        tr.job_slot[sl] = slot
        tr.sm_active[sl] = np.clip(act + jitter, 0.01, 1.0)
        tr.dram_active[sl] = np.clip(dram + 0.5 * jitter, 0.01, 1.0)
        tr.tensor_active[sl] = np.clip(tensor, 0.0, tr.sm_active[sl])
        tr.pcie_rx_bytes_per_s[sl] = np.maximum(rx, 1e4)
        tr.pcie_tx_bytes_per_s[sl] = np.maximum(tx, 1e4)
        tr.mem_used_mib[sl] = job.mem_share * gpu.spec.memory_mib * (1.0 + 0.01 * np.sin(t / 97.0)) * 0.99
        tr.compute_bound[sl] = job.compute_bound
        if job.clock_lock_ratio is not None:
            tr.target_clock_ratio[sl] = job.clock_lock_ratio
            tr.app_clock_locked[sl] = True
    return tr
