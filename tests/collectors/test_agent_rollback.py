"""The agent's rollback when NVML fails part-way, and the loop's retry of a rollback that did not
go through, against the simulated driver (collectors.sim.nvml) and its injected NVML errors."""

from __future__ import annotations

import datetime as dt

import pyarrow.dataset as ds
import pynvml
from prometheus_client import CollectorRegistry

from joulehouse.collectors.agent import apply_config, rollback
from joulehouse.collectors.agent_loop import AgentState, poll_once
from joulehouse.collectors.agent_replay import ReplayGuard
from joulehouse.collectors.config_contract import dump_config, sign_config
from joulehouse.collectors.metrics import AgentStateMetrics
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


def poll(state, location, keys, nvml, lake, hours, guard=None):
    return poll_once(state, str(location), public_key=keys[1], host=HOST, nvml=nvml, lake=lake,
                     now=NOW + dt.timedelta(hours=hours), replay_guard=guard)


def gpu_rows(lake, uuid):
    rows = ds.dataset(lake / "agent_audit", format="parquet", partitioning="hive").to_table().to_pylist()
    return sorted(((r["audited_at"], r["action"], r["power_limit_w_after"]) for r in rows if r["gpu_uuid"] == uuid))


def hour(h):
    return NOW + dt.timedelta(hours=h)


def test_an_expiry_rollback_that_fails_once_is_tried_again_until_the_gpu_is_back(keys, lake, tmp_path):
    """The config expired and the driver answered one transient error on the reset: the cap stayed
    for good ('config unchanged' at every later poll)."""
    nvml, location = driver(2), tmp_path / "recommended-config.json"
    location.write_bytes(dump_config(signed(keys[0], {"GPU-sim-0000": entry(CAP_W)}, hours=2)))
    state = AgentState()
    registry = CollectorRegistry()
    registry.register(AgentStateMetrics(state))
    owed = lambda: registry.get_sample_value("joulehouse_agent_rollback_owed_gpus")  # what an alert reads
    poll(state, location, keys, nvml, lake, 0)
    nvml.errors[(0, "nvmlDeviceSetPowerManagementLimit")] = pynvml.NVML_ERROR_UNKNOWN
    assert "1 GPU rollback not done, tried again next poll" in poll(state, location, keys, nvml, lake, 3)
    assert limit_w(nvml, 0) == CAP_W and owed() == 1
    assert "1 refuse" in poll(state, location, keys, nvml, lake, 4)  # still failing: tried, audited, still owed
    del nvml.errors[(0, "nvmlDeviceSetPowerManagementLimit")]
    assert "tried again: node-01: 1 rollback" in poll(state, location, keys, nvml, lake, 5)
    assert poll(state, location, keys, nvml, lake, 24) .startswith("config unchanged, not in force")
    assert limit_w(nvml, 0) == DEFAULT_W and not state.rollbacks_owed and owed() == 0
    assert gpu_rows(lake, "GPU-sim-0000") == [(hour(0), "apply", CAP_W), (hour(3), "refuse", CAP_W),
                                              (hour(4), "refuse", CAP_W), (hour(5), "rollback", DEFAULT_W)]
    [retried] = rows_at(lake, hour(5))
    assert "config expired at" in retried["reason"] and "not done since 2026-01-03T09:00:00+00:00" in retried["reason"]


def test_a_clock_unlock_that_fails_at_revocation_is_tried_again(keys, lake, tmp_path):
    nvml, location = driver(1), tmp_path / "recommended-config.json"
    location.write_bytes(dump_config(signed(keys[0], {"GPU-sim-0000": entry(CAP_W, LOCK_MHZ)})))
    state = AgentState()
    poll(state, location, keys, nvml, lake, 0)
    nvml.errors[(0, "nvmlDeviceResetGpuLockedClocks")] = pynvml.NVML_ERROR_NO_PERMISSION
    location.unlink()
    assert "1 verify-failed" in poll(state, location, keys, nvml, lake, 1)
    assert limit_w(nvml, 0) == DEFAULT_W and nvml.locked_clocks() == {"GPU-sim-0000": LOCK_MHZ}
    del nvml.errors[(0, "nvmlDeviceResetGpuLockedClocks")]
    poll(state, location, keys, nvml, lake, 2)
    assert nvml.locked_clocks() == {} and not state.rollbacks_owed
    assert gpu_rows(lake, "GPU-sim-0000") == [(hour(0), "apply", CAP_W), (hour(1), "verify-failed", DEFAULT_W),
                                              (hour(2), "unchanged", DEFAULT_W)]


def test_a_gpu_lost_at_revocation_is_audited_and_rolled_back_once_it_is_back(keys, tmp_path):
    """GPU 1 fell off the bus as its config was revoked: no row, no retry, its cap kept. Without
    an audit to name it the loop still knows it: the config in force set it."""
    nvml, location = driver(2), tmp_path / "recommended-config.json"
    lake = tmp_path / "lake"
    location.write_bytes(dump_config(signed(keys[0], {"GPU-sim-0000": entry(CAP_W), "GPU-sim-0001": entry(CAP_W)})))
    state = AgentState()
    poll(state, location, keys, nvml, None, 0)  # applied without an audit: only the loop's state names GPU 1
    nvml.errors[(1, "nvmlDeviceGetUUID")] = pynvml.NVML_ERROR_GPU_IS_LOST
    location.unlink()
    assert "1 rollback, 1 refuse" in poll(state, location, keys, nvml, lake, 1)
    poll(state, location, keys, nvml, lake, 2)
    assert (limit_w(nvml, 0), limit_w(nvml, 1)) == (DEFAULT_W, CAP_W)
    del nvml.errors[(1, "nvmlDeviceGetUUID")]
    poll(state, location, keys, nvml, lake, 3)
    assert limit_w(nvml, 1) == DEFAULT_W and not state.rollbacks_owed
    assert gpu_rows(lake, "GPU-sim-0001") == [(hour(1), "refuse", None), (hour(2), "refuse", None),
                                              (hour(3), "rollback", DEFAULT_W)]
    assert "GPU index 1: NVMLError_GpuIsLost" in rows_at(lake, hour(1))[1]["reason"]
    assert [r["gpu_uuid"] for r in rows_at(lake, hour(2))] == ["GPU-sim-0001"]  # only what is owed is tried again


def test_a_dropped_gpus_failed_rollback_is_tried_again_and_a_new_setting_settles_it(keys, lake, tmp_path):
    nvml, location = driver(3), tmp_path / "recommended-config.json"
    state = AgentState()
    location.write_bytes(dump_config(signed(keys[0], {f"GPU-sim-000{i}": entry(CAP_W) for i in range(3)})))
    poll(state, location, keys, nvml, lake, 0)
    nvml.errors[(1, "nvmlDeviceSetPowerManagementLimit")] = pynvml.NVML_ERROR_UNKNOWN
    nvml.errors[(2, "nvmlDeviceSetPowerManagementLimit")] = pynvml.NVML_ERROR_UNKNOWN
    location.write_bytes(dump_config(signed(keys[0], {"GPU-sim-0000": entry(CAP_W)}, hours=47)))
    assert "2 refuse" in poll(state, location, keys, nvml, lake, 1)
    del nvml.errors[(1, "nvmlDeviceSetPowerManagementLimit")]
    del nvml.errors[(2, "nvmlDeviceSetPowerManagementLimit")]
    # GPU 2 is listed again: its new setting replaces the rollback it was owed; GPU 1 goes back.
    location.write_bytes(dump_config(signed(keys[0], {"GPU-sim-0000": entry(CAP_W),
                                                      "GPU-sim-0002": entry(CAP_W - 20)}, hours=46)))
    poll(state, location, keys, nvml, lake, 2)
    assert [limit_w(nvml, i) for i in range(3)] == [CAP_W, DEFAULT_W, CAP_W - 20] and not state.rollbacks_owed
    assert [a for _, a, _ in gpu_rows(lake, "GPU-sim-0002")] == ["apply", "refuse", "apply"]
    assert [a for _, a, _ in gpu_rows(lake, "GPU-sim-0001")] == ["apply", "refuse", "rollback"]


def test_an_unidentified_gpu_a_restarted_agent_could_not_reset_is_tried_again(keys, tmp_path):
    """After a restart nothing is known in force and the audit is empty: a GPU whose UUID cannot be
    read gets a row by its index, and every GPU is tried again until it can be read."""
    nvml, location = driver(2), tmp_path / "recommended-config.json"
    lake = tmp_path / "lake"
    nvml.devices[1].power_limit_mw = int(CAP_W * 1000)  # a cap the agent left before its restart
    nvml.errors[(1, "nvmlDeviceGetUUID")] = pynvml.NVML_ERROR_GPU_IS_LOST
    state = AgentState()
    assert "1 GPU rollback not done" in poll(state, location, keys, nvml, lake, 0)
    assert [(r["gpu_uuid"], r["action"]) for r in rows_at(lake, hour(0))] == [(None, "refuse"),
                                                                                ("GPU-sim-0000", "unchanged")]
    del nvml.errors[(1, "nvmlDeviceGetUUID")]
    poll(state, location, keys, nvml, lake, 1)
    assert limit_w(nvml, 1) == DEFAULT_W and not state.rollbacks_owed
    assert [(r["gpu_uuid"], r["action"]) for r in rows_at(lake, hour(1))] == [("GPU-sim-0000", "unchanged"),
                                                                                ("GPU-sim-0001", "rollback")]


def test_a_newer_config_that_leaves_this_host_out_returns_its_gpus_to_their_defaults(keys, lake, tmp_path):
    """Every GPU of the host left out (their model held back by the fit's gate): refused as
    HostNotInConfig, yesterday's caps stayed on for up to two days, though the report tells users
    their GPUs go back to their defaults."""
    nvml, location = driver(2), tmp_path / "recommended-config.json"
    state = AgentState()
    location.write_bytes(dump_config(signed(keys[0], {f"GPU-sim-000{i}": entry(CAP_W) for i in range(2)})))
    poll(state, location, keys, nvml, lake, 0)
    body = signed(keys[0], {})["body"] | {"hosts": {"node-02": {"GPU-other": entry(CAP_W)}},
                                          "generated_at": "2026-01-04T06:00:00Z"}
    location.write_bytes(dump_config(sign_config(body, keys[0])))
    message = poll(state, location, keys, nvml, lake, 24)
    assert "no GPUs in the config for this host" in message and "2 GPUs the new config no longer sets" in message
    assert [limit_w(nvml, i) for i in range(2)] == [DEFAULT_W, DEFAULT_W]
    assert [a for _, a, _ in gpu_rows(lake, "GPU-sim-0001")] == ["apply", "rollback"]


def test_a_signed_limit_no_gpu_takes_is_refused_before_any_device_is_set_and_audited(keys, lake):
    """1e306 W passed the signature and raised OverflowError at its mW conversion, after the GPU
    before it was set and before any audit row was written."""
    nvml = driver(3)
    doc = signed(keys[0], {"GPU-sim-0000": entry(CAP_W), "GPU-sim-0001": entry(1e306), "GPU-sim-0002": entry(CAP_W)})
    result = apply_config(doc, public_key=keys[1], host=HOST, nvml=nvml, lake=lake, now=NOW)
    assert [o.action for o in result.outcomes] == ["apply", "refuse", "apply"]
    assert "outside what any GPU takes" in result.outcomes[1].reason
    assert [limit_w(nvml, i) for i in range(3)] == [CAP_W, DEFAULT_W, CAP_W] and len(rows_at(lake, NOW)) == 3


def test_a_shutdown_error_after_a_good_apply_leaves_the_apply_as_it_was(keys, lake):
    """nvmlShutdown's error, raised from `finally`, replaced the result: both GPUs were set and
    audited 'refuse: NVML unavailable; not applied'."""
    class ShutdownFails(SimulatedNvml):
        def nvmlShutdown(self):
            super().nvmlShutdown()
            raise pynvml.NVMLError(pynvml.NVML_ERROR_UNKNOWN)

    nvml = ShutdownFails([SimDevice(i, f"GPU-sim-{i:04d}", SPEC, int(DEFAULT_W * 1000)) for i in range(2)])
    doc = signed(keys[0], {"GPU-sim-0000": entry(CAP_W), "GPU-sim-0001": entry(CAP_W - 20)})
    result = apply_config(doc, public_key=keys[1], host=HOST, nvml=nvml, lake=lake, now=NOW)
    assert result.nvml_unavailable is None and [o.action for o in result.outcomes] == ["apply", "apply"]
    assert [r["action"] for r in rows_at(lake, NOW)] == ["apply", "apply"]


def test_a_lock_an_agent_killed_before_its_audit_left_is_reset_by_the_first_apply_after_a_restart(keys, lake, tmp_path):
    """An agent killed between locking a GPU's clocks and writing its audit row: the audit says the
    GPU was never locked. The restarted agent's first config sets no lock, so the lock, trusted to
    the audit, stayed on for good and the next day's measurement read the GPU as untreated."""
    nvml, location = driver(1), tmp_path / "recommended-config.json"
    guard = ReplayGuard(tmp_path / "agent-state" / "agent-applied.json")
    apply_config(signed(keys[0], {"GPU-sim-0000": entry(CAP_W)}), public_key=keys[1], host=HOST, nvml=nvml,
                 lake=lake, now=NOW, replay_guard=guard)  # recorded and audited: CAP_W, no lock
    nvml.nvmlInit()
    nvml.nvmlDeviceSetGpuLockedClocks(nvml.nvmlDeviceGetHandleByIndex(0), *LOCK_MHZ)  # the killed agent's, unaudited
    nvml.nvmlShutdown()
    location.write_bytes(dump_config(signed(keys[0], {"GPU-sim-0000": entry(CAP_W)})))
    message = poll(AgentState(), location, keys, nvml, lake, 1, guard)
    assert nvml.locked_clocks() == {} and limit_w(nvml, 0) == CAP_W, message
    [row] = rows_at(lake, hour(1))
    assert (row["action"], row["reason"]) == (
        "unchanged", f"already at {CAP_W:.1f} W, SM clocks reset to their default (a lock left before is not known: "
        "the agent's clock-lock record says unlocked, but the first apply since the agent started takes no recorded "
        "lock on trust)")
    # the same process trusts its own record afterwards: a second poll of a new document sets nothing
    state = AgentState(defaults_ensured=True)
    location.write_bytes(dump_config(signed_at(keys[0], {"GPU-sim-0000": entry(CAP_W)}, 1)))
    assert "1 unchanged" in poll(state, location, keys, nvml, lake, 2, guard)
    [row] = rows_at(lake, hour(2))
    assert row["reason"] == f"already at {CAP_W:.1f} W"


def test_a_gpu_replaced_while_its_cap_was_in_force_is_gone_once_not_owed_for_ever(keys, lake, tmp_path):
    """The board was swapped (a new UUID; every GPU reads): its rollback at expiry was owed for good,
    a 'refuse' row and 'rollback not done' at every poll (288 a day at 5-minute polls)."""
    nvml, location = driver(1), tmp_path / "recommended-config.json"
    location.write_bytes(dump_config(signed(keys[0], {"GPU-sim-0000": entry(CAP_W)}, hours=2)))
    state = AgentState()
    poll(state, location, keys, nvml, lake, 0)
    nvml.devices[0] = SimDevice(0, "GPU-sim-new0", SPEC, int(DEFAULT_W * 1000))
    assert "1 gone" in poll(state, location, keys, nvml, lake, 3)
    assert not state.rollbacks_owed and poll(state, location, keys, nvml, lake, 4) .startswith("config unchanged, not in force")
    # the new board is reset too (an expiry returns every GPU), and the old one is gone
    [row] = [r for r in rows_at(lake, hour(3)) if r["gpu_uuid"] == "GPU-sim-0000"]
    assert row["action"] == "gone" and "removed or replaced" in row["reason"]
    # one that cannot be read is no proof it is gone: still a refusal, still owed
    location.write_bytes(dump_config(signed(keys[0], {"GPU-sim-new0": entry(CAP_W)}, hours=30)))
    poll(state := AgentState(), location, keys, nvml, lake, 5)
    nvml.errors[(0, "nvmlDeviceGetUUID")] = pynvml.NVML_ERROR_GPU_IS_LOST
    location.unlink()
    assert "not done" in poll(state, location, keys, nvml, lake, 6) and "GPU-sim-new0" in state.rollbacks_owed


def whole_watts(nvml, index=0, then_fail=False):
    """The device keeps whole watts (250.5 W reads back as 250 W); `then_fail`: after that first
    set the driver refuses every limit, so the agent cannot undo it either."""
    real = nvml.nvmlDeviceSetPowerManagementLimit

    def set_limit(handle, limit_mw):
        if then_fail and nvml.devices[index].power_limit_mw != int(DEFAULT_W * 1000):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_UNKNOWN)
        real(handle, limit_mw // 1000 * 1000 if handle.index == index else limit_mw)

    nvml.nvmlDeviceSetPowerManagementLimit = set_limit


def test_a_limit_that_does_not_read_back_as_set_is_undone_with_its_lock(keys, lake):
    """'A setting is all or nothing': the limit read back otherwise (250 W for 250.5), the apply
    was audited verify-failed, and the GPU stayed capped with its clocks locked, in force for no
    config, so no later config released it."""
    nvml = driver(1)
    whole_watts(nvml)
    result = apply_config(signed(keys[0], {"GPU-sim-0000": entry(CAP_W + 0.5, LOCK_MHZ)}), public_key=keys[1],
                          host=HOST, nvml=nvml, lake=lake, now=NOW)
    [outcome] = result.outcomes
    assert outcome.action == "refuse"
    assert outcome.reason == (f"set {int((CAP_W + 0.5) * 1000)} mW but the device reads back {int(CAP_W * 1000)} mW; "
                              f"undone: limit restored to {DEFAULT_W:.1f} W")
    assert limit_w(nvml, 0) == DEFAULT_W and nvml.locked_clocks() == {}


def test_an_undone_setting_puts_back_the_lock_the_record_says_was_held(keys, lake, tmp_path):
    """A setting without a lock released the one held, then its limit did not read back: undone,
    the GPU was left unlocked while the agent's record still said locked."""
    nvml = driver(1)
    guard = ReplayGuard(tmp_path / "agent-state" / "agent-applied.json")
    apply_config(signed(keys[0], {"GPU-sim-0000": entry(CAP_W, LOCK_MHZ)}), public_key=keys[1], host=HOST,
                 nvml=nvml, lake=lake, now=NOW, replay_guard=guard)
    whole_watts(nvml)
    result = apply_config(signed_at(keys[0], {"GPU-sim-0000": entry(CAP_W - 19.5)}, 1), public_key=keys[1],
                          host=HOST, nvml=nvml, lake=lake, now=NOW + dt.timedelta(hours=1), replay_guard=guard)
    assert [o.action for o in result.outcomes] == ["refuse"] and "undone" in result.outcomes[0].reason
    assert limit_w(nvml, 0) == CAP_W and nvml.locked_clocks() == {"GPU-sim-0000": LOCK_MHZ}


def signed_at(private, gpus, hours_after_now):
    doc = signed(private, gpus)["body"]
    doc["generated_at"] = doc["valid_from"] = (NOW + dt.timedelta(hours=hours_after_now)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return sign_config(doc, private)


def test_an_apply_that_cannot_be_undone_is_returned_to_the_default_by_the_next_config(keys, lake, tmp_path):
    nvml, location = driver(2), tmp_path / "recommended-config.json"
    location.write_bytes(dump_config(signed(keys[0], {"GPU-sim-0001": entry(CAP_W)})))
    state = AgentState()
    poll(state, location, keys, nvml, lake, 0)  # the agent's first config: GPU 0 at its default
    whole_watts(nvml, then_fail=True)
    location.write_bytes(dump_config(signed_at(keys[0], {"GPU-sim-0000": entry(CAP_W + 0.5, LOCK_MHZ),
                                                         "GPU-sim-0001": entry(CAP_W)}, 1)))
    assert "1 verify-failed" in poll(state, location, keys, nvml, lake, 1)
    assert limit_w(nvml, 0) == CAP_W and nvml.locked_clocks() == {"GPU-sim-0000": LOCK_MHZ}  # left as set
    del nvml.nvmlDeviceSetPowerManagementLimit  # the driver answers again
    location.write_bytes(dump_config(signed_at(keys[0], {"GPU-sim-0001": entry(CAP_W)}, 2)))  # GPU 0 no longer set
    poll(state, location, keys, nvml, lake, 2)
    assert limit_w(nvml, 0) == DEFAULT_W and nvml.locked_clocks() == {}


def test_a_config_an_operator_applied_while_the_loop_ran_expires_though_nothing_can_be_applied(keys, lake, tmp_path):
    """Why the loop reads the replay record again whenever it knows nothing in force, instead of
    once at its start: `agent apply` shares the record, so a config an operator applies while the
    service runs is learnt there, and expires, while the location serves nothing the loop can apply."""
    nvml, location = driver(1), tmp_path / "recommended-config.json"
    guard, state = ReplayGuard(tmp_path / "agent-state" / "agent-applied.json"), AgentState()
    assert poll(state, location, keys, nvml, lake, 0, guard).startswith("no config published")
    apply_config(signed(keys[0], {"GPU-sim-0000": entry(CAP_W)}, hours=2), public_key=keys[1], host=HOST, nvml=nvml,
                 lake=lake, now=hour(0.5), replay_guard=guard)  # the operator's one-off apply
    location.write_bytes(dump_config(signed_at(keys[0], {"GPU-sim-0000": entry(CAP_W)}, 5)))  # valid from hour 5
    assert "is in force until" in poll(state, location, keys, nvml, lake, 1, guard)
    assert limit_w(nvml, 0) == CAP_W
    assert poll(state, location, keys, nvml, lake, 3, guard).startswith("expired")
    assert limit_w(nvml, 0) == DEFAULT_W
