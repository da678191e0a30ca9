"""dcgm-exporter's series -> gpu_samples rows: which fields are read, under which lake columns,
how a series' labels give the lake's keys, and the pivot of raw samples to one row per (GPU, time).

Apart from the source (collectors/sources/dcgm.py), which asks Prometheus and writes the lake:
links.py and dcgm_pods.py key their series the same way.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import pyarrow as pa

from joulehouse.collectors.schema import GPU_SAMPLES, signed_integer_bounds
from joulehouse.collectors.sources.dcgm_targets import one_target_per_gpu
from joulehouse.collectors.sources.dcgm_values import convert_value, drop_unreported_memory_temps
from joulehouse.collectors.sources.host_names import canonical_host, warn_of_merged_servers
from joulehouse.collectors.writer import check_host_name

log = logging.getLogger(__name__)

SOURCE_TAG = "dcgm"

# dcgm-exporter field -> (lake column, Python type of the lake value).
FIELDS: dict[str, tuple[str, type]] = {
    "DCGM_FI_DEV_POWER_USAGE": ("power_w", float),
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": ("energy_mj_total", int),
    "DCGM_FI_DEV_SM_CLOCK": ("sm_clock_mhz", int),
    "DCGM_FI_DEV_MEM_CLOCK": ("mem_clock_mhz", int),
    "DCGM_FI_DEV_GPU_TEMP": ("temp_c", float),
    "DCGM_FI_DEV_MEMORY_TEMP": ("mem_temp_c", float),
    "DCGM_FI_DEV_GPU_UTIL": ("util_gpu_pct", float),
    "DCGM_FI_DEV_MEM_COPY_UTIL": ("util_mem_pct", float),
    "DCGM_FI_PROF_SM_ACTIVE": ("sm_active_ratio", float),
    "DCGM_FI_PROF_SM_OCCUPANCY": ("sm_occupancy_ratio", float),
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": ("tensor_active_ratio", float),
    "DCGM_FI_PROF_DRAM_ACTIVE": ("dram_active_ratio", float),
    "DCGM_FI_PROF_PCIE_TX_BYTES": ("pcie_tx_bytes_per_s", int),
    "DCGM_FI_PROF_PCIE_RX_BYTES": ("pcie_rx_bytes_per_s", int),
    "DCGM_FI_DEV_POWER_MGMT_LIMIT": ("power_limit_w", float),
    # Framebuffer memory used (field 252): dcgm-exporter reports MiB (counters.csv), the lake's unit.
    "DCGM_FI_DEV_FB_USED": ("mem_used_mib", int),
    # NVML's clock event reasons bitmask (field 112). The models read its application-clocks bit
    # (0x2) and power-cap bit (0x4), so a GPU modelled from its DCGM stream keeps them.
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": ("clock_event_reasons", int),
}
# Names older exporters give the same field: DCGM before 3.3 called field 112
# DCGM_FI_DEV_CLOCK_THROTTLE_REASONS. Queried and read like the field they name; our counters
# file asks for the current names only (an exporter refuses a field its DCGM does not know).
FIELD_ALIASES: dict[str, str] = {
    "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": "DCGM_FI_DEV_CLOCKS_EVENT_REASONS",
}
COLUMNS = [column for column, _ in FIELDS.values()]
# Columns whose honest values pass 2**31 (a cumulative mJ counter, bytes per second).
WIDE_COLUMNS = frozenset({"energy_mj_total", "pcie_tx_bytes_per_s", "pcie_rx_bytes_per_s"})
# what each integer column holds: a value past it is set aside, not the whole range refused
_INTEGER_BOUNDS = signed_integer_bounds(GPU_SAMPLES)


def _bounds(column: str) -> dict[str, tuple[int, int]]:
    return {"bounds": _INTEGER_BOUNDS[column]} if column in _INTEGER_BOUNDS else {}


# Fields of the whole device, the same in each MIG instance's series; the others (activity, memory
# used, utilisation) are each instance's own, and a GPU's sum of them is not what the column means.
DEVICE_FIELDS = frozenset({
    "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_MEM_CLOCK",
    "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_MEMORY_TEMP", "DCGM_FI_DEV_POWER_MGMT_LIMIT",
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS"})
MIG_LABELS = frozenset({"GPU_I_ID", "GPU_I_PROFILE"})


def fields_query(selector: str = "") -> str:
    """One PromQL selector for every field: `{__name__=~"A|B|...", <selector matchers>}`."""
    matchers = f'__name__=~"{"|".join([*FIELDS, *FIELD_ALIASES])}"'
    extra = selector.strip().strip("{}").strip()
    return "{" + matchers + (", " + extra if extra else "") + "}"


@dataclass(frozen=True)
class SeriesKey:
    host: str
    gpu_index: int
    gpu_uuid: str
    gpu_model: str | None


def host_name_problem(host: str) -> str | None:
    """Why `host` cannot name a lake partition folder, or None when it can."""
    try:
        check_host_name(host)
    except ValueError as exc:
        return str(exc)
    return None


def label_host(labels: dict[str, str]) -> str:
    """The server a series names, as its labels spell it: `Hostname`/`hostname`, else the
    `instance` without its port ('' when none)."""
    host = labels.get("Hostname") or labels.get("hostname")
    if not host:
        instance = labels.get("instance", "")
        host = instance.rsplit(":", 1)[0] if instance else ""
    return host


def series_key(labels: dict[str, str]) -> SeriesKey | str:
    """Map dcgm-exporter labels onto the lake keys, or return why the series cannot be keyed. The
    host is the name every source gives the server (collectors.sources.host_names)."""
    host = canonical_host(label_host(labels))
    uuid = labels.get("UUID") or labels.get("uuid")
    gpu = labels.get("gpu")
    if labels.get("GPU_I_ID"):
        return "MIG instance series (GPU_I_ID label) are not per-GPU readings"
    if not host or not uuid or gpu is None:
        return "needs Hostname/hostname (or instance), UUID and gpu labels"
    # Checked here, not at write time: a host that cannot name a partition folder (an IPv6
    # instance such as '[fd00::7]') would otherwise fail the whole range, every sync.
    if (bad_host := host_name_problem(host)) is not None:
        return bad_host
    try:
        index = int(gpu)
    except ValueError:
        return f"gpu label {gpu!r} is not a GPU index"
    if not 0 <= index <= _INTEGER_BOUNDS["gpu_index"][1]:
        return f"gpu label {gpu!r} is not a GPU index"
    return SeriesKey(host=host, gpu_index=index, gpu_uuid=uuid, gpu_model=labels.get("modelName"))


def _gpu_of(labels: dict[str, str]) -> str | None:
    """The GPU a series reads (its host and UUID, MIG instances as their GPU), None if unkeyed."""
    key = series_key({k: v for k, v in labels.items() if k not in MIG_LABELS})
    return None if isinstance(key, str) else f"{key.gpu_uuid} on {key.host}"


def pivot_range_result(result: Iterable[dict[str, Any]]) -> tuple[pa.Table, list[str]]:
    """Turn a matrix (one entry per series: raw samples or query_range's) into gpu_samples rows:
    one row per (GPU, timestamp), a column per field, NULL where a GPU has no sample for a field;
    a GPU scraped under several targets at once is read from one (dcgm_targets).
    Returns the table and a list of the series that were set aside, each with its reason."""
    rows: dict[tuple[SeriesKey, float], dict[str, Any]] = {}
    result, rejected = one_target_per_gpu(list(result), _gpu_of)
    warn_of_merged_servers((label_host(series.get("metric", {})) for series in result), SOURCE_TAG)
    for series in result:
        labels = series.get("metric", {})
        name = labels.get("__name__", "")
        name = FIELD_ALIASES.get(name, name)
        if name not in FIELDS:
            rejected.append(f"{name or '<no __name__>'} {labels}: not a field this source reads")
            continue
        key = series_key(labels)
        if labels.get("GPU_I_ID") and name in DEVICE_FIELDS:
            # with MIG on, dcgm-exporter gives every field once per instance, and the device's own
            # fields (power, energy, clocks, temperatures) are the same in each: read once per GPU,
            # or a MIG GPU's energy left the lake whole
            key = series_key({k: v for k, v in labels.items() if k not in MIG_LABELS})
        if isinstance(key, str):
            rejected.append(f"{name} {labels}: {key}")
            continue
        column, kind = FIELDS[name]
        for ts, raw in series.get("values", []):
            try:
                value = convert_value(raw, kind, wide=column in WIDE_COLUMNS, **_bounds(column))
            except ValueError as exc:
                rejected.append(f"{name} {labels} at {ts}: {exc}")
                continue
            rows.setdefault((key, float(ts)), {})[column] = value
    unreported = drop_unreported_memory_temps(rows.values())
    if unreported:
        log.info("dcgm: %d memory temperatures of 0 C beside a warm GPU read as not reported "
                 "(a GPU without a memory sensor)", unreported)
    ordered = sorted(rows.items(), key=lambda kv: (kv[0][0].gpu_uuid, kv[0][1]))
    data: dict[str, list[Any]] = {
        "sampled_at": [datetime.fromtimestamp(ts, tz=timezone.utc) for (_, ts), _ in ordered],
        "host": [k.host for (k, _), _ in ordered],
        "gpu_index": [k.gpu_index for (k, _), _ in ordered],
        "gpu_uuid": [k.gpu_uuid for (k, _), _ in ordered],
        "gpu_model": [k.gpu_model for (k, _), _ in ordered],
    }
    for column in COLUMNS:
        data[column] = [values.get(column) for _, values in ordered]
    data["source"] = [SOURCE_TAG] * len(ordered)
    schema = pa.schema([GPU_SAMPLES.field(name) for name in data])
    return pa.Table.from_pydict(data, schema=schema), rejected
