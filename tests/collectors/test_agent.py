"""The node agent against the real nvidia-ml-py loading the stand-in libnvidia-ml.so.1."""

from __future__ import annotations

import datetime as dt
import re

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pynvml
import pytest

from joulehouse.collectors.agent import apply_config, rollback
from joulehouse.collectors.agent_audit import read_host_audit
from joulehouse.collectors.agent_loop import AgentState, poll_once, run_agent
from joulehouse.collectors.agent_replay import ReplayGuard
from joulehouse.collectors.config_contract import (
    BadSignature, ExpiredConfig, HostNotInConfig, MalformedConfig, dump_config, sign_config,
)
from nvml_stub.fixture import GpuState

NOW = dt.datetime(2026, 1, 3, 6, 0, tzinfo=dt.timezone.utc)
HOST = "node-01"


def fleet(n=8):
    return [GpuState.a100(i) for i in range(n)]


def entry(watts, model="NVIDIA A100-SXM4-80GB", clocks=None):
    lo, hi = clocks or (None, None)
    return {"gpu_model": model, "workload_class": "throughput", "power_limit_w": float(watts),
            "locked_sm_clock_min_mhz": lo, "locked_sm_clock_max_mhz": hi,
            "expected_saving_pct": 10.0, "expected_slowdown_pct": 5.0}


def signed(private, gpus, host=HOST, hours=48, generated_minutes=0):
    """Valid from NOW for `hours`; generated `generated_minutes` after NOW (a newer config, for the replay guard)."""
    generated_at = (NOW + dt.timedelta(minutes=generated_minutes)).strftime("%Y-%m-%dT%H:%M:%SZ")
    body = {"schema_version": 1, "generated_at": generated_at, "valid_from": "2026-01-03T06:00:00Z",
            "valid_until": (NOW + dt.timedelta(hours=hours)).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "site": "site-a", "day": "2026-01-02", "hosts": {host: gpus}, "excluded_gpu_models": []}
    return sign_config(body, private)


def uuid(i):
    return GpuState.a100(i).uuid


def limit_mw(stub, i):
    return int(stub.read()[f"gpu{i}.power_limit_mw"])


def agent_state(tmp_path):
    """The agent's own state (its replay record, and the clock locks it left beside it)."""
    return ReplayGuard(tmp_path / "agent-state" / "agent-applied.json")


def audit_rows(lake):
    return ds.dataset(lake / "agent_audit", format="parquet", partitioning="hive").to_table().to_pylist()


def test_apply_sets_reads_back_and_audits_each_gpu(nvml_stub, keys, lake):
    nvml_stub.write(fleet(4))
    doc = signed(keys[0], {uuid(0): entry(300), uuid(1): entry(250, clocks=(900, 1200))})
    result = apply_config(doc, public_key=keys[1], host=HOST, nvml=pynvml, lake=lake, now=NOW)
    assert result.ok and result.count("apply") == 2
    assert (limit_mw(nvml_stub, 0), limit_mw(nvml_stub, 1), limit_mw(nvml_stub, 2)) == (300_000, 250_000, 400_000)
    state = nvml_stub.read()
    assert (state["gpu1.locked_sm_clock_min_mhz"], state["gpu1.locked_sm_clock_max_mhz"]) == ("900", "1200")
    rows = {r["gpu_uuid"]: r for r in audit_rows(lake)}
    assert rows[uuid(0)]["action"] == "apply"
    assert (rows[uuid(0)]["power_limit_w_before"], rows[uuid(0)]["power_limit_w_after"]) == (400.0, 300.0)
    assert rows[uuid(0)]["config_sha256"] == result.config_sha256


def test_applying_the_same_config_twice_changes_nothing(nvml_stub, keys, lake, tmp_path):
    nvml_stub.write(fleet(2))
    doc = signed(keys[0], {uuid(0): entry(300), uuid(1): entry(275)})
    guard = agent_state(tmp_path)
    apply_config(doc, public_key=keys[1], host=HOST, nvml=pynvml, lake=lake, now=NOW, replay_guard=guard)
    lines_before = nvml_stub.state_path.read_text()
    again = apply_config(doc, public_key=keys[1], host=HOST, nvml=pynvml, lake=lake, now=NOW, replay_guard=guard)
    assert again.ok and again.count("unchanged") == 2
    assert nvml_stub.state_path.read_text() == lines_before  # no Set call reached the device
    assert sorted(r["action"] for r in audit_rows(lake)) == ["apply", "apply", "unchanged", "unchanged"]


def test_out_of_range_and_unknown_gpus_are_refused_not_clamped(nvml_stub, keys, lake):
    nvml_stub.write(fleet(3))
    doc = signed(keys[0], {uuid(0): entry(90), uuid(1): entry(300, clocks=(900, 2000)),
                           uuid(2): entry(300), "GPU-not-here": entry(300)})
    result = apply_config(doc, public_key=keys[1], host=HOST, nvml=pynvml, lake=lake, now=NOW)
    by_uuid = {o.gpu_uuid: o for o in result.outcomes}
    assert not result.ok
    assert by_uuid[uuid(0)].action == "refuse" and "outside the device's limits 100.0-400.0 W" in by_uuid[uuid(0)].reason
    assert by_uuid[uuid(1)].action == "refuse" and "1410 MHz" in by_uuid[uuid(1)].reason
    assert by_uuid["GPU-not-here"].action == "refuse" and "no GPU with UUID" in by_uuid["GPU-not-here"].reason
    assert by_uuid[uuid(2)].action == "apply"
    assert (limit_mw(nvml_stub, 0), limit_mw(nvml_stub, 1)) == (400_000, 400_000)  # untouched
    assert len(audit_rows(lake)) == 4


@pytest.mark.parametrize("n, bad, error, why", [
    (8, 3, {"nvmlDeviceSetPowerManagementLimit": "NO_PERMISSION"}, r"Insufficient Permissions|NoPermission"),
    (3, 2, {"nvmlDeviceGetUUID": "GPU_IS_LOST"}, r"GPU index 2"),  # a lost GPU: the others are still served
])
def test_one_gpu_failing_does_not_stop_the_others_and_every_gpu_is_audited(nvml_stub, keys, lake, n, bad, error, why):
    gpus = fleet(n)
    gpus[bad].error = error
    nvml_stub.write(gpus)
    doc = signed(keys[0], {uuid(i): entry(300) for i in range(n)})
    result = apply_config(doc, public_key=keys[1], host=HOST, nvml=pynvml, lake=lake, now=NOW)
    outcomes = {o.gpu_uuid: o for o in result.outcomes}
    failed = outcomes.pop(uuid(bad))
    assert failed.action == "refuse" and re.search(why, failed.reason), failed.reason
    assert {o.action for o in outcomes.values()} == {"apply"}
    assert limit_mw(nvml_stub, bad) == 400_000 and limit_mw(nvml_stub, 0) == 300_000
    assert f"{n - 1} apply, 1 refuse" in result.summary()
    assert len(audit_rows(lake)) == n


def test_rollback_returns_every_gpu_to_its_default_and_unlocks_clocks(nvml_stub, keys, lake):
    nvml_stub.write(fleet(2))
    apply_config(signed(keys[0], {uuid(0): entry(300, clocks=(900, 1200))}), public_key=keys[1], host=HOST,
                 nvml=pynvml, now=NOW)
    result = rollback(host=HOST, nvml=pynvml, lake=lake, now=NOW, reason="config expired")
    assert [o.action for o in result.outcomes] == ["rollback", "unchanged"]
    assert limit_mw(nvml_stub, 0) == 400_000 and nvml_stub.read()["gpu0.locked_sm_clock_max_mhz"] == "0"
    assert {r["action"] for r in audit_rows(lake)} == {"rollback", "unchanged"}


def test_a_config_for_another_host_touches_no_gpu_and_is_audited(nvml_stub, keys, lake):
    nvml_stub.write(fleet(1))
    doc = signed(keys[0], {uuid(0): entry(300)}, host="node-02")
    with pytest.raises(HostNotInConfig, match="no entries for host 'node-01'"):
        apply_config(doc, public_key=keys[1], host=HOST, nvml=pynvml, lake=lake, now=NOW)
    assert limit_mw(nvml_stub, 0) == 400_000
    assert [(r["action"], r["gpu_uuid"]) for r in audit_rows(lake)] == [("refuse", None)]


def test_expired_config_is_refused_and_audited(nvml_stub, keys, lake):
    nvml_stub.write(fleet(1))
    doc = signed(keys[0], {uuid(0): entry(300)}, hours=1)
    with pytest.raises(ExpiredConfig):
        apply_config(doc, public_key=keys[1], host=HOST, nvml=pynvml, lake=lake, now=NOW + dt.timedelta(hours=2))
    assert limit_mw(nvml_stub, 0) == 400_000
    assert audit_rows(lake)[0]["reason"].startswith("ExpiredConfig")


def test_tampered_file_is_refused(nvml_stub, keys, tmp_path):
    nvml_stub.write(fleet(1))
    path = tmp_path / "c.json"
    path.write_bytes(dump_config(signed(keys[0], {uuid(0): entry(300)})).replace(b"300.0", b"150.0"))
    with pytest.raises(BadSignature):
        apply_config(str(path), public_key=keys[1], host=HOST, nvml=pynvml, now=NOW)
    assert limit_mw(nvml_stub, 0) == 400_000


def test_a_config_expires_while_its_server_cannot_be_reached(nvml_stub, keys, lake, tmp_path):
    """A fetch that failed returned before the expiry check: with the config server down past
    valid_until, the caps stayed on with no valid config behind them."""
    nvml_stub.write(fleet(1))
    location = tmp_path / "recommended-config.json"
    location.write_bytes(dump_config(signed(keys[0], {uuid(0): entry(300)}, hours=2)))
    state, kw = AgentState(), dict(public_key=keys[1], host=HOST, nvml=pynvml, lake=lake)
    assert poll_once(state, str(location), now=NOW, **kw).startswith("applied")
    location.unlink()
    location.mkdir()  # unreadable as a file: a fetch error, not a revocation
    assert poll_once(state, str(location), now=NOW + dt.timedelta(hours=1), **kw).startswith("fetch failed")
    assert limit_mw(nvml_stub, 0) == 300_000, "before its expiry the config in force stays"
    assert poll_once(state, str(location), now=NOW + dt.timedelta(hours=2), **kw).startswith("expired")
    assert limit_mw(nvml_stub, 0) == 400_000


def test_agent_loop_applies_on_change_and_rolls_back_on_expiry_and_revocation(nvml_stub, keys, lake, tmp_path):
    nvml_stub.write(fleet(2))
    location = tmp_path / "recommended-config.json"
    location.write_bytes(dump_config(signed(keys[0], {uuid(0): entry(300)}, hours=2)))
    state, kw = AgentState(), dict(public_key=keys[1], host=HOST, nvml=pynvml, lake=lake)
    assert poll_once(state, str(location), now=NOW, **kw).startswith("applied")
    assert poll_once(state, str(location), now=NOW + dt.timedelta(minutes=5), **kw) == "config unchanged"
    assert limit_mw(nvml_stub, 0) == 300_000
    assert poll_once(state, str(location), now=NOW + dt.timedelta(hours=2), **kw).startswith("expired")
    assert limit_mw(nvml_stub, 0) == 400_000
    # the expired bytes still served: said as not in force, not as "config unchanged"
    assert poll_once(state, str(location), now=NOW + dt.timedelta(hours=2, minutes=5), **kw).startswith(
        "config unchanged, not in force")
    location.write_bytes(dump_config(signed(keys[0], {uuid(1): entry(250)}, hours=48)))
    poll_once(state, str(location), now=NOW + dt.timedelta(hours=3), **kw)
    assert limit_mw(nvml_stub, 1) == 250_000
    location.unlink()
    assert poll_once(state, str(location), now=NOW + dt.timedelta(hours=4), **kw).startswith("revoked")
    assert limit_mw(nvml_stub, 1) == 400_000
    actions = [r["action"] for r in sorted(audit_rows(lake), key=lambda r: r["audited_at"])]
    assert actions.count("apply") == 2 and actions.count("rollback") == 2


def test_a_clock_only_change_is_audited_as_an_apply_with_its_range(nvml_stub, keys, lake, tmp_path):
    """The limit is already the default, only the SM clocks change: that is an 'apply' (the lock
    range in the reason), then 'unchanged' when the same config comes again, and 'apply' again
    when the range changes; judged from the agent's own record, as NVML cannot read a lock back."""
    nvml_stub.write(fleet(2))
    kw = dict(public_key=keys[1], host=HOST, nvml=pynvml, lake=lake, replay_guard=agent_state(tmp_path))
    first = apply_config(signed(keys[0], {uuid(0): entry(400, clocks=(420, 1200))}), now=NOW, **kw)
    assert [o.action for o in first.outcomes] == ["apply"]
    assert ("SM clocks locked to 420-1200 MHz (was unknown: not in the agent's clock-lock record)"
            in first.outcomes[0].reason)
    again = apply_config(signed(keys[0], {uuid(0): entry(400, clocks=(420, 1200))}), now=NOW + dt.timedelta(minutes=5),
                         **kw)
    assert [o.action for o in again.outcomes] == ["unchanged"]
    moved = apply_config(signed(keys[0], {uuid(0): entry(400, clocks=(420, 1100))}, generated_minutes=10),
                         now=NOW + dt.timedelta(minutes=10), **kw)
    assert [o.action for o in moved.outcomes] == ["apply"] and "was 420-1200 MHz" in moved.outcomes[0].reason
    assert nvml_stub.read()["gpu0.locked_sm_clock_max_mhz"] == "1100"
    assert [r["action"] for r in sorted(audit_rows(lake), key=lambda r: r["audited_at"])] == ["apply", "unchanged", "apply"]


def test_a_host_named_by_digits_alone_reads_its_audit_back(nvml_stub, keys, lake, tmp_path):
    # Inferred from the folder, host=4021 read as int32 and clashed with the files' string host
    # column: every apply after the first raised ArrowTypeError before touching a GPU.
    nvml_stub.write(fleet(1))
    doc = signed(keys[0], {uuid(0): entry(300, clocks=(900, 1200))}, host="4021")
    kw = dict(public_key=keys[1], host="4021", nvml=pynvml, lake=lake, replay_guard=agent_state(tmp_path))
    first = apply_config(doc, now=NOW, **kw)
    again = apply_config(doc, now=NOW + dt.timedelta(minutes=5), **kw)
    assert [o.action for o in first.outcomes + again.outcomes] == ["apply", "unchanged"]
    assert read_host_audit(lake, "4021", ["action"]).column("action").to_pylist() == ["apply", "unchanged"]


def test_an_audit_file_that_clashes_with_the_others_is_reported_not_raised(lake, caplog):
    # A foreign file whose host column is an integer: pyarrow raises ArrowTypeError, which is
    # not an ArrowInvalid; it once escaped the agent's audit reader.
    folder = lake / "agent_audit" / "date=2026-01-03" / f"host={HOST}"
    folder.mkdir(parents=True)
    pq.write_table(pa.table({"audited_at": [NOW], "host": [4021], "gpu_uuid": [uuid(0)], "action": ["apply"],
                             "reason": ["SM clocks locked to 900-1200 MHz"]}), folder / "part-foreign.parquet")
    assert read_host_audit(lake, HOST, ["gpu_uuid", "reason"]) is None
    assert "agent_audit" in caplog.text and "ArrowTypeError" in caplog.text


def test_a_clock_lock_the_driver_refuses_puts_the_limit_back(nvml_stub, keys, lake):
    """All or nothing per GPU: the limit went in, the lock did not, so the limit is restored and
    the audit's 'refuse' tells the truth about the device."""
    gpus = fleet(2)
    gpus[0].error = {"nvmlDeviceSetGpuLockedClocks": "NO_PERMISSION"}
    nvml_stub.write(gpus)
    doc = signed(keys[0], {uuid(0): entry(300, clocks=(900, 1200)), uuid(1): entry(300, clocks=(900, 1200))})
    result = apply_config(doc, public_key=keys[1], host=HOST, nvml=pynvml, lake=lake, now=NOW)
    refused = next(o for o in result.outcomes if o.gpu_uuid == uuid(0))
    assert refused.action == "refuse" and "limit restored to 400.0 W" in refused.reason
    assert limit_mw(nvml_stub, 0) == 400_000 and refused.power_limit_w_after == 400.0
    assert limit_mw(nvml_stub, 1) == 300_000, "the other GPU is applied"
    rows = {r["gpu_uuid"]: r for r in audit_rows(lake)}
    assert (rows[uuid(0)]["action"], rows[uuid(0)]["power_limit_w_after"]) == ("refuse", 400.0)


@pytest.mark.parametrize("body", [b"", b"  \n"])
def test_an_empty_export_is_called_empty_not_bad_json(keys, lake, body):
    """It read "not valid JSON: Expecting value: line 1 column 1 (char 0)"."""
    with pytest.raises(MalformedConfig, match=r"^config is empty"):
        apply_config(body, public_key=keys[1], host=HOST, nvml=pynvml, lake=lake, now=NOW)
    assert [r["action"] for r in audit_rows(lake)] == ["refuse"]


def test_a_body_that_is_not_json_is_refused_and_audited(keys, lake):
    with pytest.raises(MalformedConfig, match="not valid JSON"):
        apply_config(b"<html>502 Bad Gateway</html>", public_key=keys[1], host=HOST, nvml=pynvml, lake=lake, now=NOW)
    rows = audit_rows(lake)
    assert [(r["action"], r["gpu_uuid"]) for r in rows] == [("refuse", None)]
    assert rows[0]["reason"].startswith("MalformedConfig")


def test_a_clock_range_below_the_devices_lowest_clock_is_refused_before_any_set(nvml_stub, keys, lake):
    """NVML has no min-clock getter; the agent reads the supported-clock list (as nvidia-smi does)
    and refuses a lock below its lowest entry (A100: 210 MHz), and a device that cannot list its
    clocks gets no lock, rather than whatever the driver makes of it."""
    gpus = fleet(3)
    gpus[2].error = {"nvmlDeviceGetSupportedGraphicsClocks": "NOT_SUPPORTED"}
    nvml_stub.write(gpus)
    doc = signed(keys[0], {uuid(0): entry(300, clocks=(150, 1200)), uuid(1): entry(300, clocks=(210, 1200)),
                           uuid(2): entry(300, clocks=(900, 1200))})
    lines_before = len(nvml_stub.state_path.read_text().splitlines())
    result = apply_config(doc, public_key=keys[1], host=HOST, nvml=pynvml, lake=lake, now=NOW)
    by_uuid = {o.gpu_uuid: o for o in result.outcomes}
    assert by_uuid[uuid(0)].action == "refuse"
    assert "locked SM clock min 150 MHz is below the device's lowest 210 MHz" in by_uuid[uuid(0)].reason
    assert by_uuid[uuid(2)].action == "refuse" and "cannot read the device's supported SM clocks" in by_uuid[uuid(2)].reason
    assert by_uuid[uuid(1)].action == "apply", "the lowest listed clock itself is a valid floor"
    state = nvml_stub.read()
    assert (limit_mw(nvml_stub, 0), limit_mw(nvml_stub, 2)) == (400_000, 400_000)
    assert state.get("gpu0.locked_sm_clock_min_mhz") is None and state.get("gpu2.locked_sm_clock_min_mhz") is None
    # only GPU 1's limit and lock were written to the device
    assert len(nvml_stub.state_path.read_text().splitlines()) == lines_before + 3


def test_the_supported_clock_lists_follow_nvml(nvml_stub):
    """The stand-in answers the two-call list functions as libnvidia-ml does through pynvml."""
    nvml_stub.write([GpuState.a100(0), GpuState.h100(1)])
    pynvml.nvmlInit()
    try:
        a100, h100 = (pynvml.nvmlDeviceGetHandleByIndex(i) for i in (0, 1))
        assert pynvml.nvmlDeviceGetSupportedMemoryClocks(a100) == [1593]
        clocks = pynvml.nvmlDeviceGetSupportedGraphicsClocks(a100, 1593)
        assert (clocks[0], clocks[-1], len(clocks)) == (1410, 210, 81) and clocks == sorted(clocks, reverse=True)
        assert min(pynvml.nvmlDeviceGetSupportedGraphicsClocks(h100, 2619)) == 345
        with pytest.raises(pynvml.NVMLError_NotFound):
            pynvml.nvmlDeviceGetSupportedGraphicsClocks(a100, 2619)
    finally:
        pynvml.nvmlShutdown()


def test_a_setting_without_a_lock_releases_the_lock_the_last_one_left(nvml_stub, keys, lake, tmp_path):
    """Day 1: 300 W and 900-1200 MHz; day 2: 300 W, no lock. The clocks are unlocked and the audit
    says so (it used to say 'unchanged' and leave the lock on)."""
    nvml_stub.write(fleet(1))
    kw = dict(public_key=keys[1], host=HOST, nvml=pynvml, lake=lake, replay_guard=agent_state(tmp_path))
    apply_config(signed(keys[0], {uuid(0): entry(300, clocks=(900, 1200))}), now=NOW, **kw)
    result = apply_config(signed(keys[0], {uuid(0): entry(300)}, generated_minutes=60), now=NOW + dt.timedelta(hours=1),
                          **kw)
    [outcome] = result.outcomes
    assert outcome.action == "apply" and "SM clocks unlocked (were 900-1200 MHz)" in outcome.reason
    assert nvml_stub.read()["gpu0.locked_sm_clock_max_mhz"] == "0"
    again = apply_config(signed(keys[0], {uuid(0): entry(300)}, generated_minutes=60), now=NOW + dt.timedelta(hours=2),
                         **kw)
    assert again.outcomes[0].action == "unchanged", "the agent now records the GPU as unlocked"


def test_the_loop_outlives_an_unusable_driver_and_a_clock_behind_the_exporter(nvml_stub, keys, lake, tmp_path):
    nvml_stub.write(fleet(1))
    location = tmp_path / "recommended-config.json"
    body = signed(keys[0], {uuid(0): entry(300)})
    early = NOW - dt.timedelta(seconds=5)  # this node's clock: 5 s behind the exporter's
    location.write_bytes(dump_config(body))
    state, kw = AgentState(), dict(public_key=keys[1], host=HOST, nvml=pynvml, lake=lake)
    assert "not valid yet" in poll_once(state, str(location), now=early, **kw)
    assert poll_once(state, str(location), now=NOW + dt.timedelta(minutes=5), **kw).startswith("applied"), \
        "the same bytes are checked again once they are valid"
    assert limit_mw(nvml_stub, 0) == 300_000
    nvml_stub.write(fleet(1), errors={"nvmlInitWithFlags": "DRIVER_NOT_LOADED", "nvmlInit": "DRIVER_NOT_LOADED"})
    location.write_bytes(dump_config(signed(keys[0], {uuid(0): entry(275)})))
    assert "NVML unavailable" in poll_once(state, str(location), now=NOW + dt.timedelta(minutes=10), **kw)
    assert any(r["action"] == "refuse" and "NVML unavailable" in (r["reason"] or "") for r in audit_rows(lake))
    nvml_stub.write(fleet(1))  # the driver is back: the same document is applied at the next poll
    assert poll_once(state, str(location), now=NOW + dt.timedelta(minutes=15), **kw).startswith("applied")
    assert limit_mw(nvml_stub, 0) == 275_000


def test_a_gpu_the_next_config_drops_goes_back_to_its_default(nvml_stub, keys, lake, tmp_path):
    """Day 1 caps GPUs 0 and 1; day 2's config lists only GPU 0 (GPU 1's model failed the gate):
    GPU 1 goes back to its default instead of keeping yesterday's cap for good."""
    nvml_stub.write(fleet(2))
    location = tmp_path / "recommended-config.json"
    state, kw = AgentState(), dict(public_key=keys[1], host=HOST, nvml=pynvml, lake=lake)
    location.write_bytes(dump_config(signed(keys[0], {uuid(0): entry(300), uuid(1): entry(250)})))
    poll_once(state, str(location), now=NOW, **kw)
    assert (limit_mw(nvml_stub, 0), limit_mw(nvml_stub, 1)) == (300_000, 250_000)
    location.write_bytes(dump_config(signed(keys[0], {uuid(0): entry(300)})))
    message = poll_once(state, str(location), now=NOW + dt.timedelta(days=1), **kw)
    assert "1 GPUs the new config no longer sets" in message
    assert (limit_mw(nvml_stub, 0), limit_mw(nvml_stub, 1)) == (300_000, 400_000)
    rollbacks = [r for r in audit_rows(lake) if r["action"] == "rollback"]
    assert [r["gpu_uuid"] for r in rollbacks] == [uuid(1)] and "not set by the new config" in rollbacks[0]["reason"]


def test_a_restarted_agent_returns_gpus_its_first_config_does_not_list(nvml_stub, keys, lake, tmp_path):
    """Day 1 caps GPUs 0 and 1; the agent restarts (its state is in memory) and day 2's config lists
    only GPU 0. GPU 1 goes back to its default; it used to keep yesterday's cap until a config
    listed it again or none was valid."""
    nvml_stub.write(fleet(2))
    location = tmp_path / "recommended-config.json"
    kw = dict(public_key=keys[1], host=HOST, nvml=pynvml, lake=lake)
    location.write_bytes(dump_config(signed(keys[0], {uuid(0): entry(300), uuid(1): entry(250)})))
    poll_once(AgentState(), str(location), now=NOW, **kw)
    assert (limit_mw(nvml_stub, 0), limit_mw(nvml_stub, 1)) == (300_000, 250_000)
    restarted = AgentState()
    location.write_bytes(dump_config(signed(keys[0], {uuid(0): entry(275)})))
    message = poll_once(restarted, str(location), now=NOW + dt.timedelta(days=1), **kw)
    assert message.startswith("applied") and "GPUs the config does not set returned to their defaults" in message
    assert (limit_mw(nvml_stub, 0), limit_mw(nvml_stub, 1)) == (275_000, 400_000)
    rollbacks = [r for r in audit_rows(lake) if r["action"] == "rollback"]
    assert [r["gpu_uuid"] for r in rollbacks] == [uuid(1)] and "first config since the agent started" in rollbacks[0]["reason"]
    # Once per process: the next config is compared with the one in force, as before.
    location.write_bytes(dump_config(signed(keys[0], {uuid(0): entry(260)})))
    assert "set to their defaults" not in poll_once(restarted, str(location), now=NOW + dt.timedelta(days=2), **kw)


@pytest.mark.parametrize("restarted", [False, True])
def test_a_gpu_whose_new_setting_is_refused_goes_back_to_its_default(nvml_stub, keys, lake, tmp_path, restarted):
    """Day 2's config asks GPU 1 for more than its maximum limit: refused. Day 1's cap is no longer
    in force, so GPU 1 returns to its default (it kept the old cap for good, restart or not)."""
    nvml_stub.write(fleet(2))
    location = tmp_path / "recommended-config.json"
    state, kw = AgentState(), dict(public_key=keys[1], host=HOST, nvml=pynvml, lake=lake)
    location.write_bytes(dump_config(signed(keys[0], {uuid(0): entry(300), uuid(1): entry(250)})))
    poll_once(state, str(location), now=NOW, **kw)
    location.write_bytes(dump_config(signed(keys[0], {uuid(0): entry(300), uuid(1): entry(5000)})))
    message = poll_once(AgentState() if restarted else state, str(location), now=NOW + dt.timedelta(days=1), **kw)
    assert "1 refuse" in message
    assert (limit_mw(nvml_stub, 0), limit_mw(nvml_stub, 1)) == (300_000, 400_000)


def test_a_rollback_that_fails_is_retried_at_the_next_poll(nvml_stub, keys, lake, tmp_path, monkeypatch):
    """The rollback of a GPU the new config drops fails (its audit could not be written): the next
    poll of the same document retries it instead of calling the config unchanged."""
    import joulehouse.collectors.agent_loop as loop

    nvml_stub.write(fleet(2))
    location = tmp_path / "recommended-config.json"
    state, kw = AgentState(), dict(public_key=keys[1], host=HOST, nvml=pynvml, lake=lake)
    location.write_bytes(dump_config(signed(keys[0], {uuid(0): entry(300), uuid(1): entry(250)})))
    poll_once(state, str(location), now=NOW, **kw)
    location.write_bytes(dump_config(signed(keys[0], {uuid(0): entry(300)})))
    real_rollback = loop.rollback

    def disk_full(**kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(loop, "rollback", disk_full)
    with pytest.raises(OSError):
        poll_once(state, str(location), now=NOW + dt.timedelta(days=1), **kw)
    assert limit_mw(nvml_stub, 1) == 250_000
    monkeypatch.setattr(loop, "rollback", real_rollback)
    message = poll_once(state, str(location), now=NOW + dt.timedelta(days=1, minutes=5), **kw)
    assert "1 GPUs the new config no longer sets" in message and limit_mw(nvml_stub, 1) == 400_000


def test_one_failed_poll_does_not_end_the_agent(keys, lake, tmp_path):
    """Whatever a poll meets (here an NVML binding that crashes outright), the daemon logs it and
    polls again rather than exit and leave the node unmanaged."""
    class Broken:
        NVMLError = pynvml.NVMLError

        def nvmlInit(self):
            raise RuntimeError("libnvidia-ml.so.1: cannot open shared object file")

    location = tmp_path / "recommended-config.json"
    location.write_bytes(dump_config(signed(keys[0], {uuid(0): entry(300)})))
    lines: list[str] = []
    run_agent(str(location), public_key=keys[1], host=HOST, nvml=Broken(), lake=lake, iterations=2,
              clock=lambda: NOW, sleep=lambda s: None, log=lines.append)
    assert len(lines) == 2 and all("poll failed (RuntimeError: libnvidia-ml.so.1" in line for line in lines)


def test_a_restarted_agent_does_not_leave_an_expired_configs_caps_in_place(nvml_stub, keys, lake, tmp_path):
    """The agent's state is in memory: applied, restarted, and the config expires (or is taken
    down) while it was away. Its first poll finds no valid config and returns the GPUs to their
    defaults, once; it used to keep the cap for good."""
    nvml_stub.write(fleet(2))
    location = tmp_path / "recommended-config.json"
    location.write_bytes(dump_config(signed(keys[0], {uuid(0): entry(300)}, hours=2)))
    kw = dict(public_key=keys[1], host=HOST, nvml=pynvml, lake=lake)
    poll_once(AgentState(), str(location), now=NOW, **kw)
    assert limit_mw(nvml_stub, 0) == 300_000
    restarted = AgentState()
    message = poll_once(restarted, str(location), now=NOW + dt.timedelta(hours=30), **kw)
    assert "ExpiredConfig" in message and "GPUs set to their defaults" in message
    assert limit_mw(nvml_stub, 0) == 400_000
    assert poll_once(restarted, str(location), now=NOW + dt.timedelta(hours=31), **kw) .startswith("config unchanged, not in force")
    location.unlink()
    gone = AgentState()
    assert "GPUs set to their defaults" in poll_once(gone, str(location), now=NOW + dt.timedelta(hours=32), **kw)
    assert "GPUs set to their defaults" not in poll_once(gone, str(location), now=NOW + dt.timedelta(hours=33), **kw)


def test_a_restarted_agent_that_finds_a_tampered_config_does_not_keep_caps_of_unknown_origin(nvml_stub, keys, lake,
                                                                                            tmp_path):
    """After a restart, a first poll that found a tampered (or unreadable) config logged "keeping
    current settings": caps no valid config stood behind stayed on the GPUs for good."""
    nvml_stub.write(fleet(2))
    location = tmp_path / "recommended-config.json"
    location.write_bytes(dump_config(signed(keys[0], {uuid(0): entry(300)})))
    kw = dict(public_key=keys[1], host=HOST, nvml=pynvml, lake=lake)
    poll_once(AgentState(), str(location), now=NOW, **kw)
    assert limit_mw(nvml_stub, 0) == 300_000
    location.write_bytes(location.read_bytes().replace(b"300.0", b"200.0"))
    restarted = AgentState()
    message = poll_once(restarted, str(location), now=NOW + dt.timedelta(hours=1), **kw)
    assert "BadSignature" in message and "GPUs set to their defaults" in message
    assert limit_mw(nvml_stub, 0) == 400_000


@pytest.mark.parametrize("number", [b"9" * 5000, b"1e400"])
def test_a_number_json_cannot_hold_is_refused_and_audited(keys, lake, number):
    """A 5,000-digit limit ended `agent apply` in a ValueError traceback (exit 1), and 1e400 (read
    as infinity) was refused without an audit row."""
    body = dump_config(signed(keys[0], {uuid(0): entry(300)})).replace(b"300.0", number)
    with pytest.raises(MalformedConfig):
        apply_config(body, public_key=keys[1], host=HOST, nvml=pynvml, lake=lake, now=NOW)
    assert [r["action"] for r in audit_rows(lake)] == ["refuse"]


def test_a_node_whose_own_name_has_capitals_and_a_domain_applies_the_entries_the_warehouse_keyed_by_its_short_name(
        nvml_stub, keys, lake):
    """The warehouse keys a setting by the lake's name of the server, its lowercase short name
    (collectors.sources.host_names); the agent asked for its own uname (NODE-01.cluster.example.com),
    found no entry and capped nothing. Its audit rows then name the server as the lake does."""
    nvml_stub.write(fleet(2))
    doc = signed(keys[0], {uuid(0): entry(300)})
    result = apply_config(doc, public_key=keys[1], host="NODE-01.cluster.example.com", nvml=pynvml, lake=lake, now=NOW)
    assert result.ok and result.count("apply") == 1 and limit_mw(nvml_stub, 0) == 300_000
    assert {r["host"] for r in audit_rows(lake)} == {HOST}
    back = rollback(host="Node-01", nvml=pynvml, lake=lake, now=NOW + dt.timedelta(hours=1))
    assert back.count("rollback") == 1 and limit_mw(nvml_stub, 0) == 400_000
    assert {r["host"] for r in audit_rows(lake)} == {HOST}
