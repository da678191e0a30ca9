"""What the real NVML answers on a GPU machine, recorded so that the stand-in library the tests
load (tests/nvml_stub) can be checked against it, and the energy the warehouse computes can be
checked against the GPU's own counter under a load that changes faster than the power reading.

Read only: nothing here sets a clock, a limit or a mode. Runs under the machine's python3 with the
node role's wheels on PYTHONPATH (infra/device/run_probe.sh says how):

  python3 infra/device/nvml_probe.py answers OUT.json     every pynvml call the collectors make
  python3 infra/device/nvml_probe.py sample OUT.csv S     power and counter every 20 ms for S seconds
  python3 infra/device/nvml_probe.py load OUT.json        the load ladder (torch), its phases' times

Units as NVML gives them: power mW, energy mJ, clocks MHz, PCIe KB/s, memory bytes.
"""

from __future__ import annotations

import ctypes
import json
import sys
import time
from pathlib import Path
from typing import Any

UINT_MAX = 0xFFFFFFFF
# NVML field ids (nvml.h): memory temperature, NVLink speed/count/throughput, power average/instant
FIELDS = {"memory_temp": (82, 0), "nvlink_speed_mbps_common": (90, 0), "nvlink_link_count": (91, 0),
          "nvlink_throughput_data_tx": (138, UINT_MAX), "nvlink_throughput_data_rx": (139, UINT_MAX),
          "power_average": (185, 0), "power_instant": (186, 0)}


MEMBERS = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}


def describe(value: Any) -> Any:
    """A JSON picture of a pynvml answer that keeps its Python and ctypes types."""
    if isinstance(value, ctypes.Structure):
        return {"__struct__": type(value).__name__,
                **{name: describe(getattr(value, name)) for name, *_ in value._fields_}}
    if isinstance(value, ctypes.Union):  # every member: which one counts is the struct's valueType
        return {"__union__": type(value).__name__,
                **{name: describe(getattr(value, name)) for name, *_ in value._fields_}}
    if isinstance(value, (list, tuple, ctypes.Array)):
        return {"__seq__": type(value).__name__, "items": [describe(v) for v in value]}
    if isinstance(value, bytes):
        return {"__bytes__": value.decode(errors="replace")}
    if value is None or isinstance(value, (bool, int, float, str)):
        return {"__type__": type(value).__name__, "value": value}
    return {"__type__": type(value).__name__, "repr": repr(value)[:200]}


def answers(out: Path) -> None:
    import pynvml as nvml

    record: dict[str, Any] = {"pynvml_file": nvml.__file__, "calls": {}}

    def call(label: str, name: str, *args: Any) -> Any:
        t0 = time.perf_counter()
        try:
            value = getattr(nvml, name)(*args)
        except nvml.NVMLError as exc:
            record["calls"][label] = {"ok": False, "error_class": type(exc).__name__,
                                      "code": getattr(exc, "value", None), "text": str(exc),
                                      "us": (time.perf_counter() - t0) * 1e6}
            return None
        except Exception as exc:  # a pynvml-side failure (a missing symbol): recorded, not fatal
            record["calls"][label] = {"ok": False, "error_class": type(exc).__name__, "text": str(exc)}
            return None
        record["calls"][label] = {"ok": True, "answer": describe(value), "us": (time.perf_counter() - t0) * 1e6}
        return value

    call("nvmlInit", "nvmlInit")
    call("nvmlSystemGetDriverVersion", "nvmlSystemGetDriverVersion")
    call("nvmlSystemGetNVMLVersion", "nvmlSystemGetNVMLVersion")
    count = call("nvmlDeviceGetCount", "nvmlDeviceGetCount")
    call("nvmlDeviceGetHandleByIndex(out_of_range)", "nvmlDeviceGetHandleByIndex", (count or 0) + 7)
    handle = call("nvmlDeviceGetHandleByIndex", "nvmlDeviceGetHandleByIndex", 0)
    for name in ("nvmlDeviceGetUUID", "nvmlDeviceGetName", "nvmlDeviceGetPowerManagementLimitConstraints",
                 "nvmlDeviceGetPowerManagementDefaultLimit", "nvmlDeviceGetPowerManagementLimit",
                 "nvmlDeviceGetEnforcedPowerLimit", "nvmlDeviceGetPowerUsage",
                 "nvmlDeviceGetTotalEnergyConsumption", "nvmlDeviceGetUtilizationRates",
                 "nvmlDeviceGetMemoryInfo", "nvmlDeviceGetPerformanceState",
                 "nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetCurrentClocksEventReasons",
                 "nvmlDeviceGetCurrentClocksThrottleReasons", "nvmlDeviceGetPersistenceMode",
                 "nvmlDeviceGetApplicationsClock", "nvmlDeviceGetSupportedMemoryClocks"):
        call(name, name, handle) if name != "nvmlDeviceGetApplicationsClock" else \
            call(name, name, handle, nvml.NVML_CLOCK_SM)
    call("nvmlDeviceGetTemperature(GPU)", "nvmlDeviceGetTemperature", handle, nvml.NVML_TEMPERATURE_GPU)
    call("nvmlDeviceGetClockInfo(SM)", "nvmlDeviceGetClockInfo", handle, nvml.NVML_CLOCK_SM)
    call("nvmlDeviceGetClockInfo(MEM)", "nvmlDeviceGetClockInfo", handle, nvml.NVML_CLOCK_MEM)
    call("nvmlDeviceGetMaxClockInfo(SM)", "nvmlDeviceGetMaxClockInfo", handle, nvml.NVML_CLOCK_SM)
    call("nvmlDeviceGetPcieThroughput(TX)", "nvmlDeviceGetPcieThroughput", handle, nvml.NVML_PCIE_UTIL_TX_BYTES)
    call("nvmlDeviceGetPcieThroughput(RX)", "nvmlDeviceGetPcieThroughput", handle, nvml.NVML_PCIE_UTIL_RX_BYTES)
    for label, field in FIELDS.items():
        call(f"nvmlDeviceGetFieldValues({label})", "nvmlDeviceGetFieldValues", handle, [field])
    call("nvmlDeviceGetFieldValues(memory_temp, bare id)", "nvmlDeviceGetFieldValues", handle, [82])
    # what one poll of the collector costs on this GPU, through the collector's own source
    from joulehouse.collectors.sources.nvml import NvmlSource

    source, polls = NvmlSource("probe"), []
    first = source.read()
    for _ in range(50):
        t0 = time.perf_counter()
        source.read()
        polls.append((time.perf_counter() - t0) * 1e3)
    record["nvml_source"] = {"first_row": {k: v[0] for k, v in first.to_pydict().items()},
                             "poll_ms": sorted(polls), "gpus": first.num_rows}
    source.close()
    call("nvmlShutdown", "nvmlShutdown")
    out.write_text(json.dumps(record, indent=1, default=str))


def sample(out: Path, seconds: float) -> None:
    """time_s (UNIX), power_mw (nvmlDeviceGetPowerUsage), energy_mj (the counter), and the
    average and instant power fields, every 20 ms."""
    import pynvml as nvml

    nvml.nvmlInit()
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    power_fields = [FIELDS["power_average"], FIELDS["power_instant"]]
    end = time.time() + seconds
    with out.open("w") as f:
        f.write("time_s,power_mw,energy_mj,power_average_mw,power_instant_mw\n")
        next_at = time.time()
        while next_at < end:
            now = time.time()
            power = nvml.nvmlDeviceGetPowerUsage(handle)
            energy = nvml.nvmlDeviceGetTotalEnergyConsumption(handle)
            try:
                values = nvml.nvmlDeviceGetFieldValues(handle, power_fields)
                extra = [str(getattr(v.value, MEMBERS[v.valueType])) if v.nvmlReturn == 0 and v.valueType in MEMBERS
                         else "" for v in values]
            except nvml.NVMLError:
                extra = ["", ""]
            f.write(f"{now:.6f},{power},{energy},{extra[0]},{extra[1]}\n")
            next_at += 0.02
            time.sleep(max(0.0, next_at - time.time()))
    nvml.nvmlShutdown()


def load(out: Path) -> None:
    """Idle, full matmul, matmul 100 ms on / 100 ms off, a memory-bound copy, idle; each phase's
    start and end (UNIX seconds) into `out`."""
    import torch

    dev = torch.device("cuda")
    a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    x = torch.empty(2 * 1024**3 // 2, device=dev, dtype=torch.bfloat16)
    y = torch.empty_like(x)
    torch.cuda.synchronize()
    phases = []

    def phase(name: str, seconds: float, work) -> None:
        start = time.time()
        while time.time() - start < seconds:
            work()
        torch.cuda.synchronize()
        phases.append({"phase": name, "start_s": start, "end_s": time.time()})

    def matmuls(n: int = 20) -> None:
        for _ in range(n):
            a @ b
        torch.cuda.synchronize()

    def duty() -> None:
        t0 = time.time()
        while time.time() - t0 < 0.1:
            matmuls(4)
        time.sleep(0.1)

    def copies() -> None:
        for _ in range(20):
            y.copy_(x)
        torch.cuda.synchronize()

    phase("idle_before", 15, lambda: time.sleep(0.05))
    phase("matmul_full", 25, matmuls)
    phase("matmul_duty_100ms", 20, duty)
    phase("copy_membound", 20, copies)
    phase("idle_after", 15, lambda: time.sleep(0.05))
    out.write_text(json.dumps(phases, indent=1))


if __name__ == "__main__":
    mode, target = sys.argv[1], Path(sys.argv[2])
    if mode == "answers":
        answers(target)
    elif mode == "sample":
        sample(target, float(sys.argv[3]))
    elif mode == "load":
        load(target)
    else:
        raise SystemExit(f"unknown mode {mode!r}: answers, sample or load")
