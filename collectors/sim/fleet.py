"""The simulated fleet's hardware: hosts, GPUs, their slots' cooling, and the site inventory CSV.

A GPU's identity (UUID) depends only on its host and index, so every seed simulates the same
fleet; its cooling (thermal resistance, time constant, inlet offset) depends on (seed, GPU).
"""

from __future__ import annotations

import csv
import uuid
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from joulehouse.collectors.sim.constants import GPU_LIFETIME_YEARS, HOST_MODEL_CYCLE, REGION, SITE, GpuModelSpec

GPUS_PER_HOST = 8
_UUID_NAMESPACE = uuid.UUID("6f1c1f0e-6a52-4d8e-9a57-6a6f756c6568")
# Random streams: one per purpose, so adding a draw to one never shifts another.
STREAM_COOLING = 1
STREAM_SCHEDULE = 2
STREAM_TRACE = 3
STREAM_NOISE = 4
STREAM_COUNTER = 5
STREAM_HOST = 6
STREAM_SITE = 7
STREAM_LINKS = 8
STREAM_LIVE_LOAD = 9

INVENTORY_COLUMNS = (
    "gpu_uuid", "host", "gpu_index", "gpu_model", "rack", "site", "region", "purchased_on",
    "purchase_price_usd", "embodied_kgco2e", "lifetime_years",
)


def stable_key(name: str) -> int:
    """A stable 32-bit integer for a name (seeds random streams; Python's hash() is salted)."""
    return zlib.crc32(name.encode())


def rng_for(seed: int, *keys: int) -> np.random.Generator:
    """The random stream of (seed, keys...): the same keys give the same numbers in any run."""
    return np.random.default_rng([seed & 0xFFFFFFFF, *keys])


@dataclass(frozen=True)
class SimGpu:
    """One simulated GPU and its slot: thermal resistance C/W, time constant s, inlet offset C."""

    host: str
    index: int
    uuid: str
    spec: GpuModelSpec
    rack: str
    theta_c_per_w: float
    thermal_tau_s: float
    inlet_offset_c: float
    badly_cooled: bool

    @property
    def model(self) -> str:
        return self.spec.nvml_name


def default_hosts(gpus: int) -> list[str]:
    """Host names node-01.. for `gpus` GPUs at 8 per host."""
    return [f"node-{i + 1:02d}" for i in range(-(-gpus // GPUS_PER_HOST))]


def gpu_uuid(host: str, index: int) -> str:
    """A UUID in NVML's form (`GPU-xxxxxxxx-...`), stable for a (host, index)."""
    return f"GPU-{uuid.uuid5(_UUID_NAMESPACE, f'{host}/{index}')}"


def build_fleet(gpus: int, seed: int, hosts: Sequence[str] | None = None) -> list[SimGpu]:
    """`gpus` GPUs spread over `hosts` (default node-01.. at 8 per host, the last host takes the
    rest). Host i carries HOST_MODEL_CYCLE[i % 4]; two hosts per rack. One GPU in 16 sits in a
    badly cooled slot (thermal resistance +35 %)."""
    if gpus < 1:
        raise ValueError(f"gpus={gpus}: expected at least 1")
    host_names = list(hosts) if hosts else default_hosts(gpus)
    if len(set(host_names)) != len(host_names) or not host_names:
        raise ValueError(f"hosts={host_names!r}: expected distinct, non-empty host names")
    per_host = [gpus // len(host_names) + (1 if i < gpus % len(host_names) else 0) for i in range(len(host_names))]
    if hosts is None:
        per_host = [min(GPUS_PER_HOST, gpus - GPUS_PER_HOST * i) for i in range(len(host_names))]
    fleet = []
    for h, (host, count) in enumerate(zip(host_names, per_host)):
        spec = HOST_MODEL_CYCLE[h % len(HOST_MODEL_CYCLE)]
        for index in range(count):
            uid = gpu_uuid(host, index)
            rng = rng_for(seed, stable_key(uid), STREAM_COOLING)
            slot_factor = 1.0 + 0.04 * (index % 4) + rng.normal(0.0, 0.03)
            badly = bool(rng.random() < 1.0 / 16.0) or (h == 0 and index == GPUS_PER_HOST - 2)
            fleet.append(
                SimGpu(
                    host=host, index=index, uuid=uid, spec=spec, rack=f"rack-{h // 2 + 1:02d}",
                    theta_c_per_w=spec.theta_c_per_w * slot_factor * (1.35 if badly else 1.0),
                    thermal_tau_s=spec.thermal_tau_s * float(rng.uniform(0.85, 1.2)),
                    # GPUs further back in the chassis breathe air the front ones warmed.
                    inlet_offset_c=0.5 * (index // 2) + float(rng.normal(0.0, 0.3)),
                    badly_cooled=badly,
                )
            )
    return fleet


def write_inventory_csv(fleet: Sequence[SimGpu], path: Path) -> Path:
    """Write the site inventory (one row per GPU, header row) to `path`; returns it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(INVENTORY_COLUMNS)
        for g in fleet:
            writer.writerow([
                g.uuid, g.host, g.index, g.model, g.rack, SITE, REGION, g.spec.purchased_on,
                f"{g.spec.purchase_price_usd:.2f}", f"{g.spec.embodied_kgco2e:.1f}", f"{GPU_LIFETIME_YEARS:g}",
            ])
    tmp.replace(path)
    return path
