"""NVML source: one gpu_samples row per GPU per poll, read through nvidia-ml-py (`pynvml`).

Units, as stored: power_w W (NVML gives integer mW), energy_mj_total mJ (NVML's counter since the
driver loaded; integrate this, not power: on A100/H100 the instantaneous power reading covers
only about a quarter of the time), temp_c / mem_temp_c C, sm_clock_mhz / mem_clock_mhz MHz,
util_gpu_pct / util_mem_pct 0-100, mem_used_mib MiB, power_limit_w W (the enforced limit),
pcie_tx/rx_bytes_per_s bytes/s (NVML gives KB/s; 1 KB = 1024 bytes here), pstate 0-15,
clock_event_reasons the NVML bitmask.

On a real H200 (driver 580; infra/device/README.md) the power reading and the counter both move
every 100 ms, the power reading is a 100 ms average, and their energies agree within 0.5% per
phase of a changing load; the counter is still what the warehouse integrates when it is there.

Cost of a poll: NVML counts PCIe bytes over a 20 ms window per nvmlDeviceGetPcieThroughput call,
so the two of them were 42 of the 48 ms a poll of one H200 took. They run in threads (NVML is
thread-safe), every GPU's at once, while the other readings are taken: a poll of that H200 fell
from 47.1-48.1 to 22.0-22.2 ms (medians of three runs each). A poll of 8 GPUs should then cost
about one window plus the other readings instead of 16 windows in a row (about 340 ms); only one
GPU was lent to measure it.

`power_limit_min_w` / `power_limit_max_w` / `power_limit_default_w` (W) are read once per GPU when it
is first seen. Extra columns: `running_pids` (list of PIDs of compute processes, for job
attribution; `take_processes()` hands the full list, with each process's memory, to the process
map in collectors/sources/gpu_processes.py) and `error` (NULL on a good row; else which NVML calls failed and why).

Error policy, applied in one place (`_call`): NOT_SUPPORTED, NO_DATA, a function the driver
lacks (NVMLError_FunctionNotFound, old drivers) -> the reading is NULL and the row is good.
GPU_IS_LOST / GPU_NOT_FOUND / RESET_REQUIRED -> the GPU's row is written with every reading
NULL and `error` saying so; the other GPUs go on. Any other error -> that reading is NULL and
`error` names the call. NVML that cannot start at all raises NvmlUnavailable (a SourceError).

A GPU whose UUID NVML never gave (lost before the collector's first poll, or its UUID call
failing) has no key the lake can take (gpu_uuid is required; '' would be a phantom GPU): it gets
no row until its UUID is read, which is tried again every poll. The log says which GPU index is
unidentified and why (a warning when it starts or its cause changes, an info line when it is
identified), and a read where no GPU NVML counts can be identified raises SourceError after the
first poll (the first one answers: the collector starts, and a GPU may come back).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import pyarrow as pa

from joulehouse.collectors.schema import GPU_SAMPLES, signed_integer_bounds
from joulehouse.collectors.sources.base import ERROR_COLUMN, SourceError
from joulehouse.collectors.sources.host_names import canonical_host

log = logging.getLogger(__name__)

KIB = 1024
NVML_FI_DEV_MEMORY_TEMP = 82
# nvmlFieldValue_t.value member for each NVML_VALUE_TYPE_* (pynvml's c_nvmlValue_t names)
FIELD_VALUE_MEMBERS = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}
NVML_PSTATE_UNKNOWN = 32
_UNSUPPORTED = {3, 21}  # NOT_SUPPORTED, NO_DATA
_LOST = {15, 16, 28}  # GPU_IS_LOST, RESET_REQUIRED, GPU_NOT_FOUND
_MAX_PCIE_THREADS = 32  # two reads per GPU, up to 16 GPUs at once


class NvmlError(RuntimeError):
    """An NVML call failed; the message names the call and NVML's error."""


class NvmlUnsupported(NvmlError):
    """The GPU or driver has no such reading (the value is NULL, not an error)."""


class NvmlFunctionMissing(NvmlUnsupported):
    """The driver's NVML lacks the function (older driver)."""


class NvmlGpuLost(NvmlError):
    """The GPU fell off the bus or needs a reset."""


class NvmlUnavailable(SourceError):
    """NVML itself could not start (no driver, no library)."""


_SCHEMA_FIELDS = {f.name: f for f in GPU_SAMPLES}
_EXTRA_FIELDS = [
    pa.field("running_pids", pa.list_(pa.int64())),
    pa.field(ERROR_COLUMN, pa.string()),
]
_COLUMNS = [
    "sampled_at", "host", "gpu_index", "gpu_uuid", "gpu_model", "power_w", "energy_mj_total", "temp_c",
    "mem_temp_c", "sm_clock_mhz", "mem_clock_mhz", "util_gpu_pct", "util_mem_pct", "mem_used_mib",
    "power_limit_w", "pcie_tx_bytes_per_s", "pcie_rx_bytes_per_s", "pstate", "clock_event_reasons", "source",
    "power_limit_min_w", "power_limit_max_w", "power_limit_default_w",
]
ROW_SCHEMA = pa.schema([_SCHEMA_FIELDS[c] for c in _COLUMNS] + _EXTRA_FIELDS)
# Integer readings -> the (lowest, highest) value their column holds. NVML answers unsigned
# (the energy counter and the event-reasons mask are u64): a garbage value past the column's
# range made pyarrow refuse the whole poll's table, every GPU's row lost.
_READING_RANGES = {column: bounds for column, bounds in signed_integer_bounds(ROW_SCHEMA).items()
                   if column in _COLUMNS and column != "gpu_index"}


def _import_pynvml() -> ModuleType:
    import pynvml

    return pynvml


@dataclass
class _Gpu:
    index: int
    handle: Any = None
    uuid: str | None = None  # None until NVML gives it: such a GPU gets no row (no key for the lake)
    model: str | None = None
    limits_w: tuple[float | None, float | None, float | None] = (None, None, None)
    lost: str | None = None
    errors: list[str] = field(default_factory=list)
    # A discovery call failed (not "not supported"): discover again at the next poll.
    rediscover: bool = False


class NvmlSource:
    """Polls every GPU NVML sees on this host. `nvml` is the pynvml module (a test may hand in
    another); `clock` gives seconds since the epoch (UTC)."""

    dataset = "gpu_samples"

    def __init__(self, host: str, *, nvml: ModuleType | None = None, clock: Callable[[], float] = time.time):
        self.host = canonical_host(host)  # as every source names this server (host_names)
        self._nvml = nvml
        self._clock = clock
        self._gpus: list[_Gpu] | None = None
        self._event_reasons_fn = "nvmlDeviceGetCurrentClocksEventReasons"
        self._processes: list[dict[str, Any]] | None = None
        self._pcie_pool: ThreadPoolExecutor | None = None
        # GPU index -> why NVML has not identified it (no UUID yet): those GPUs get no row
        self.unidentified: dict[int, str] = {}
        self._polled = False

    def _call(self, gpu: _Gpu | None, name: str, *args: Any) -> Any:
        """Call pynvml.<name>(*args), translating NVML's errors into this module's exceptions."""
        nvml = self._nvml
        try:
            return getattr(nvml, name)(*args)
        except nvml.NVMLError as exc:
            code = getattr(exc, "value", None)
            text = f"{name}: {exc} (NVML error {code})"
            if code == 13:  # FUNCTION_NOT_FOUND
                raise NvmlFunctionMissing(text) from None
            if code in _UNSUPPORTED:
                raise NvmlUnsupported(text) from None
            if code in _LOST:
                raise NvmlGpuLost(text) from None
            raise NvmlError(text) from None
        except nvml.NVMLLibraryMismatchError as exc:  # pynvml's word for a missing unversioned function
            raise NvmlFunctionMissing(f"{name}: {exc}") from None

    def _reading(self, gpu: _Gpu, name: str, *args: Any, raise_missing: bool = False) -> Any:
        """One reading of one GPU, or None. A lost GPU stops being read for this poll.
        `raise_missing`: a function the driver lacks raises NvmlFunctionMissing (the caller has another)."""
        if gpu.lost:
            return None
        return self._settled(gpu, self._attempt(gpu, name, *args), raise_missing=raise_missing)

    def _attempt(self, gpu: _Gpu, name: str, *args: Any) -> tuple[Any, NvmlError | None]:
        """The call's value or its error, leaving `gpu` alone: what a worker thread may do."""
        try:
            return self._call(gpu, name, gpu.handle, *args), None
        except NvmlError as exc:
            return None, exc

    def _settled(self, gpu: _Gpu, outcome: tuple[Any, NvmlError | None], *, raise_missing: bool = False) -> Any:
        """The error policy, on the reading thread: NULL for what the GPU lacks, the GPU marked
        lost, any other error said in the row's `error`."""
        value, error = outcome
        if error is None or gpu.lost:
            return None if gpu.lost else value
        if isinstance(error, NvmlFunctionMissing) and raise_missing:
            raise error
        if isinstance(error, NvmlGpuLost):
            gpu.lost = str(error)
        elif not isinstance(error, NvmlUnsupported):
            gpu.errors.append(str(error))
        return None

    def _start(self) -> list[_Gpu]:
        if self._nvml is None:
            try:
                self._nvml = _import_pynvml()
            except ImportError as exc:
                raise NvmlUnavailable(f"nvidia-ml-py is not installed: {exc}") from None
        try:
            self._call(None, "nvmlInit")
            count = self._call(None, "nvmlDeviceGetCount")
        except NvmlError as exc:
            raise NvmlUnavailable(f"NVML on host {self.host!r} cannot start: {exc}") from None
        gpus = [_Gpu(index=i) for i in range(count)]
        for gpu in gpus:
            self._discover(gpu)
        return gpus

    def _discover(self, gpu: _Gpu) -> None:
        """Get the handle, UUID, model and limit constraints (fixed for a GPU's life)."""
        try:
            gpu.handle = self._call(gpu, "nvmlDeviceGetHandleByIndex", gpu.index)
        except NvmlError as exc:
            gpu.handle, gpu.lost = None, str(exc)
            return
        errors_before = len(gpu.errors)
        gpu.uuid = _text(self._reading(gpu, "nvmlDeviceGetUUID")) or gpu.uuid
        gpu.model = _text(self._reading(gpu, "nvmlDeviceGetName")) or gpu.model
        limits = self._reading(gpu, "nvmlDeviceGetPowerManagementLimitConstraints")
        default = self._reading(gpu, "nvmlDeviceGetPowerManagementDefaultLimit")
        lo, hi = limits if limits else (None, None)
        found = (_mw_to_w(lo), _mw_to_w(hi), _mw_to_w(default))
        gpu.limits_w = tuple(new if new is not None else old for new, old in zip(found, gpu.limits_w))
        # A transient error (UNKNOWN, TIMEOUT) must not leave the model or limits NULL for the
        # process's life: try again next poll, and that poll's row says what failed.
        gpu.rediscover = len(gpu.errors) > errors_before or gpu.lost is not None

    def read(self) -> pa.Table:
        """One row per GPU, sampled now."""
        if self._gpus is None:
            self._gpus = self._start()
        rows = {name: [] for name in ROW_SCHEMA.names}
        self._processes = []
        for gpu in self._gpus:
            gpu.lost, gpu.errors = None, []
            if gpu.handle is None or not gpu.uuid or gpu.rediscover:
                self._discover(gpu)  # lost or failing at start-up: try again each poll
        known = self._identified()
        pcie = [self._start_pcie_reads(gpu) for gpu in known]
        try:
            for gpu, pcie_reads in zip(known, pcie):
                for name, value in self._sample(gpu, pcie_reads).items():
                    rows[name].append(value)
        finally:  # a poll that failed half-way leaves no read in flight
            wait([read for pair in pcie if pair for read in pair])
        first, self._polled = not self._polled, True
        if not known and self.unidentified and not first:
            raise SourceError(f"NVML on host {self.host!r} sees {len(self._gpus)} GPUs and can identify none: "
                              + "; ".join(f"GPU index {i}: {why}" for i, why in sorted(self.unidentified.items())))
        return pa.Table.from_pydict(rows, schema=ROW_SCHEMA)

    def _identified(self) -> list[_Gpu]:
        """The GPUs with a UUID, to be read; the others are kept in `unidentified` and logged when
        that starts, when its cause changes, and when they are identified."""
        known = []
        for gpu in self._gpus or ():
            if gpu.uuid:
                known.append(gpu)
                if self.unidentified.pop(gpu.index, None) is not None:
                    log.info("nvml: GPU index %d on %s identified as %s; its rows are written from now",
                             gpu.index, self.host, gpu.uuid)
                continue
            why = gpu.lost or "; ".join(gpu.errors) or "NVML gave no UUID"
            if self.unidentified.get(gpu.index) != why:
                log.warning("nvml: GPU index %d on %s has no UUID (%s): no row until NVML gives it, "
                            "tried again every poll", gpu.index, self.host, why)
            self.unidentified[gpu.index] = why
        return known

    def _start_pcie_reads(self, gpu: _Gpu) -> tuple[Future, Future] | None:
        """The GPU's two PCIe counters, each read in a thread (20 ms each: see the module doc);
        None for a GPU already lost. The threads only call: `_sample` settles their outcomes."""
        if gpu.lost:
            return None
        if self._pcie_pool is None:
            workers = min(_MAX_PCIE_THREADS, 2 * max(1, len(self._gpus or ())))
            self._pcie_pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="nvml-pcie")
        nvml = self._nvml
        return (self._pcie_pool.submit(self._attempt, gpu, "nvmlDeviceGetPcieThroughput", nvml.NVML_PCIE_UTIL_TX_BYTES),
                self._pcie_pool.submit(self._attempt, gpu, "nvmlDeviceGetPcieThroughput", nvml.NVML_PCIE_UTIL_RX_BYTES))

    def _sample(self, gpu: _Gpu, pcie_reads: tuple[Future, Future] | None) -> dict[str, Any]:
        nvml = self._nvml
        sampled_at_us = int(self._clock() * 1_000_000)
        util = self._reading(gpu, "nvmlDeviceGetUtilizationRates")
        memory = self._reading(gpu, "nvmlDeviceGetMemoryInfo")
        pstate = self._reading(gpu, "nvmlDeviceGetPerformanceState")
        processes = self._reading(gpu, "nvmlDeviceGetComputeRunningProcesses")
        row = {
            "power_w": _mw_to_w(self._reading(gpu, "nvmlDeviceGetPowerUsage")),
            "energy_mj_total": self._reading(gpu, "nvmlDeviceGetTotalEnergyConsumption"),
            "temp_c": self._reading(gpu, "nvmlDeviceGetTemperature", nvml.NVML_TEMPERATURE_GPU),
            "mem_temp_c": self._memory_temp_c(gpu),
            "sm_clock_mhz": self._reading(gpu, "nvmlDeviceGetClockInfo", nvml.NVML_CLOCK_SM),
            "mem_clock_mhz": self._reading(gpu, "nvmlDeviceGetClockInfo", nvml.NVML_CLOCK_MEM),
            "util_gpu_pct": util.gpu if util is not None else None,
            "util_mem_pct": util.memory if util is not None else None,
            "mem_used_mib": memory.used // (1024 * 1024) if memory is not None else None,
            "power_limit_w": _mw_to_w(self._reading(gpu, "nvmlDeviceGetEnforcedPowerLimit")),
            # settled here, in the order of the calls before the threads: the row's `error` lists
            # the failures in the same order every poll, and a GPU found lost nulls the row below
            "pcie_tx_bytes_per_s": _kib(self._settled(gpu, pcie_reads[0].result())) if pcie_reads else None,
            "pcie_rx_bytes_per_s": _kib(self._settled(gpu, pcie_reads[1].result())) if pcie_reads else None,
            "pstate": pstate if pstate is not None and 0 <= pstate < NVML_PSTATE_UNKNOWN else None,
            "clock_event_reasons": self._clock_event_reasons(gpu),
            "running_pids": [p.pid for p in processes] if processes is not None else None,
        }
        if processes and not gpu.lost:
            self._processes.extend({"sampled_at": sampled_at_us, "gpu_index": gpu.index, "gpu_uuid": gpu.uuid,
                                    "pid": p.pid, "used_gpu_memory_bytes": p.usedGpuMemory} for p in processes)
        self._null_out_of_range(gpu, row)
        if gpu.lost:  # readings taken before the GPU was found lost are not trusted either
            row = dict.fromkeys(row)
        errors = [gpu.lost] if gpu.lost else gpu.errors
        row.update(
            sampled_at=sampled_at_us, host=self.host, gpu_index=gpu.index, gpu_uuid=gpu.uuid,
            gpu_model=gpu.model, source="nvml", power_limit_min_w=gpu.limits_w[0],
            power_limit_max_w=gpu.limits_w[1], power_limit_default_w=gpu.limits_w[2],
            error="; ".join(errors) if errors else None,
        )
        return row

    def _null_out_of_range(self, gpu: _Gpu, row: dict[str, Any]) -> None:
        """NULL each reading its lake column cannot hold, said in the row's `error`."""
        for column, (lowest, highest) in _READING_RANGES.items():
            value = row.get(column)
            if value is not None and not lowest <= value <= highest:
                gpu.errors.append(f"{column}: NVML gave {value}, outside what its "
                                  f"{ROW_SCHEMA.field(column).type} column holds ({lowest}..{highest})")
                row[column] = None

    def _memory_temp_c(self, gpu: _Gpu) -> float | None:
        values = self._reading(gpu, "nvmlDeviceGetFieldValues", [NVML_FI_DEV_MEMORY_TEMP])
        if not values or values[0].nvmlReturn != 0:
            return None
        # The value is a union: the member to read is the one valueType names, not a fixed one.
        member = FIELD_VALUE_MEMBERS.get(values[0].valueType)
        if member is None:
            gpu.errors.append(f"nvmlDeviceGetFieldValues(memory temperature): unknown valueType {values[0].valueType}")
            return None
        return float(getattr(values[0].value, member))

    def _clock_event_reasons(self, gpu: _Gpu) -> int | None:
        """Drivers before 535 only have the older name ("throttle reasons") for the same bitmask."""
        older = "nvmlDeviceGetCurrentClocksThrottleReasons"
        try:
            return self._reading(gpu, self._event_reasons_fn, raise_missing=self._event_reasons_fn != older)
        except NvmlFunctionMissing:
            self._event_reasons_fn = older
            return self._reading(gpu, older)

    def take_processes(self) -> list[dict[str, Any]] | None:
        """The compute processes the last read saw (sampled_at in us, gpu_index, gpu_uuid, pid,
        used_gpu_memory_bytes: pynvml's usedGpuMemory, None where NVML cannot tell), once: None
        when there was no read since the last call (the process map then writes nothing)."""
        taken, self._processes = self._processes, None
        return taken

    def close(self) -> None:
        if self._pcie_pool is not None:  # no read in flight when NVML shuts down
            self._pcie_pool.shutdown(wait=True)
            self._pcie_pool = None
        if self._gpus is not None and self._nvml is not None:
            try:
                self._call(None, "nvmlShutdown")
            except NvmlError:
                pass  # shutting down a driver that already went away is not worth failing for
        self._gpus, self._polled = None, False


def _mw_to_w(value: int | None) -> float | None:
    return value / 1000.0 if value is not None else None


def _kib(value: int | None) -> int | None:
    return value * KIB if value is not None else None


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else str(value)
