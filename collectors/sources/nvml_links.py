"""NVML NVLink source: one `link_samples` row per NVLink-connected GPU per poll, through nvidia-ml-py.

NVML gives NVLink traffic as field values (nvmlDeviceGetFieldValues): NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX
/ _RX (138/139) are counters of data KiB since the driver loaded, per link in `scopeId`, or summed
over all links with scopeId UINT_MAX (what is read here). A rate needs two readings: the first
poll of a GPU gives NULL rates, later ones (counter rise x 1024) / (rise of the field values' own
timestamps, us); a counter that went down (driver reload) gives NULL for that poll.
The capacity per direction is NVML_FI_DEV_NVLINK_LINK_COUNT (91) active links x
NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON (90) MB/s each (10^6 bytes). A GPU whose link count is 0 or
not supported (PCIe boards, old drivers) has no NVLink and gives no rows.

Errors follow NvmlSource (one policy, its `_call`): a field NVML answers NOT_SUPPORTED is NULL; a
lost GPU is skipped this poll; NVML that cannot start raises NvmlUnavailable.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import pyarrow as pa

from joulehouse.collectors.schema import LINK_SAMPLES
from joulehouse.collectors.sources.nvml import FIELD_VALUE_MEMBERS, KIB, NvmlError, NvmlSource, _Gpu

NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON = 90
NVML_FI_DEV_NVLINK_LINK_COUNT = 91
NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX = 138
NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX = 139
ALL_LINKS_SCOPE = 0xFFFFFFFF  # UINT_MAX: the counter summed over every link
MB = 1_000_000
SOURCE_TAG = "nvml"


@dataclass
class _Counters:
    tx_kib: int
    rx_kib: int
    at_us: int


class NvmlLinkSource(NvmlSource):
    """Polls the NVLink counters of every GPU NVML sees on this host (dataset link_samples)."""

    dataset = "link_samples"

    def __init__(self, host: str, *, nvml: ModuleType | None = None, clock: Callable[[], float] = time.time):
        super().__init__(host, nvml=nvml, clock=clock)
        self._last: dict[str, _Counters] = {}

    def _field_values(self, gpu: _Gpu, fields: list[tuple[int, int]]) -> list[Any | None] | None:
        """Each field's value (None where NVML answered it with an error), with the field values'
        timestamps; None when the call itself failed."""
        values = self._reading(gpu, "nvmlDeviceGetFieldValues", fields)
        if values is None:
            return None
        out: list[Any | None] = []
        for value in values:
            member = FIELD_VALUE_MEMBERS.get(value.valueType)
            out.append((getattr(value.value, member), value.timestamp) if value.nvmlReturn == 0 and member else None)
        return out

    def read(self) -> pa.Table:
        if self._gpus is None:
            self._gpus = self._start()
        rows: dict[str, list[Any]] = {name: [] for name in LINK_SAMPLES.names}
        for gpu in self._gpus:
            gpu.lost, gpu.errors = None, []
            if gpu.handle is None or not gpu.uuid or gpu.rediscover:
                self._discover(gpu)
            row = self._sample(gpu)
            if row is not None:
                for name in rows:
                    rows[name].append(row[name])
        return pa.Table.from_pydict(rows, schema=LINK_SAMPLES)

    def _sample(self, gpu: _Gpu) -> dict[str, Any] | None:  # type: ignore[override]
        sampled_at_us = int(self._clock() * 1_000_000)
        if gpu.lost or not gpu.uuid:
            return None
        values = self._field_values(gpu, [(NVML_FI_DEV_NVLINK_LINK_COUNT, 0), (NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON, 0),
                                          (NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, ALL_LINKS_SCOPE),
                                          (NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX, ALL_LINKS_SCOPE)])
        if not values or values[0] is None or not values[0][0]:
            return None  # no NVLink on this GPU (or NVML cannot say): nothing to record
        links, speed, tx, rx = values
        capacity = float(links[0]) * float(speed[0]) * MB if speed is not None and speed[0] else None
        tx_rate = rx_rate = None
        if tx is not None and rx is not None:
            now = _Counters(tx_kib=int(tx[0]), rx_kib=int(rx[0]), at_us=int(tx[1]))
            before = self._last.get(gpu.uuid)
            if before is not None and now.at_us > before.at_us and now.tx_kib >= before.tx_kib and now.rx_kib >= before.rx_kib:
                seconds = (now.at_us - before.at_us) / 1e6
                tx_rate = (now.tx_kib - before.tx_kib) * KIB / seconds
                rx_rate = (now.rx_kib - before.rx_kib) * KIB / seconds
            self._last[gpu.uuid] = now
        return {
            "sampled_at": sampled_at_us, "host": self.host, "link_kind": "nvlink", "device": gpu.uuid,
            "gpu_index": gpu.index, "gpu_model": gpu.model, "tx_bytes_per_s": tx_rate, "rx_bytes_per_s": rx_rate,
            "capacity_bytes_per_s": capacity, "source": SOURCE_TAG,
        }


__all__ = ["NvmlLinkSource", "NvmlError"]
