"""The simulated fleet's NVML stand-in: the real agent applies configs to it, and the simulator
then runs the next day under the limits it set."""

from __future__ import annotations

import datetime as dt

import pyarrow.dataset as ds
import pynvml
import pytest

from joulehouse.collectors.agent import apply_config, rollback
from joulehouse.collectors.agent_replay import ReplayGuard
from joulehouse.collectors.config_contract import sign_config
from joulehouse.collectors.sim import simulate_fleet
from joulehouse.collectors.sim.constants import SPECS
from joulehouse.collectors.sim.nvml import locked_clocks_by_day, power_limits_by_day, simulated_nvml_by_host

NOW = dt.datetime(2026, 1, 3, 6, 0, tzinfo=dt.timezone.utc)


def _config(private, host, settings):
    body = {"schema_version": 1, "generated_at": "2026-01-03T06:00:00Z", "valid_from": "2026-01-03T06:00:00Z",
            "valid_until": "2026-01-05T06:00:00Z", "site": "site-a", "day": "2026-01-02",
            "hosts": {host: settings}, "excluded_gpu_models": []}
    return sign_config(body, private)


def _entry(model, watts, clocks=(None, None)):
    return {"gpu_model": model, "workload_class": "throughput", "power_limit_w": float(watts),
            "locked_sm_clock_min_mhz": clocks[0], "locked_sm_clock_max_mhz": clocks[1],
            "expected_saving_pct": 10.0, "expected_slowdown_pct": 5.0}


def test_the_agent_sets_limits_on_the_simulated_fleet_and_audits_them(keys, lake, tmp_path):
    nvml = simulated_nvml_by_host(gpus=16)["node-02"]
    model = nvml.devices[0].spec.nvml_name
    uuids = [d.uuid for d in nvml.devices]
    doc = _config(keys[0], "node-02", {uuids[0]: _entry(model, 450), uuids[1]: _entry(model, 500, (1000, 1500)),
                                       uuids[2]: _entry(model, 150), "GPU-not-here": _entry(model, 450)})
    guard = ReplayGuard(tmp_path / "agent-state" / "agent-applied.json")  # where the agent keeps the locks it left
    result = apply_config(doc, public_key=keys[1], host="node-02", nvml=nvml, lake=lake, now=NOW, replay_guard=guard)
    by_uuid = {o.gpu_uuid: o for o in result.outcomes}
    assert by_uuid[uuids[0]].action == "apply" and by_uuid[uuids[0]].power_limit_w_after == 450.0
    assert by_uuid[uuids[1]].action == "apply" and nvml.locked_clocks() == {uuids[1]: (1000, 1500)}
    # 150 W is under the H100's 200 W minimum: refused by the agent, the device untouched.
    assert by_uuid[uuids[2]].action == "refuse" and "200.0-700.0 W" in by_uuid[uuids[2]].reason
    assert by_uuid["GPU-not-here"].action == "refuse"
    limits = nvml.power_limits_w()
    assert (limits[uuids[0]], limits[uuids[1]], limits[uuids[2]]) == (450.0, 500.0, 700.0)
    rows = ds.dataset(lake / "agent_audit", format="parquet", partitioning="hive").to_table().to_pylist()
    assert sorted(r["action"] for r in rows) == ["apply", "apply", "refuse", "refuse"]
    assert {r["host"] for r in rows} == {"node-02"}
    again = apply_config(doc, public_key=keys[1], host="node-02", nvml=nvml, lake=lake, now=NOW, replay_guard=guard)
    assert again.count("unchanged") == 2  # state survives nvmlShutdown/nvmlInit like a driver's
    back = rollback(host="node-02", nvml=nvml, now=NOW)
    assert back.count("rollback") == 2 and set(nvml.power_limits_w().values()) == {700.0}
    assert nvml.locked_clocks() == {}


def test_refusals_are_pynvml_own_errors():
    nvml = simulated_nvml_by_host(gpus=8)["node-01"]
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        nvml.nvmlDeviceGetCount()
    nvml.nvmlInit()
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    spec = SPECS[nvml.nvmlDeviceGetName(handle)]
    assert nvml.nvmlDeviceGetPowerManagementLimitConstraints(handle) == [spec.min_limit_w * 1000, spec.max_limit_w * 1000]
    with pytest.raises(pynvml.NVMLError_InvalidArgument) as exc:
        nvml.nvmlDeviceSetPowerManagementLimit(handle, int(spec.max_limit_w * 1000) + 1)
    assert exc.value.value == pynvml.NVML_ERROR_INVALID_ARGUMENT and isinstance(exc.value, nvml.NVMLError)
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        nvml.nvmlDeviceSetGpuLockedClocks(handle, 900, spec.f_max_mhz + 1)
    with pytest.raises(pynvml.NVMLError_NotFound):
        nvml.nvmlDeviceGetHandleByUUID("GPU-nope")
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        nvml.nvmlDeviceGetHandleByIndex(8)
    assert nvml.nvmlErrorString(pynvml.NVML_ERROR_NO_PERMISSION) == "Insufficient Permissions"
    nvml.nvmlShutdown()


def test_a_set_failing_half_way_is_reported_per_gpu(keys):
    nvml = simulated_nvml_by_host(gpus=8)["node-01"]
    nvml.errors[(3, "nvmlDeviceSetPowerManagementLimit")] = pynvml.NVML_ERROR_NO_PERMISSION
    model = nvml.devices[0].spec.nvml_name
    doc = _config(keys[0], "node-01", {d.uuid: _entry(model, 300) for d in nvml.devices})
    result = apply_config(doc, public_key=keys[1], host="node-01", nvml=nvml, now=NOW)
    assert result.count("apply") == 7 and result.count("refuse") == 1
    refused = next(o for o in result.outcomes if o.action == "refuse")
    assert refused.gpu_uuid == nvml.devices[3].uuid and "Insufficient Permissions" in refused.reason
    assert nvml.power_limits_w()[nvml.devices[3].uuid] == 400.0


def test_limits_set_through_nvml_drive_the_next_simulated_day(keys, tmp_path):
    nvmls = simulated_nvml_by_host(gpus=8)
    nvml = nvmls["node-01"]
    capped = nvml.devices[0].uuid
    doc = _config(keys[0], "node-01", {capped: _entry(nvml.devices[0].spec.nvml_name, 200)})
    apply_config(doc, public_key=keys[1], host="node-01", nvml=nvml, now=NOW)
    day = dt.date(2026, 1, 3)
    by_day = power_limits_by_day(nvmls.values(), [day])
    assert by_day[day][capped] == 200.0 and len(by_day[day]) == 8
    simulate_fleet(tmp_path / "lake", gpus=8, days=1, start=day, seed=1, interval_s=60, power_limits_by_day=by_day)
    t = ds.dataset(tmp_path / "lake" / "gpu_samples", partitioning="hive").to_table(columns=["gpu_uuid", "power_limit_w", "power_w"])
    rows = [r for r in t.to_pylist() if r["gpu_uuid"] == capped]
    assert {r["power_limit_w"] for r in rows} == {200.0}
    assert max(r["power_w"] for r in rows) < 200.0 * 1.05  # the simulated GPU obeys the cap it was given


def test_clocks_locked_through_nvml_drive_the_next_simulated_day(keys, tmp_path):
    nvmls = simulated_nvml_by_host(gpus=8)
    nvml = nvmls["node-01"]
    locked = nvml.devices[1].uuid
    spec = nvml.devices[1].spec
    doc = _config(keys[0], "node-01", {locked: _entry(spec.nvml_name, spec.default_limit_w, (420, 1000))})
    apply_config(doc, public_key=keys[1], host="node-01", nvml=nvml, now=NOW)
    day = dt.date(2026, 1, 3)
    locks = locked_clocks_by_day(nvmls.values(), [day])
    assert locks == {day: {locked: (420, 1000)}}
    simulate_fleet(tmp_path / "lake", gpus=8, days=1, start=day, seed=1, interval_s=60,
                   power_limits_by_day=power_limits_by_day(nvmls.values(), [day]), locked_sm_clocks_by_day=locks)
    t = ds.dataset(tmp_path / "lake" / "gpu_samples", partitioning="hive").to_table(columns=["gpu_uuid", "sm_clock_mhz"])
    clocks = [r["sm_clock_mhz"] for r in t.to_pylist() if r["gpu_uuid"] == locked]
    others = [r["sm_clock_mhz"] for r in t.to_pylist() if r["gpu_uuid"] != locked]
    assert max(clocks) <= 1000 < max(others)
    rollback(host="node-01", nvml=nvml, now=NOW)
    assert locked_clocks_by_day(nvmls.values(), [day]) == {day: {}}


def test_the_simulated_driver_lists_clocks_down_to_the_idle_clock_and_the_agent_keeps_locks_above_it(keys, lake):
    nvml = simulated_nvml_by_host(gpus=16)["node-02"]
    device = nvml.devices[0]
    nvml.nvmlInit()
    try:
        handle = nvml.nvmlDeviceGetHandleByIndex(0)
        memory_mhz = max(nvml.nvmlDeviceGetSupportedMemoryClocks(handle))
        clocks = nvml.nvmlDeviceGetSupportedGraphicsClocks(handle, memory_mhz)
        assert (clocks[0], clocks[-1]) == (device.spec.f_max_mhz, device.spec.f_idle_mhz)
        with pytest.raises(pynvml.NVMLError_NotFound):
            nvml.nvmlDeviceGetSupportedGraphicsClocks(handle, memory_mhz + 1)
    finally:
        nvml.nvmlShutdown()
    model, low = device.spec.nvml_name, device.spec.f_idle_mhz - 15
    doc = _config(keys[0], "node-02", {device.uuid: _entry(model, 500, (low, 1500))})
    result = apply_config(doc, public_key=keys[1], host="node-02", nvml=nvml, lake=lake, now=NOW)
    assert result.outcomes[0].action == "refuse" and f"below the device's lowest {device.spec.f_idle_mhz} MHz" in result.outcomes[0].reason
    assert nvml.locked_clocks() == {} and nvml.power_limits_w()[device.uuid] == device.spec.default_limit_w
