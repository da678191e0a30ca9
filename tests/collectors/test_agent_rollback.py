"""The agent's rollback when NVML fails part-way, and the loop's retry of a rollback that did not
go through, against the simulated driver (collectors.sim.nvml) and its injected NVML errors."""

from __future__ import annotations

import datetime as dt

import pyarrow.dataset as ds
import pynvml

from joulehouse.collectors.agent import apply_config, rollback
from joulehouse.collectors.agent_loop import AgentState, poll_once
from joulehouse.collectors.config_contract import dump_config, sign_config
from joulehouse.collectors.sim.constants import SPECS
from joulehouse.collectors.sim.nvml import SimDevice, SimulatedNvml

NOW = dt.datetime(2026, 1, 3, 6, 0, tzinfo=dt.timezone.utc)
HOST = "node-01"
SPEC = next(s for m, s in SPECS.items() if "A100" in m)
DEFAULT_W = SPEC.default_limit_w
CAP_W = DEFAULT_W - 50
LOCK_MHZ = (SPEC.f_idle_mhz + 150, SPEC.f_max_mhz - 150)


def driver(n=2) -> SimulatedNvml:
    return SimulatedNvml([SimDevice(i, f"GPU-sim-{i:04d}", SPEC, int(DEFAULT_W * 1000)) for i in range(n)])


def limit_w(nvml, i):
    return nvml.devices[i].power_limit_mw / 1000


def signed(private, gpus, hours=48):
    body = {"schema_version": 1, "generated_at": "2026-01-03T06:00:00Z", "valid_from": "2026-01-03T06:00:00Z",
            "valid_until": (NOW + dt.timedelta(hours=hours)).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "site": "site-a", "day": "2026-01-02", "hosts": {HOST: gpus}, "excluded_gpu_models": []}
    return sign_config(body, private)


def entry(watts, clocks=(None, None)):
    return {"gpu_model": SPEC.nvml_name, "workload_class": "throughput", "power_limit_w": float(watts),
            "locked_sm_clock_min_mhz": clocks[0], "locked_sm_clock_max_mhz": clocks[1],
            "expected_saving_pct": 10.0, "expected_slowdown_pct": 5.0}


def rows_at(lake, when):
    rows = ds.dataset(lake / "agent_audit", format="parquet", partitioning="hive").to_table().to_pylist()
    return sorted((r for r in rows if r["audited_at"] == when), key=lambda r: r["gpu_uuid"] or "")


def test_a_limit_reset_whose_clock_unlock_fails_is_audited_with_what_was_done(keys, lake):
    """The limit went back to the default, then unlocking the clocks failed: the row said 'refuse'
    with no watts, as if the device were untouched."""
    nvml = driver(1)
    apply_config(signed(keys[0], {"GPU-sim-0000": entry(CAP_W, LOCK_MHZ)}), public_key=keys[1], host=HOST,
                 nvml=nvml, lake=lake, now=NOW)
    nvml.errors[(0, "nvmlDeviceResetGpuLockedClocks")] = pynvml.NVML_ERROR_NO_PERMISSION
    at = NOW + dt.timedelta(hours=3)
    result = rollback(host=HOST, nvml=nvml, lake=lake, now=at, reason="config expired")
    assert limit_w(nvml, 0) == DEFAULT_W and nvml.locked_clocks() == {"GPU-sim-0000": LOCK_MHZ}
    [row] = rows_at(lake, at)
    assert row["action"] == "verify-failed" and not result.ok
    assert (row["power_limit_w_before"], row["power_limit_w_requested"], row["power_limit_w_after"]) == (
        CAP_W, DEFAULT_W, DEFAULT_W)
    assert f"limit set to the device default {DEFAULT_W:.1f} W (was {CAP_W:.1f} W)" in row["reason"]
    assert "unlocking the SM clocks failed (NVMLError_NoPermission: Insufficient Permissions)" in row["reason"]


def test_a_limit_reset_that_fails_is_a_refusal_that_still_unlocks_the_clocks(keys, lake):
    nvml = driver(1)
    apply_config(signed(keys[0], {"GPU-sim-0000": entry(CAP_W, LOCK_MHZ)}), public_key=keys[1], host=HOST,
                 nvml=nvml, lake=lake, now=NOW)
    nvml.errors[(0, "nvmlDeviceSetPowerManagementLimit")] = pynvml.NVML_ERROR_UNKNOWN
    at = NOW + dt.timedelta(hours=3)
    rollback(host=HOST, nvml=nvml, lake=lake, now=at)
    assert limit_w(nvml, 0) == CAP_W and nvml.locked_clocks() == {}
    [row] = rows_at(lake, at)
    assert row["action"] == "refuse" and (row["power_limit_w_before"], row["power_limit_w_after"]) == (CAP_W, CAP_W)
    assert row["reason"].startswith("rollback failed: setting the limit to the device default")
    assert "Unknown Error" in row["reason"] and "SM clocks unlocked" in row["reason"]


def test_a_gpu_that_cannot_be_read_at_rollback_gets_its_failed_row(keys, lake):
    """GPU 1 fell off the bus: it got no audit row at all. Its UUID comes from the agent's own
    audit (it applied a cap there); with no audit, the row names its index."""
    nvml = driver(2)
    apply_config(signed(keys[0], {"GPU-sim-0000": entry(CAP_W), "GPU-sim-0001": entry(CAP_W)}), public_key=keys[1],
                 host=HOST, nvml=nvml, lake=lake, now=NOW)
    nvml.errors[(1, "nvmlDeviceGetUUID")] = pynvml.NVML_ERROR_GPU_IS_LOST
    at = NOW + dt.timedelta(hours=3)
    result = rollback(host=HOST, nvml=nvml, lake=lake, now=at)
    assert (limit_w(nvml, 0), limit_w(nvml, 1)) == (DEFAULT_W, CAP_W) and not result.ok
    rows = rows_at(lake, at)
    assert [(r["gpu_uuid"], r["action"]) for r in rows] == [("GPU-sim-0000", "rollback"), ("GPU-sim-0001", "refuse")]
    assert "GPU index 1: NVMLError_GpuIsLost" in rows[1]["reason"] and "limit was not reset" in rows[1]["reason"]
    unaudited = rollback(host=HOST, nvml=nvml, lake=None, now=at)
    assert [(o.gpu_uuid, o.action) for o in unaudited.outcomes] == [("GPU-sim-0000", "unchanged"), (None, "refuse")]
    assert "GPU index 1: NVMLError_GpuIsLost" in unaudited.outcomes[1].reason
