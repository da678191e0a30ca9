"""Pytest fixtures for the stand-in `libnvidia-ml.so.1` (tests/nvml_stub/nvml_stub.c).

The stub is built once per session with gcc into a temp folder. Two ways to make the real
nvidia-ml-py load it, both checked against pynvml's loader (`CDLL("libnvidia-ml.so.1")` in
`_LoadNvmlLibrary`):

- in this process: `ctypes.CDLL(path, RTLD_GLOBAL)` first. glibc's dlopen matches a bare name
  against the SONAME of objects already loaded, so pynvml's `CDLL("libnvidia-ml.so.1")` gets
  the stub without touching LD_LIBRARY_PATH (which the dynamic loader reads only at start-up).
  The `nvml_stub` fixture does this and also drops a library pynvml may have loaded before.
- in a subprocess: `env=stub.env()` puts the stub's folder first on LD_LIBRARY_PATH and names the
  state file.

Usage:
    def test_x(nvml_stub):
        nvml_stub.write([GpuState.h100(0), GpuState.a100(1, error={"*": "GPU_IS_LOST"})])
        nvml_stub.set(0, power_mw=250_000)          # takes effect on the next NVML call
        nvml_stub.read()["gpu0.power_limit_mw"]      # what Set* calls wrote back
"""

from __future__ import annotations

import ctypes
import os
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pytest

STUB_SOURCE = Path(__file__).with_name("nvml_stub.c")
STATE_ENV = "JOULEHOUSE_NVML_STUB_STATE"
SONAME = "libnvidia-ml.so.1"


def build_stub(out_dir: Path) -> Path:
    """Compile nvml_stub.c into `out_dir/libnvidia-ml.so.1` and return its path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    lib = out_dir / SONAME
    cmd = ["gcc", "-O1", "-Wall", "-shared", "-fPIC", f"-Wl,-soname,{SONAME}", "-o", str(lib),
           str(STUB_SOURCE), "-lpthread"]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"building the NVML stub failed: {' '.join(cmd)}\n{done.stderr}")
    return lib


@dataclass
class GpuState:
    """One stand-in GPU, in NVML's units. None leaves the key out: NVML answers NOT_SUPPORTED."""

    name: str | None
    uuid: str | None
    power_mw: int | None = None
    energy_mj_total: int | None = None
    temp_c: int | None = None
    mem_temp_c: int | None = None
    mem_temp_value_type: int | None = None  # NVML_VALUE_TYPE_* the stub answers field 82 with (default 1)
    sm_clock_mhz: int | None = None
    mem_clock_mhz: int | None = None
    max_sm_clock_mhz: int | None = None
    min_sm_clock_mhz: int | None = None
    max_mem_clock_mhz: int | None = None
    util_gpu_pct: int | None = None
    util_mem_pct: int | None = None
    mem_total_mib: int | None = None
    mem_used_mib: int | None = None
    power_limit_mw: int | None = None
    power_limit_default_mw: int | None = None
    power_limit_min_mw: int | None = None
    power_limit_max_mw: int | None = None
    clock_event_reasons: int | None = None
    pcie_tx_kb_per_s: int | None = None
    pcie_rx_kb_per_s: int | None = None
    pstate: int | None = None
    nvlink_link_count: int | None = None  # field value 91; None: no NVLink (NOT_SUPPORTED)
    nvlink_speed_mbps: int | None = None  # field value 90, per link and direction
    nvlink_tx_kib_total: int | None = None  # field values 138/139: KiB counters since driver load
    nvlink_rx_kib_total: int | None = None
    # pid -> used GPU memory in MiB (None: NVML_VALUE_NOT_AVAILABLE, as under MIG or vGPU)
    processes: dict[int, int | None] = field(default_factory=dict)
    # NVML function name (or "*") -> error name such as "GPU_IS_LOST", "NOT_SUPPORTED"
    error: dict[str, str] = field(default_factory=dict)

    @classmethod
    def _model(cls, index: int, name: str, limits_w: tuple[int, int, int], idle_w: int,
               sm_mhz: tuple[int, int], mem_mhz: int, **overrides: Any) -> "GpuState":
        min_sm_mhz, max_sm_mhz = sm_mhz
        default_w, min_w, max_w = limits_w
        base = dict(
            name=name, uuid=f"GPU-5eed{index:04d}-0000-4000-8000-{index:012d}",
            power_mw=idle_w * 1000, energy_mj_total=1_000_000 * (index + 1), temp_c=33,
            mem_temp_c=40, sm_clock_mhz=345, mem_clock_mhz=mem_mhz, max_sm_clock_mhz=max_sm_mhz,
            min_sm_clock_mhz=min_sm_mhz, max_mem_clock_mhz=mem_mhz, util_gpu_pct=0, util_mem_pct=0,
            mem_total_mib=81559,
            mem_used_mib=4, power_limit_mw=default_w * 1000, power_limit_default_mw=default_w * 1000,
            power_limit_min_mw=min_w * 1000, power_limit_max_mw=max_w * 1000,
            clock_event_reasons=0x1, pcie_tx_kb_per_s=0, pcie_rx_kb_per_s=0, pstate=0,
        )
        base.update(overrides)
        return cls(**base)

    @classmethod
    def a100(cls, index: int, **overrides: Any) -> "GpuState":
        """NVIDIA A100-SXM4-80GB: limits 400/100/400 W, idle ~52 W, SM 210-1410 MHz."""
        return cls._model(index, "NVIDIA A100-SXM4-80GB", (400, 100, 400), 52, (210, 1410), 1593, **overrides)

    @classmethod
    def h100(cls, index: int, **overrides: Any) -> "GpuState":
        """NVIDIA H100 80GB HBM3: limits 700/200/700 W, idle ~72 W, SM 345-1980 MHz."""
        return cls._model(index, "NVIDIA H100 80GB HBM3", (700, 200, 700), 72, (345, 1980), 2619, **overrides)

    @classmethod
    def h200(cls, index: int, **overrides: Any) -> "GpuState":
        """NVIDIA H200: limits 700/200/700 W, idle ~75 W, SM 345-1980 MHz."""
        return cls._model(index, "NVIDIA H200", (700, 200, 700), 75, (345, 1980), 3201, mem_total_mib=143771, **overrides)


def _gpu_lines(index: int, gpu: GpuState) -> list[str]:
    lines = []
    for key, value in asdict(gpu).items():
        if key == "processes":
            if value:
                lines.append(f"gpu{index}.processes " + _process_list(value))
        elif key == "error":
            lines += [f"gpu{index}.error.{fn} {err}" for fn, err in value.items()]
        elif value is not None:
            lines.append(f"gpu{index}.{key} {value}")
    return lines


class NvmlStub:
    """The state file of the stand-in NVML library, and the environment that points at it."""

    def __init__(self, library: Path, state_path: Path):
        self.library = library
        self.state_path = state_path

    def write(self, gpus: list[GpuState], *, driver_version: str = "550.54.15",
              errors: dict[str, str] | None = None, device_count: int | None = None) -> None:
        """Replace the whole state: these GPUs (index = position), call-wide injected errors
        (e.g. {"nvmlInitWithFlags": "DRIVER_NOT_LOADED"})."""
        lines = [f"device_count {len(gpus) if device_count is None else device_count}",
                 f"driver_version {driver_version}"]
        lines += [f"error.{fn} {err}" for fn, err in (errors or {}).items()]
        for i, gpu in enumerate(gpus):
            lines += _gpu_lines(i, gpu)
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text("\n".join(lines) + "\n")
        os.replace(tmp, self.state_path)  # a concurrent reader sees old or new, never half

    def set(self, index: int, **values: Any) -> None:
        """Change readings of GPU `index` (later lines win); `error={fn: name}` injects errors,
        `error={fn: "SUCCESS"}` clears one."""
        lines = []
        for key, value in values.items():
            if key == "error":
                lines += [f"gpu{index}.error.{fn} {err}" for fn, err in value.items()]
            elif key == "processes":
                lines.append(f"gpu{index}.processes " + _process_list(value))
            else:
                lines.append(f"gpu{index}.{key} {value}")
        with open(self.state_path, "a") as fh:
            fh.write("\n".join(lines) + "\n")

    def read(self) -> dict[str, str]:
        """The effective state (last line wins), e.g. {"gpu0.power_limit_mw": "250000", ...}."""
        state: dict[str, str] = {}
        for line in self.state_path.read_text().splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                key, _, value = line.partition(" ")
                state[key] = value.strip()
        return state

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """Environment for a subprocess that should load the stub through LD_LIBRARY_PATH."""
        env = dict(os.environ if base is None else base)
        env[STATE_ENV] = str(self.state_path)
        env["LD_LIBRARY_PATH"] = os.pathsep.join(
            [str(self.library.parent)] + [p for p in env.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p])
        return env


def _point_pynvml_at(library: Path) -> None:
    """Preload the stub by path so pynvml's dlopen("libnvidia-ml.so.1") resolves to it; forget
    any other NVML (a real driver's) that pynvml may have loaded earlier in this process."""
    stub = ctypes.CDLL(str(library), mode=ctypes.RTLD_GLOBAL)
    try:
        import pynvml
    except ImportError:  # pragma: no cover - nvidia-ml-py is a test dependency
        pytest.skip("nvidia-ml-py is not installed")
    loaded = getattr(pynvml, "nvmlLib", None)
    if loaded is not None and loaded._handle != stub._handle:
        pynvml.nvmlLib = None
        pynvml._nvmlGetFunctionPointer_cache.clear()


@pytest.fixture(scope="session")
def nvml_stub_library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The compiled stand-in `libnvidia-ml.so.1` (built once per test session)."""
    return build_stub(tmp_path_factory.mktemp("nvml_stub"))


@pytest.fixture()
def nvml_stub(nvml_stub_library: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> NvmlStub:
    """A fresh stub state (two idle H100s) that this process's pynvml reads on every call."""
    stub = NvmlStub(nvml_stub_library, tmp_path / "nvml_state.txt")
    stub.write([GpuState.h100(0), GpuState.h100(1)])
    monkeypatch.setenv(STATE_ENV, str(stub.state_path))
    _point_pynvml_at(nvml_stub_library)
    return stub


def _process_list(processes: dict[int, int | None]) -> str:
    """The stub's `pid:MiB,pid` form; a pid without memory is answered NVML_VALUE_NOT_AVAILABLE."""
    return ",".join(f"{pid}:{mib}" if mib is not None else str(pid) for pid, mib in processes.items())
