"""The agent refuses an older signed config after a newer one, across restarts, and never reads a
config larger than its limit. Against the real nvidia-ml-py loading the stand-in libnvidia-ml.so.1.

The attack: yesterday's export is still signed and still inside its validity window; whoever can
serve the agent's config location (or write its file) serves it again, and the agent would undo
today's settings with it.
"""

from __future__ import annotations

import datetime as dt
import http.server
import threading

import pyarrow.dataset as ds
import pynvml
import pytest

from joulehouse.collectors.agent import apply_config
from joulehouse.collectors.agent_loop import AgentState, ConfigTooLarge, fetch_config, poll_once
from joulehouse.collectors.agent_replay import ReplayedConfig, ReplayGuard, ReplayStateError, WrongSite
from joulehouse.collectors.config_contract import (
    MAX_CONFIG_BYTES, MalformedConfig, canonical_body, dump_config, load_config_document, sign_config,
)
from nvml_stub.fixture import GpuState

NOW = dt.datetime(2026, 1, 3, 6, 0, tzinfo=dt.timezone.utc)
HOST = "node-01"


def uuid(i):
    return GpuState.a100(i).uuid


def config(private, watts, generated_at, site="site-a", valid_from=None):
    """A config valid for two days around NOW (from `valid_from` where given), generated at `generated_at`."""
    fmt = lambda t: t.strftime("%Y-%m-%dT%H:%M:%SZ")  # noqa: E731
    valid_from = valid_from or NOW - dt.timedelta(days=2)
    body = {"schema_version": 1, "generated_at": fmt(generated_at), "valid_from": fmt(valid_from),
            "valid_until": fmt(max(valid_from, NOW) + dt.timedelta(days=2)), "site": site, "day": "2026-01-02",
            "hosts": {HOST: {uuid(0): {"gpu_model": "NVIDIA A100-SXM4-80GB", "workload_class": "throughput",
                                       "power_limit_w": float(watts), "expected_saving_pct": 10.0,
                                       "expected_slowdown_pct": 5.0}}},
            "excluded_gpu_models": []}
    return dump_config(sign_config(body, private))


def limit_w(stub):
    return int(stub.read()["gpu0.power_limit_mw"]) / 1000


TODAY, YESTERDAY = NOW - dt.timedelta(hours=1), NOW - dt.timedelta(days=1)


def test_an_older_config_after_a_newer_one_is_refused_and_audited(nvml_stub, keys, lake, tmp_path):
    nvml_stub.write([GpuState.a100(0)])
    guard = ReplayGuard(tmp_path / "state" / "agent-applied.json")
    kw = dict(public_key=keys[1], host=HOST, nvml=pynvml, lake=lake, replay_guard=guard)
    assert apply_config(config(keys[0], 300, TODAY), now=NOW, **kw).ok
    with pytest.raises(ReplayedConfig, match=r"generated at 2026-01-02T06:00:00Z is not newer than .* "
                                             r"\(generated at 2026-01-03T05:00:00Z"):
        apply_config(config(keys[0], 250, YESTERDAY), now=NOW + dt.timedelta(minutes=5), **kw)
    assert limit_w(nvml_stub) == 300.0
    refused = [r for r in ds.dataset(lake / "agent_audit", partitioning="hive").to_table().to_pylist()
               if r["action"] == "refuse"]
    assert len(refused) == 1 and refused[0]["reason"].startswith("ReplayedConfig: ")
    again = apply_config(config(keys[0], 300, TODAY), now=NOW + dt.timedelta(minutes=10), **kw)
    assert again.count("unchanged") == 1, "the same config again is no replay"


def test_a_withdrawn_config_served_again_is_refused_even_after_a_restart(nvml_stub, keys, lake, tmp_path):
    """The operator withdrew a bad config (the agent rolled it back); a stale mirror serving the
    same signed bytes again had put its cap back five minutes later."""
    nvml_stub.write([GpuState.a100(0)])
    location, state_file = tmp_path / "recommended-config.json", tmp_path / "state" / "agent-applied.json"
    bad = config(keys[0], 150, TODAY)
    poll = lambda state, minutes: poll_once(state, str(location), public_key=keys[1], host=HOST, nvml=pynvml,  # noqa: E731
                                            lake=lake, now=NOW + dt.timedelta(minutes=minutes),
                                            replay_guard=ReplayGuard(state_file))
    state = AgentState()
    location.write_bytes(bad)
    assert poll(state, 0).startswith("applied") and limit_w(nvml_stub) == 150.0
    location.unlink()
    assert poll(state, 5).startswith("revoked") and limit_w(nvml_stub) == 400.0
    location.write_bytes(bad)
    assert "WithdrawnConfig" in poll(state, 10) and limit_w(nvml_stub) == 400.0
    assert "WithdrawnConfig" in poll(AgentState(), 15) and limit_w(nvml_stub) == 400.0  # a restarted agent too
    location.write_bytes(config(keys[0], 300, TODAY + dt.timedelta(minutes=20)))  # the corrected config
    assert poll(state, 20).startswith("applied") and limit_w(nvml_stub) == 300.0


def test_two_agents_of_a_node_apply_one_after_the_other_and_the_older_config_loses(nvml_stub, keys, lake, tmp_path,
                                                                                    monkeypatch):
    """The service's poll and an operator's `agent apply` at once: both checked before either
    recorded, the older one applied second and stayed in force, the record moved back to it."""
    nvml_stub.write([GpuState.a100(0)])
    state_file = tmp_path / "state" / "agent-applied.json"
    checking, real_check = threading.Event(), ReplayGuard.check

    def slow_check(self, config):  # the newer config's agent is between its check and its record
        real_check(self, config)
        if config.generated_at == TODAY:
            checking.set()
            threading.Event().wait(0.3)

    monkeypatch.setattr(ReplayGuard, "check", slow_check)
    outcomes = {}

    def agent(name, data):
        try:
            outcomes[name] = apply_config(data, public_key=keys[1], host=HOST, nvml=pynvml, lake=lake, now=NOW,
                                          replay_guard=ReplayGuard(state_file)).summary()
        except ReplayedConfig as exc:
            outcomes[name] = type(exc).__name__

    newer = threading.Thread(target=agent, args=("newer", config(keys[0], 300, TODAY)))
    newer.start()
    checking.wait(5)
    agent("older", config(keys[0], 250, YESTERDAY))
    newer.join()
    assert outcomes == {"newer": "node-01: 1 apply", "older": "ReplayedConfig"}
    assert limit_w(nvml_stub) == 300.0
    assert ReplayGuard(state_file).last_accepted("site-a")[0] == TODAY.replace(microsecond=0)


def test_the_record_never_moves_back_to_an_older_config(keys, tmp_path):
    from joulehouse.collectors.config_contract import verify_signature
    guard = ReplayGuard(tmp_path / "state" / "agent-applied.json")
    newer, older = (verify_signature(load_config_document(config(keys[0], w, t)), keys[1])
                    for w, t in ((300, TODAY), (250, YESTERDAY)))
    guard.record(newer, NOW)
    with pytest.raises(ReplayedConfig):
        guard.record(older, NOW)
    assert guard.last_accepted("site-a") == (TODAY, newer.config_sha256)


def test_the_guard_survives_a_restart_of_the_agent(nvml_stub, keys, lake, tmp_path):
    """A new process (a new guard on the same file, a fresh loop state) still refuses yesterday's."""
    nvml_stub.write([GpuState.a100(0)])
    location = tmp_path / "recommended-config.json"
    state_path = tmp_path / "state" / "agent-applied.json"
    location.write_bytes(config(keys[0], 300, TODAY))
    kw = dict(public_key=keys[1], host=HOST, nvml=pynvml, lake=lake)
    assert poll_once(AgentState(), str(location), now=NOW, replay_guard=ReplayGuard(state_path), **kw).startswith("applied")
    location.write_bytes(config(keys[0], 250, YESTERDAY))
    message = poll_once(AgentState(), str(location), now=NOW + dt.timedelta(minutes=5),
                        replay_guard=ReplayGuard(state_path), **kw)
    assert message.startswith("new config refused (ReplayedConfig: ") and "keeping current settings" in message
    assert limit_w(nvml_stub) == 300.0


def _applied_at_now(nvml_stub, keys, lake, tmp_path):
    """One A100 capped to 300 W at NOW by a config valid until NOW + 2 days, through a replay guard
    whose state the caller's restarted agents read: (config location, guard state file, poll kwargs)."""
    nvml_stub.write([GpuState.a100(0)])
    location = tmp_path / "recommended-config.json"
    state_path = tmp_path / "state" / "agent-applied.json"
    kw = dict(public_key=keys[1], host=HOST, nvml=pynvml, lake=lake)
    location.write_bytes(config(keys[0], 300, TODAY))
    assert poll_once(AgentState(), str(location), now=NOW, replay_guard=ReplayGuard(state_path), **kw).startswith("applied")
    return location, state_path, kw


def test_after_a_restart_the_newest_config_still_expires_though_an_older_one_is_served(nvml_stub, keys, lake, tmp_path):
    """Refused as a replay with nothing known in force, the older config left the newer one's caps
    on for good: its window ended and no rollback came. The guard's record now says when it ends."""
    location, state_path, kw = _applied_at_now(nvml_stub, keys, lake, tmp_path)
    restarted, guard = AgentState(), ReplayGuard(state_path)
    location.write_bytes(config(keys[0], 250, YESTERDAY))  # a stale cache serves yesterday's
    message = poll_once(restarted, str(location), now=NOW + dt.timedelta(hours=1), replay_guard=guard, **kw)
    assert "is in force until 2026-01-05T06:00:00Z" in message and limit_w(nvml_stub) == 300.0
    message = poll_once(restarted, str(location), now=NOW + dt.timedelta(days=2), replay_guard=guard, **kw)
    assert message.startswith("expired: ") and limit_w(nvml_stub) == 400.0


@pytest.mark.parametrize("served", ["not-yet-valid", "unreadable"])
def test_after_a_restart_an_expired_configs_caps_go_though_nothing_can_be_applied(nvml_stub, keys, lake, tmp_path,
                                                                                  served):
    """Restarted after its config ended, with the location serving one not valid yet (or not
    readable): the expired caps stayed on, as nothing was known in force (review, helper-85). The
    guard's record says when the newest config applied here ends; past that, the defaults, once."""
    location, state_path, kw = _applied_at_now(nvml_stub, keys, lake, tmp_path)
    if served == "not-yet-valid":
        location.write_bytes(config(keys[0], 250, NOW + dt.timedelta(days=2), valid_from=NOW + dt.timedelta(days=3)))
    else:
        location.unlink()
        location.mkdir()  # a folder: the fetch fails, as for a server that is down
    restarted, guard = AgentState(), ReplayGuard(state_path)
    message = poll_once(restarted, str(location), now=NOW + dt.timedelta(days=1), replay_guard=guard, **kw)
    assert "is in force until 2026-01-05T06:00:00Z" in message and limit_w(nvml_stub) == 300.0
    poll_once(restarted, str(location), now=NOW + dt.timedelta(days=2, hours=1), replay_guard=guard, **kw)
    assert limit_w(nvml_stub) == 400.0
    again = AgentState()  # restarted once more, after the end
    poll_once(again, str(location), now=NOW + dt.timedelta(days=2, hours=2), replay_guard=guard, **kw)
    poll_once(again, str(location), now=NOW + dt.timedelta(days=2, hours=3), replay_guard=guard, **kw)
    rows = ds.dataset(lake / "agent_audit", format="parquet", partitioning="hive").to_table().to_pylist()
    assert [r["action"] for r in rows].count("rollback") + [r["action"] for r in rows].count("unchanged") <= 3, \
        "a rollback each poll would fill the audit"


def test_a_body_too_deep_to_write_is_malformed_not_a_crash():
    """json.loads accepts a depth that json.dumps, a few frames deeper, cannot write."""
    deep: dict = {}
    for _ in range(100_000):
        deep = {"a": deep}
    with pytest.raises(MalformedConfig, match="nested too deeply"):
        canonical_body(deep)


def test_a_file_no_check_foresaw_is_refused_and_the_config_in_force_still_expires(nvml_stub, keys, lake, tmp_path):
    """A lone surrogate loads as JSON and cannot be encoded: it escaped the refusal, so every poll
    failed before the expiry and the caps stayed on past their config (review, helper-85)."""
    nvml_stub.write([GpuState.a100(0)])
    location = tmp_path / "recommended-config.json"
    state, guard = AgentState(), ReplayGuard(tmp_path / "state" / "agent-applied.json")
    kw = dict(public_key=keys[1], host=HOST, nvml=pynvml, lake=lake, replay_guard=guard)
    location.write_bytes(config(keys[0], 300, TODAY))
    assert poll_once(state, str(location), now=NOW, **kw).startswith("applied")
    location.write_bytes(b'{"body": {"site": "\\ud800"}, "signature": {"alg": "ed25519", "value": "AA=="}}')
    message = poll_once(state, str(location), now=NOW + dt.timedelta(hours=1), **kw)
    assert message.startswith("new config refused (") and limit_w(nvml_stub) == 300.0
    assert poll_once(state, str(location), now=NOW + dt.timedelta(days=2), **kw).startswith("expired: ")
    assert limit_w(nvml_stub) == 400.0


def test_a_second_config_generated_the_same_second_is_refused(nvml_stub, keys, lake, tmp_path):
    nvml_stub.write([GpuState.a100(0)])
    guard = ReplayGuard(tmp_path / "agent-applied.json")
    kw = dict(public_key=keys[1], host=HOST, nvml=pynvml, replay_guard=guard)
    apply_config(config(keys[0], 300, TODAY), now=NOW, **kw)
    with pytest.raises(ReplayedConfig):
        apply_config(config(keys[0], 200, TODAY), now=NOW, **kw)
    assert limit_w(nvml_stub) == 300.0


def test_sites_are_guarded_apart_and_a_dry_run_records_nothing(nvml_stub, keys, tmp_path):
    nvml_stub.write([GpuState.a100(0)])
    guard = ReplayGuard(tmp_path / "agent-applied.json")
    kw = dict(public_key=keys[1], host=HOST, nvml=pynvml, replay_guard=guard)
    apply_config(config(keys[0], 300, TODAY, site="site-a"), now=NOW, **kw)
    assert apply_config(config(keys[0], 250, YESTERDAY, site="site-b"), now=NOW, **kw).ok
    with pytest.raises(ReplayedConfig):
        apply_config(config(keys[0], 250, YESTERDAY, site="site-a"), now=NOW, dry_run=True, **kw)
    newer = NOW - dt.timedelta(minutes=1)
    assert apply_config(config(keys[0], 200, newer), now=NOW, dry_run=True, **kw).count("dry-run") == 1
    assert guard.last_accepted("site-a")[0] == TODAY.replace(microsecond=0), "a dry run is not an acceptance"


def test_a_node_given_its_site_refuses_another_sites_config_and_audits_it(nvml_stub, keys, lake, tmp_path):
    """One key signing two sites' configs: a node of site-a served site-b's config (same host name,
    a wrong location) would take its settings and roll back every GPU it does not list. With
    [agent] site the node refuses it, audited, and its own setting stays."""
    nvml_stub.write([GpuState.a100(0)])
    guard = ReplayGuard(tmp_path / "state" / "agent-applied.json", site="site-a")
    kw = dict(public_key=keys[1], host=HOST, nvml=pynvml, lake=lake, replay_guard=guard)
    assert apply_config(config(keys[0], 300, TODAY, site="site-a"), now=NOW, **kw).ok
    later = NOW - dt.timedelta(minutes=1)
    with pytest.raises(WrongSite, match=r"config is for site 'site-b'; this node belongs to site 'site-a'"):
        apply_config(config(keys[0], 250, later, site="site-b"), now=NOW, **kw)
    assert limit_w(nvml_stub) == 300.0
    assert guard.last_accepted("site-b") is None  # nothing of it recorded
    audit = ds.dataset(lake / "agent_audit", format="parquet", partitioning="hive").to_table().to_pylist()
    assert [r["action"] for r in audit if "WrongSite" in (r["reason"] or "")] == ["refuse"]
    # the poll loop refuses it the same way, and keeps the config in force
    state = AgentState(in_force_sha256="x", in_force_gpus=frozenset({uuid(0)}), defaults_ensured=True,
                       in_force_until=NOW + dt.timedelta(days=1))
    served = tmp_path / "served.json"
    served.write_bytes(config(keys[0], 200, later, site="site-b"))
    message = poll_once(state, str(served), public_key=keys[1], host=HOST, nvml=pynvml, lake=lake, now=NOW,
                        replay_guard=guard)
    assert "WrongSite" in message and limit_w(nvml_stub) == 300.0, message


@pytest.mark.parametrize("content", [b"{not json", b'{"sites": {"site-a": {"generated_at": "yesterday"}}}',
                                     b"\xff\xfe"])
def test_an_unreadable_state_refuses_rather_than_forgets(nvml_stub, keys, tmp_path, content):
    nvml_stub.write([GpuState.a100(0)])
    state_path = tmp_path / "agent-applied.json"
    state_path.write_bytes(content)
    with pytest.raises(ReplayStateError, match=f"agent state {state_path}"):
        apply_config(config(keys[0], 300, TODAY), public_key=keys[1], host=HOST, nvml=pynvml, now=NOW,
                     replay_guard=ReplayGuard(state_path))
    assert limit_w(nvml_stub) == 400.0
    assert state_path.read_bytes() == content


def test_a_config_file_over_the_limit_is_refused_without_reading_it(tmp_path):
    huge = tmp_path / "recommended-config.json"
    with open(huge, "wb") as fh:
        fh.truncate(4 << 30)  # 4 GiB, sparse: reading it whole would take the node's memory
    with pytest.raises(ConfigTooLarge, match=r"is 4294967296 bytes, over the 16 MiB limit"):
        fetch_config(str(huge))
    with pytest.raises(MalformedConfig, match="larger than 16 MiB"):
        load_config_document(huge)
    with pytest.raises(MalformedConfig, match="larger than 16 MiB"):
        load_config_document(b" " * (MAX_CONFIG_BYTES + 1))


def test_a_config_nested_too_deep_is_malformed_not_a_crash():
    with pytest.raises(MalformedConfig, match="nested too deep"):
        load_config_document(b"[" * 200_000)


class _Serve(http.server.BaseHTTPRequestHandler):
    body = b""
    declare_length = True

    def do_GET(self):  # noqa: N802 - the stdlib's name
        self.send_response(200)
        if self.declare_length:
            self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args):
        pass


@pytest.mark.parametrize("declare_length", [True, False])
def test_a_config_url_over_the_limit_is_refused(declare_length):
    handler = type("Handler", (_Serve,), {"body": b" " * 2048, "declare_length": declare_length})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/recommended-config.json"
    try:
        assert fetch_config(url, max_bytes=4096) == b" " * 2048
        with pytest.raises(ConfigTooLarge, match="over the" if declare_length else "more than 1024 bytes"):
            fetch_config(url, max_bytes=1024)
    finally:
        server.shutdown()
        server.server_close()


def test_a_state_folder_another_user_can_write_is_refused_and_no_fixed_temporary_name_is_used(
        nvml_stub, keys, tmp_path):
    """Whoever can remove the record can replay yesterday's config; and a fixed temporary name in a
    folder the collector's user writes was a link the agent (root) would write through."""
    import os

    nvml_stub.write([GpuState.a100(0)])
    kw = dict(public_key=keys[1], host=HOST, nvml=pynvml)
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    with pytest.raises(ReplayStateError, match="can be written by another user"):
        apply_config(config(keys[0], 300, TODAY), now=NOW, replay_guard=ReplayGuard(shared / "agent-applied.json"), **kw)
    assert limit_w(nvml_stub) != 300.0, "nothing applied before the record is kept"
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    victim = tmp_path / "victim"
    victim.write_text("root only")
    (private / ".agent-applied.json.tmp").symlink_to(victim)
    assert apply_config(config(keys[0], 300, TODAY), now=NOW,
                        replay_guard=ReplayGuard(private / "agent-applied.json"), **kw).ok
    assert victim.read_text() == "root only" and (private / "agent-applied.json").is_file()
