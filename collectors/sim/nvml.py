"""A stand-in for the `pynvml` module backed by one host of the simulated fleet.

`SimulatedNvml(gpus)` answers the NVML calls the node agent makes (collectors/agent.py) for the
host's simulated GPUs, with NVML's units (mW, MHz) and NVML's errors: the exception classes are
pynvml's own (`pynvml.NVMLError` and its per-code subclasses, raised as `NVMLError(code)`), so
`except nvml.NVMLError_NoPermission` behaves exactly as with the real library. Limits come from
collectors.sim.constants (default/min/max W and max SM clock per GPU model). Device state (power
limit, locked clocks) survives nvmlShutdown/nvmlInit, as it does on a real driver.

`power_limits_by_day(nvmls, days)` turns the devices' limits into the simulator's
`power_limits_by_day={date: {uuid: W}}`, so the demo can apply a recommended config with the real
agent and simulate the following days under it; `locked_clocks_by_day(nvmls, days)` does the
same for SM clock ranges the agent locked (the simulator's `locked_sm_clocks_by_day`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import pynvml

from joulehouse.collectors.sim.constants import SPECS, GpuModelSpec
from joulehouse.collectors.sim.fleet import build_fleet

NVMLError = pynvml.NVMLError


@dataclass
class SimDevice:
    """One simulated GPU as its driver sees it: identity, limits (mW), locked SM clocks (MHz)."""

    index: int
    uuid: str
    spec: GpuModelSpec
    power_limit_mw: int
    locked_sm_clock_min_mhz: int | None = None
    locked_sm_clock_max_mhz: int | None = None

    @property
    def default_limit_mw(self) -> int:
        return int(round(self.spec.default_limit_w * 1000))

    @property
    def min_limit_mw(self) -> int:
        return int(round(self.spec.min_limit_w * 1000))

    @property
    def max_limit_mw(self) -> int:
        return int(round(self.spec.max_limit_w * 1000))


@dataclass(frozen=True)
class _Handle:
    """An opaque device handle (real pynvml hands out a ctypes pointer)."""

    index: int


class SimulatedNvml:
    """Module-like: `apply_config(..., nvml=SimulatedNvml(...))`. Unknown attributes (NVML_*
    constants, NVMLError_* classes) are pynvml's own.

    `errors` injects failures: {(gpu_index, "nvmlDeviceSetPowerManagementLimit"): NVML_ERROR_NO_PERMISSION}
    makes that call fail on that GPU with that code, as a real driver would."""

    def __init__(self, devices: Sequence[SimDevice], *, errors: Mapping[tuple[int, str], int] | None = None):
        self.devices = list(devices)
        self.errors = dict(errors or {})
        self._init_count = 0

    def __getattr__(self, name: str):
        if name.startswith(("NVML", "NVMLError")):
            return getattr(pynvml, name)
        raise AttributeError(f"SimulatedNvml has no {name!r} (the simulated driver only answers the agent's calls)")

    # -- library ---------------------------------------------------------------------------------
    def nvmlInit(self) -> None:
        self._init_count += 1

    def nvmlInitWithFlags(self, flags: int) -> None:
        self._init_count += 1

    def nvmlShutdown(self) -> None:
        self._check_init()
        self._init_count -= 1

    @staticmethod
    def nvmlErrorString(result: int) -> str:
        return NVMLError._errcode_to_string.get(result, "Unknown Error")

    def _check_init(self) -> None:
        if self._init_count <= 0:
            raise NVMLError(pynvml.NVML_ERROR_UNINITIALIZED)

    def _device(self, handle: object, call: str) -> SimDevice:
        self._check_init()
        if not isinstance(handle, _Handle) or not 0 <= handle.index < len(self.devices):
            raise NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        code = self.errors.get((handle.index, call))
        if code is not None:
            raise NVMLError(code)
        return self.devices[handle.index]

    # -- discovery -------------------------------------------------------------------------------
    def nvmlDeviceGetCount(self) -> int:
        self._check_init()
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> _Handle:
        self._check_init()
        if not 0 <= int(index) < len(self.devices):
            raise NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return _Handle(int(index))

    def nvmlDeviceGetHandleByUUID(self, uuid: str | bytes) -> _Handle:
        self._check_init()
        text = uuid.decode() if isinstance(uuid, bytes) else str(uuid)
        for d in self.devices:
            if d.uuid == text:
                return _Handle(d.index)
        raise NVMLError(pynvml.NVML_ERROR_NOT_FOUND)

    def nvmlDeviceGetUUID(self, handle: _Handle) -> str:
        return self._device(handle, "nvmlDeviceGetUUID").uuid

    def nvmlDeviceGetName(self, handle: _Handle) -> str:
        return self._device(handle, "nvmlDeviceGetName").spec.nvml_name

    def nvmlDeviceGetIndex(self, handle: _Handle) -> int:
        return self._device(handle, "nvmlDeviceGetIndex").index

    # -- power limits (mW) -----------------------------------------------------------------------
    def nvmlDeviceGetPowerManagementLimit(self, handle: _Handle) -> int:
        return self._device(handle, "nvmlDeviceGetPowerManagementLimit").power_limit_mw

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: _Handle) -> int:
        return self._device(handle, "nvmlDeviceGetEnforcedPowerLimit").power_limit_mw

    def nvmlDeviceGetPowerManagementDefaultLimit(self, handle: _Handle) -> int:
        return self._device(handle, "nvmlDeviceGetPowerManagementDefaultLimit").default_limit_mw

    def nvmlDeviceGetPowerManagementLimitConstraints(self, handle: _Handle) -> list[int]:
        d = self._device(handle, "nvmlDeviceGetPowerManagementLimitConstraints")
        return [d.min_limit_mw, d.max_limit_mw]

    def nvmlDeviceSetPowerManagementLimit(self, handle: _Handle, limit_mw: int) -> None:
        d = self._device(handle, "nvmlDeviceSetPowerManagementLimit")
        # The driver refuses (never clamps) a limit outside the constraints: INVALID_ARGUMENT.
        if not d.min_limit_mw <= int(limit_mw) <= d.max_limit_mw:
            raise NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        d.power_limit_mw = int(limit_mw)

    # -- clocks (MHz) ----------------------------------------------------------------------------
    def nvmlDeviceGetMaxClockInfo(self, handle: _Handle, clock_type: int) -> int:
        d = self._device(handle, "nvmlDeviceGetMaxClockInfo")
        if clock_type in (pynvml.NVML_CLOCK_GRAPHICS, pynvml.NVML_CLOCK_SM):
            return d.spec.f_max_mhz
        if clock_type == pynvml.NVML_CLOCK_MEM:
            return d.spec.mem_clock_mhz
        raise NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)

    def nvmlDeviceGetSupportedMemoryClocks(self, handle: _Handle) -> list[int]:
        return [self._device(handle, "nvmlDeviceGetSupportedMemoryClocks").spec.mem_clock_mhz]

    def nvmlDeviceGetSupportedGraphicsClocks(self, handle: _Handle, mem_clock_mhz: int) -> list[int]:
        """Highest first in 15 MHz steps down to the idle clock, as the driver lists them; a memory
        clock the device does not support answers NOT_FOUND."""
        d = self._device(handle, "nvmlDeviceGetSupportedGraphicsClocks")
        if int(mem_clock_mhz) != d.spec.mem_clock_mhz:
            raise NVMLError(pynvml.NVML_ERROR_NOT_FOUND)
        clocks = list(range(d.spec.f_max_mhz, d.spec.f_idle_mhz, -15))
        return clocks + [d.spec.f_idle_mhz]

    def nvmlDeviceSetGpuLockedClocks(self, handle: _Handle, min_mhz: int, max_mhz: int) -> None:
        d = self._device(handle, "nvmlDeviceSetGpuLockedClocks")
        if int(min_mhz) > int(max_mhz) or int(max_mhz) > d.spec.f_max_mhz:
            raise NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        d.locked_sm_clock_min_mhz, d.locked_sm_clock_max_mhz = int(min_mhz), int(max_mhz)

    def nvmlDeviceResetGpuLockedClocks(self, handle: _Handle) -> None:
        d = self._device(handle, "nvmlDeviceResetGpuLockedClocks")
        d.locked_sm_clock_min_mhz = d.locked_sm_clock_max_mhz = None

    # -- what the simulator needs ----------------------------------------------------------------
    def power_limits_w(self) -> dict[str, float]:
        """{gpu_uuid: power limit now in force, W} of this host's devices."""
        return {d.uuid: d.power_limit_mw / 1000.0 for d in self.devices}

    def locked_clocks(self) -> dict[str, tuple[int, int]]:
        """{gpu_uuid: (min, max) MHz} of devices with locked SM clocks."""
        return {d.uuid: (d.locked_sm_clock_min_mhz, d.locked_sm_clock_max_mhz)
                for d in self.devices if d.locked_sm_clock_max_mhz is not None}


def simulated_nvml_by_host(gpus: int = 32, seed: int = 0, hosts: Sequence[str] | None = None,
                           power_limits_w: Mapping[str, float] | None = None) -> dict[str, SimulatedNvml]:
    """One SimulatedNvml per host of the fleet `simulate_fleet(gpus=, seed=, hosts=)` simulates,
    every GPU at its default limit unless `power_limits_w` (uuid -> W) says otherwise."""
    limits = dict(power_limits_w or {})
    by_host: dict[str, list[SimDevice]] = {}
    for g in build_fleet(gpus, seed, hosts):
        spec = SPECS[g.model]
        watts = float(limits.get(g.uuid, spec.default_limit_w))
        by_host.setdefault(g.host, []).append(SimDevice(g.index, g.uuid, spec, int(round(watts * 1000))))
    return {host: SimulatedNvml(devices) for host, devices in by_host.items()}


def power_limits_by_day(nvmls: Iterable[SimulatedNvml], days: Iterable[dt.date]) -> dict[dt.date, dict[str, float]]:
    """The simulator's `power_limits_by_day`: every device's current limit (W) on each of `days`."""
    limits: dict[str, float] = {}
    for nvml in nvmls:
        limits.update(nvml.power_limits_w())
    return {day: dict(limits) for day in days}


def locked_clocks_by_day(nvmls: Iterable[SimulatedNvml],
                         days: Iterable[dt.date]) -> dict[dt.date, dict[str, tuple[int, int]]]:
    """The simulator's `locked_sm_clocks_by_day`: every locked device's (min, max) MHz on each of `days`."""
    locks: dict[str, tuple[int, int]] = {}
    for nvml in nvmls:
        locks.update(nvml.locked_clocks())
    return {day: dict(locks) for day in days}


__all__ = ["SimDevice", "SimulatedNvml", "locked_clocks_by_day", "power_limits_by_day", "simulated_nvml_by_host"]
