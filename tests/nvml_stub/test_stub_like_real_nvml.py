"""The stand-in NVML answers as the real one did on a GPU machine.

tests/nvml_stub/real_nvml_h200.json is what infra/device/nvml_probe.py recorded on an NVIDIA H200
(driver 580.159.04). The same probe runs here against the stub, set up as an H200; for every call
the collectors make, both must answer with the same Python and ctypes types, the same struct
members, the same field-value type and return code, the same errors, and the same fixed figures
of the board (limits, memory, clocks) in NVML's units.

What can fail here is the stub's: a function it lacks or answers with another error, a field value
of another type or return code, another board figure. The Python types and struct members are
pynvml's own (the same nvidia-ml-py on both sides), so they guard against a change of that pin
rather than of the stub. The recording saw no compute process (its list was empty): the layout of
the stub's process records is checked by test_nvml_stub.py and test_nvml.py (two pids, memory).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from nvml_stub.fixture import GpuState

REPO = Path(__file__).resolve().parents[2]
REAL = json.loads(Path(__file__).with_name("real_nvml_h200.json").read_text())
# the calls NvmlSource and NvmlLinkSource make (the probe also asks a few they do not)
COLLECTOR_CALLS = [
    "nvmlInit", "nvmlDeviceGetCount", "nvmlDeviceGetHandleByIndex", "nvmlDeviceGetHandleByIndex(out_of_range)",
    "nvmlDeviceGetUUID", "nvmlDeviceGetName", "nvmlDeviceGetPowerManagementLimitConstraints",
    "nvmlDeviceGetPowerManagementDefaultLimit", "nvmlDeviceGetEnforcedPowerLimit", "nvmlDeviceGetPowerUsage",
    "nvmlDeviceGetTotalEnergyConsumption", "nvmlDeviceGetUtilizationRates", "nvmlDeviceGetMemoryInfo",
    "nvmlDeviceGetPerformanceState", "nvmlDeviceGetComputeRunningProcesses",
    "nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons",
    "nvmlDeviceGetTemperature(GPU)", "nvmlDeviceGetClockInfo(SM)", "nvmlDeviceGetClockInfo(MEM)",
    "nvmlDeviceGetPcieThroughput(TX)", "nvmlDeviceGetPcieThroughput(RX)",
    "nvmlDeviceGetFieldValues(memory_temp)", "nvmlDeviceGetFieldValues(memory_temp, bare id)",
    "nvmlDeviceGetFieldValues(nvlink_link_count)", "nvmlDeviceGetFieldValues(nvlink_speed_mbps_common)",
    "nvmlDeviceGetFieldValues(nvlink_throughput_data_tx)", "nvmlDeviceGetFieldValues(nvlink_throughput_data_rx)",
    "nvmlShutdown",
]
# what does not change on an H200 board: the stub's H200 must give the same, in NVML's units
BOARD_FIGURES = ["nvmlDeviceGetName", "nvmlDeviceGetPowerManagementLimitConstraints",
                 "nvmlDeviceGetPowerManagementDefaultLimit", "nvmlDeviceGetEnforcedPowerLimit",
                 "nvmlDeviceGetClockInfo(MEM)"]


def _probe():
    spec = importlib.util.spec_from_file_location("nvml_probe", REPO / "infra" / "device" / "nvml_probe.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture()
def stub_answers(nvml_stub, tmp_path):
    # the board of the recording, nothing else of it: the readings are the stub's own
    nvml_stub.write([GpuState.h200(0)])
    out = tmp_path / "answers.json"
    _probe().answers(out)  # a few ms: the probe's 50 polls of one stand-in GPU
    return json.loads(out.read_text())


def shape(answer):
    """The types and members of an answer, without its values (a field value's type and return
    code are kept: they say which member of the union holds the value)."""
    if "__struct__" in answer:
        kept = {"valueType", "nvmlReturn"} if answer["__struct__"] == "c_nvmlFieldValue_t" else set()
        return {"struct": answer["__struct__"],
                **{k: (v["value"] if k in kept else shape(v)) for k, v in answer.items() if k != "__struct__"}}
    if "__union__" in answer:
        return {"union": answer["__union__"], "members": sorted(k for k in answer if k != "__union__")}
    if "__seq__" in answer:
        return {"seq": answer["__seq__"], "items": [shape(item) for item in answer["items"]]}
    return answer.get("__type__", "bytes")


def field_values_without_value_type_of_errors(answer):
    """NVML leaves a field's valueType unset when it answers the field with an error (the real
    driver wrote 1 or 3 there for NVLink fields it does not support, the stub 0): only the return
    code of such a field means something."""
    for item in answer["items"]:
        if item["nvmlReturn"]["value"] != 0:
            item["valueType"] = {"__type__": "int", "value": None}
    return answer


@pytest.mark.parametrize("call", COLLECTOR_CALLS)
def test_each_call_answers_with_the_types_and_errors_of_the_real_library(stub_answers, call):
    real, stub = REAL["calls"][call], stub_answers["calls"][call]
    assert stub["ok"] == real["ok"], (call, real, stub)
    if not real["ok"]:
        assert (stub["error_class"], stub["code"]) == (real["error_class"], real["code"])
        return
    real_answer, stub_answer = real["answer"], stub["answer"]
    if call.startswith("nvmlDeviceGetFieldValues"):
        real_answer = field_values_without_value_type_of_errors(real_answer)
        stub_answer = field_values_without_value_type_of_errors(stub_answer)
    assert shape(stub_answer) == shape(real_answer)


@pytest.mark.parametrize("call", BOARD_FIGURES)
def test_the_stub_h200_has_the_real_boards_figures(stub_answers, call):
    assert stub_answers["calls"][call]["answer"] == REAL["calls"][call]["answer"]


def test_the_collectors_row_has_the_same_columns_and_types_as_on_the_real_gpu(stub_answers):
    real, stub = REAL["nvml_source"]["first_row"], stub_answers["nvml_source"]["first_row"]
    assert list(stub) == list(real)
    for column, value in real.items():
        if value is not None and stub[column] is not None:
            assert type(stub[column]) is type(value), column
    assert real["error"] is None and stub["error"] is None
    assert stub["gpu_model"] == real["gpu_model"] == "NVIDIA H200"
