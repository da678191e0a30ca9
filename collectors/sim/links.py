"""Simulated network traffic: each GPU's NVLink and each host's InfiniBand ports, driven by the work.

The shape follows how the work communicates (the magnitudes are the simulation's own choice, in the
range NCCL all-reduce and serving traces show, not a measurement):
- data-parallel training on a group of GPUs all-reduces gradients over NVLink: while the GPU
  computes, a share of the link (drawn per job, 25-55% of its rate) scales with its SM activity,
  and the step's all-reduce dip fills the link further; 1-3% of that traffic leaves the node
  over InfiniBand (the hierarchical all-reduce's inter-node step, one rail per GPU pair);
- single-GPU training and evaluation touch NVLink little (1-6%);
- inference serving (tensor-parallel shards) sends 2% + 10% x offered load of NVLink, and its
  requests and replies cross the network at 0.4-1.2 MB per request;
- data preparation reads over the network (its PCIe intake arrives through the NIC) and no NVLink.
Idle links carry about a megabyte per second of control traffic.

Readings are written every LINK_INTERVAL_S (a typical 10 s scrape) as the mean over that window,
DCGM-shaped for NVLink (no capacity in the row: it comes from the GPU model) and node_exporter-
shaped for the ports (the port's rate in the row). Draws use their own random stream, so the
GPU, node and job rows are the same as without links.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from joulehouse.collectors.schema import LINK_SAMPLES, TS
from joulehouse.collectors.sim.fleet import STREAM_LINKS, SimGpu, rng_for, stable_key
from joulehouse.collectors.sim.workload import Job, Traces

LINK_INTERVAL_S = 10.0
# NVLink bytes/s per direction of the simulated models (catalogue: A100 12 x 25 GB/s, H100/H200 18 x 25 GB/s).
NVLINK_BYTES_PER_S = {"a100": 300e9, "h100": 450e9, "h200": 450e9}
# Two ports per host: HDR (200 Gb/s) beside A100s, NDR (400 Gb/s) beside Hopper.
PORT_BYTES_PER_S = {"a100": 25e9, "h100": 50e9, "h200": 50e9}
PORTS = ("mlx5_0/1", "mlx5_1/1")
IDLE_BYTES_PER_S = 1e6
SOURCE = "sim"


def _window_means(values: np.ndarray, k: int) -> np.ndarray:
    m = values.shape[-1] // k
    return values[..., : m * k].reshape(*values.shape[:-1], m, k).mean(axis=-1)


def link_traffic(seed: int, day: dt.date, gpus: Sequence[SimGpu], jobs: Sequence[Job], traces: Sequence[Traces],
                 interval_s: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per sample: (NVLink tx, NVLink rx) bytes/s per GPU (g x n) and (network tx, rx) bytes/s of the host (n)."""
    n = traces[0].job_slot.size
    spec = gpus[0].spec
    nvlink_cap = NVLINK_BYTES_PER_S[spec.short_name]
    nv_tx = np.full((len(gpus), n), IDLE_BYTES_PER_S)
    net_tx, net_rx = np.full(n, IDLE_BYTES_PER_S), np.full(n, IDLE_BYTES_PER_S)
    for k, (g, tr) in enumerate(zip(gpus, traces)):
        rng = rng_for(seed, stable_key(g.uuid), day.toordinal(), STREAM_LINKS)
        noise = 1.0 + 0.05 * rng.standard_normal(n)
        for slot, job in enumerate(jobs):
            mask = tr.job_slot == slot
            if not mask.any():
                continue
            job_rng = rng_for(seed, job.trace_key, STREAM_LINKS)
            act = tr.sm_active[mask]
            if job.kind.startswith("train") and len(job.gpu_indices) > 1:
                share = job_rng.uniform(0.25, 0.55)
                # all-reduce: busier links while computing, fuller in the step's dip (low SM activity)
                relative = act / max(job.act, 1e-3)
                # the all-reduce dip (SMs at about a third) fills the link; a checkpoint (SMs near
                # idle, writing to storage) sends nothing over it
                in_dip = (relative < 0.5) & (relative > 0.15)
                occ = share * np.where(relative <= 0.15, 0.02, 0.6 * relative + 0.4 * in_dip)
                leaves_node = job_rng.uniform(0.01, 0.03)
                net_tx[mask] += leaves_node * occ * nvlink_cap
                net_rx[mask] += leaves_node * occ * nvlink_cap
            elif job.kind == "inference":
                occ = 0.02 + 0.10 * tr.load[mask]
                bytes_per_request = job_rng.uniform(0.4e6, 1.2e6)
                requests = job.requests_per_s * tr.load[mask]
                net_rx[mask] += 0.3 * bytes_per_request * requests
                net_tx[mask] += bytes_per_request * requests
            elif job.kind == "data-prep":
                occ = np.zeros(act.size)
                net_rx[mask] += tr.pcie_rx_bytes_per_s[mask]
            else:
                occ = job_rng.uniform(0.01, 0.06) * act / max(job.act, 1e-3)
            nv_tx[k, mask] = np.maximum(occ * nvlink_cap, IDLE_BYTES_PER_S)
        nv_tx[k] *= noise
    # NVLink all-reduce is symmetric: what a GPU sends its peers, it receives from them.
    nv_rx = nv_tx * (1.0 + 0.02 * rng_for(seed, stable_key(gpus[0].host), day.toordinal(), STREAM_LINKS)
                     .standard_normal(nv_tx.shape))
    cap = PORT_BYTES_PER_S[spec.short_name] * len(PORTS)
    return nv_tx, nv_rx, np.minimum(net_tx, cap), np.minimum(net_rx, cap)


def link_day_table(seed: int, day: dt.date, gpus: Sequence[SimGpu], jobs: Sequence[Job], traces: Sequence[Traces],
                   interval_s: float) -> pa.Table:
    """link_samples rows of one host for one day: NVLink per GPU, the host's two ports, every LINK_INTERVAL_S."""
    nv_tx, nv_rx, net_tx, net_rx = link_traffic(seed, day, gpus, jobs, traces, interval_s)
    k = max(1, int(round(LINK_INTERVAL_S / interval_s)))
    nv_tx, nv_rx, net_tx, net_rx = (_window_means(a, k) for a in (nv_tx, nv_rx, net_tx, net_rx))
    m = net_tx.size
    midnight_us = int(dt.datetime(day.year, day.month, day.day, tzinfo=dt.timezone.utc).timestamp()) * 1_000_000
    # stamped at the window's end, as a scrape reports what it saw up to then
    times = pa.array(midnight_us + np.round((np.arange(m) + 1) * k * interval_s * 1e6 - 1).astype(np.int64)).cast(TS)
    host, port_rate = gpus[0].host, PORT_BYTES_PER_S[gpus[0].spec.short_name]
    tables = []
    for i, g in enumerate(gpus):
        tables.append(pa.table({
            "sampled_at": times, "host": pa.repeat(host, m), "link_kind": pa.repeat("nvlink", m),
            "device": pa.repeat(g.uuid, m), "gpu_index": pa.repeat(pa.scalar(g.index, pa.int16()), m),
            "gpu_model": pa.repeat(g.model, m), "tx_bytes_per_s": pa.array(np.round(nv_tx[i])),
            "rx_bytes_per_s": pa.array(np.round(nv_rx[i])),
            "capacity_bytes_per_s": pa.nulls(m, pa.float64()), "source": pa.repeat(SOURCE, m)}, schema=LINK_SAMPLES))
    for port in PORTS:  # traffic spread evenly over the ports (NCCL stripes rings across rails)
        tables.append(pa.table({
            "sampled_at": times, "host": pa.repeat(host, m), "link_kind": pa.repeat("infiniband", m),
            "device": pa.repeat(port, m), "gpu_index": pa.nulls(m, pa.int16()), "gpu_model": pa.nulls(m, pa.string()),
            "tx_bytes_per_s": pa.array(np.round(net_tx / len(PORTS))),
            "rx_bytes_per_s": pa.array(np.round(net_rx / len(PORTS))),
            "capacity_bytes_per_s": pa.repeat(pa.scalar(port_rate, pa.float64()), m),
            "source": pa.repeat(SOURCE, m)}, schema=LINK_SAMPLES))
    return pa.concat_tables(tables)
