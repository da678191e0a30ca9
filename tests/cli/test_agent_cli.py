"""`joulehouse agent apply --dry-run` and `joulehouse keys generate`, as a user runs them."""

from __future__ import annotations

import datetime as dt
import json

import pyarrow.dataset as ds
import pytest
from typer.testing import CliRunner

from joulehouse.collectors.config_contract import dump_config, load_private_key, sign_config
from nvml_stub.fixture import nvml_stub, nvml_stub_library  # noqa: F401

from agent_cli import app, off_a_node  # noqa: F401  (fixtures)

runner = CliRunner()


@pytest.fixture()
def keys(app, tmp_path):
    result = runner.invoke(app, ["keys", "generate", "--out", str(tmp_path / "keys")])
    assert result.exit_code == 0, result.output
    return tmp_path / "keys" / "joulehouse-ed25519.pem", tmp_path / "keys" / "joulehouse-ed25519.pub.pem"


def write_config(path, private_path, *, hours=48, tamper=False, signed=True):
    now = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
    fmt = lambda t: t.strftime("%Y-%m-%dT%H:%M:%SZ")  # noqa: E731
    body = {"schema_version": 1, "generated_at": fmt(now), "valid_from": fmt(now - dt.timedelta(days=2)),
            "valid_until": fmt(now + dt.timedelta(hours=hours)) if hours > 0 else fmt(now - dt.timedelta(minutes=1)),
            "site": "site-a", "hosts": {"node-01": {"GPU-1": {
                "gpu_model": "NVIDIA H200", "workload_class": "background", "power_limit_w": 500.0,
                "locked_sm_clock_min_mhz": 1000, "locked_sm_clock_max_mhz": 1500,
                "expected_saving_pct": 18.0, "expected_slowdown_pct": 12.0}}},
            "excluded_gpu_models": []}
    doc = sign_config(body, load_private_key(private_path)) if signed else {"body": body}
    data = dump_config(doc)
    path.write_bytes(data.replace(b"500.0", b"700.0") if tamper else data)
    return path


@pytest.fixture()
def no_driver(nvml_stub):
    """A machine whose NVML does not start (no driver loaded), whatever NVML this process loaded before."""
    nvml_stub.write([], errors={"nvmlInitWithFlags": "DRIVER_NOT_LOADED"})


def test_dry_run_prints_what_it_would_set_without_a_gpu(app, keys, tmp_path, lake, no_driver):
    config = write_config(tmp_path / "c.json", keys[0])
    result = runner.invoke(app, ["agent", "apply", str(config), "--public-key", str(keys[1]), "--dry-run",
                                 "--host", "node-01", "--lake", str(lake)])
    assert result.exit_code == 0, result.output
    assert "GPU-1" in result.output and "500.0" in result.output and "1000-1500 MHz" in result.output
    assert "not checked against the device" in result.output
    assert list((lake / "agent_audit").rglob("*.parquet"))  # the dry run is audited too


@pytest.mark.parametrize("kwargs, message", [
    (dict(tamper=True), "refused: BadSignature"),
    (dict(hours=-1), "refused: config expired at "),
    (dict(signed=False), "refused: UnsignedConfig"),
])
def test_bad_configs_exit_non_zero_with_one_line(app, keys, tmp_path, kwargs, message):
    config = write_config(tmp_path / "c.json", keys[0], **kwargs)
    result = runner.invoke(app, ["agent", "apply", str(config), "--public-key", str(keys[1]), "--dry-run",
                                 "--host", "node-01"])
    assert result.exit_code == 2
    assert result.output.strip().startswith(message) and len(result.output.strip().splitlines()) == 1


def test_another_host_is_refused(app, keys, tmp_path):
    config = write_config(tmp_path / "c.json", keys[0])
    result = runner.invoke(app, ["agent", "apply", str(config), "--public-key", str(keys[1]), "--dry-run",
                                 "--host", "node-07"])
    assert result.exit_code == 2 and "HostNotInConfig" in result.output


def test_dry_run_reads_a_file_url_and_a_missing_one_is_an_error(app, keys, tmp_path, no_driver):
    config = write_config(tmp_path / "c.json", keys[0])
    ok = runner.invoke(app, ["agent", "apply", config.as_uri(), "--public-key", str(keys[1]), "--dry-run", "--host", "node-01"])
    assert ok.exit_code == 0, ok.output
    missing = runner.invoke(app, ["agent", "apply", str(tmp_path / "nope.json"), "--public-key", str(keys[1]), "--dry-run"])
    assert missing.exit_code == 2 and "no config at" in missing.output


def test_keys_generate_refuses_to_overwrite(app, keys):
    again = runner.invoke(app, ["keys", "generate", "--out", str(keys[0].parent)])
    assert again.exit_code == 2 and "already exists" in again.output
    assert "--overwrite" in again.output, "the message names the flag a user can pass"


def test_verify_checks_an_expired_export_and_says_when_it_was_valid(app, keys, tmp_path):
    """An old export (the demo's, any archived one) can still be checked: its signature and form,
    what it holds, and whether an agent would take it now or at --at."""
    config = write_config(tmp_path / "c.json", keys[0], hours=-1)
    result = runner.invoke(app, ["agent", "verify", str(config), "--public-key", str(keys[1])])
    assert result.exit_code == 1, "well signed but expired: not what `verify && deploy` should pass"
    assert "signature: valid" in result.output and "1 GPU settings on 1 hosts (node-01)" in result.output
    assert "an agent would refuse it" in result.output
    inside = (dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    at = runner.invoke(app, ["agent", "verify", str(config), "--public-key", str(keys[1]), "--at", inside])
    assert at.exit_code == 0 and "an agent would take it" in at.output
    late = runner.invoke(app, ["agent", "verify", str(config), "--public-key", str(keys[1]), "--at", "2099-01-01T00:00:00Z"])
    assert late.exit_code == 1 and "an agent would refuse it" in late.output
    body = json.loads(config.read_text())["body"]
    # the expiry named is the file's own end of validity, not the time checked
    assert f"expired at {body['valid_until']}, before 2099-01-01T00:00:00Z" in late.output


@pytest.mark.parametrize("kwargs, message", [
    (dict(tamper=True), "refused: BadSignature"),
    (dict(signed=False), "refused: UnsignedConfig"),
])
def test_verify_refuses_what_apply_refuses(app, keys, tmp_path, kwargs, message):
    config = write_config(tmp_path / "c.json", keys[0], **kwargs)
    result = runner.invoke(app, ["agent", "verify", str(config), "--public-key", str(keys[1])])
    assert result.exit_code == 2 and result.output.strip().startswith(message)


def test_a_dry_run_of_an_archived_export_checks_it_at_a_time_inside_its_window(app, keys, tmp_path, no_driver):
    """The demo's export (dated June 2026) could only ever answer ExpiredConfig to the help's own
    example; --at checks it as of a time it was valid. A real apply stays now or never."""
    config = write_config(tmp_path / "c.json", keys[0], hours=-1)
    args = ["agent", "apply", str(config), "--public-key", str(keys[1]), "--host", "node-01",
            "--state", str(tmp_path / "state.json")]
    expired = runner.invoke(app, [*args, "--dry-run"]).output
    assert expired.startswith("refused: config expired at ") and "give --at" in expired  # no exception's name
    inside = (dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    dry = runner.invoke(app, [*args, "--dry-run", "--at", inside])
    assert dry.exit_code == 0 and "would set" in dry.output, dry.output
    real = runner.invoke(app, [*args, "--at", inside])
    assert real.exit_code == 2 and "--at is for a --dry-run" in real.output
    assert not (tmp_path / "state.json").exists()


def test_a_dry_run_at_another_time_is_audited_when_it_ran_and_says_when_it_was_judged(app, keys, tmp_path, no_driver):
    """An operator's trial: a dry run with --at 2026-06-16 wrote its audit rows as of 2026-06-16
    (and into that day's partition), though it ran months later."""
    import pyarrow.dataset as ds

    config = write_config(tmp_path / "c.json", keys[0], hours=-1)
    inside = (dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=1)).replace(microsecond=0)
    lake = tmp_path / "lake"
    before = dt.datetime.now(dt.timezone.utc)
    dry = runner.invoke(app, ["agent", "apply", str(config), "--public-key", str(keys[1]), "--host", "node-01",
                              "--state", str(tmp_path / "state.json"), "--lake", str(lake), "--dry-run",
                              "--at", inside.strftime("%Y-%m-%dT%H:%M:%SZ")])
    assert dry.exit_code == 0, dry.output
    rows = ds.dataset(lake / "agent_audit", partitioning="hive").to_table().to_pylist()
    assert rows and all(r["audited_at"] >= before - dt.timedelta(seconds=1) for r in rows), rows
    assert all(r["reason"].endswith(f"(judged at {inside.strftime('%Y-%m-%dT%H:%M:%SZ')})") for r in rows), rows


def test_verify_needs_a_time_zone_in_at(app, keys, tmp_path):
    config = write_config(tmp_path / "c.json", keys[0])
    result = runner.invoke(app, ["agent", "verify", str(config), "--public-key", str(keys[1]), "--at", "2026-01-12"])
    assert result.exit_code == 2 and "no time zone" in result.output


def _signed_for_a100(private_path, watts, generated_at):
    """A config for the stand-in NVML's first A100 (limits 100-400 W), generated at `generated_at`."""
    from nvml_stub.fixture import GpuState

    fmt = lambda t: t.strftime("%Y-%m-%dT%H:%M:%SZ")  # noqa: E731
    now = dt.datetime.now(dt.timezone.utc)
    body = {"schema_version": 1, "generated_at": fmt(generated_at), "valid_from": fmt(now - dt.timedelta(days=2)),
            "valid_until": fmt(now + dt.timedelta(days=2)), "site": "site-a", "hosts": {"node-01": {
                GpuState.a100(0).uuid: {"gpu_model": "NVIDIA A100-SXM4-80GB", "workload_class": "throughput",
                                        "power_limit_w": float(watts), "expected_saving_pct": 5.0,
                                        "expected_slowdown_pct": 1.0}}},
            "excluded_gpu_models": []}
    return dump_config(sign_config(body, load_private_key(private_path)))


def test_a_dry_run_exits_non_zero_where_the_apply_would_refuse_a_gpu(app, keys, tmp_path, nvml_stub):
    from nvml_stub.fixture import GpuState

    nvml_stub.write([GpuState.a100(0)])
    config = tmp_path / "c.json"
    # 500 W: one an A100 board of another kind could take, so the device's own limits refuse it
    config.write_bytes(_signed_for_a100(keys[0], 500, dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=1)))
    lake = tmp_path / "lake"
    result = runner.invoke(app, ["agent", "apply", str(config), "--public-key", str(keys[1]), "--dry-run",
                                 "--host", "node-01", "--lake", str(lake)])
    assert result.exit_code == 1, result.output
    assert "dry run: node-01: 1 refuse" in result.output
    assert nvml_stub.read()["gpu0.power_limit_mw"] == "400000", "a dry run sets nothing"
    config.write_bytes(_signed_for_a100(keys[0], 300, dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=1)))
    ok = runner.invoke(app, ["agent", "apply", str(config), "--public-key", str(keys[1]), "--dry-run",
                             "--host", "node-01", "--lake", str(lake)])
    assert ok.exit_code == 0 and "dry run: node-01: 1 dry-run" in ok.output, ok.output
    reasons = sorted(r["reason"] for r in ds.dataset(lake / "agent_audit", partitioning="hive").to_table().to_pylist())
    assert reasons == ["requested 500.0 W is outside the device's limits 100.0-400.0 W; an apply would refuse it",
                       "would set 300.0 W (NVIDIA A100-SXM4-80GB, throughput); the device is at 400.0 W"]
    assert not (tmp_path / "state").exists(), "a dry run records no config as accepted"


def test_a_replayed_config_is_refused_by_apply_and_by_its_dry_run(app, keys, tmp_path, nvml_stub):
    from nvml_stub.fixture import GpuState

    nvml_stub.write([GpuState.a100(0)])
    now = dt.datetime.now(dt.timezone.utc)
    today, yesterday = tmp_path / "today.json", tmp_path / "yesterday.json"
    today.write_bytes(_signed_for_a100(keys[0], 300, now - dt.timedelta(hours=1)))
    yesterday.write_bytes(_signed_for_a100(keys[0], 250, now - dt.timedelta(days=1)))
    lake = tmp_path / "node" / "lake"
    applied = runner.invoke(app, ["agent", "apply", str(today), "--public-key", str(keys[1]), "--host", "node-01",
                                  "--lake", str(lake)])
    assert applied.exit_code == 0, applied.output
    assert (tmp_path / "node" / "state" / "agent-applied.json").is_file(), "the state lives beside the node's lake"
    for dry in (["--dry-run"], []):
        replay = runner.invoke(app, ["agent", "apply", str(yesterday), "--public-key", str(keys[1]),
                                     "--host", "node-01", "--lake", str(lake), *dry])
        assert replay.exit_code == 2, replay.output
        assert replay.output.startswith("refused: ReplayedConfig: ") and len(replay.output.strip().splitlines()) == 1
    assert nvml_stub.read()["gpu0.power_limit_mw"] == "300000"


def test_a_config_over_16_mib_is_refused_in_one_line(app, keys, tmp_path):
    huge = tmp_path / "c.json"
    with open(huge, "wb") as fh:
        fh.truncate(17 << 20)
    result = runner.invoke(app, ["agent", "apply", str(huge), "--public-key", str(keys[1]), "--dry-run"])
    assert result.exit_code == 2
    assert result.output.strip() == f"error: config at {huge} is {17 << 20} bytes, over the 16 MiB limit; refused unread"


def test_the_outcome_table_prints_uuids_and_reasons_as_written(capsys):
    """A uuid or reason from the GPU or the config file is data: '[x]' is not rich markup to drop."""
    from joulehouse.cli.agent_output import print_result as _print_result
    from joulehouse.collectors.agent_audit import ApplyResult, GpuOutcome

    result = ApplyResult(host="node-[01]", config_sha256=None, dry_run=True,
                         outcomes=[GpuOutcome("GPU-[bold]1", "refuse", "limit [red]9999 W[/red] above max", 400.0)])
    _print_result(result)
    out = capsys.readouterr().out
    assert "GPU-[bold]1" in out and "[red]9999 W[/red]" in out and "node-[01]" in out


def _signed_setting(path, private_path, *, generated_at=None, **entry):
    """A config of one GPU on node-01 (valid now), its setting's fields overridden by `entry`."""
    now = dt.datetime.now(dt.timezone.utc)
    fmt = lambda t: t.strftime("%Y-%m-%dT%H:%M:%SZ")  # noqa: E731
    setting = {"gpu_model": "NVIDIA H200", "workload_class": "background", "power_limit_w": 500.0,
               "expected_saving_pct": 18.0, "expected_slowdown_pct": 12.0} | entry
    body = {"schema_version": 1, "generated_at": fmt(generated_at or now - dt.timedelta(hours=1)),
            "valid_from": fmt(now - dt.timedelta(days=2)), "valid_until": fmt(now + dt.timedelta(days=2)),
            "site": "site-a", "hosts": {"node-01": {"GPU-1": setting}}, "excluded_gpu_models": []}
    path.write_bytes(dump_config(sign_config(body, load_private_key(private_path))))
    return path


@pytest.mark.parametrize("entry, shown", [
    (dict(power_limit_w=1e9), "requested 1000000000.0 W is outside what any GPU takes (1-2000 W)"),
    (dict(power_limit_w=0.001), "requested 0.001 W is outside what any GPU takes (1-2000 W)"),
    (dict(locked_sm_clock_min_mhz=1, locked_sm_clock_max_mhz=10**12),
     f"locked SM clocks 1-{10**12} MHz are outside what any GPU runs (1-5000 MHz)"),
])
def test_a_dry_run_without_nvml_refuses_what_no_gpu_takes(app, keys, tmp_path, no_driver, entry, shown):
    """The dry run 'exits as the apply would': no device takes 1e9 W, 0.001 W or a 10^12 MHz clock."""
    config = _signed_setting(tmp_path / "c.json", keys[0], **entry)
    result = runner.invoke(app, ["agent", "apply", str(config), "--public-key", str(keys[1]), "--dry-run",
                                 "--host", "node-01"])
    assert result.exit_code == 1, result.output
    assert "dry run: node-01: 1 refuse" in result.output
    assert shown in result.output and "an apply would refuse it" in result.output


def test_a_dry_run_shows_the_watts_it_was_given(app, keys, tmp_path, no_driver):
    config = _signed_setting(tmp_path / "c.json", keys[0], power_limit_w=412.35)
    result = runner.invoke(app, ["agent", "apply", str(config), "--public-key", str(keys[1]), "--dry-run",
                                 "--host", "node-01"])
    assert result.exit_code == 0, result.output
    assert "would set 412.35 W" in result.output and "412.4" not in result.output


def test_one_off_commands_use_the_agent_services_state_and_audit_on_a_node(app, keys, tmp_path, monkeypatch,
                                                                             nvml_stub):
    """On a node, an apply from one folder and a dry run from another check the same replay state
    the service keeps (/var/lib/joulehouse/state) and audit into its lake."""
    from nvml_stub.fixture import GpuState

    nvml_stub.write([GpuState.a100(0)])
    node_data = tmp_path / "var-lib-joulehouse"
    node_data.mkdir()
    monkeypatch.setattr("joulehouse.cli.agent.NODE_DATA", node_data)
    now = dt.datetime.now(dt.timezone.utc)
    today, yesterday = tmp_path / "today.json", tmp_path / "yesterday.json"
    today.write_bytes(_signed_for_a100(keys[0], 300, now - dt.timedelta(hours=1)))
    yesterday.write_bytes(_signed_for_a100(keys[0], 250, now - dt.timedelta(days=1)))
    for folder in ("admin-home", "elsewhere"):
        (tmp_path / folder).mkdir()
    monkeypatch.chdir(tmp_path / "admin-home")
    applied = runner.invoke(app, ["agent", "apply", str(today), "--public-key", str(keys[1]), "--host", "node-01"])
    assert applied.exit_code == 0, applied.output
    # the service's own folder beside the node's data, not one the collector's user owns
    assert (tmp_path / "var-lib-joulehouse-agent" / "agent-applied.json").is_file()
    assert not (tmp_path / "admin-home" / "var").exists() and not (node_data / "state").exists()
    assert list((node_data / "lake" / "agent_audit").rglob("*.parquet")), "the one-off apply is audited"
    monkeypatch.chdir(tmp_path / "elsewhere")
    replay = runner.invoke(app, ["agent", "apply", str(yesterday), "--public-key", str(keys[1]), "--dry-run",
                                 "--host", "node-01"])
    assert replay.exit_code == 2 and replay.output.startswith("refused: ReplayedConfig: "), replay.output


def test_off_a_node_the_relative_state_file_and_the_missing_audit_are_named(app, keys, tmp_path, monkeypatch,
                                                                              no_driver):
    monkeypatch.chdir(tmp_path)
    config = _signed_setting(tmp_path / "c.json", keys[0])
    result = runner.invoke(app, ["agent", "apply", str(config), "--public-key", str(keys[1]), "--dry-run",
                                 "--host", "node-01"])
    assert result.exit_code == 0, result.output
    assert f"replay state: {tmp_path / 'var' / 'state' / 'agent-applied.json'} (relative to this folder" in result.stderr
    assert "not audited: no --lake, and no " in result.stderr


def test_the_state_path_comes_from_the_environment_as_for_the_service(app, keys, tmp_path, nvml_stub):
    from nvml_stub.fixture import GpuState

    nvml_stub.write([GpuState.a100(0)])
    config = tmp_path / "c.json"
    config.write_bytes(_signed_for_a100(keys[0], 300, dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=1)))
    state = tmp_path / "elsewhere" / "applied.json"
    result = runner.invoke(app, ["agent", "apply", str(config), "--public-key", str(keys[1]), "--host", "node-01",
                                 "--lake", str(tmp_path / "lake")], env={"JOULEHOUSE_AGENT__STATE_PATH": str(state)})
    assert result.exit_code == 0, result.output
    assert state.is_file() and not (tmp_path / "state").exists()


def test_a_dry_run_a_user_cannot_audit_says_so_and_still_checks(app, keys, tmp_path, monkeypatch, no_driver):
    node_data = tmp_path / "var-lib-joulehouse"
    (node_data / "lake" / "agent_audit").mkdir(parents=True)
    monkeypatch.setattr("joulehouse.cli.agent.NODE_DATA", node_data)
    monkeypatch.setattr("joulehouse.cli.agent._writable", lambda folder: False)  # a plain user; the tests run as root
    config = _signed_setting(tmp_path / "c.json", keys[0])
    result = runner.invoke(app, ["agent", "apply", str(config), "--public-key", str(keys[1]), "--dry-run",
                                 "--host", "node-01"])
    assert result.exit_code == 0, result.output
    assert f"not audited: {node_data / 'lake' / 'agent_audit'} is not writable by this user" in result.stderr
    assert not list((node_data / "lake").rglob("*.parquet"))


@pytest.mark.parametrize("out", ["/proc/joulehouse-keys", "afile/keys"])
def test_keys_generate_where_no_folder_can_be_made_is_one_line(app, tmp_path, monkeypatch, out):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("not a folder")
    result = runner.invoke(app, ["keys", "generate", "--out", out])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert result.output.startswith(f"error: --out {out}: cannot create the folder (")
    assert len(result.output.strip().splitlines()) == 1


def test_keys_generate_into_an_existing_file_says_it_is_not_a_folder(app, tmp_path):
    (tmp_path / "afile").write_text("not a folder")
    result = runner.invoke(app, ["keys", "generate", "--out", str(tmp_path / "afile")])
    assert result.exit_code == 2
    assert result.output.strip() == f"error: --out {tmp_path / 'afile'} is a file, not a folder: give the folder for the key pair"


def test_rollback_without_nvml_does_not_offer_a_dry_run_it_lacks(app, no_driver):
    result = runner.invoke(app, ["agent", "rollback"])
    assert result.exit_code == 3
    assert result.output.startswith("error: NVML is not usable on this machine") and "--dry-run" not in result.output


def test_agent_run_help_names_the_agents_metrics_port(app):
    help_text = runner.invoke(app, ["agent", "run", "--help"], env={"COLUMNS": "200"}).output
    assert "e.g. 9403" in help_text, "the unit file and the README serve the agent's metrics on 9403"


@pytest.mark.parametrize("command", ["verify", "apply"])
def test_a_url_scheme_no_export_is_published_on_is_refused_unfetched(app, keys, monkeypatch, command):
    import urllib.request

    def no_network(*args, **kwargs):
        raise AssertionError("the URL was fetched")

    monkeypatch.setattr(urllib.request, "urlopen", no_network)
    result = runner.invoke(app, ["agent", command, "ftp://x/y", "--public-key", str(keys[1])])
    assert result.exit_code == 2, result.output
    assert result.output.strip() == ("error: EXPORT ftp://x/y: ftp:// is not supported; give a path or an http(s), "
                                     "file, s3, gs or az URL")


def test_on_an_80_column_terminal_the_outcomes_fit_and_keep_their_values_whole(capsys, monkeypatch):
    from joulehouse.cli.agent_output import print_result as _print_result
    from joulehouse.collectors.agent_audit import ApplyResult, GpuOutcome

    uuid = "GPU-5f3c2a1e-8b7d-4c6e-9a2f-1d3e5b7c9a0f"
    reason = ("would set 500.0 W, SM clocks 1000-1500 MHz (NVIDIA H200, background); not checked against the "
              "device (no NVML) [x]")
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setattr("sys.stdout.isatty", lambda: True)
    _print_result(ApplyResult("node-01", None, True, [GpuOutcome(uuid, "dry-run", reason, None, 0.001)]))
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert any(uuid in line for line in lines) and any("requested 0.001" in line for line in lines)
    assert " ".join(" ".join(line.split()) for line in lines).count(reason) == 1, "every word of the reason, as written"


@pytest.mark.parametrize("command", [["rollback"], ["apply", "c.json", "--dry-run"], ["run", "--export-url", "c.json"]])
def test_a_lake_url_is_refused_not_made_a_local_folder(app, tmp_path, monkeypatch, command):
    """Typer's Path made `--lake s3://bucket/lake` the local folder `s3:/bucket/lake`: the audit
    went there, and never to the bucket. The audit is written on the node and shipped."""
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["agent", *command, "--lake", "s3://bucket/lake"])
    assert result.exit_code == 2, result.output
    assert "--lake s3://bucket/lake: a node's lake is a local folder" in result.output
    assert not (tmp_path / "s3:").exists()
