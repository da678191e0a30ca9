"""The stand-in libnvidia-ml.so.1 answers the real nvidia-ml-py the way a driver does."""

from __future__ import annotations

import subprocess
import sys

import pynvml
import pytest

from nvml_stub.fixture import GpuState


@pytest.fixture()
def nvml(nvml_stub):
    pynvml.nvmlInit()
    yield nvml_stub
    pynvml.nvmlShutdown()


def test_readings_come_back_in_nvml_units(nvml):
    nvml.write([GpuState.h100(0, power_mw=312_345, energy_mj_total=9_876_543_210, temp_c=61,
                              sm_clock_mhz=1755, util_gpu_pct=97, pcie_tx_kb_per_s=1500,
                              processes={4242: 2048}, clock_event_reasons=0x4)])
    assert pynvml.nvmlDeviceGetCount() == 1
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    assert pynvml.nvmlDeviceGetName(h) == "NVIDIA H100 80GB HBM3"
    assert pynvml.nvmlDeviceGetPowerUsage(h) == 312_345
    assert pynvml.nvmlDeviceGetTotalEnergyConsumption(h) == 9_876_543_210  # > 32 bits survives
    assert pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU) == 61
    assert pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM) == 1755
    assert pynvml.nvmlDeviceGetUtilizationRates(h).gpu == 97
    assert pynvml.nvmlDeviceGetPcieThroughput(h, pynvml.NVML_PCIE_UTIL_TX_BYTES) == 1500
    assert pynvml.nvmlDeviceGetMemoryInfo(h).total == 81559 * 2**20
    assert pynvml.nvmlDeviceGetPowerManagementLimitConstraints(h) == [200_000, 700_000]
    assert pynvml.nvmlDeviceGetCurrentClocksEventReasons(h) == 0x4  # driver 535 on
    assert pynvml.nvmlDeviceGetCurrentClocksThrottleReasons(h) == 0x4  # its older name, kept
    [proc] = pynvml.nvmlDeviceGetComputeRunningProcesses(h)
    assert (proc.pid, proc.usedGpuMemory) == (4242, 2048 * 2**20)
    [field] = pynvml.nvmlDeviceGetFieldValues(h, [pynvml.NVML_FI_DEV_MEMORY_TEMP])
    assert field.nvmlReturn == 0 and field.value.uiVal == 40
    uuid = pynvml.nvmlDeviceGetUUID(h)
    assert pynvml.nvmlDeviceGetIndex(pynvml.nvmlDeviceGetHandleByUUID(uuid)) == 0


def test_values_change_while_running(nvml):
    h = pynvml.nvmlDeviceGetHandleByIndex(1)
    before = pynvml.nvmlDeviceGetPowerUsage(h)
    nvml.set(1, power_mw=before + 100_000)
    assert pynvml.nvmlDeviceGetPowerUsage(h) == before + 100_000


def test_missing_function_and_missing_sensor_raise_like_a_driver(nvml):
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    nvml.set(0, error={"nvmlDeviceGetCurrentClocksEventReasons": "FUNCTION_NOT_FOUND"})  # a driver before 535
    with pytest.raises(pynvml.NVMLError_FunctionNotFound):
        pynvml.nvmlDeviceGetCurrentClocksEventReasons(h)
    nvml.write([GpuState(name="Tesla P100-PCIE-16GB", uuid="GPU-p100", power_mw=30_000)])
    with pytest.raises(pynvml.NVMLError_NotSupported):
        pynvml.nvmlDeviceGetTotalEnergyConsumption(h)


def test_injected_errors_hit_only_their_gpu(nvml):
    h0, h1 = (pynvml.nvmlDeviceGetHandleByIndex(i) for i in (0, 1))
    nvml.set(1, error={"*": "GPU_IS_LOST"})
    nvml.set(0, error={"nvmlDeviceGetPcieThroughput": "NOT_SUPPORTED"})
    with pytest.raises(pynvml.NVMLError_GpuIsLost):
        pynvml.nvmlDeviceGetPowerUsage(h1)
    with pytest.raises(pynvml.NVMLError_GpuIsLost):  # a lost GPU gives no new handle either
        pynvml.nvmlDeviceGetHandleByIndex(1)
    with pytest.raises(pynvml.NVMLError_NotSupported):
        pynvml.nvmlDeviceGetPcieThroughput(h0, pynvml.NVML_PCIE_UTIL_RX_BYTES)
    assert pynvml.nvmlDeviceGetPowerUsage(h0) == 72_000


def test_set_power_limit_honours_constraints_and_writes_back(nvml):
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    pynvml.nvmlDeviceSetPowerManagementLimit(h, 450_000)
    assert nvml.read()["gpu0.power_limit_mw"] == "450000"
    assert pynvml.nvmlDeviceGetEnforcedPowerLimit(h) == 450_000
    assert pynvml.nvmlDeviceGetPowerManagementDefaultLimit(h) == 700_000
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        pynvml.nvmlDeviceSetPowerManagementLimit(h, 199_999)
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        pynvml.nvmlDeviceSetPowerManagementLimit(h, 700_001)
    assert pynvml.nvmlDeviceGetPowerManagementLimit(h) == 450_000
    nvml.set(0, error={"nvmlDeviceSetPowerManagementLimit": "NO_PERMISSION"})
    with pytest.raises(pynvml.NVMLError_NoPermission):
        pynvml.nvmlDeviceSetPowerManagementLimit(h, 300_000)


def test_locked_clocks_cap_the_sm_clock_until_reset(nvml):
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    nvml.set(0, sm_clock_mhz=1980)
    pynvml.nvmlDeviceSetGpuLockedClocks(h, 900, 1500)
    assert pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM) == 1500
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        pynvml.nvmlDeviceSetGpuLockedClocks(h, 900, 2500)  # above the GPU's max SM clock
    pynvml.nvmlDeviceResetGpuLockedClocks(h)
    assert pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM) == 1980


def test_init_error_is_raised_by_nvmlInit(nvml_stub):
    nvml_stub.write([], errors={"nvmlInitWithFlags": "DRIVER_NOT_LOADED"})
    with pytest.raises(pynvml.NVMLError_DriverNotLoaded):
        pynvml.nvmlInit()


def test_subprocess_finds_it_through_ld_library_path(nvml_stub):
    code = ("import pynvml; pynvml.nvmlInit(); "
            "print(pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(1)))")
    out = subprocess.run([sys.executable, "-c", code], env=nvml_stub.env(), capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == "NVIDIA H100 80GB HBM3"
